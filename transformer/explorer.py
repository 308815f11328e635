"""What the attention explorer computes, independent of any UI: checked input, translations, and their views.

``app.py`` only lays these out and wires events. Every function here takes
plain values (a checkpoint, a ``Translation``, selector values) and returns
plain values or Plotly figures, so each is tested without a browser.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
import torch

from . import figures
from .checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, CheckpointError, list_checkpoints, load_checkpoint
from .decoding import Translation, forced_decode, translate
from .model import sinusoidal_table

log = logging.getLogger(__name__)

MAX_INPUT_CHARS = 1000
MAX_BEAM = 8
ATTENTION_KINDS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention",
                   "cross": "Cross-attention (decoder → encoder)"}
VIEWS = ("one head", "all heads of the layer", "model view: every layer and head")


class InputError(ValueError):
    """A problem with what the user typed, phrased for the user."""


# --- input ---------------------------------------------------------------------------------------

def clean_text(text: str | None, limit: int = MAX_INPUT_CHARS) -> tuple[str, list[str]]:
    """Text fit to translate, and notes about what was changed. Raises InputError for nothing to translate."""
    notes = []
    text = text if isinstance(text, str) else ""
    # Control characters (other than whitespace) have no meaning to the tokenizer and would display badly.
    cleaned = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    cleaned = " ".join(cleaned.split())
    if cleaned != " ".join(text.split()):
        notes.append("Control characters were replaced by spaces.")
    if not cleaned:
        raise InputError("Type a sentence to translate first (the text box is empty).")
    if len(cleaned) > limit:
        cleaned = cleaned[:limit]
        notes.append(f"The input was cut to its first {limit} characters.")
    return cleaned, notes


# --- models --------------------------------------------------------------------------------------

class ModelRegistry:
    """The checkpoints a user may choose, by name only, loaded once each and shared read-only by all sessions."""

    def __init__(self, roots: list[Path] | None = None, device: str | torch.device | None = None, max_loaded: int = 4):
        self.roots = [Path(r) for r in (roots or [REPOSITORY_CHECKPOINTS])]
        self.device = device
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, Checkpoint] = OrderedDict()
        self._lock = threading.Lock()

    def available(self) -> dict[str, Path]:
        """Name -> directory of every listed checkpoint; the first root wins on a name clash."""
        found: dict[str, Path] = {}
        for path in list_checkpoints(*self.roots):
            found.setdefault(path.name, path)
        return found

    def names(self) -> list[str]:
        return list(self.available())

    def default_name(self) -> str | None:
        names = self.names()
        for preferred in ("multi30k-en-de", "reverse-tiny"):
            if preferred in names:
                return preferred
        return names[0] if names else None

    def get(self, name: str) -> Checkpoint:
        """The loaded checkpoint called ``name``; CheckpointError when it is not listed or cannot be loaded."""
        with self._lock:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name]
            available = self.available()
            if name not in available:
                raise CheckpointError(f"no checkpoint named {name!r}; choose one of {', '.join(available) or 'none'}")
            checkpoint = load_checkpoint(available[name], self.device)
            self._loaded[name] = checkpoint
            while len(self._loaded) > self.max_loaded:
                self._loaded.popitem(last=False)
            return checkpoint

    def forget(self, name: str) -> None:
        with self._lock:
            self._loaded.pop(name, None)


# --- translating ---------------------------------------------------------------------------------

@dataclass
class TranslateResult:
    translation: Translation
    notes: list[str]


def run_translation(checkpoint: Checkpoint, text: str, decoding: str = "beam", beam_size: int = 5,
                    max_length: int | None = None, top_k: int = 5) -> TranslateResult:
    cleaned, notes = clean_text(text)
    beam = 1 if decoding == "greedy" else max(1, min(MAX_BEAM, int(beam_size)))
    result = translate(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, cleaned,
                       beam_size=beam, max_length=int(max_length) if max_length else None, top_k=top_k)
    if result.truncated:
        notes.append(f"The sentence is longer than the model's {checkpoint.model.config.max_len} positions; "
                     "only its beginning was translated.")
    unknown = sum(1 for i in result.source_ids if i == checkpoint.source_tokenizer.unk_id)
    if unknown:
        notes.append(f"{unknown} source piece(s) are unknown to this model's vocabulary (shown as <unk>).")
    if result.predicted_ids[-1] != checkpoint.target_tokenizer.eos_id:
        notes.append("Decoding stopped at the maximum length before the model ended the sentence.")
    return TranslateResult(result, notes)


def run_forced(checkpoint: Checkpoint, source: str, target: str, top_k: int = 5) -> TranslateResult:
    """Score the user's own translation of ``source`` and capture the attention paid while reading it."""
    cleaned_source, notes = clean_text(source)
    try:
        cleaned_target, target_notes = clean_text(target)
    except InputError:
        raise InputError("Type your own translation in the box first.") from None
    result = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                           cleaned_source, cleaned_target, top_k=top_k)
    return TranslateResult(result, notes + target_notes)


