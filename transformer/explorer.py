"""What the attention explorer computes, independent of any UI: checked input, translations, and their views.

``app.py`` only lays these out and wires events. Every function here takes
plain values (a checkpoint, a ``Translation``, selector values) and returns
plain values or Plotly figures, so each is tested without a browser.
"""

from __future__ import annotations

import csv
import difflib
import itertools
import json
import logging
import re
import shutil
import tempfile
import threading
import time
import unicodedata
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pandas
import plotly.graph_objects as go
import torch
from pandas.io.formats.style import Styler

from . import analysis, figures, interventions, jobs
from .checkpoint import (REPOSITORY_CHECKPOINTS, Checkpoint, CheckpointError, list_checkpoints, load_checkpoint,
                         read_records, read_training_log)
from .decoding import Translation, beam_search, encode_source, forced_decode
from .errors import InputError
from .model import sinusoidal_table

log = logging.getLogger(__name__)

MAX_INPUT_CHARS = 1000
MAX_BEAM = 8
TARGET_TOKENS = (5, 200)  # the range of "Maximum target tokens" in the app
MAX_PE_LINES = 12  # more lines in one chart are a tangle with a legend longer than the chart
DIRECTION_CONTROLS = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])  # LRE..RLO, LRI..PDI
LONG_SOURCE_PIECES = 64  # beyond this, a note warns that the models here learned from far shorter sentences
ATTENTION_KINDS = {"encoder": "Encoder self-attention", "decoder": "Decoder self-attention",
                   "cross": "Cross-attention (decoder → encoder)"}
VIEWS = ("one head", "all heads of the layer", "model view: every layer and head")




# --- input ---------------------------------------------------------------------------------------

def clean_text(text: str | None, limit: int = MAX_INPUT_CHARS) -> tuple[str, list[str]]:
    """Text fit to translate, and notes about what was changed. Raises InputError for nothing to translate."""
    notes = []
    text = text if isinstance(text, str) else ""
    # Unpaired surrogates (JSON allows "\ud800") are not text: UTF-8 cannot encode them, and the tokenizer fails.
    if any(unicodedata.category(ch) == "Cs" for ch in text):
        text = "".join("\ufffd" if unicodedata.category(ch) == "Cs" else ch for ch in text)
        notes.append("Invalid characters (unpaired surrogates) were replaced by \ufffd.")
    # Control characters (other than whitespace) have no meaning to the tokenizer and would display badly.
    cleaned = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    cleaned = " ".join(cleaned.split())
    if cleaned != " ".join(text.split()):
        notes.append("Control characters were replaced by spaces.")
    # Text-direction overrides and isolates would make the sentence display in an order it is not read in.
    without_overrides = cleaned.translate(DIRECTION_CONTROLS)
    if without_overrides != cleaned:
        cleaned = " ".join(without_overrides.split())
        notes.append("Text-direction control characters were removed.")
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
        """The loaded checkpoint called ``name``; CheckpointError when it is not listed or cannot be loaded.

        Loading happens outside the lock, so one slow load never holds up
        translations with models that are already loaded.
        """
        with self._lock:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name]
        available = self.available()
        if name not in available:
            raise CheckpointError(f"no checkpoint named {name!r}; choose one of {', '.join(available) or 'none'}")
        try:
            checkpoint = load_checkpoint(available[name], self.device)
        except CheckpointError as error:  # name the checkpoint, not the server's directories
            raise CheckpointError(str(error).replace(str(available[name].parent) + "/", "")) from None
        with self._lock:
            checkpoint = self._loaded.setdefault(name, checkpoint)
            self._loaded.move_to_end(name)
            while len(self._loaded) > self.max_loaded:
                self._loaded.popitem(last=False)
            return checkpoint


# --- translating ---------------------------------------------------------------------------------

@dataclass
class TranslateResult:
    translation: Translation
    notes: list[str]


