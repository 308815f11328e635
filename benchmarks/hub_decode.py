"""Decoding a real translator's shapes: our modules against transformers' ``generate``, on the same weights.

``--family marian`` (default): a ``MarianMTModel`` with opus-mt-en-de's shapes (d_model 512, 6+6 layers, 8 heads,
feed-forward 2048, vocabulary 58,101). ``--family m2m100``: an ``M2M100ForConditionalGeneration`` with M2M100-418M's
(d_model 1024, 12+12 layers, 16 heads, feed-forward 4096, vocabulary 128,112); ``small100``: SMaLL-100's (the same
with 3 decoder layers). Random weights, converted by ``transformer.files`` as a downloaded model would be. Both then
translate the same source sentences one at a time, as the app does, for exactly ``--tokens`` tokens each (random
weights rarely end a sentence; both are held to the same count; an M2M100 translation's first token is its forced
target language), greedily and with beam 5 under the generation config's rules, in one process with the same
threads, alternating so that machine noise hits both alike:

- ``ours``: ``greedy_search`` / ``beam_search``: the search alone;
- ``ours_recording``: ``translation.translate``: the search, then one teacher-forced pass that keeps every attention
  map of every layer (what the app shows);
- ``transformers`` / ``transformers_recording``: ``generate``, without and with ``output_attentions=True``.

Ours decodes as the app's models do: through ``speed_choices.choose_speed``, timed afresh for this run's shapes on
this machine (``speed_choices``: what it chose, and ``choosing_s``: what choosing took). ``transformers_version``
is recorded beside the figures.

``--dtype bfloat16``: both models' weights in bfloat16 (as the app keeps a model too big for its memory in float32,
on a CPU that computes in bfloat16 natively), and ours in float32 timed beside them (``ours_float32_greedy_ms``,
``ours_float32_beam_ms``; ``bf16_greedy_speedup`` is float32's time over bfloat16's).

Prints JSON last: {"ours_greedy_ms", "transformers_greedy_ms", "greedy_ratio", "ours_beam_ms",
"transformers_beam_ms", "beam_ratio", "greedy_ratio_recording", "beam_ratio_recording", "peak_rss_mb", ...};
a ratio is ours / transformers over the sentences, medians of ``--repeats`` runs.

    python benchmarks/hub_decode.py --json
    python benchmarks/hub_decode.py --family m2m100 --json
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch
import transformers

from common import machine, report
from transformer.cpu import speed_up
from transformer.files import hub, multilingual
from transformer.files.weights import load_weights
from transformer.paper.decoding import SearchRules, beam_search, greedy_search
from transformer.paper.translation import translate
from transformer.paper.model import Transformer
from transformer.speed_choices import choose_speed

OPUS_MT_EN_DE = dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                     activation_function="swish", scale_embedding=True, max_position_embeddings=512,
                     pad_token_id=58100, decoder_start_token_id=58100, eos_token_id=0, forced_eos_token_id=0)
M2M100_418M = dict(vocab_size=128112, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                   decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, activation_function="relu",
                   scale_embedding=True, max_position_embeddings=1024, pad_token_id=1, bos_token_id=0,
                   decoder_start_token_id=2, eos_token_id=2, forced_eos_token_id=2)
SHAPES = {"marian": OPUS_MT_EN_DE, "m2m100": M2M100_418M, "small100": {**M2M100_418M, "decoder_layers": 3}}
FORCED_LANGUAGE = 128022  # "__de__" in M2M100's numbering: the first token every M2M100 translation is forced to
PUBLISHED_RULES = SearchRules(early_stopping=False, renormalize=True)  # opus-mt's generation config


class Ids:
    """A tokenizer of token ids written as numbers ("15 3021 7"): the benchmark's sources are random ids."""

    def __init__(self, eos_id: int, prefix_ids: tuple[int, ...] = ()):
        self.eos_id, self.prefix_ids = eos_id, prefix_ids

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        return [int(word) for word in text.split()] + ([self.eos_id] if add_eos else [])

    def pieces(self, ids) -> list[str]:
        return [str(i) for i in ids]

    def decode(self, ids) -> str:
        return " ".join(self.pieces(ids))


