"""What each layer knows, over many sentences: every encoder layer read by the decoder (DecoderLens), and every
decoder layer read by the logit lens and the tuned lens (``inside/decoder_lens.py``, ``inside/tuned_lens.py``;
what each reading shows and does not: docs/lenses.md).

    python -m transformer.lens --input multi30k:test_2016_flickr --limit 200 --json
    python -m transformer.lens --checkpoint DIR --input sentences.tsv --lens-train multi30k:train --save-lens

``--input`` is ``multi30k:SPLIT`` (from ``--data-dir`` or ``$MULTI30K_DIR``), a ``.tsv`` of a sentence and its
reference a line, or a text file of one sentence a line. Every sentence is decoded as ``transformer.translate``
decodes it (``--beam`` to change it) from each encoder layer in turn; each layer's translations are scored
(sacreBLEU's BLEU and chrF) against the references, or, for input without them, against the model's final
translation. The tuned lens is the one kept beside the model when it was trained on ``--lens-train``, else one
trained now (``--save-lens`` keeps it there); the lenses are compared on the input's sentences, which must not be
the lens's own.

``--json`` prints one object: ``decoderlens``, one row per encoder layer, ``{encoder_layer, bleu, chrf, sentences,
bleu_signature, chrf_signature}``; ``lens``, one row per decoder layer, ``{decoder_layer, kl_logit, kl_tuned,
top1_logit, top1_tuned}`` (KL(p_final ‖ p_layer) in nats averaged over positions; top1: the share of positions
whose top token is the final layer's); ``references`` (the input, or ``"final translation"``), ``lens_trained_on``,
``positions``, ``sentences`` and ``seconds``. Layers count from 1.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from . import arguments
from .data import MULTI30K_PREFIX, corpus_sentences
from .errors import InputError
from .files.checkpoint import Checkpoint
from .inside.decoder_lens import texts_from_layer
from .inside.tuned_lens import (LENS_FILE, LensTraining, TunedLens, collect_positions, compare_lenses, shipped_lens,
                                train_lens)
from .metrics import corpus_scores

log = logging.getLogger("transformer.lens")
FINAL_TRANSLATION = "final translation"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = arguments.CommandLine("lens", __doc__)
    parser.add_argument("--input", required=True, help="multi30k:SPLIT, a .tsv of sentence and reference, or a "
                        "text file of one sentence a line")
    parser.add_argument("--limit", type=arguments.positive_int, help="only the first N sentences (default: all)")
    parser.add_argument("--lens-train", metavar="SPEC",
                        help="what the tuned lens is trained on, as --input (default: what the model's kept lens "
                             "was trained on, else multi30k:train for a model trained on Multi30K)")
    parser.add_argument("--lens-sentences", type=arguments.positive_int, default=LensTraining.sentences,
                        help="how many of --lens-train's sentences a new lens is trained on")
    parser.add_argument("--save-lens", action="store_true",
                        help=f"keep a newly trained lens beside the model ({LENS_FILE})")
    parser.add_argument("--data-dir", help="the Multi30K folder (default: $MULTI30K_DIR, else download)")
    arguments.add_model(parser, output_length=False)
    arguments.add_json(parser)
    return arguments.run(parser, read_layers, argv)


def same_input(spec: str, other: str) -> bool:
    """Whether two SPECs name the same sentences: the same Multi30K split, or the same file."""
    if spec.startswith(MULTI30K_PREFIX) or other.startswith(MULTI30K_PREFIX):
        return spec.strip().lower() == other.strip().lower()
    return Path(spec).expanduser().resolve() == Path(other).expanduser().resolve()


def lens_training_input(checkpoint: Checkpoint, kept: TunedLens | None, asked: str | None) -> str:
    """What the tuned lens is trained on: as asked, else the kept lens's, else the model's own training data."""
    if asked:
        return asked
    if kept is not None and kept.trained_on.get("input"):
        return kept.trained_on["input"]
    if checkpoint.info.get("training", {}).get("data") == "multi30k":
        return MULTI30K_PREFIX + "train"
    raise InputError(code="lens.no_training_input", name=checkpoint.name)


def the_lens(checkpoint: Checkpoint, args, kept: TunedLens | None, trained_on: str) -> TunedLens:
    """The kept lens when it was trained on ``trained_on``, else one trained now (and kept with --save-lens)."""
    if kept is not None and same_input(kept.trained_on.get("input", ""), trained_on):
        log.info("the tuned lens kept beside the model, trained on %s", trained_on)
        return kept
    sentences, _ = corpus_sentences(trained_on, *checkpoint.direction, args.data_dir)
    lens = train_lens(checkpoint, sentences, trained_on, LensTraining(sentences=args.lens_sentences),
                      progress=lambda stage, done, total: log.info("tuned lens: %s %d of %d", stage, done, total))
    if args.save_lens and checkpoint.path is not None:
        log.info("tuned lens kept in %s", lens.save(checkpoint.path / LENS_FILE))
    return lens


def read_layers(args) -> int:
    started = time.perf_counter()
    checkpoint = arguments.checkpoint_of(args)
    kept = shipped_lens(checkpoint)
    trained_on = lens_training_input(checkpoint, kept, args.lens_train)
    if same_input(args.input, trained_on):
        raise InputError(code="lens.overlap", input=trained_on)
    sources, references = corpus_sentences(args.input, *checkpoint.direction, args.data_dir)
    if args.limit:
        sources, references = sources[:args.limit], references and references[:args.limit]
    lens = the_lens(checkpoint, args, kept, trained_on)
    beam, length_penalty = arguments.beam_of(checkpoint, args), arguments.length_penalty_of(checkpoint, args)
    layers = checkpoint.model.config.n_encoder_layers
    by_layer = []
    for layer in range(1, layers + 1):
        by_layer.append(texts_from_layer(checkpoint, sources, layer, beam, length_penalty))
        log.info("encoder layer %d of %d read", layer, layers)
    scored_against = references or by_layer[-1]
    decoderlens = [{"encoder_layer": layer, "sentences": len(sources), **corpus_scores(texts, scored_against)}
                   for layer, texts in enumerate(by_layer, start=1)]
    positions = collect_positions(checkpoint, sources, beam_size=beam, length_penalty=length_penalty)
    comparison = compare_lenses(checkpoint, lens, positions.states)
    result = {"decoderlens": decoderlens, "lens": comparison.rows(),
              "references": args.input if references else FINAL_TRANSLATION, "lens_trained_on": lens.trained_on,
              "positions": comparison.positions, "sentences": len(sources),
              "seconds": round(time.perf_counter() - started, 3)}
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    print(f"{len(sources)} sentences, scored against {result['references']}, in {result['seconds']:.1f} s")
    print(f"{'encoder layer':>13} {'BLEU':>7} {'chrF':>7}")
    for row in decoderlens:
        print(f"{row['encoder_layer']:>13} {row['bleu']:7.2f} {row['chrf']:7.2f}")
    print(f"tuned lens trained on {lens.trained_on.get('input')}; KL in nats over {comparison.positions} positions")
    print(f"{'decoder layer':>13} {'KL logit':>9} {'KL tuned':>9} {'top-1 logit':>12} {'top-1 tuned':>12}")
    for row in comparison.rows():
        print(f"{row['decoder_layer']:>13} {row['kl_logit']:9.3f} {row['kl_tuned']:9.3f} "
              f"{row['top1_logit']:12.1%} {row['top1_tuned']:12.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