def run_translation(checkpoint: Checkpoint, text: str, decoding: str = "beam", beam_size: int = 5,
                    max_length: int | None = None, top_k: int = 5) -> TranslateResult:
    cleaned, notes = clean_text(text)
    beam = 1 if decoding == "greedy" else max(1, min(MAX_BEAM, int(beam_size)))
    max_length = int(max_length) if max_length else None
    result = checkpoint.translate(cleaned, beam, max_length, top_k=top_k)
    # Experiments and shared links decode this translation the same way.
    result.extra.update(beam_size=beam, max_length=max_length)
    if result.truncated:
        notes.append(f"The sentence is longer than the model's {checkpoint.model.config.max_len} positions; "
                     "only its beginning was translated.")
    unknown = sum(1 for i in result.source_ids if i == checkpoint.source_tokenizer.unk_id)
    content = [piece for piece in result.source_pieces[:-1] if piece != "▁"]  # not </s>, nor a bare word start
    if unknown and unknown >= len(content) / 2:  # half or more of what the model reads is unknown to it
        notes.append(f"{'None' if unknown == len(content) else 'Little'} of the sentence is in this model's "
                     "vocabulary (unknown pieces are shown as `<unk>`), so the translation says little or nothing "
                     "about it.")
    elif unknown:
        notes.append(f"{unknown} source piece(s) are unknown to this model's vocabulary (shown as `<unk>`).")
    if language := language_note(checkpoint, cleaned):
        notes.append(language)
    if result.ended and not result.text.strip():
        notes.append("The translation is empty: the model ended the sentence without producing a word.")
    if not result.ended:
        notes.append("Decoding stopped at the maximum length before the model ended the sentence.")
    if len(result.source_ids) > LONG_SOURCE_PIECES and not result.truncated:
        notes.append(f"The input is {len(result.source_ids)} pieces long. Models here learn from far shorter "
                     "sentences (the English→German model's captions average about 15 pieces), so expect parts of "
                     "it to be left out.")
    return TranslateResult(result, notes)


def decoding_of(translation: Translation) -> dict:
    """``beam_size`` (1: greedy) and ``max_length`` a translation was made with, so a comparison decodes alike."""
    return {"beam_size": int(translation.extra.get("beam_size", 1)), "max_length": translation.extra.get("max_length")}


def run_forced(checkpoint: Checkpoint, source: str, target: str, top_k: int = 5) -> TranslateResult:
    """Score the user's own translation of ``source`` and capture the attention paid while reading it."""
    cleaned_source, notes = clean_text(source)
    try:
        cleaned_target, target_notes = clean_text(target)
    except InputError:
        raise InputError("Type your own translation in the box first.") from None
    result = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                           cleaned_source, cleaned_target, top_k=top_k)
    unknown = sum(1 for i in result.predicted_ids if i == checkpoint.target_tokenizer.unk_id)
    if unknown:
        target_notes.append(f"{unknown} piece(s) of your translation are unknown to this model's vocabulary "
                            "(shown as <unk>): their probabilities say little about the words you wrote.")
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
        which = "every layer, mean of heads" if average_heads else "every layer and head"
        return figures.attention_grid(grid, rows, columns, name, [f"layer {l + 1}" for l in range(layers)],
                                      column_names, show_ticks=len(columns) <= 14 and len(rows) <= 14,
                                      query_title=row_title, key_title=column_title, rows_are_steps=kind != "encoder",
                                      subtitle=which)
    if view == VIEWS[1] and not average_heads:
        return figures.attention_grid([weights[layer - 1]], rows, columns, name, [""],
                                      [f"head {h + 1}" for h in range(heads)], query_title=row_title,
                                      key_title=column_title, rows_are_steps=kind != "encoder",
                                      subtitle=f"layer {layer}, all heads")
    # Layer and head on a line of their own: on a phone or a zoomed projector one long line is cut off there.
    if average_heads:
        matrix, which = weights[layer - 1].mean(dim=0), f"layer {layer}, mean over {heads} heads"
    else:
        matrix, which = weights[layer - 1, head - 1], f"layer {layer}, head {head}"
    return figures.attention_heatmap(matrix, rows, columns, f"{name}<br><sup>{which}</sup>", row_title, column_title,
                                     rows_are_steps=kind != "encoder")


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
                                             f"Step {step}: cross-attention over the source<br><sup>{which}</sup>")
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
        translation.source_pieces,
        f"Cross-attention while reading your translation<br><sup>layer {layers}, mean of heads</sup>",
        "producing", "source", rows_are_steps=True)
    return probabilities, attention


def attention_json_file(translation: Translation, directory: str | None = None) -> str:
    """Write the current translation's raw attention (the --json contract) to a file for download."""
    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.json"
    payload = translation.to_json()
    payload["predicted_tokens"] = translation.predicted_pieces
    payload["token_probabilities"] = translation.token_probs
    path.write_text(json.dumps(payload, ensure_ascii=False))
    return str(path)


