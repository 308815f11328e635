"""Turn a training run into a bundled checkpoint with an honest model card.

    python -m transformer.export runs/multi30k-en-de/averaged checkpoints/multi30k-en-de \\
        --run runs/multi30k-en-de --data-dir ../shared/data/multi30k --dtype float16

Weights are stored in the chosen precision (half precision keeps every file of
a small model under the 10 MB a Hugging Face Space accepts without Git LFS),
then scored *as stored*: greedy and beam decoding on val and
test_2016_flickr, the length penalty chosen on val only. The card records the
command, config, data checksums, tokenizer settings, hardware, time, and every
score with its sacreBLEU signature; a picture of the training curves goes beside it
(training.svg, drawn by ``transformer.files.curves``).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
from pathlib import Path

import torch

from . import arguments
from . import data as datasets
from .files.checkpoint import CheckpointError, load_checkpoint, read_config, save_checkpoint
from .files.curves import training_curves_svg
from .train.evaluation import evaluate_checkpoint
from .train.run_logs import read_training_log, run_history


log = logging.getLogger(__name__)
CURVES = "training.svg"  # the training curves, saved in the checkpoint beside its card


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def hardware() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    import os
    return f"{cpu_name()}, {os.cpu_count()} cores, no GPU"


def _score_rows(metrics: dict) -> str:
    exact = any("exact_match" in result for result in metrics["scores"].values())
    rows = ["| split | decoding | BLEU | chrF |" + (" exact match |" if exact else ""),
            "|---|---|---|---|" + ("---|" if exact else "")]
    for key, result in metrics["scores"].items():
        split, decoding = key.split(":", 1)
        row = f"| {split} | {decoding} | {result['bleu']:.2f} | {result['chrf']:.2f} |"
        rows.append(row + (f" {100 * result['exact_match']:.1f}% |" if exact else ""))
    return "\n".join(rows)


def tokenizer_description(tokenizer: dict) -> str:
    kind = f"sentencepiece {tokenizer['model_type']}"
    if tokenizer.get("joint", True):
        return f"one joint {kind} model, {tokenizer['vocab_size']} pieces, trained on the training sources and targets"
    same = " (they came out identical: both sides use the same symbols)" if tokenizer.get("identical") else ""
    return (f"one {kind} model per language, {tokenizer['vocab_size']} source and "
            f"{tokenizer['target_vocab_size']} target pieces, each trained on its side of the training data{same}")


def model_card(name: str, metrics: dict, config: dict, command: str, curve: str | None, note: str = "") -> str:
    training = config.get("training", {})
    model = config["model"]
    files = "\n".join(f"| `{k}` | `{v}` |" for k, v in sorted(config.get("data_files_sha256", {}).items()))
    params = metrics["parameters"]
    lines = [
        f"# {name}", "",
        f"An encoder-decoder Transformer trained from scratch by this project on {config.get('data', '?')}.",
        f"It has {params / 1e6:.2f}M parameters ({model['n_encoder_layers']}+{model['n_decoder_layers']} layers, "
        f"d_model {model['d_model']}, {model['n_heads']} heads, ffn {model['d_ff']}, "
        f"{'pre' if model['norm_first'] else 'post'}-norm, shared embeddings: {model['share_embeddings']}).", "",
        "## Scores", "",
        "Real decoding (no teacher forcing), detokenized output, scored with sacreBLEU against one reference.",
        (f"Decoding choices were made on `val` only: beam {metrics['beam']}, length penalty "
         f"{metrics['length_penalty']}." if "test_bleu" in metrics else
         "Scored on 500 freshly generated examples the model never saw." if metrics["scores"] else
         "Not scored by the export (no standard test set for this data)."), "",
        _score_rows(metrics), "",
        f"- BLEU signature: `{metrics.get('bleu_signature', 'not scored')}`",
        f"- chrF signature: `{metrics.get('chrf_signature', 'not scored')}`",
        f"- Weights stored as {metrics['stored_dtype']}; {metrics['precision_check']}", "",
    ]
    if "test_bleu" in metrics:
        lines += [
            "Reproduce the test score (about a minute on a CPU):", "",
            "```bash",
            f"python -m transformer.evaluate --checkpoint checkpoints/{name} --split test_2016_flickr "
            f"--beam {metrics['beam']} --length-penalty {metrics['length_penalty']} --data-dir DIR",
            "```", ""]
    lines += [
        "## Training", "",
        "```bash", command, "```", "",
        *([note, ""] if note else []),
        f"- Hardware: {metrics['hardware']}",
        f"- Wall-clock training time: {metrics['train_minutes']:.1f} minutes for {metrics['steps']} updates "
        f"({metrics['epochs']} epochs)",
        f"- Checkpoint: {metrics['source_checkpoint']}",
        f"- Schedule: {training.get('schedule')} with {training.get('warmup_steps')} warm-up steps, peak learning "
        f"rate {training.get('lr')}, Adam (0.9, 0.98), label smoothing {training.get('label_smoothing')}, "
        f"dropout {model['dropout']} (attention {model['attention_dropout']}), batches of "
        f"{training.get('max_tokens')} padded tokens, gradient clipping {training.get('clip_norm')}",
        f"- Tokenizer: {tokenizer_description(metrics['tokenizer'])} "
        "(cased, raw text; character coverage 1.0; ids pad 0, unk 1, bos 2, eos 3)", "",
    ]
    if files:
        lines += ["Training data (SHA-256):", "", "| file | sha256 |", "|---|---|", files, ""]
    if curve:
        lines += [f"![training curves]({curve})", ""]
    lines += ["## Full config", "", "```json", json.dumps({"model": model, "training": training}, indent=2), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    parser = arguments.CommandLine("export", __doc__)
    parser.add_argument("source", help="checkpoint directory to export (e.g. RUN/averaged)")
    parser.add_argument("destination", help="bundled checkpoint directory (e.g. checkpoints/NAME)")
    parser.add_argument("--run", help="run directory with log.jsonl, probes.jsonl and command.txt (default: the "
                                      "source's parent)")
    parser.add_argument("--data-dir", help="Multi30K directory, for scoring translation models (default: "
                                           "$MULTI30K_DIR, else download)")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"],
                        help="the precision the weights are stored in")
    parser.add_argument("--beam", type=arguments.positive_int, default=5, help="the beam size it is scored with")
    parser.add_argument("--length-penalties", type=arguments.non_negative_number, nargs="+", default=[0.6, 1.0, 1.4],
                        help="candidates, chosen by val BLEU")
    parser.add_argument("--command", help="the training command, if the run has no command.txt (default: the "
                                          "run's)")
    parser.add_argument("--note", default="", help="a remark for the model card (e.g. which code trained it)")
    return arguments.run(parser, exported, argv)


def exported(args) -> int:
    source, destination = Path(args.source), Path(args.destination)
    run_dir = Path(args.run) if args.run else source.parent
    dtype = getattr(torch, args.dtype)
    try:
        original = load_checkpoint(source, device="cpu")
        config = read_config(source)
        info = {k: v for k, v in config.items() if k not in ("model", "source_tokenizer", "target_tokenizer")}
        with tempfile.TemporaryDirectory(prefix="export-") as staging:
            # Scored as stored, from a staging copy: whatever fails leaves `destination` as it was.
            stored = load_checkpoint(save_checkpoint(Path(staging) / "model", original.model,
                                                     original.source_tokenizer, original.target_tokenizer,
                                                     info=info, dtype=dtype), device="cpu")
        steps, evals = read_training_log(run_dir / "log.jsonl")
        metrics = score(stored, original, config, steps, evals, args)
    except (CheckpointError, datasets.DataError) as error:
        return arguments.said(error, error.code or "input", 2, args.debug, also=f"; {destination} was left as it was")
    command_file = run_dir / "command.txt"
    command = args.command or (command_file.read_text().strip().splitlines()[0] if command_file.is_file() else "?")
    curves = training_curves_svg(steps, evals, f"{destination.name}: training").encode() if steps or evals else None
    card = model_card(destination.name, metrics, {**config, **info}, command, CURVES if curves else None, args.note)
    save_checkpoint(destination, original.model, original.source_tokenizer, original.target_tokenizer, info=info,
                    dtype=dtype, card=card, metrics=metrics,
                    extra_files={**run_history(run_dir), **({CURVES: curves} if curves else {})})
    print(json.dumps({k: metrics[k] for k in ("scores", "beam", "length_penalty")}), file=sys.stdout)
    return 0


def training_minutes(steps: list[dict]) -> float:
    """Wall-clock minutes of a run's updates, resumed segments added up (each starts its clock at 0)."""
    total, last = 0.0, 0.0
    for record in steps:
        if record["elapsed_s"] < last:  # a resumed segment begins
            total += last
        last = record["elapsed_s"]
    return (total + last) / 60


