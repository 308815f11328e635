"""The command line of ``transformer.inside.patching``: which layer, head or source position carries the difference
a minimal pair makes to one step of the translation.

    python -m transformer.patch "The doctor said that she was tired." "The doctor said that he was tired." \\
        --step 8 --alternative ▁er --json
    python -m transformer.patch "The doctor said that she was tired." --noise 7 --step 8 --json

The clean sentence's translation is forced on both runs. STEP counts generated tokens from 1 (default: the step whose
token the corrupted sentence makes least likely); TOKEN is a piece as ``target_tokens`` shows it (default: the step's
runner-up, or with the default step the token the corrupted run prefers there). ``--json`` prints one object: the
share of the logit difference each component restores, ``encoder_positions`` (encoder layers × clean source
positions, null where a position has no partner), ``heads`` (``encoder``, ``decoder``, ``cross``: layers × heads),
``decoder_layers``, and the two checks, ``nothing`` (0) and ``last_encoder_layer_all_positions`` (restores 1: its
largest logit difference from the clean run), each to float32 rounding.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import arguments
from .inside import patching
from .paper.sentences import encode_source


def pairs(value: str) -> list[tuple[int, int]]:
    """``1-1,2-2,3-4``: clean and corrupted positions, counted from 1."""
    try:
        found = [tuple(int(x) - 1 for x in pair.split("-")) for pair in value.replace(" ", "").split(",") if pair]
    except ValueError:
        found = []
    if not found or any(len(pair) != 2 or min(pair) < 0 for pair in found):
        raise argparse.ArgumentTypeError(f"expected pairs of positions like 1-1,2-2,3-4, got {value!r}")
    return found


def positions(value: str) -> list[int]:
    """``7`` or ``6,7``: source positions, counted from 1."""
    return [arguments.positive_int(part) - 1 for part in value.replace(" ", "").split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = arguments.CommandLine("patch", __doc__)
    parser.add_argument("text", help="the clean sentence, whose translation both runs read")
    parser.add_argument("corrupted", nargs="?", help="the corrupted sentence (a minimal pair); or use --noise")
    parser.add_argument("--step", type=arguments.positive_int,
                        help="default: the step whose token the corrupted sentence makes least likely")
    parser.add_argument("--alternative", help="the token to compare with (default: the step's runner-up; with the "
                                              "default step, the token the corrupted run prefers there)")
    parser.add_argument("--noise", type=positions, metavar="POSITIONS",
                        help="instead of a corrupted sentence: noise on these source positions' embeddings (1,2; "
                             "default: none)")
    parser.add_argument("--align", type=pairs, metavar="PAIRS",
                        help="clean-corrupted positions, e.g. 1-1,2-2,3-4 (default: the pieces the two share "
                             "from the start and the end)")
    parser.add_argument("--seed", type=arguments.whole_number, default=0, help="the noise's seed")
    arguments.add_model(parser)
    arguments.add_json(parser)
    return arguments.run(parser, lambda args: patched(parser, args), argv)


def patched(parser: arguments.CommandLine, args) -> int:
    if (args.corrupted is None) == (args.noise is None):
        parser.error("give either a corrupted sentence or --noise POSITIONS")
    if args.corrupted is not None and not args.corrupted.strip():
        parser.error("the corrupted sentence is empty")
    checkpoint, translation = arguments.translated_sentence(parser, args)
    corrupted = None
    if args.corrupted is not None:
        corrupted = encode_source(checkpoint.model, checkpoint.source_tokenizer, args.corrupted)[0]
    step, alternative = args.step, args.alternative
    if step is None and corrupted is not None:
        step, preferred = patching.most_affected_step(checkpoint.model, translation, corrupted)
        alternative = alternative or checkpoint.target_tokenizer.piece(preferred)
    elif step is None:
        parser.error("with --noise, give --step")
    result = patching.activation_patching(checkpoint.model, translation, checkpoint.target_tokenizer, corrupted,
                                          step, alternative, args.align, args.noise, args.seed)
    if args.json:
        print(json.dumps(result.to_json(translation), ensure_ascii=False))
        return 0
    print(describe(result, translation))
    return 0


def describe(result: patching.Patching, translation) -> str:
    """The strongest components, a line each, for a terminal."""
    layers, sources = result.encoder_positions.shape
    named = [(f"encoder layer {layer + 1} at {translation.source_pieces[position]}",
              float(result.encoder_positions[layer, position]))
             for layer in range(layers) for position in range(sources)
             if not result.encoder_positions[layer, position].isnan()]
    named += [(f"{kind} head L{layer + 1}H{head + 1}", float(values[layer, head]))
              for kind, values in result.heads.items() for layer in range(values.size(0))
              for head in range(values.size(1))]
    named += [(f"decoder layer {layer + 1}", share) for layer, share in enumerate(result.decoder_layers.tolist())]
    lines = [f"translation: {translation.text}",
             f"step {result.step}: {result.target} over {result.alternative}; logit difference "
             f"{result.clean_difference:.3f} clean, {result.corrupted_difference:.3f} corrupted",
             "share restored by patching one component:"]
    lines += [f"{share:8.1%}  {name}" for name, share in sorted(named, key=lambda item: -item[1])[:12]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