EXPORT_ROOT = Path(tempfile.gettempdir()) / "transformer-explorer-exports"
EXPORT_LIFETIME_S = 3600


def fresh_export_directory() -> str:
    """A new directory for one download; those older than an hour are removed, so exports never pile up."""
    EXPORT_ROOT.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - EXPORT_LIFETIME_S
    for old in EXPORT_ROOT.iterdir():
        try:
            if old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    return tempfile.mkdtemp(dir=EXPORT_ROOT)


# --- positional encoding tab ---------------------------------------------------------------------

def positional_views(d_model: int, length: int, dimensions: str) -> tuple[go.Figure, go.Figure, go.Figure]:
    asked = max(2, min(1024, int(d_model)))
    d_model = asked + asked % 2
    length = max(2, min(512, int(length)))
    table = sinusoidal_table(length, d_model)
    chosen, ignored = [], []
    for part in str(dimensions).replace(";", ",").split(","):
        part = part.strip()
        if part.isdigit() and int(part) < d_model:
            chosen.append(int(part))
        elif part:
            ignored.append(part)
    title = "Chosen dimensions across positions"
    chosen = list(dict.fromkeys(chosen))  # a dimension asked twice is one line
    if len(chosen) > MAX_PE_LINES:
        title += f"<br><sup>the first {MAX_PE_LINES} of {len(chosen)} dimensions asked for</sup>"
        chosen = chosen[:MAX_PE_LINES]
    if not chosen:
        chosen = [0, 1, 4, 5, d_model // 2]
        title = "Dimensions 0, 1, 4, 5 and d_model/2 across positions"
    if ignored:
        title += (f"<br><sup>ignored {figures.escape(', '.join(ignored)[:80])}: dimensions are whole numbers "
                  f"from 0 to {d_model - 1}</sup>")
    matrix_title = f"PE matrix: {length} positions × {d_model} dimensions"
    if d_model != asked:
        matrix_title += f"<br><sup>d_model {asked} rounded up to {d_model}: dimensions come in (sin, cos) pairs</sup>"
    return (figures.positional_encoding_heatmap(table, matrix_title),
            figures.positional_encoding_lines(table, chosen, title),
            figures.position_similarity(table, "PE(i) · PE(j): how alike two positions look"))


# --- model tab -----------------------------------------------------------------------------------

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
    if not scores:
        return "This checkpoint has no scores yet (no metrics.json)."
    lines = ["| split | decoding | BLEU | chrF |", "|---|---|---|---|"]
    for key, value in scores.items():
        split, decoding = key.split(":", 1)
        lines.append(f"| {split} | {decoding} | {value['bleu']:.2f} | {value['chrf']:.2f} |")
    if "bleu_signature" in checkpoint.metrics:
        lines += ["", f"sacreBLEU signature: `{checkpoint.metrics['bleu_signature']}`"]
    return "\n".join(lines)


LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}


def known_languages(checkpoint: Checkpoint) -> tuple[str, str | None] | None:
    """(source, target) language codes of a Multi30K model; None for others.

    Only Multi30K says which languages it holds; an uploaded TSV records the
    default codes, and the synthetic tasks read digits.
    """
    source, target = checkpoint.info.get("source_lang"), checkpoint.info.get("target_lang")
    multi30k = checkpoint.info.get("training", {}).get("data") == "multi30k"
    return (source, target) if multi30k and source in LANGUAGE_NAMES else None


def source_label(checkpoint: Checkpoint) -> str:
    """What the input box holds for this model: "English sentence", "Digits", or a neutral "Source sentence"."""
    if uses_digits(checkpoint):
        return "Digits"
    languages = known_languages(checkpoint)
    return f"{LANGUAGE_NAMES[languages[0]]} sentence" if languages else "Source sentence"


