"""The Model tab: what a checkpoint is (config, parameters, scores, card) and how it learned (curves, probes)."""

from __future__ import annotations

import pandas
import plotly.graph_objects as go
import torch
from pandas.io.formats.style import Styler

from transformer.files.checkpoint import Checkpoint, read_records, read_training_log

from .. import figures
from .choices import clamp


def status_line(checkpoint: Checkpoint) -> str:
    """Under the model picker: size, shape and where the model runs, then what it learned from."""
    config = checkpoint.model.config
    return (f"**{checkpoint.name}**: {checkpoint.model.num_parameters() / 1e6:.2f}M parameters, "
            f"{config.n_encoder_layers}+{config.n_decoder_layers} layers, {config.n_heads} heads, "
            f"on {checkpoint.model.device}. {what_it_learned(checkpoint)}")


def what_it_learned(checkpoint: Checkpoint) -> str:
    """What the model read in training, so a visitor knows which sentences it can translate."""
    source = checkpoint.info.get("source")
    publisher = source.get("name", "") if isinstance(source, dict) else ""
    data = str(checkpoint.info.get("data", ""))
    if publisher.startswith("Helsinki-NLP/opus-mt-"):
        return ("A real translator: Helsinki-NLP trained it on millions of sentence pairs of every kind (the OPUS "
                "collection), so everyday sentences, questions and news suit it.")
    if publisher:
        return "Converted from a Marian translator; its card (Model tab) says what it learned from."
    if data.startswith("Multi30K"):
        return ("It learned from 29,000 image captions (Multi30K), so it translates sentences that describe a "
                "scene best; greetings, questions or news are far from anything it has read.")
    if "reverse" in data:
        return "It learned to write a row of digits backwards, and reads nothing else."
    return f"It learned from {data}." if data else "Its card (Model tab) says what it learned from."


def card_markdown(checkpoint: Checkpoint) -> str:
    """The model card without its pictures (they are files beside the card, which the page cannot reach)."""
    card = "\n".join(line for line in checkpoint.card.splitlines() if not line.startswith("!["))
    return card or "No model card."


def parameter_table(checkpoint: Checkpoint) -> Styler:
    """Parameters per module for the Model tab; a shared embedding is counted once.

    Counts and shares stay numbers, so the table sorts by them, and read with
    thousands separators and as percentages.
    """
    model = checkpoint.model
    seen: set[int] = set()
    rows = []
    groups = [("embedding (shared)" if model.config.share_embeddings else "source embedding", model.src_embed)]
    if not model.config.share_embeddings:
        groups.append(("target embedding", model.tgt_embed))
    groups += [(f"encoder layer {i + 1}", layer) for i, layer in enumerate(model.encoder.layers)]
    groups += [(f"decoder layer {i + 1}", layer) for i, layer in enumerate(model.decoder.layers)]
    for name, module in [("encoder final norm", model.encoder.final_norm), ("decoder final norm", model.decoder.final_norm),
                         ("output projection", model.output_proj)]:
        if module is not None:
            groups.append((name, module))
    total = model.num_parameters()
    for name, module in groups:
        count = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                count += p.numel()
        rows.append([name, count, count / total])
    if model.output_bias is not None:
        rows.append(["output bias", model.output_bias.numel(), model.output_bias.numel() / total])
    rows.append(["total", total, 1.0])
    table = pandas.DataFrame(rows, columns=["module", "parameters", "share"])
    return table.style.format({"parameters": "{:,}", "share": "{:.1%}"})


def config_rows(checkpoint: Checkpoint) -> list[list]:
    rows = [[key, str(value)] for key, value in checkpoint.model.config.to_dict().items()]
    rows.append(["device", str(checkpoint.model.device)])
    for key in ("data", "source_lang", "target_lang", "step"):
        if key in checkpoint.info:
            rows.append([key, str(checkpoint.info[key])])
    return rows


def metrics_markdown(checkpoint: Checkpoint) -> str:
    scores = checkpoint.metrics.get("scores")
    source = checkpoint.info.get("source")
    if not scores and isinstance(source, dict):
        licence = f", licence {source.get('license') or 'not stated'}" if source.get("license") != "cc-by-4.0" else \
            ", licence CC-BY 4.0 (name Helsinki-NLP / OPUS-MT when you use it)"
        revision = f" at revision `{source['revision'][:12]}`" if source.get("revision") else ""
        return (f"Opened from `{source.get('name')}`{revision}{licence}. Its scores were **not measured here**: "
                "score it on Multi30K with `python -m transformer.evaluate --checkpoint DIR` (see the card below).")
    if not scores:
        return "This checkpoint has no scores yet (no metrics.json)."
    lines = ["| split | decoding | BLEU | chrF |", "|---|---|---|---|"]
    for key, value in scores.items():
        split, decoding = key.split(":", 1)
        lines.append(f"| {split} | {decoding} | {value['bleu']:.2f} | {value['chrf']:.2f} |")
    if "bleu_signature" in checkpoint.metrics:
        lines += ["", f"sacreBLEU signature: `{checkpoint.metrics['bleu_signature']}`"]
    return "\n".join(lines)


def checkpoint_history(checkpoint: Checkpoint) -> tuple[list[dict], list[dict], list[dict]]:
    """(update records, evaluation records, probe attention records) saved beside a checkpoint, if any."""
    if checkpoint.path is None:
        return [], [], []
    steps, evals = read_training_log(checkpoint.path / "training_log.jsonl")
    return steps, evals, read_records(checkpoint.path / "probes.jsonl")


def probe_figure(probes: list[dict], index: int) -> go.Figure | None:
    """Cross-attention of the fixed probe sentence at evaluation ``index`` (1-based), last layer, mean of heads."""
    if not probes:
        return None
    index = clamp(index, 1, len(probes))
    probe = probes[index - 1]
    cross = torch.tensor(probe["cross"])  # (layers, heads, target, source)
    return figures.attention_heatmap(
        cross[-1].mean(dim=0), probe["target_tokens"], probe["source_tokens"],
        f"Cross-attention at update {probe['step']} (evaluation {index} of {len(probes)})", "producing", "source",
        rows_are_steps=True, subtitle=f"“{figures.escape(probe['translation'][:80])}”")
