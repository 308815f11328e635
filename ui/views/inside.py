"""The Inside a head tab: how one weight is computed from the model's own numbers, what each position actually
contributes, how the heads are merged, and how the last layer becomes a word."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas
import plotly.graph_objects as go
import torch

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside import one_head
from transformer.paper.decoding import Sampling, never_generate
from transformer.paper.translation import Translation

from ..drawing import charts, figures
from ..runtime.language import ENGLISH, Message, Number, message, text
from .choices import kind_key, require_translation
from ..runtime.numbers import clamp
from .translate import AXES, AttentionMap, MapWords, attention_axes, attention_tensor

@dataclass
class InsideView:
    """Everything the tab shows for one query of one head."""

    summary: str
    table: pandas.DataFrame
    vectors: go.Figure
    contributions: go.Figure
    merge: str
    cache: str


def query_count(translation: Translation, kind: str) -> int:
    return len(translation.source_pieces if kind_key(kind) == "encoder" else translation.target_pieces)


def layers_of(checkpoint: Checkpoint, kind: str) -> int:
    return checkpoint.model.config.layers(kind_key(kind))


def chosen_head(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer,
                head) -> tuple[str, int, int]:
    """The attention kind's key, and the layer and head kept within the model."""
    require_translation(translation)
    kind = kind_key(kind)
    return kind, clamp(layer, 1, layers_of(checkpoint, kind)), clamp(head, 1, checkpoint.model.config.n_heads)


def arithmetic(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer, head,
               query) -> one_head.HeadArithmetic:
    kind, layer, head = chosen_head(checkpoint, translation, kind, layer, head)
    query = clamp(query, 1, query_count(translation, kind))
    return one_head.head_arithmetic(checkpoint.model, translation, kind, layer, head, query)


def arithmetic_table(a: one_head.HeadArithmetic, language: str = ENGLISH) -> pandas.DataFrame:
    """One row per key: the steps of equation 1, then what the key adds (the columns named in ``language``; the
    equation's own, q·k, ÷ √d_k and ‖α v W_O‖, as they are)."""
    total = float(a.contribution_norms.sum()) or 1.0
    key, weight, share = (text(language, f"inside.column.{name}") for name in ("key", "weight", "share"))
    masked = text(language, "inside.masked")
    rows = [{key: position_label(j, token, language), "q·k": round(score, 3),
             "÷ √d_k": round(scaled, 3) if allowed else masked,
             weight: round(weight_j, 4), "‖α v W_O‖": round(norm, 4), share: Number(norm / total, ".1%").in_(language)}
            for j, (token, score, scaled, allowed, weight_j, norm) in enumerate(zip(
                a.key_tokens, a.scores.tolist(), a.scaled.tolist(), a.mask.tolist(), a.weights.tolist(),
                a.contribution_norms.tolist()))]
    return pandas.DataFrame(rows)


def position_label(position: int, token: str, language: str = ENGLISH) -> str:
    """A key's label: its position (from 0) and its token."""
    return text(language, "inside.position", position=position, token=token)


def summary_markdown(a: one_head.HeadArithmetic, language: str = ENGLISH) -> str:
    token = figures.escape(a.query_token)
    query = (message("inside.summary.source", query=a.query, token=token, position=a.query - 1)
             if a.predicts is None else
             message("inside.summary.step", query=a.query, token=token, produced=figures.escape(a.predicts)))
    return text(language, "inside.summary", kind=message(f"map.kind.{a.kind}"), layer=a.layer, head=a.head,
                query=query, d_k=a.d_k, root=Number(math.sqrt(a.d_k), ".2f"),
                largest=Number(float(a.weights.max()), ".1%"),
                token=figures.escape(a.key_tokens[int(a.weights.argmax())]))