# --- views of a translation ----------------------------------------------------------------------

def kind_key(label: str) -> str:
    """Accept a key ("cross") or its display label."""
    for key, name in ATTENTION_KINDS.items():
        if label in (key, name):
            return key
    raise ValueError(f"unknown attention kind {label!r}")


def attention_axes(translation: Translation, kind: str) -> tuple[list[str], list[str], str, str]:
    """Row labels, column labels and axis names of one attention kind.

    Decoder-side rows are labelled with the token that step produced, so a
    row reads "while producing X, the model looked at ...".
    """
    produced = translation.predicted_pieces
    if kind == "encoder":
        return translation.source_pieces, translation.source_pieces, "source", "source"
    if kind == "decoder":
        return produced, translation.target_pieces, "producing", "target so far"
    return produced, translation.source_pieces, "producing", "source"


def attention_tensor(translation: Translation, kind: str) -> torch.Tensor:
    return {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
            "cross": translation.cross_attention}[kind_key(kind)]


def attention_figure(translation: Translation, kind: str, view: str = VIEWS[0], layer: int = 1, head: int = 1,
                     average_heads: bool = False) -> go.Figure:
    """The attention heatmap(s) for the selectors of the Translate tab (layer and head are 1-based)."""
    kind = kind_key(kind)
    weights = attention_tensor(translation, kind)  # (layers, heads, queries, keys)
    layers, heads = weights.shape[:2]
    layer = max(1, min(layers, int(layer)))
    head = max(1, min(heads, int(head)))
    rows, columns, row_title, column_title = attention_axes(translation, kind)
    name = ATTENTION_KINDS[kind]
    if view == VIEWS[2]:
        grid = weights.mean(dim=1, keepdim=True) if average_heads else weights
        column_names = ["mean of heads"] if average_heads else [f"head {h + 1}" for h in range(heads)]
        return figures.attention_grid(grid, rows, columns, f"{name}: every layer and head", 
                                      [f"layer {l + 1}" for l in range(layers)], column_names,
                                      show_ticks=len(columns) <= 14 and len(rows) <= 14,
                                      query_title=row_title, key_title=column_title)
    if view == VIEWS[1] and not average_heads:
        return figures.attention_grid([weights[layer - 1]], rows, columns, f"{name}, layer {layer}: all heads",
                                      [""], [f"head {h + 1}" for h in range(heads)],
                                      query_title=row_title, key_title=column_title)
    if average_heads:
        matrix, title = weights[layer - 1].mean(dim=0), f"{name}, layer {layer}, mean over {heads} heads"
    else:
        matrix, title = weights[layer - 1, head - 1], f"{name}, layer {layer}, head {head}"
    return figures.attention_heatmap(matrix, rows, columns, title, row_title, column_title)