def models(family: str, seed: int = 0):
    """Theirs with random weights, and ours converted from it (as ``load_checkpoint`` gives it)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration, MarianConfig, MarianMTModel

    torch.manual_seed(seed)
    if family == "marian":
        theirs = MarianMTModel(MarianConfig(**OPUS_MT_EN_DE)).eval()
        config = hub.model_config(hub.marian_config({"model_type": "marian", **OPUS_MT_EN_DE}))
        weights = hub.convert_state_dict(theirs.state_dict(), config)
    else:
        theirs = M2M100ForConditionalGeneration(M2M100Config(**SHAPES[family])).eval()
        config = multilingual.model_config(SHAPES[family], family)
        weights = {name: tensor.float() for name, tensor in
                   multilingual.convert_state_dict(theirs.state_dict(), config).items()}
    ours = speed_up(Transformer(config)).eval()
    load_weights(ours, weights)
    return ours, theirs


def sentences(count: int, eos_id: int, seed: int = 1) -> list[torch.Tensor]:
    """Sources of 8 to 30 pieces, ending with </s>, as one-row batches."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(8, 31, (count,), generator=generator).tolist()
    return [torch.cat([torch.randint(10, 58000, (1, n - 1), generator=generator),
                       torch.full((1, 1), eos_id, dtype=torch.long)], dim=1) for n in lengths]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=20, help="tokens each translation is held to")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--family", choices=sorted(SHAPES), default="marian")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ours, theirs = models(args.family)
    in_float32 = None
    if args.dtype == "bfloat16":
        in_float32 = speed_up(Transformer(ours.config)).eval()
        in_float32.load_state_dict(ours.state_dict())
        ours.to(torch.bfloat16), theirs.to(torch.bfloat16)
    choices = choose_speed(ours if in_float32 is None else in_float32)  # none apply to bfloat16's
    eos_id, n = ours.config.eos_id, args.tokens
    sources = sentences(args.sentences, eos_id)
    forced = (FORCED_LANGUAGE,) if args.family != "marian" else ()
    ids = Ids(eos_id, forced)
    generate = dict(max_new_tokens=n, do_sample=False, **({"forced_bos_token_id": forced[0]} if forced else {}))

    def ours_greedy():
        return [greedy_search(ours, src, n, forced=forced)[0] for src in sources]

    def theirs_greedy(record=False):
        theirs.set_attn_implementation("eager" if record else "sdpa")  # only eager attention hands its maps out
        return [theirs.generate(src, num_beams=1, output_attentions=record, return_dict_in_generate=record,
                                **generate) for src in sources]

    def ours_beam():
        return [beam_search(ours, src, args.beam, 1.0, n, rules=PUBLISHED_RULES, forced=forced)[0][0]
                for src in sources]

    def theirs_beam(record=False):
        theirs.set_attn_implementation("eager" if record else "sdpa")
        return [theirs.generate(src, num_beams=args.beam, output_attentions=record, return_dict_in_generate=record,
                                **generate) for src in sources]

    def ours_recording(beam):
        return [translate(ours, ids, ids, ids.decode(src[0, :-1].tolist()), beam, 1.0, n, rules=PUBLISHED_RULES)
                for src in sources]

    runs = {"ours_greedy": ours_greedy, "transformers_greedy": theirs_greedy,
            "ours_beam": ours_beam, "transformers_beam": theirs_beam,
            "ours_greedy_recording": lambda: ours_recording(1),
            "transformers_greedy_recording": lambda: theirs_greedy(True),
            "ours_beam_recording": lambda: ours_recording(args.beam),
            "transformers_beam_recording": lambda: theirs_beam(True)}
    if in_float32 is not None:
        runs["ours_float32_greedy"] = lambda: [greedy_search(in_float32, src, n, forced=forced)[0] for src in sources]
        runs["ours_float32_beam"] = lambda: [beam_search(in_float32, src, args.beam, 1.0, n, rules=PUBLISHED_RULES,
                                                         forced=forced)[0][0] for src in sources]
    with torch.inference_mode():
        # transformers ends a translation held to n tokens with a forced </s>: the tokens before it must agree.
        agree = [a[: n - 1] == b.tolist()[0][1:n] for a, b in zip(ours_greedy(), theirs_greedy())]
        beams_agree = [a.tokens[: n - 1] == b.tolist()[0][1:n] for a, b in zip(ours_beam(), theirs_beam())]
        for run in runs.values():  # warm-up
            run()
        times = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, run in runs.items():
                times[name].append(timed(run))
    ms = {name: statistics.median(values) for name, values in times.items()}
    result = {f"{name}_ms": round(value, 1) for name, value in ms.items()}
    result.update({
        "greedy_ratio": round(ms["ours_greedy"] / ms["transformers_greedy"], 3),
        "beam_ratio": round(ms["ours_beam"] / ms["transformers_beam"], 3),
        "greedy_ratio_recording": round(ms["ours_greedy_recording"] / ms["transformers_greedy_recording"], 3),
        "beam_ratio_recording": round(ms["ours_beam_recording"] / ms["transformers_beam_recording"], 3),
        "greedy_outputs_equal": sum(agree), "beam_outputs_equal": sum(beams_agree), "sentences": len(sources),
        "tokens": n, "beam": args.beam,
        "family": args.family, "dtype": args.dtype,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "speed_choices": choices.describe(), "choosing_s": choices.timed_s,
        "transformers_version": transformers.__version__, "machine": machine()})
    if in_float32 is not None:
        result["bf16_greedy_speedup"] = round(ms["ours_float32_greedy"] / ms["ours_greedy"], 3)
        result["bf16_beam_speedup"] = round(ms["ours_float32_beam"] / ms["ours_beam"], 3)
    result["goals_met"] = {"greedy_ratio<=0.7": result["greedy_ratio"] <= 0.7,
                           "beam_ratio<=0.7": result["beam_ratio"] <= 0.7,
                           "greedy_ratio_recording<=0.85": result["greedy_ratio_recording"] <= 0.85,
                           "beam_ratio_recording<=0.85": result["beam_ratio_recording"] <= 0.85}
    report(result, args.json)


if __name__ == "__main__":
    main()
