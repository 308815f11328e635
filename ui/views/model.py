"""The Model tab: what a checkpoint is (config, parameters, scores, card) and how it learned (curves, probes)."""

from __future__ import annotations

import re

import pandas
import plotly.graph_objects as go
import torch
from pandas.io.formats.style import Styler

from transformer.files.checkpoint import Checkpoint
from transformer.train.run_logs import read_records, read_training_log

from ..drawing import figures
from ..runtime.language import ENGLISH, Message, Number, message, text
from ..runtime.numbers import clamp
from .languages import language_label
from .text import markdown_escape


def status_line(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """Under the model picker: size, shape and where the model runs, then what it learned from (and, for a model
    from the Hub, its licence)."""
    config = checkpoint.model.config
    status = text(language, "model.status", name=checkpoint.name,
                  millions=Number(checkpoint.model.num_parameters() / 1e6, ".2f"),
                  encoder_layers=config.n_encoder_layers, decoder_layers=config.n_decoder_layers,
                  heads=config.n_heads, device=checkpoint.model.device,
                  learned=what_it_learned(checkpoint, language))
    if checkpoint.model.dtype == torch.bfloat16:  # the registry's doing: it would not fit in float32
        status += " " + text(language, "model.status.bfloat16")
    licence = licence_of(checkpoint)
    if licence is None:
        return status
    non_commercial = "-nc" in licence.lower()  # Creative Commons' NonCommercial (NLLB-200: CC-BY-NC 4.0)
    return status + " " + text(language, "model.status.licence.non_commercial" if non_commercial
                               else "model.status.licence", licence=markdown_escape(licence))


def licence_of(checkpoint: Checkpoint) -> str | None:
    """The licence a converted model was published under, as its publisher names it."""
    source = checkpoint.info.get("source")
    licence = source.get("license") if isinstance(source, dict) else None
    return str(licence) if licence else None


def what_it_learned(checkpoint: Checkpoint, language: str = ENGLISH) -> Message:
    """What the model read in training, so a visitor knows which sentences it can translate."""
    source = checkpoint.info.get("source")
    publisher = source.get("name", "") if isinstance(source, dict) else ""
    data = str(checkpoint.info.get("data", ""))
    if publisher.startswith("Helsinki-NLP/opus-mt-"):
        return message("model.learned.opus")
    if checkpoint.pair is not None:
        source, target = (language_label(code, language) for code in checkpoint.pair)
        return message("model.learned.multilingual", source=source, target=target)
    if publisher:
        return message("model.learned.marian")
    if data.startswith("Multi30K"):
        return message("model.learned.multi30k")
    if "reverse" in data:
        return message("model.learned.reverse")
    return message("model.learned.data", data=data) if data else message("model.learned.unknown")


def card_markdown(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """The model card without its pictures (they are files beside the card, which the page cannot reach). The card
    is the model's own document: it stays as its author wrote it, in whatever language."""
    card = "\n".join(line for line in checkpoint.card.splitlines() if not line.startswith("!["))
    return card or text(language, "model.no_card")


def parameter_table(checkpoint: Checkpoint, language: str = ENGLISH) -> Styler:
    """Parameters per module for the Model tab; a shared embedding is counted once.

    Counts and shares stay numbers, so the table sorts by them, and read with
    thousands separators and as percentages (as the page's language writes them).
    """
    def words(key: str, **values) -> str:
        return text(language, f"model.row.{key}", **values)

    model = checkpoint.model
    seen: set[int] = set()
    rows = []
    groups = [(words("shared_embedding") if model.config.share_embeddings else words("source_embedding"),
               model.src_embed)]
    if not model.config.share_embeddings:
        groups.append((words("target_embedding"), model.tgt_embed))
    groups += [(words("encoder_layer", n=i + 1), layer) for i, layer in enumerate(model.encoder.layers)]
    groups += [(words("decoder_layer", n=i + 1), layer) for i, layer in enumerate(model.decoder.layers)]
    for name, module in [(words("encoder_norm"), model.encoder.final_norm),
                         (words("decoder_norm"), model.decoder.final_norm),
                         (words("output_projection"), model.output_proj)]:
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
        rows.append([words("output_bias"), model.output_bias.numel(), model.output_bias.numel() / total])
    rows.append([words("total"), total, 1.0])
    columns = parameter_columns(language)
    table = pandas.DataFrame(rows, columns=columns)
    return table.style.format({columns[1]: lambda n: Number(n, ",").in_(language),
                               columns[2]: lambda share: Number(share, ".1%").in_(language)})


def parameter_columns(language: str = ENGLISH) -> list[str]:
    """The parameter table's column names: module, parameters, share."""
    return [text(language, f"model.column.{name}") for name in ("module", "parameters", "share")]


def config_rows(checkpoint: Checkpoint) -> list[list]:
    """The config's settings by their names in the code (``d_model``, ``n_heads``), as the paper and the command
    line name them."""
    rows = [[key, str(value)] for key, value in checkpoint.model.config.to_dict().items()]
    rows.append(["device", str(checkpoint.model.device)])
    for key in ("data", "source_lang", "target_lang", "step"):
        if key in checkpoint.info:
            rows.append([key, str(checkpoint.info[key])])
    return rows


BEAM_SCORED = re.compile(r"beam (\d+), length penalty ([\d.]+)")  # as the evaluation names a beam search


def decoding_words(decoding: str, language: str = ENGLISH) -> str:
    """A score's decoding ("greedy", "beam 5, length penalty 1.4", as metrics.json names it) in the page's words."""
    if decoding == "greedy":
        return text(language, "translate.decoding.greedy")
    if beam := BEAM_SCORED.fullmatch(decoding):
        return text(language, "model.decoding.beam", beam=beam.group(1), penalty=Number(float(beam.group(2)), "g"))
    return decoding


def metrics_markdown(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    scores = checkpoint.metrics.get("scores")
    source = checkpoint.info.get("source")
    if not scores and isinstance(source, dict):
        licence = (message("model.licence", licence=source.get("license") or message("model.licence_not_stated"))
                   if source.get("license") != "cc-by-4.0" else message("model.licence_cc_by"))
        revision = message("model.at_revision", revision=source["revision"][:12]) if source.get("revision") else ""
        return text(language, "model.opened_from", name=source.get("name"), revision=revision, licence=licence)
    if not scores:
        return text(language, "model.no_scores")
    lines = [text(language, "model.scores_header"), "|---|---|---|---|"]
    for key, value in scores.items():
        split, decoding = key.split(":", 1)
        bleu, chrf = (Number(value[name], ".2f").in_(language) for name in ("bleu", "chrf"))
        lines.append(f"| {split} | {decoding_words(decoding, language)} | {bleu} | {chrf} |")
    if "bleu_signature" in checkpoint.metrics:
        lines += ["", text(language, "model.bleu_signature", signature=checkpoint.metrics["bleu_signature"])]
    return "\n".join(lines)


def checkpoint_history(checkpoint: Checkpoint) -> tuple[list[dict], list[dict], list[dict]]:
    """(update records, evaluation records, probe attention records) saved beside a checkpoint, if any."""
    if checkpoint.path is None:
        return [], [], []
    steps, evals = read_training_log(checkpoint.path / "training_log.jsonl")
    return steps, evals, read_records(checkpoint.path / "probes.jsonl")


def probe_figure(probes: list[dict], index: int, language: str = ENGLISH) -> go.Figure | None:
    """Cross-attention of the fixed probe sentence at evaluation ``index`` (1-based), last layer, mean of heads."""
    if not probes:
        return None
    index = clamp(index, 1, len(probes))
    probe = probes[index - 1]
    cross = torch.tensor(probe["cross"])  # (layers, heads, target, source)
    return figures.attention_heatmap(
        cross[-1].mean(dim=0), probe["target_tokens"], probe["source_tokens"],
        text(language, "model.probe_title", step=probe["step"], index=index, count=len(probes)),
        text(language, "map.axis.producing"), text(language, "map.axis.source"), rows_are_steps=True,
        subtitle=text(language, "model.probe_subtitle", translation=figures.escape(probe["translation"][:80])),
        language=language)
