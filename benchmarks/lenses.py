"""What reading every layer costs, and what the lenses read (``transformer.inside.decoder_lens``, ``tuned_lens``).

For each bundled translator, on the first ``--sentences`` of Multi30K test_2016_flickr, decoded as
``transformer.translate`` decodes:

- ``decoderlens_s``: every sentence translated from every encoder layer (DecoderLens), timed apart from the rest;
  each layer's BLEU and chrF against the references, and ``ordinary_chrf``, the ordinary translation's;
- ``lens_training_s``: a tuned lens trained as the bundled ones were (2,000 Multi30K training sentences), split into
  translating them and fitting the maps; skipped with ``--skip-training``;
- each decoder layer's KL to the last layer and top-1 agreement, logit lens against the shipped tuned lens, on the
  same test sentences (which no lens was trained on).

``--family opus-mt`` or ``m2m100``: a random model of opus-mt-en-de's or M2M100-418M's shapes instead: what a lens
trained in the app (``ui.views.layers.training_for``) costs there, per position read and per fitting step.

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/lenses.py --json
    python benchmarks/lenses.py --family m2m100 --json
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from common import machine, report
from transformer.data import corpus_sentences
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, load_checkpoint
from transformer.inside.decoder_lens import texts_from_layer
from transformer.inside.tuned_lens import (LensTraining, Positions, TunedLens, collect_positions, compare_lenses, fit,
                                           shipped_lens)
from transformer.metrics import corpus_scores
from transformer.paper.sentences import translate_batch

BUNDLED = ("multi30k-en-de", "multi30k-en-fr")


def bundled(name: str, count: int, train: bool) -> dict:
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / name, device="cpu")
    data_dir = os.environ.get("MULTI30K_DIR")
    languages = checkpoint.info["source_lang"], checkpoint.info["target_lang"]
    sources, references = corpus_sentences("multi30k:test_2016_flickr", *languages, data_dir)
    sources, references = sources[:count], references[:count]
    beam = int(checkpoint.search.get("beam_size", 5))
    started = time.perf_counter()
    by_layer = [texts_from_layer(checkpoint, sources, layer, beam)
                for layer in range(1, checkpoint.model.config.n_encoder_layers + 1)]
    decoderlens_s = time.perf_counter() - started
    ordinary = translate_batch(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, sources,
                               beam, checkpoint.length_penalty, rules=checkpoint.rules)
    result = {"model": name, "sentences": len(sources), "decoderlens_s": round(decoderlens_s, 2),
              "decoderlens": [{"encoder_layer": layer, **{key: value for key, value in corpus_scores(
                  texts, references).items() if not key.endswith("signature")}}
                              for layer, texts in enumerate(by_layer, start=1)],
              "ordinary_chrf": corpus_scores(ordinary, references)["chrf"]}
    if train:
        result.update(training_time(checkpoint, data_dir))
    held_out = collect_positions(checkpoint, sources, beam_size=beam)
    comparison = compare_lenses(checkpoint, shipped_lens(checkpoint), held_out.states)
    result.update(lens=comparison.rows(), positions=comparison.positions)
    return result


def training_time(checkpoint: Checkpoint, data_dir: str | None) -> dict:
    """A lens trained as the shipped ones were, its two parts timed apart."""
    training = LensTraining()
    sentences, _ = corpus_sentences("multi30k:train", checkpoint.info["source_lang"], None, data_dir)
    started = time.perf_counter()
    positions = collect_positions(checkpoint, sentences[:training.sentences], training.translate_batch)
    translated = time.perf_counter() - started
    started = time.perf_counter()
    fit(checkpoint, TunedLens.identity(checkpoint), positions, training)
    fitted = time.perf_counter() - started
    return {"lens_training_s": round(translated + fitted, 1), "lens_translating_s": round(translated, 1),
            "lens_fitting_s": round(fitted, 1), "lens_positions": positions.count}


def shaped(family: str, steps: int) -> dict:
    """The app's lens training at a real translator's shapes: reading positions and fitting steps, timed."""
    from hub_decode import models
    from ui.views.layers import training_for

    model, _ = models("marian" if family == "opus-mt" else family)
    checkpoint = Checkpoint(model, None, None)
    training = training_for(checkpoint)
    config = model.config
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(10, 1000, (16, 20), generator=generator)
    tgt = torch.randint(10, 1000, (16, 24), generator=generator)
    from transformer.inside.one_head import decoder_states
    started = time.perf_counter()
    with torch.inference_mode():
        states = decoder_states(model, src, tgt)
    read_s = time.perf_counter() - started
    positions = Positions(states.flatten(1, 2).clone(), 16)
    lens = TunedLens(config.d_model, config.n_decoder_layers)
    started = time.perf_counter()
    fit(checkpoint, lens, positions, LensTraining(steps=steps, batch_positions=training.batch_positions))
    step_s = (time.perf_counter() - started) / steps
    per_position_ms = 1000 * read_s / positions.count
    return {"family": family, "read_ms_per_position": round(per_position_ms, 2),
            "fitting_step_s": round(step_s, 2), "app_training": vars(training),
            "app_fitting_min": round(step_s * training.steps / 60, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--family", choices=["opus-mt", "m2m100"], help="a random model of these shapes instead")
    parser.add_argument("--steps", type=int, default=3, help="fitting steps timed with --family")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {"machine": machine()}
    if args.family:
        result.update(shaped(args.family, args.steps))
    else:
        result["models"] = [bundled(name, args.sentences, not args.skip_training) for name in BUNDLED]
    report(result, args.json)


if __name__ == "__main__":
    main()
