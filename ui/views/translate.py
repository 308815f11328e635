"""The Translate tab's views of one translation: notes, pieces, the step view, heatmaps and forced decoding.

Plain values in (a checkpoint, a ``Translation``, selector values), plain values and Plotly figures out.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.paper.watching import SearchProgress
from transformer.paper.decoding import length_limits
from transformer.paper.tokenizer import WORD_START
from transformer.paper.translation import Translation, forced_decode

from ..drawing import figures
from ..drawing.frames import framed, hole
from ..runtime import gpu
from ..runtime.language import ENGLISH, Message, Number, message, percent, said, table, text
from .choices import ATTENTION_KINDS, kind_key, max_target_tokens
from ..runtime.numbers import clamp
from .text import clean_text, language_note, markdown_escape

MAX_BEAM = 8
TARGET_TOKENS = (5, 200)  # the range of "Maximum target tokens" in the app
DEFAULT_TARGET_TOKENS = 60
LONG_SOURCE_PIECES = 64  # beyond this, a note warns that the models here learned from far shorter sentences
SPECIAL_PIECES = ("</s>", "<s>", "<unk>", "<pad>")
# Weights are drawn to the 4 decimals their hover shows: the page receives every head's maps (``page_numbers``)
# as whole numbers of 1/10^4.
WEIGHT_DECIMALS = 4
# Attention weights a translation's answer brings at most (2 bytes each, 1.3 MB in base64): past them, as for a
# long sentence on a large model, the page asks for the maps of a layer when it shows them.
MOST_PAGE_NUMBERS = 500_000


@dataclass
class TranslateResult:
    """A translation, notes on it, and how much of each step comes from the source (ALTI+, for the step view)."""

    translation: Translation
    notes: list[str]
    source_share: list[float] | None = None


def beams_of(decoding: str, beam_size) -> int:
    """The beams a search keeps: one for greedy decoding, else the slider's number within its range."""
    return 1 if decoding == "greedy" else clamp(beam_size, 1, MAX_BEAM, message("translate.name.beam_size"))


def cut_short(checkpoint: Checkpoint, translation: Translation, max_length: int | None) -> bool:
    """Whether a search ended before the model ended the sentence or ran out of length: a Stop it obeyed."""
    source = torch.tensor([translation.source_ids])
    return not translation.ended and len(translation.predicted_ids) < length_limits(checkpoint.model, source,
                                                                                     max_length)[0]


def run_translation(checkpoint: Checkpoint, sentence: str, decoding: str = "beam", beam_size: int = 5,
                    max_length: int | None = None, top_k: int = 5, language: str = ENGLISH,
                    source_shares: bool = True, on_step: Callable[[SearchProgress], None] | None = None,
                    stop: threading.Event | None = None) -> TranslateResult:
    """A translation of ``sentence``, notes on it in ``language``, and (``source_shares``) each step's source
    share for the step view. ``on_step`` sees each step of the search as it is decided; ``stop``, once set, ends
    it early with what it has."""
    cleaned, notes = clean_text(sentence, language=language)
    beam = beams_of(decoding, beam_size)
    max_length = max_target_tokens(max_length)
    decoded = gpu.translate(checkpoint, cleaned, beam, max_length, on_step, stop, source_shares, top_k=top_k)
    result = decoded.translation
    if result.truncated:
        notes.append(text(language, "translate.note.truncated", positions=checkpoint.model.config.max_len))
    unknown = sum(1 for i in result.source_ids if i == checkpoint.source_tokenizer.unk_id)
    content = [piece for piece in result.source_pieces[:-1] if piece != WORD_START]  # not </s>, nor a bare word start
    if unknown and unknown >= len(content) / 2:  # half or more of what the model reads is unknown to it
        notes.append(text(language, "translate.note.unknown_all" if unknown == len(content)
                          else "translate.note.unknown_most"))
    elif unknown:
        notes.append(text(language, "translate.note.unknown_some", unknown=unknown))
    if other_language := language_note(checkpoint, cleaned, language):
        notes.append(other_language)
    if result.ended and not result.text.strip():
        notes.append(text(language, "translate.note.empty"))
    if not result.ended:
        notes.append(text(language, "translate.note.stopped_by_you" if cut_short(checkpoint, result, max_length)
                          else "translate.note.stopped"))
    if len(result.source_ids) > LONG_SOURCE_PIECES and not result.truncated:
        notes.append(text(language, "translate.note.long", pieces=len(result.source_ids)))
    return TranslateResult(result, notes, decoded.source_share)