def merge_markdown(a: one_head.HeadArithmetic, checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """The way from this head's output to the layer's residual stream, with the sizes of each vector."""
    config = checkpoint.model.config
    after = message("inside.merge.pre_norm" if config.norm_first else "inside.merge.post_norm")
    # A list of its own separator: "head 1: 3,21, head 2: …" would blur decimal commas and the list's.
    norms = text(language, "inside.merge.separator").join(
        text(language, "inside.merge.head_norm", head=h + 1, norm=Number(float(n), ".2f"))
        for h, n in enumerate(a.head_outputs.norm(dim=-1)))
    return text(language, "inside.merge", heads=config.n_heads, d_k=a.d_k, d_model=config.d_model,
                projected=Number(float(a.projected.norm()), ".2f"), residual=Number(float(a.residual.norm()), ".2f"),
                after=after, output=Number(float(a.block_output.norm()), ".2f"), norms=norms)


def cache_markdown(a: one_head.HeadArithmetic, translation: Translation, language: str = ENGLISH) -> str:
    """What is computed when: the key/value cache of incremental decoding."""
    sources = len(translation.source_pieces)
    if a.kind == "encoder":
        return text(language, "inside.cache.encoder", sources=sources)
    steps = translation.num_steps
    shown = range(1, min(steps, 4) + 1)
    more = "| … | | |\n" if steps > 4 else ""
    if a.kind == "cross":
        return (text(language, "inside.cache.cross", sources=sources, steps=steps)
                + "".join(text(language, "inside.cache.cross_row", step=t, sources=sources) for t in shown) + more)
    return text(language, "inside.cache.decoder") + "".join(f"| {t} | 1 | {t} |\n" for t in shown) + more


def vectors_figure(a: one_head.HeadArithmetic, language: str = ENGLISH) -> go.Figure:
    keys = [position_label(j, token, language) for j, token in enumerate(a.key_tokens)]
    named = {name: text(language, f"inside.vectors.{name}") for name in ("query", "output", "keys", "values")}
    return charts.vector_panels({named["query"]: (a.q[None], [figures.escape(a.query_token)]),
                                  named["output"]: (a.output[None], [text(language, "inside.vectors.output_row")]),
                                  named["keys"]: (a.k, keys), named["values"]: (a.v, keys)},
                                 text(language, "inside.vectors.title", layer=a.layer, head=a.head),
                                 language=language)


def contributions_figure(a: one_head.HeadArithmetic, language: str = ENGLISH) -> go.Figure:
    total = float(a.contribution_norms.sum()) or 1.0
    return charts.paired_bars([position_label(j, token, language) for j, token in enumerate(a.key_tokens)],
                               {text(language, "inside.column.weight"): a.weights.tolist(),
                                text(language, "inside.contributions.share"):
                                    (a.contribution_norms / total).tolist()},
                               text(language, "inside.contributions.title", head=a.head), language=language)


def inside_view(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer, head,
                query, language: str = ENGLISH) -> InsideView:
    a = arithmetic(checkpoint, translation, kind, layer, head, query)
    return InsideView(summary_markdown(a, language), arithmetic_table(a, language), vectors_figure(a, language),
                      contributions_figure(a, language), merge_markdown(a, checkpoint, language),
                      cache_markdown(a, translation, language))


def row_shares(norms: torch.Tensor) -> torch.Tensor:
    """Each row as shares of its total (rows that add nothing stay 0)."""
    totals = norms.sum(-1, keepdim=True)
    return torch.where(totals > 0, norms / totals.clamp_min(1e-12), torch.zeros_like(norms))


def contribution_maps(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer,
                      head) -> tuple[AttentionMap, AttentionMap, AttentionMap]:
    """The whole head beside what it adds: weights, this head's contributions, the layer's contributions (their
    words as messages, written in the language of the page that shows them)."""
    kind, layer, head = chosen_head(checkpoint, translation, kind, layer, head)
    maps = one_head.contribution_maps(checkpoint.model, translation, kind)
    rows, columns, row_title, column_title = attention_axes(translation, kind)
    labels = {"query_title": row_title, "key_title": column_title, "rows_are_steps": kind != "encoder"}
    axes = [message(f"map.axis.{name}") for name in AXES[kind]]

    def shown(weights: torch.Tensor, title: Message, subtitle: Message) -> AttentionMap:
        return AttentionMap.of(weights, rows, columns, str(title), subtitle=str(subtitle), **labels,
                               words=MapWords(title, subtitle, *axes))

    return (shown(attention_tensor(translation, kind)[layer - 1, head - 1], message("inside.map.weights"),
                  message("map.one_head", layer=layer, head=head)),
            shown(row_shares(maps.heads[layer - 1, head - 1]), message("inside.map.head_title"),
                  message("inside.map.head_subtitle", layer=layer, head=head)),
            shown(row_shares(maps.layers[layer - 1]), message("inside.map.layer_title"),
                  message("inside.map.layer_subtitle", layer=layer)))


def lens_figures(checkpoint: Checkpoint, translation: Translation | None, step,
                 sampling: Sampling, language: str = ENGLISH) -> tuple[go.Figure, go.Figure]:
    """The logit lens and one step's distribution as sampling draws from it, from one pass of the model."""
    require_translation(translation)
    lens = one_head.logit_lens(checkpoint.model, translation, top_k=1)
    return (logit_lens_figure(checkpoint, translation, lens, language),
            temperature_figure(checkpoint, translation, step, sampling, lens=lens, language=language))


def logit_lens_figure(checkpoint: Checkpoint, translation: Translation,
                      lens: one_head.LogitLens, language: str = ENGLISH) -> go.Figure:
    favourite = [[checkpoint.target_tokenizer.piece(int(i)) for i in layer] for layer in lens.top_ids[..., 0]]
    return charts.logit_lens_heatmap(lens.probabilities, favourite, translation.predicted_pieces, language=language)


def sampling_settings(temperature, top_k, top_p, seed) -> Sampling:
    """The sliders' values as a ``Sampling`` (numbers past a slider's end mean that end)."""
    return Sampling(temperature=min(max(float(temperature), 0.05), 5.0), top_k=clamp(top_k, 0, 1000),
                    top_p=min(max(float(top_p), 0.01), 1.0), seed=clamp(seed, 0, 2**31 - 1))


# How each language groups a whole number's thousands: 12,345, 12.345, 12 345 (a narrow no-break space).
def temperature_figure(checkpoint: Checkpoint, translation: Translation | None, step, sampling: Sampling,
                       top: int = 10, lens: one_head.LogitLens | None = None, language: str = ENGLISH) -> go.Figure:
    """The last layer's distribution at one step as sampling would draw from it: tempered, cut, renormalised.
    ``lens``: the translation's logit lens, where it was already computed."""
    require_translation(translation)
    step = clamp(step, 1, translation.num_steps)
    lens = lens or one_head.logit_lens(checkpoint.model, translation, top_k=1)
    log_probs = lens.final_log_probs[step - 1].clone()
    log_probs = never_generate(checkpoint.model, log_probs)  # as in decoding itself
    probabilities = sampling.distribution(log_probs)
    best = probabilities.topk(top)
    pieces = checkpoint.target_tokenizer.pieces(best.indices.tolist())
    kept = int((probabilities > 0).sum())
    # The English page says "1 tokens kept" as it always has; the others say it in the singular.
    kept_words = "inside.lens.kept_one" if kept == 1 else "inside.lens.kept"
    cut = text(language, kept_words, kept=Number(kept, ",")) if kept < probabilities.numel() else ""
    title = text(language, "inside.lens.title", step=step, temperature=Number(sampling.temperature, "g"),
                 top_k=sampling.top_k or message("inside.lens.off"), top_p=Number(sampling.top_p, "g"), cut=cut)
    return figures.top_k_bar(pieces, best.values.tolist(), translation.predicted_pieces[step - 1], title=title,
                             language=language)


def sampled_translation(checkpoint: Checkpoint, translation: Translation | None, sampling: Sampling,
                        language: str = ENGLISH) -> str:
    """The same sentence translated by drawing every token with ``sampling``."""
    require_translation(translation)
    drawn = checkpoint.translate(translation.source_text, max_length=translation.max_length,
                                 sampling=sampling)
    return text(language, "inside.lens.sampled", seed=sampling.seed, drawn=figures.escape(drawn.text),
                greedy=figures.escape(translation.text), log_prob=Number(drawn.log_prob, ".2f"))


def blackboard(table: pandas.DataFrame | list, causal: bool, language: str = ENGLISH) -> tuple[str, go.Figure]:
    """Equation 1 on a hand-made example: rows of (token, q…, k…, v…) numbers a student can edit."""
    frame = table if isinstance(table, pandas.DataFrame) else pandas.DataFrame(table)
    try:
        numbers = frame.iloc[:, 1:].apply(pandas.to_numeric, errors="raise").to_numpy(dtype=float)
    except (ValueError, TypeError):
        raise InputError(message("inside.blackboard.not_a_number")) from None
    if len(frame) < 1 or numbers.shape[1] % 3 or not numbers.size:
        raise InputError(message("inside.blackboard.uneven"))
    if not torch.isfinite(torch.tensor(numbers)).all():
        raise InputError(message("inside.blackboard.not_finite"))
    d = numbers.shape[1] // 3
    tokens = [str(token) for token in frame.iloc[:, 0]]
    values = torch.tensor(numbers, dtype=torch.float32)
    result = one_head.small_attention(values[:, :d], values[:, d:2 * d], values[:, 2 * d:], causal)
    words = {name: text(language, f"inside.blackboard.{name}") for name in ("title", "query", "key", "subtitle")}
    return blackboard_markdown(tokens, d, result, language), figures.attention_heatmap(
        result.weights, tokens, tokens, words["title"], words["query"], words["key"], subtitle=words["subtitle"],
        language=language)


def _matrix_markdown(tokens: list[str], matrix: torch.Tensor, mask: torch.Tensor | None = None,
                     columns: list[str] | None = None, language: str = ENGLISH) -> str:
    columns = columns or tokens
    head = "| | " + " | ".join(figures.escape(c) for c in columns) + " |\n|---|" + "---|" * len(columns) + "\n"
    body = "".join(f"| **{figures.escape(token)}** | " + " | ".join(
        ("−∞" if mask is not None and not mask[i, j] else Number(value, ".3f").in_(language))
        for j, value in enumerate(row)) + " |\n"
        for i, (token, row) in enumerate(zip(tokens, matrix.tolist())))
    return head + body


def blackboard_markdown(tokens: list[str], d: int, result: one_head.SmallAttention, language: str = ENGLISH) -> str:
    def step(key: str, **values) -> str:
        return text(language, f"inside.blackboard.{key}", **values)

    dims = [step("dim", n=i + 1) for i in range(result.output.size(1))]
    return (f"{step('scores')}\n\n{_matrix_markdown(tokens, result.scores, language=language)}\n"
            f"{step('scaled', d=d, root=Number(math.sqrt(d), '.3f'))}\n\n"
            f"{_matrix_markdown(tokens, result.scaled, result.mask, language=language)}\n"
            f"{step('softmax')}\n\n{_matrix_markdown(tokens, result.weights, language=language)}\n"
            f"{step('output')}\n\n{_matrix_markdown(tokens, result.output, columns=dims, language=language)}")


def blackboard_table(d: int, current: pandas.DataFrame | None = None, language: str = ENGLISH) -> pandas.DataFrame:
    """The example's table with ``d`` numbers per q, k and v: the current numbers kept where they fit, 0 added."""
    d = clamp(d, 1, 8)
    current = blackboard_example(language) if current is None or not len(current) else current
    old_d = max(1, (current.shape[1] - 1) // 3)
    columns = [text(language, "inside.blackboard.token")] + [f"{part}{i + 1}" for part in "qkv" for i in range(d)]
    rows = []
    for _, row in current.iterrows():
        values = list(row)[1:]
        parts = [values[p * old_d:(p + 1) * old_d] for p in range(3)]
        rows.append([row.iloc[0]] + [part[i] if i < len(part) else 0.0 for part in parts for i in range(d)])
    return pandas.DataFrame(rows, columns=columns)


def blackboard_example(language: str = ENGLISH) -> pandas.DataFrame:
    """Three tokens of a short sentence in ``language``, with vectors of 2 numbers: q, k and v."""
    tokens = [token.strip() for token in text(language, "inside.blackboard.tokens").split(",")]
    numbers = [[1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 2.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0, 0.5, 0.5]]
    return pandas.DataFrame([[token, *row] for token, row in zip(tokens, numbers)],
                            columns=[text(language, "inside.blackboard.token"), "q1", "q2", "k1", "k2", "v1", "v2"])