def step_view(translation: Translation, step: int, layer: int | None = None, head: int | None = None):
    """What decoding step ``step`` (1-based) did: the revealed tokens, its top-k choices, where it looked.

    Returns (highlighted tokens for gr.HighlightedText, top-k figure, source-attention figure, caption).
    ``head`` None averages the heads; ``layer`` None uses the last layer.
    """
    steps = translation.num_steps
    step = max(1, min(steps, int(step)))
    index = step - 1
    produced = translation.predicted_pieces
    highlighted = [(piece + " ", "current" if i == index else None) for i, piece in enumerate(produced[:step])]
    highlighted += [("…", None)] if step < steps else []
    chosen = produced[index]
    top = figures.top_k_bar(translation.top_pieces[index], translation.top_probs[index], chosen,
                            title=f"Step {step}: candidates for the next token")
    cross = translation.cross_attention  # (layers, heads, target, source)
    layers, heads = cross.shape[:2]
    layer = layers if layer is None else max(1, min(layers, int(layer)))
    if head is None:
        weights, which = cross[layer - 1, :, index].mean(dim=0), f"layer {layer}, mean of {heads} heads"
    else:
        head = max(1, min(heads, int(head)))
        weights, which = cross[layer - 1, head - 1, index], f"layer {layer}, head {head}"
    attention = figures.source_attention_bar(weights, translation.source_pieces,
                                             f"Step {step}: cross-attention over the source ({which})")
    caption = (f"Step {step} of {steps}: the model produced **{_md_escape(chosen)}** with probability "
               f"{translation.token_probs[index]:.1%}.")
    return highlighted, top, attention, caption


def _md_escape(text: str) -> str:
    """Make a token safe to show inside Markdown (no HTML, no formatting)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_{}[]()#+-.!|~":
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped


SPECIAL_PIECES = ("</s>", "<s>", "<unk>", "<pad>")


def source_tokens_view(translation: Translation) -> list[tuple[str, str | None]]:
    """Source pieces for gr.HighlightedText, one space apart so piece boundaries stay visible."""
    return [(piece + " ", "special" if piece in SPECIAL_PIECES else None) for piece in translation.source_pieces]


def forced_figures(translation: Translation) -> tuple[go.Figure, go.Figure]:
    """Per-token probability of a forced target, and the cross-attention (mean over heads, last layer)."""
    probabilities = figures.token_probability_bar(
        translation.predicted_pieces, translation.token_probs,
        f"Probability of each token of your translation (total log-probability {translation.log_prob:.2f})")
    layers = translation.cross_attention.shape[0]
    attention = figures.attention_heatmap(
        translation.cross_attention[layers - 1].mean(dim=0), translation.predicted_pieces,
        translation.source_pieces, f"Cross-attention while reading your translation (layer {layers}, mean of heads)",
        "producing", "source")
    return probabilities, attention


def attention_json_file(translation: Translation, directory: str | None = None) -> str:
    """Write the current translation's raw attention (the --json contract) to a file for download."""
    directory = directory or tempfile.mkdtemp(prefix="attention-")
    path = Path(directory) / "attention.json"
    payload = translation.to_json()
    payload["predicted_tokens"] = translation.predicted_pieces
    payload["token_probabilities"] = translation.token_probs
    path.write_text(json.dumps(payload, ensure_ascii=False))
    return str(path)


# --- positional encoding tab ---------------------------------------------------------------------