def notes_markdown(notes: list[str]) -> str:
    return "\n".join(f"- {note}" for note in notes)


def decoding_of(translation: Translation) -> dict:
    """``beam_size`` (1: greedy) and ``max_length`` a translation was made with, so a comparison decodes alike."""
    return {"beam_size": translation.beam_size, "max_length": translation.max_length}


def run_forced(checkpoint: Checkpoint, source: str, target: str, top_k: int = 5,
               language: str = ENGLISH) -> TranslateResult:
    """Score the user's own translation of ``source`` and capture the attention paid while reading it (notes in
    ``language``)."""
    cleaned_source, notes = clean_text(source, language=language)
    try:
        cleaned_target, target_notes = clean_text(target, language=language)
    except InputError:
        raise InputError(message("translate.forced.empty")) from None
    result = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                           cleaned_source, cleaned_target, top_k=top_k)
    unknown = sum(1 for i in result.predicted_ids if i == checkpoint.target_tokenizer.unk_id)
    if unknown:
        target_notes.append(text(language, "translate.note.forced_unknown", unknown=unknown))
    return TranslateResult(result, notes + target_notes)


def length_penalty_origin(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """Where the model's default length penalty α comes from, in a few words for a slider's caption."""
    scored = "length_penalty" in checkpoint.metrics and bool(checkpoint.metrics.get("scores"))
    return text(language, "translate.beam.scored" if scored else "translate.beam.neutral")


def layer_and_head_counts(checkpoint: Checkpoint) -> tuple[int, int]:
    """The range of the layer and head sliders: the deeper stack's layers, and the heads per layer."""
    config = checkpoint.model.config
    return max(config.n_encoder_layers, config.n_decoder_layers), config.n_heads


# --- heatmaps ------------------------------------------------------------------------------------

# The views' titles: each one's key in ui/locales/, whose words Python fills in and the page does (its config:
# explorer.titles, in the page's language).
TITLE_KEYS = {"oneHead": "map.one_head", "meanOfHeads": "map.mean_of_heads", "layerHeads": "translate.map.layer_heads",
              "everyHead": "translate.map.every_head", "everyMean": "translate.map.every_mean",
              "layer": "translate.map.layer", "head": "translate.map.head", "mean": "translate.mean_of_heads",
              "candidates": "translate.map.candidates", "sourceAttention": "translate.map.source_attention"}


def titles(language: str = ENGLISH) -> dict[str, str]:
    """The views' titles in ``language``, their ``{placeholders}`` left to fill."""
    return {name: table(language)[key] for name, key in TITLE_KEYS.items()}


# Each kind's rows and columns: map.axis.<name> in ui/locales/.
AXES = {"encoder": ("source", "source"), "decoder": ("producing", "target_so_far"), "cross": ("producing", "source")}


def attention_axes(translation: Translation, kind: str,
                   language: str = ENGLISH) -> tuple[list[str], list[str], str, str]:
    """Row labels, column labels and axis names (in ``language``) of one attention kind.

    Decoder-side rows are labelled with the token that step produced, so a
    row reads "while producing X, the model looked at ...".
    """
    rows = translation.source_pieces if kind == "encoder" else translation.predicted_pieces
    columns = translation.target_pieces if kind == "decoder" else translation.source_pieces
    row_title, column_title = (table(language)[f"map.axis.{name}"] for name in AXES[kind])
    return rows, columns, row_title, column_title


def attention_tensor(translation: Translation, kind: str) -> torch.Tensor:
    return {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
            "cross": translation.cross_attention}[kind_key(kind)]


def one_map(translation: Translation, kind: str, layer: int, head: int | None,
            language: str = ENGLISH) -> tuple[torch.Tensor, str]:
    """The map of one layer (1-based, clamped) and head (None: the mean of heads), as drawn, and its subtitle in
    ``language``."""
    weights = attention_tensor(translation, kind)
    layer, head = clamp(layer, 1, weights.shape[0]), None if head is None else clamp(head, 1, weights.shape[1])
    shown = weights[layer - 1].mean(dim=0) if head is None else weights[layer - 1, head - 1]
    return shown_weights(shown), subtitle(layer, head, weights.shape[1]).in_(language)


def subtitle(layer: int, head: int | None, heads: int) -> Message:
    """A map's layer and head as its subtitle says them (None: the mean of the ``heads``). Mirrored by
    `ui/static/explorer.js:whichMap`, where the mean is head 0."""
    if head is None:
        return message("map.mean_of_heads", layer=layer, heads=heads)
    return message("map.one_head", layer=layer, head=head)


def which_message(translation: Translation, kind: str, layer: int, head: int | None) -> Message:
    """``one_map``'s subtitle as a message, for a page in another language (the phones of a class)."""
    layers, heads = attention_tensor(translation, kind).shape[:2]
    return subtitle(clamp(layer, 1, layers), None if head is None else clamp(head, 1, heads), heads)


def shown_weights(weights: torch.Tensor) -> torch.Tensor:
    """Weights rounded to the ``WEIGHT_DECIMALS`` the page shows (and receives)."""
    return weights.double().round(decimals=WEIGHT_DECIMALS)


@dataclass(frozen=True)
class MapWords:
    """A map's title, subtitle and axis names as messages, for the pages written in each language."""

    title: Message | str
    subtitle: Message | str
    query_title: Message | str
    key_title: Message | str


@dataclass(frozen=True)
class AttentionMap:
    """One heatmap of weights (or shares) between 0 and 1, as its numbers and labels: a chart is sent its frame and
    numbers and the page draws it (``for_page``; ui/static/figures.js, attentionMap), a third of the bytes of the
    figure, which repeats every cell's hover text. ``figure()`` is the same figure drawn by the server, for exports
    and for the tests that hold the two equal."""

    weights: torch.Tensor  # queries x keys, rounded to the WEIGHT_DECIMALS the page receives
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    title: str
    query_title: str = "query"
    key_title: str = "key"
    rows_are_steps: bool = False
    subtitle: str = ""
    marked_row: int | None = None  # 0-based
    words: MapWords | None = None  # the words above in any language; without them, the English ones

    @classmethod
    def of(cls, weights: torch.Tensor, rows, columns, title: str, **labels) -> AttentionMap:
        return cls(shown_weights(weights), tuple(rows), tuple(columns), title, **labels)

    def figure(self, language: str = ENGLISH) -> go.Figure:
        """The map drawn by the server, its words in ``language``."""
        return figures.plotly_figure(self._json(self.weights, self.marked_row, language))

    def _json(self, weights, marked_row, language: str) -> dict:
        words = self.in_words(language)
        return figures.heatmap_json(weights, self.rows, self.columns, words.title, words.query_title,
                                    words.key_title, self.rows_are_steps, words.subtitle, marked_row=marked_row,
                                    language=language)

    def table_html(self, language: str = ENGLISH) -> str:
        """The map as an HTML table, for a page without Plotly.js (a class's phones), in the page's language."""
        words = self.in_words(language)
        axes = message("map.rows_and_columns", rows=words.query_title, columns=words.key_title)
        return figures.attention_table(self.weights, self.rows, self.columns, words.title, subtitle=words.subtitle,
                                       marked_row=self.marked_row, axes_note=said(axes, language))

    def in_words(self, language: str) -> MapWords:
        """The title, subtitle and axis names in ``language`` (as they are, without messages)."""
        words = self.words or MapWords(self.title, self.subtitle, self.query_title, self.key_title)
        return MapWords(*(said(part, language) for part in (words.title, words.subtitle, words.query_title,
                                                              words.key_title)))

    def for_page(self, language: str = ENGLISH) -> dict:
        """The map as the page draws it: its frame (``figure``'s, the weights left out) and its weights."""
        return {"type": "attentionMap", "frame": framed(self._json(hole("map"), self.marked_row, language),
                                                        figures.known()),
                "weights": fixed_point(self.weights), "decimals": WEIGHT_DECIMALS, "rows": len(self.rows),
                "columns": len(self.columns)}


def map_of(translation: Translation, kind: str, layer: int, head: int | None, title: str = "",
           marked_step: int | None = None) -> AttentionMap:
    """One map of ``kind``; ``title`` (default: the kind's name; given, in the words of the page it is for) with
    layer and head on a second line; the row of decoding step ``marked_step`` outlined, where rows are steps."""
    kind = kind_key(kind)
    matrix, which = one_map(translation, kind, layer, head)
    rows, columns, row_title, column_title = attention_axes(translation, kind)
    marked = None if kind == "encoder" or marked_step is None else clamp(marked_step, 1, len(rows)) - 1
    # Layer and head on a line of their own: on a phone or a zoomed projector one long line is cut off there.
    words = MapWords(title or message(f"map.kind.{kind}"), which_message(translation, kind, layer, head),
                     *(message(f"map.axis.{name}") for name in AXES[kind]))
    return AttentionMap(matrix, tuple(rows), tuple(columns), title or ATTENTION_KINDS[kind], row_title, column_title,
                        rows_are_steps=kind != "encoder", subtitle=which, marked_row=marked, words=words)


def map_figure(translation: Translation, kind: str, layer: int, head: int | None, title: str = "",
               marked_step: int | None = None, language: str = ENGLISH) -> go.Figure:
    """``map_of``'s map drawn by the server, in ``language`` (``title``, if given, in its words)."""
    return map_of(translation, kind, layer, head, title, marked_step).figure(language)


# --- what the page draws from ------------------------------------------------------------------------

def map_block(translation: Translation, kind: str, layer: int) -> str:
    """One kind's and layer's maps, every head's and then their mean, (heads + 1) x queries x keys, in fixed point
    (a third of the JSON of the same numbers as decimals)."""
    weights = attention_tensor(translation, kind)[layer - 1]
    return fixed_point(torch.cat([weights, weights.mean(dim=0, keepdim=True)]))


def fixed_point(weights: torch.Tensor) -> str:
    """Numbers between 0 and 1 as base64 of little-endian 16-bit integers, each times 10^WEIGHT_DECIMALS, rounded
    as the server's figures round it (ui/static/figures.js, fromFixedPoint)."""
    fixed = torch.round(weights.double() * 10 ** WEIGHT_DECIMALS).to(torch.int32)
    if fixed.numel() and not 0 <= int(fixed.min()) <= int(fixed.max()) <= 10 ** WEIGHT_DECIMALS:
        raise ValueError("fixed_point takes numbers between 0 and 1")
    return base64.b64encode(fixed.numpy().astype("<u2").tobytes()).decode("ascii")


# --- stepping through the decoding ---------------------------------------------------------------

@dataclass
class StepView:
    """What one decoding step did: the pieces so far, its top-k choices, where it looked, and a caption."""

    step: int                      # 1-based, within the translation's steps
    revealed: list[tuple[str, str | None]]
    candidates: go.Figure
    source_attention: go.Figure
    caption: str


def step_view(translation: Translation, step: int, layer: int | None = None, head: int | None = None,
              language: str = ENGLISH) -> StepView:
    """Step ``step`` (1-based, clamped), in ``language``. ``head`` None averages the heads; ``layer`` None uses the
    last layer."""
    steps = translation.num_steps
    step = clamp(step, 1, steps)
    index = step - 1
    matrix, which = one_map(translation, "cross", _layer_or_last(translation, layer), head, language)
    title = titles(language)["sourceAttention"].format(step=step, which=which)
    return StepView(step, revealed_pieces(translation, step, language),
                    figures.top_k_bar(*_candidates(translation, index, language), language=language),
                    figures.source_attention_bar(matrix[index], translation.source_pieces, title, language=language),
                    step_caption(translation, index, language))


def revealed_pieces(translation: Translation, step: int, language: str = ENGLISH) -> list[tuple[str, str | None]]:
    """The pieces produced up to ``step``, the last marked current and a language token the model was forced to
    write marked forced (the mark's word shown beside it, in ``language``), and "…" where more follow. Mirrored by
    `ui/static/explorer.js:revealedPieces`, which draws a step in the page."""
    current, forced = text(language, "translate.piece.current"), text(language, "translate.piece.forced")
    revealed = [(piece + " ", current if i == step - 1 else forced if i < translation.forced_steps else None)
                for i, piece in enumerate(translation.predicted_pieces[:step])]
    return revealed + ([("…", None)] if step < translation.num_steps else [])


def _layer_or_last(translation: Translation, layer: int | None) -> int:
    return translation.cross_attention.shape[0] if layer is None else layer


def _candidates(translation: Translation, index: int, language: str = ENGLISH) -> tuple:
    """The top-k chart's pieces, probabilities, chosen piece and title at step ``index + 1``."""
    return (translation.top_pieces[index], translation.top_probs[index], translation.predicted_pieces[index],
            titles(language)["candidates"].format(step=index + 1))


def step_caption(translation: Translation, index: int, language: str = ENGLISH,
                  source_share: list[float] | None = None) -> str:
    forced = index < translation.forced_steps  # a multilingual model's target language, not the model's choice
    caption = text(language, "translate.step.forced" if forced else "translate.step.caption", step=index + 1,
                   steps=translation.num_steps, piece=markdown_escape(translation.predicted_pieces[index]),
                   probability=Number(translation.token_probs[index], ".1%"))
    if source_share is None:
        return caption
    share = source_share[index]
    return caption + " " + text(language, "translate.step.source_share", source=percent(share),
                                prefix=percent(1 - share))


def source_pieces(translation: Translation, language: str = ENGLISH) -> list[tuple[str, str | None]]:
    """Source pieces for a highlighted-text view, one space apart so piece boundaries stay visible; the special
    ones marked (the mark's word shown beside them, in ``language``)."""
    return marked_pieces(translation.source_pieces, language)


def marked_pieces(pieces: list[str], language: str = ENGLISH) -> list[tuple[str, str | None]]:
    """``source_pieces`` of pieces a translation has not made yet (a search under way)."""
    special = text(language, "translate.piece.special")
    return [(piece + " ", special if piece in SPECIAL_PIECES else None) for piece in pieces]


def forced_figures(translation: Translation, layer: int | None = None, head: int | None = None,
                   language: str = ENGLISH) -> tuple[go.Figure, go.Figure]:
    """Per-token probability of a forced target, and its cross-attention (default: last layer, mean of heads), in
    ``language``."""
    probabilities = figures.token_probability_bar(
        translation.predicted_pieces, translation.token_probs,
        text(language, "translate.forced.probability.title", log_prob=Number(translation.log_prob, ".2f")),
        language=language)
    layer = translation.cross_attention.shape[0] if layer is None else layer
    # Figures: /forced sends them to scripts as Gradio's Plot would.
    attention = map_figure(translation, "cross", layer, head, text(language, "translate.forced.attention.title"),
                           language=language)
    return probabilities, attention