def score(stored, original, config: dict, steps: list[dict], evals: list[dict], args: argparse.Namespace) -> dict:
    """Score the model as stored (and, for translation, the float32 original on val)."""
    training = config.get("training", {})
    metrics: dict = {"scores": {}, "stored_dtype": args.dtype, "hardware": hardware(),
                     "parameters": stored.model.num_parameters(), "steps": config.get("step"),
                     "epochs": evals[-1]["epoch"] + 1 if evals else None,
                     "train_minutes": training_minutes(steps),
                     "source_checkpoint": f"{Path(args.source).name} of the run"
                     + (f" (weights averaged over {', '.join(config['averaged_from'])})"
                        if config.get("averaged_from") else ""),
                     "tokenizer": {"model_type": "word" if training.get("data") in datasets.SYNTHETIC_TASKS
                                   else "unigram",
                                   "vocab_size": stored.source_tokenizer.vocab_size,
                                   "target_vocab_size": stored.target_tokenizer.vocab_size,
                                   "joint": training.get("joint_vocabulary", True),
                                   "identical": stored.source_tokenizer.model_proto
                                   == stored.target_tokenizer.model_proto}}
    if training.get("data") == "multi30k":
        src, tgt = training.get("src_lang", "en"), training.get("tgt_lang", "de")
        splits = {s: datasets.load_multi30k(s, src, tgt, args.data_dir) for s in ("val", "test_2016_flickr")}
        candidates = {}
        for alpha in args.length_penalties:
            candidates[alpha] = evaluate_checkpoint(stored, splits["val"].sources, splits["val"].targets,
                                                    args.beam, alpha)
            log.info("val beam %d alpha %.1f: BLEU %.2f", args.beam, alpha, candidates[alpha]["bleu"])
        alpha = max(candidates, key=lambda a: candidates[a]["bleu"])
        for split, corpus in splits.items():
            for beam in (1, args.beam):
                result = (candidates[alpha] if split == "val" and beam == args.beam else
                          evaluate_checkpoint(stored, corpus.sources, corpus.targets, beam, alpha))
                label = "greedy" if beam == 1 else f"beam {beam}, length penalty {alpha}"
                metrics["scores"][f"{split}:{label}"] = {k: result[k] for k in ("bleu", "chrf", "seconds")}
                log.info("%s %s: BLEU %.2f chrF %.2f", split, label, result["bleu"], result["chrf"])
        metrics["bleu_signature"], metrics["chrf_signature"] = result["signature"], result["chrf_signature"]
        metrics["beam"], metrics["length_penalty"] = args.beam, alpha
        metrics["length_penalty_search_on_val"] = {str(a): r["bleu"] for a, r in candidates.items()}
        reference_val = evaluate_checkpoint(original, splits["val"].sources, splits["val"].targets, args.beam, alpha)
        delta = metrics["scores"][f"val:beam {args.beam}, length penalty {alpha}"]["bleu"] - reference_val["bleu"]
        metrics["precision_check"] = (f"val BLEU with float32 weights {reference_val['bleu']:.2f}, as stored "
                                      f"{candidates[alpha]['bleu']:.2f} (difference {delta:+.2f})")
        metrics["test_bleu"] = metrics["scores"][f"test_2016_flickr:beam {args.beam}, length penalty {alpha}"]["bleu"]
    else:
        val = datasets.synthetic_corpus(training["data"], 500, seed=123_456) if training.get("data") in \
            datasets.SYNTHETIC_TASKS else None
        if val is not None:
            for beam in (1, args.beam):
                result = evaluate_checkpoint(stored, val.sources, val.targets, beam, 1.0)
                exact = sum(h == r for h, r in zip(result["hypotheses"], val.targets)) / len(val)
                label = "greedy" if beam == 1 else f"beam {beam}"
                metrics["scores"][f"fresh {training['data']} examples:{label}"] = {
                    "bleu": result["bleu"], "chrf": result["chrf"], "exact_match": exact}
            metrics["bleu_signature"], metrics["chrf_signature"] = result["signature"], result["chrf_signature"]
        metrics["beam"], metrics["length_penalty"] = args.beam, 1.0
        metrics["precision_check"] = ("scores above are computed with the stored weights" if val is not None else
                                      "not scored: score it with python -m transformer.evaluate --source/--reference")

    return metrics


if __name__ == "__main__":
    raise SystemExit(main())