# Clues to the language of a sentence: frequent words of each Multi30K language, picked to be far rarer in the
# other three, and letters that only it of the four uses. Each clue word counts; the letters count once.
LANGUAGE_WORDS = {
    "en": {"the", "and", "is", "are", "of", "with", "his", "her", "their", "while", "from", "this", "into", "at"},
    "de": {"der", "das", "und", "ist", "sind", "ein", "eine", "einem", "einen", "einer", "mit", "auf", "im", "zu",
           "dem", "nicht", "sich", "von", "vor", "bei", "aus", "neben", "ich", "wir", "sie", "es"},
    "fr": {"le", "la", "les", "un", "une", "et", "est", "sont", "du", "avec", "sur", "dans", "au", "aux", "qui",
           "sa", "ses", "il", "elle", "nous", "vous", "ils"},
    "cs": {"v", "z", "se", "si", "jsou", "na", "ve", "ze", "který", "která", "které", "při", "před", "muž", "žena"},
}
LANGUAGE_LETTERS = {"en": "", "de": "äöüß", "fr": "àâçèêëîïôœùû", "cs": "áčďěíňřšťůýž"}


def language_note(checkpoint: Checkpoint, text: str) -> str | None:
    """A warning when a sentence looks like another language than the one the model reads (German typed into the
    English→German model reads like gibberish to it, yet gets a confident translation)."""
    languages = known_languages(checkpoint)
    if languages is None:
        return None
    expected, target = languages
    lowered = unicodedata.normalize("NFC", text).lower()  # "ä" pasted as "a" + a combining mark is still "ä"
    words = re.findall(r"\w+", lowered)
    clues = {language: sum(word in LANGUAGE_WORDS[language] for word in words)
                       + any(letter in lowered for letter in LANGUAGE_LETTERS[language])
             for language in LANGUAGE_WORDS}
    seen = max(clues, key=clues.get)  # of tied languages the first; tied with the expected one, no note
    if seen == expected or clues[seen] < 2 or clues[seen] <= clues[expected]:
        return None
    learned = f" (it learned {LANGUAGE_NAMES[expected]}→{LANGUAGE_NAMES[target]})" if target in LANGUAGE_NAMES else ""
    return (f"This looks like {LANGUAGE_NAMES[seen]}. The model reads {LANGUAGE_NAMES[expected]}{learned}, so its "
            "translation of other languages is mostly made up.")


def uses_digits(checkpoint: Checkpoint) -> bool:
    return checkpoint.info.get("source_lang") == "digits"


def text_kind(text: str | None) -> str:
    """"digits" for a digit sequence (the synthetic tasks' input), else "text"."""
    digits_only = all(ch.isdigit() or ch.isspace() for ch in (text or "")) and any(ch.isdigit() for ch in text or "")
    return "digits" if digits_only else "text"


def suits(checkpoint: Checkpoint, text: str) -> bool:
    """Whether ``text`` is for this kind of model: digits for the synthetic tasks, words for the others."""
    return text_kind(text) == ("digits" if uses_digits(checkpoint) else "text")


def suitable_text(checkpoint: Checkpoint, current: str, examples: dict[str, str]) -> str:
    """Keep the user's text unless it is plainly for another kind of model (digits vs. words)."""
    return current if suits(checkpoint, current) else examples["digits" if uses_digits(checkpoint) else "text"]



# --- train tab -----------------------------------------------------------------------------------

def job_status_markdown(job) -> str:
    """A line or two on the current job: progress, time left, outcome."""
    if job is None:
        return "No training job has run on this server yet."
    line = f"**{job.name}**: {job.status}, update {job.step} of {job.total_steps}"
    left = job.seconds_left()
    if left is not None:
        line += f", {jobs.time_left_text(left)}"
    if job.evals:
        last = job.evals[-1]
        line += f" · validation loss {last['val_loss']:.3f}, BLEU {last['bleu']:.1f}"
        if "exact_match" in last:
            line += f", exact match {last['exact_match']:.0%}"
    if job.message:
        line += f"\n\n{job.message}"
    return line


def job_progress(job) -> float:
    return 0.0 if job is None else job.progress()