def positional_views(d_model: int, length: int, dimensions: str) -> tuple[go.Figure, go.Figure, go.Figure]:
    d_model = max(2, min(1024, int(d_model)))
    d_model += d_model % 2
    length = max(2, min(512, int(length)))
    table = sinusoidal_table(length, d_model)
    chosen = []
    for part in str(dimensions).replace(";", ",").split(","):
        part = part.strip()
        if part.isdigit() and int(part) < d_model:
            chosen.append(int(part))
    chosen = chosen or [0, 1, 4, 5, d_model // 2]
    return (figures.positional_encoding_heatmap(table, f"PE matrix: {length} positions × {d_model} dimensions"),
            figures.positional_encoding_lines(table, chosen, "Chosen dimensions across positions"),
            figures.position_similarity(table, "PE(i) · PE(j): how alike two positions look"))


# --- model tab -----------------------------------------------------------------------------------

def parameter_table(checkpoint: Checkpoint) -> list[list]:
    """[module, parameters, share] rows for the Model tab; a shared embedding is counted once."""
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
        rows.append([name, count, f"{count / total:.1%}"])
    rows.append(["total", total, "100%"])
    return rows


def config_rows(checkpoint: Checkpoint) -> list[list]:
    rows = [[key, str(value)] for key, value in checkpoint.model.config.to_dict().items()]
    rows.append(["device", str(checkpoint.model.device)])
    for key in ("data", "source_lang", "target_lang", "step"):
        if key in checkpoint.info:
            rows.append([key, str(checkpoint.info[key])])
    return rows


def metrics_markdown(checkpoint: Checkpoint) -> str:
    scores = checkpoint.metrics.get("scores")
    if not scores:
        return "This checkpoint has no scores yet (no metrics.json)."
    lines = ["| split | decoding | BLEU | chrF |", "|---|---|---|---|"]
    for key, value in scores.items():
        split, decoding = key.split(":", 1)
        lines.append(f"| {split} | {decoding} | {value['bleu']:.2f} | {value['chrf']:.2f} |")
    if "bleu_signature" in checkpoint.metrics:
        lines += ["", f"sacreBLEU signature: `{checkpoint.metrics['bleu_signature']}`"]
    return "\n".join(lines)


def suitable_text(checkpoint: Checkpoint, current: str, examples: dict[str, str]) -> str:
    """Keep the user's text unless it is plainly for another kind of model (digits vs. words)."""
    synthetic = checkpoint.info.get("source_lang") == "digits"
    digits_only = all(ch.isdigit() or ch.isspace() for ch in (current or "")) and any(ch.isdigit() for ch in current or "")
    if synthetic != digits_only:
        return examples["digits" if synthetic else "text"]
    return current


def is_hosted() -> bool:
    return bool(os.environ.get("SPACE_ID"))


# --- train tab -----------------------------------------------------------------------------------

def job_status_markdown(job) -> str:
    """A line or two on the current job: progress, time left, outcome."""
    if job is None:
        return "No training job has run on this server yet."
    line = f"**{job.name}**: {job.status}, update {job.step} of {job.total_steps}"
    left = job.seconds_left()
    if left is not None:
        line += f", about {left:.0f} s left"
    if job.evals:
        last = job.evals[-1]
        line += f" · validation loss {last['val_loss']:.3f}, BLEU {last['bleu']:.1f}"
        if "exact_match" in last:
            line += f", exact match {last['exact_match']:.0%}"
    if job.message:
        line += f"\n\n{job.message}"
    return line


def job_progress(job) -> float:
    return 0.0 if job is None else min(1.0, job.step / max(1, job.total_steps))


def job_curves(job) -> go.Figure:
    steps = job.steps if job else []
    # Thin out long step lists: the curve needs a few hundred points at most.
    stride = max(1, len(steps) // 300)
    return figures.training_curves(steps[::stride] + steps[-1:] if steps else [], job.evals if job else [],
                                   title="Training, live")


def probe_figure(probes: list[dict], index: int) -> go.Figure | None:
    """Cross-attention of the fixed probe sentence at evaluation ``index`` (1-based), last layer, mean of heads."""
    if not probes:
        return None
    index = max(1, min(len(probes), int(index)))
    probe = probes[index - 1]
    cross = torch.tensor(probe["cross"])  # (layers, heads, target, source)
    return figures.attention_heatmap(
        cross[-1].mean(dim=0), probe["target_tokens"], probe["source_tokens"],
        f"Cross-attention at update {probe['step']} (evaluation {index} of {len(probes)}): "
        f"“{probe['translation'][:60]}”", "producing", "source")