def job_curves(job) -> go.Figure | None:
    """The job's curves; None (an empty plot) before its first update, rather than axes around nothing."""
    steps = job.steps if job else []
    if not steps:
        return None
    # Thin out long step lists: the curve needs a few hundred points at most.
    stride = max(1, len(steps) // 300)
    running = job.status == "running"
    return figures.training_curves(steps[::stride] + steps[-1:], job.evals,
                                   title="Training, live" if running else "Training")


def probe_figure(probes: list[dict], index: int) -> go.Figure | None:
    """Cross-attention of the fixed probe sentence at evaluation ``index`` (1-based), last layer, mean of heads."""
    if not probes:
        return None
    index = max(1, min(len(probes), int(index)))
    probe = probes[index - 1]
    cross = torch.tensor(probe["cross"])  # (layers, heads, target, source)
    return figures.attention_heatmap(
        cross[-1].mean(dim=0), probe["target_tokens"], probe["source_tokens"],
        f"Cross-attention at update {probe['step']} (evaluation {index} of {len(probes)})"
        f"<br><sup>“{figures.escape(probe['translation'][:80])}”</sup>", "producing", "source", rows_are_steps=True)


# --- experiments tab -----------------------------------------------------------------------------

def head_choices(checkpoint: Checkpoint) -> dict[str, list[str]]:
    """Head labels (L1H1, ...) per attention type, for the ablation checkboxes."""
    return {kind: [interventions.head_label(layer, head) for layer in range(layers) for head in range(heads)]
            for kind, (layers, heads) in interventions.head_count(checkpoint).items()}


def word_diff(before: str, after: str) -> list[tuple[str, str | None]]:
    """Word-level difference for gr.HighlightedText: kept words plain, removed and added ones labelled."""
    old, new = before.split(), after.split()
    pieces: list[tuple[str, str | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append((" ".join(old[i1:i2]) + " ", None))
        if op in ("delete", "replace"):
            pieces.append((" ".join(old[i1:i2]) + " ", "removed"))
        if op in ("insert", "replace"):
            pieces.append((" ".join(new[j1:j2]) + " ", "added"))
    return pieces


def comparison_views(comparison: interventions.Comparison, attention_kind: str = "cross"):
    """(before text, after text, word diff, probability chart, attention before, attention after)."""
    before, after = comparison.before, comparison.after
    changes = comparison.probability_changes()
    probability = (figures.probability_comparison(changes, "Probability of the original translation's tokens")
                   if changes else None)
    kind = kind_key(attention_kind)

    def mean_map(tr: Translation, label: str) -> go.Figure:
        weights = attention_tensor(tr, kind)
        rows, columns, row_title, column_title = attention_axes(tr, kind)
        return figures.attention_heatmap(weights[-1].mean(dim=0), rows, columns,
                                         f"{label}<br><sup>{ATTENTION_KINDS[kind]}, last layer, mean of heads</sup>",
                                         row_title, column_title, rows_are_steps=kind != "encoder")

    return (before.text, after.text, word_diff(before.text, after.text), probability,
            mean_map(before, "Unmodified"), mean_map(after, f"With {figures.escape(comparison.description)}"))


def importance_views(importance: dict[str, torch.Tensor], title: str) -> tuple[go.Figure, str]:
    ranked = interventions.ranked_heads(importance)
    listed = lambda heads: ", ".join(f"{kind} {label} ({drop:+.2f})" for kind, label, drop in heads)  # noqa: E731
    lines = [f"**Most important:** {listed(ranked[:3])}.",
             f"**Barely matter:** {listed(sorted(ranked, key=lambda item: abs(item[2]))[:3])}."]
    better_without = [item for item in reversed(ranked) if item[2] < 0][:3]
    if better_without:
        lines.append(f"**The translation became more likely without:** {listed(better_without)}.")
    summary = ("  \n".join(lines) + "  \nNumbers are the drop in log-probability (nats) of the translation when "
               "that head alone is off.")
    return figures.head_importance_heatmaps(importance, title), summary


def importance_sample(checkpoint: Checkpoint, count: int = 20) -> list[str]:
    """Sentences for averaging head importance: fresh task examples, or Multi30K validation when present."""
    from . import data as datasets

    task = checkpoint.info.get("training", {}).get("data")
    if task in datasets.SYNTHETIC_TASKS:
        return datasets.synthetic_corpus(task, count, seed=4242).sources
    try:
        return datasets.load_multi30k("val", checkpoint.info.get("source_lang", "en"),
                                      checkpoint.info.get("target_lang", "de"),
                                      datasets.multi30k_dir(download=False)).sources[:count]
    except datasets.DataError:
        raise InputError("The validation sentences come from Multi30K, which is not on this server (set "
                         "MULTI30K_DIR to a folder holding it; a training run on multi30k downloads it); use the "
                         "button for the current sentence instead.") from None


# --- analysis tab --------------------------------------------------------------------------------

STATISTICS_HEADERS = ["attention", "layer", "head", "entropy (nats)", "mean distance", "share on <s>/</s>",
                      "diagonality"]


def beam_view(checkpoint: Checkpoint, text: str, beam_size: int = 5, length_penalty: float = 1.0):
    """(tree figure, hypotheses table rows, state for ``hypothesis_attention``) for one sentence."""
    cleaned, _ = clean_text(text)
    model, target_tokenizer = checkpoint.model, checkpoint.target_tokenizer
    beam_size = max(2, min(MAX_BEAM, int(beam_size)))
    source_ids, _ = encode_source(model, checkpoint.source_tokenizer, cleaned)
    src = torch.tensor([source_ids], device=model.device)
    results, steps = beam_search(model, src, beam_size, float(length_penalty), return_steps=True)
    nodes = analysis.beam_tree(steps[0])
    pieces = [target_tokenizer.piece(node.token) for node in nodes]
    figure = figures.beam_tree_figure(nodes, pieces, f"Beam search, k = {beam_size}, length penalty {length_penalty}")
    rows = [[rank + 1, target_tokenizer.decode(h.tokens), round(h.log_prob, 3), len(h.tokens) + 1, round(h.score, 3)]
            for rank, h in enumerate(results[0])]
    return figure, rows, {"source_ids": source_ids, "hypotheses": [(h.tokens, h.ended) for h in results[0]]}


def hypothesis_attention(checkpoint: Checkpoint, beam_state: dict, rank: int) -> go.Figure:
    """Cross-attention of hypothesis ``rank`` (0-based) of the beam that ``beam_view`` drew."""
    tokens, ended = beam_state["hypotheses"][rank]
    tr = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                       beam_state["source_ids"], tokens, ended=ended)
    return attention_figure(tr, "cross", VIEWS[0], tr.cross_attention.shape[0], 1, average_heads=True)


def alignment_view(translation: Translation, layer: int | None = None, head: int | None = None) -> go.Figure:
    """Word alignment from cross-attention of one layer and head (head None: mean of heads)."""
    cross = translation.cross_attention
    layers, heads = cross.shape[:2]
    layer = layers if layer is None else max(1, min(layers, int(layer)))
    weights = cross[layer - 1].mean(dim=0) if head is None else cross[layer - 1, max(1, min(heads, int(head))) - 1]
    merged, target_words, source_words = analysis.word_attention(weights, translation.predicted_pieces,
                                                                 translation.source_pieces)
    which = f"layer {layer}, " + ("mean of heads" if head is None else f"head {head}")
    return figures.alignment_figure(merged, source_words, target_words, f"Alignment from cross-attention ({which})")


def statistics_rows(stats: list[analysis.HeadStatistics]) -> list[list]:
    return [[s.kind, s.layer, s.head, round(s.entropy, 3), round(s.distance, 2), round(s.special_share, 3),
             round(s.diagonality, 3)] for s in stats]


def sample_statistics(checkpoint: Checkpoint, sentences: list[str]) -> list[analysis.HeadStatistics]:
    per_sentence = [analysis.head_statistics(checkpoint.translate(s)) for s in sentences]
    return analysis.mean_statistics(per_sentence)


def attention_csv_file(translation: Translation, directory: str | None = None) -> str:
    """Every attention weight of a translation in long format (one row per layer, head, query, key)."""
    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["attention", "layer", "head", "query", "key", "query_token", "key_token", "weight"])
        for kind in ATTENTION_KINDS:
            weights = attention_tensor(translation, kind)
            rows, columns, _, _ = attention_axes(translation, kind)
            for (layer, head, query, key), weight in zip(itertools.product(*(range(n) for n in weights.shape)),
                                                          weights.flatten().tolist()):
                writer.writerow([kind, layer + 1, head + 1, query, key, rows[query], columns[key], f"{weight:.6f}"])
    return str(path)


def attention_npz_file(translation: Translation, directory: str | None = None) -> str:
    """The three attention tensors and the token lists as a NumPy archive."""
    import numpy as np

    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.npz"
    np.savez_compressed(path, encoder=translation.encoder_attention.numpy(),
                        decoder=translation.decoder_attention.numpy(), cross=translation.cross_attention.numpy(),
                        source_tokens=np.array(translation.source_pieces),
                        target_tokens=np.array(translation.target_pieces),
                        predicted_tokens=np.array(translation.predicted_pieces))
    return str(path)


def figure_svg_file(figure: go.Figure, name: str = "figure") -> str:
    """An SVG of a figure (rendered server-side by kaleido, which needs a Chromium on the server)."""
    path = Path(fresh_export_directory()) / f"{name}.svg"
    try:
        figure.write_image(str(path), format="svg", width=1100, height=figure.layout.height or 600)
    except Exception as error:  # kaleido missing or no browser for it
        raise InputError(f"SVG export is not available on this server ({type(error).__name__}); "
                         "use the PNG button of the figure instead.") from None
    return str(path)


def share_query(model: str, text: str, kind: str, view: str, layer: int, head: int, beam: int = 1,
                max_tokens: int | None = None) -> str:
    """The query string that reopens the app on the same sentence, decoding (``beam`` 1: greedy) and view."""
    query = {"model": model, "text": text, "kind": kind_key(kind), "view": VIEWS.index(view) if view in VIEWS else 0,
             "layer": int(layer), "head": int(head), "beam": int(beam)}
    if max_tokens:
        query["max"] = int(max_tokens)
    return urllib.parse.urlencode(query)


def parse_share_query(params: dict, names: list[str]) -> dict:
    """Validated values from a shared link's query parameters (unknown or bad values are dropped)."""
    values = {}
    if params.get("model") in names:
        values["model"] = params["model"]
    if params.get("text"):
        try:
            values["text"] = clean_text(params["text"])[0]
        except InputError:  # nothing to translate in it; the link's other choices still hold
            pass
    if params.get("kind") in ATTENTION_KINDS:
        values["kind"] = ATTENTION_KINDS[params["kind"]]
    for key in ("view", "layer", "head", "beam", "max"):
        if str(params.get(key, "")).isdecimal():  # not isdigit(): "²" is a digit that int() refuses
            values[key] = int(params[key])
    if "view" in values:
        values["view"] = VIEWS[min(values["view"], len(VIEWS) - 1)]
    if "beam" in values:
        values["beam"] = max(1, min(MAX_BEAM, values["beam"]))
    if "max" in values:
        values["max"] = max(TARGET_TOKENS[0], min(TARGET_TOKENS[1], values["max"]))
    return values


def share_link_problems(params: dict, names: list[str], checkpoint: Checkpoint) -> list[str]:
    """What a shared link asked for and will not get, said to the person who opened it.

    ``checkpoint`` is the model the link opens: the one it names, or the default.
    """
    problems = []
    if params.get("model") and params["model"] not in names:
        problems.append(f"The link's model '{params['model']}' is not on this server; {checkpoint.name} is open "
                        "instead.")
    text = params.get("text") or ""
    if not text.strip():
        return problems
    try:
        notes = clean_text(text)[1]
    except InputError:  # said first: such a sentence is for no model
        problems.append("The link's sentence has nothing to translate in it; an example is shown instead.")
        return problems
    if not suits(checkpoint, text):
        wanted = "digits" if uses_digits(checkpoint) else "words"
        problems.append(f"The link's sentence is not for {checkpoint.name}, which reads {wanted}; an example is "
                        "shown instead.")
        return problems
    return problems + [f"The link's sentence was changed: {note}" for note in notes]


def layer_and_head_counts(checkpoint: Checkpoint) -> tuple[int, int]:
    """The range of the layer and head sliders: the deeper stack's layers, and the heads per layer."""
    config = checkpoint.model.config
    return max(config.n_encoder_layers, config.n_decoder_layers), config.n_heads


def fit_share_values(values: dict, checkpoint: Checkpoint) -> dict:
    """A shared link's layer and head, kept within the model it opens (a link may outlive the model it was made on)."""
    limits = dict(zip(("layer", "head"), layer_and_head_counts(checkpoint)))
    return {**values, **{key: max(1, min(values[key], limit)) for key, limit in limits.items() if key in values}}


def checkpoint_history(checkpoint: Checkpoint) -> tuple[list[dict], list[dict], list[dict]]:
    """(update records, evaluation records, probe attention records) saved beside a checkpoint, if any."""
    if checkpoint.path is None:
        return [], [], []
    steps, evals = read_training_log(checkpoint.path / "training_log.jsonl")
    return steps, evals, read_records(checkpoint.path / "probes.jsonl")
