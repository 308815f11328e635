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
from transformer.paper.decoding import Sampling, Translation, never_generate

from .. import figures
from .choices import ATTENTION_KINDS, clamp, kind_key, require_translation
from .translate import AttentionMap, attention_axes, attention_tensor

NOTES = {
    "arithmetic": "Each row is one key. The query's vector meets each key's in a dot product **q·k** (similar "
                  "directions score high); dividing by **√d_k** keeps the scores from growing with the vector size, "
                  "which would make the softmax all-or-nothing (section 3.2.1). Keys the mask forbids get **−∞**, so "
                  "the softmax gives them exactly 0. The weights sum to 1, and the head's output is the weighted sum "
                  "of the values.",
    "vectors": "The model's own numbers: the query q = x W_Q, every key k = x W_K and value v = x W_V of this head "
               "(blue negative, red positive), and the output Σ weight · v.",
    "contributions": "A large weight on a value that W_O maps to almost nothing adds almost nothing. ‖α v W_O‖ "
                     "(Kobayashi et al., 2020) measures what each key actually adds to this query through this head; "
                     "shown here as a share of the head's total, beside the weights.",
    "maps": "Left: where the head looks (weights). Middle: what each key adds through this head (‖α v W_O‖, as a "
            "share of each row). Right: what each key adds through all heads of the layer together. Where they "
            "differ, the weights alone mislead. Click a cell to look inside its row's query.",
    "lens": "Each decoder layer's output read as if it were the last: through the output projection to the "
            "vocabulary. Colour: the probability of the token the model finally chose; text: that layer's own "
            "favourite. Watch the answer form layer by layer.",
    "temperature": "How a distribution becomes a choice. Greedy takes the most probable token; beam search keeps "
                   "several candidates; sampling draws one at random. Before the draw the logits are divided by a "
                   "temperature T (T < 1 sharpens the distribution towards greedy, T > 1 flattens it), and the draw "
                   "may be limited to the k most probable tokens (top-k) or to the fewest whose probabilities reach "
                   "p (top-p). The seed makes a draw repeatable.",
}


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


def arithmetic_table(a: one_head.HeadArithmetic) -> pandas.DataFrame:
    """One row per key: the steps of equation 1, then what the key adds."""
    total = float(a.contribution_norms.sum()) or 1.0
    rows = [{"key": f"position {j}: {token}", "q·k": round(score, 3),
             "÷ √d_k": round(scaled, 3) if allowed else "−∞ (masked)",
             "softmax weight": round(weight, 4), "‖α v W_O‖": round(norm, 4), "share of what is added": f"{norm / total:.1%}"}
            for j, (token, score, scaled, allowed, weight, norm) in enumerate(zip(
                a.key_tokens, a.scores.tolist(), a.scaled.tolist(), a.mask.tolist(), a.weights.tolist(),
                a.contribution_norms.tolist()))]
    return pandas.DataFrame(rows)


def summary_markdown(a: one_head.HeadArithmetic) -> str:
    token = figures.escape(a.query_token)
    query = (f"Query {a.query} is **{token}** (position {a.query - 1})" if a.predicts is None else
             f"Query {a.query} is step {a.query}: it reads **{token}** and produced **{figures.escape(a.predicts)}**")
    return (f"**{ATTENTION_KINDS[a.kind]}, layer {a.layer}, head {a.head}.** {query}. Each vector has d_k = {a.d_k} numbers, so the scores are "
            f"divided by √{a.d_k} = {math.sqrt(a.d_k):.2f}. The largest weight, {float(a.weights.max()):.1%}, goes to "
            f"**{figures.escape(a.key_tokens[int(a.weights.argmax())])}**.")


def merge_markdown(a: one_head.HeadArithmetic, checkpoint: Checkpoint) -> str:
    """The way from this head's output to the layer's residual stream, with the sizes of each vector."""
    config = checkpoint.model.config
    after = ("carried on as x + block (pre-norm: the LayerNorm came before the block)" if config.norm_first else
             "normalised, LayerNorm(x + block), the paper's post-norm")
    return (f"**Merging the heads (section 3.2.2).** The {config.n_heads} heads' outputs for this query "
            f"({config.n_heads} × {a.d_k} numbers) are concatenated into one vector of {config.d_model} and "
            f"multiplied by W_O ({config.d_model} × {config.d_model}), plus its bias: ‖W_O · concat + b‖ = "
            f"{float(a.projected.norm()):.2f}. That is added to the residual stream (‖x‖ = "
            f"{float(a.residual.norm()):.2f}) and {after}: the layer carries on with a vector of norm "
            f"{float(a.block_output.norm()):.2f}.\n\nHeads' output norms: "
            + ", ".join(f"head {h + 1}: {float(n):.2f}" for h, n in enumerate(a.head_outputs.norm(dim=-1))))


def cache_markdown(a: one_head.HeadArithmetic, translation: Translation) -> str:
    """What is computed when: the key/value cache of incremental decoding."""
    if a.kind == "encoder":
        return ("**When is this computed?** Once per sentence: the encoder sees the whole source at once, so all "
                f"{len(translation.source_pieces)} queries, keys and values of every layer are computed together.")
    steps = translation.num_steps
    if a.kind == "cross":
        return ("**When is this computed?** The keys and values come from the encoder's output: computed **once** "
                f"per sentence ({len(translation.source_pieces)} rows) and reused unchanged at every one of the "
                f"{steps} decoding steps. Only the query is new at each step.\n\n"
                "| step | new query | keys and values used |\n|---|---|---|\n"
                + "".join(f"| {t} | 1 | the same {len(translation.source_pieces)} (cached) |\n"
                          for t in range(1, min(steps, 4) + 1)) + ("| … | | |\n" if steps > 4 else ""))
    return ("**When is this computed?** Decoder self-attention's keys and values grow by **one row per step**: step t "
            "computes the query, key and value of its newest position only and appends them to the cache; "
            "the positions after it do not exist yet, which the mask stands for in this teacher-forced replay.\n\n"
            "| step | new rows computed | keys and values used |\n|---|---|---|\n"
            + "".join(f"| {t} | 1 | {t} |\n" for t in range(1, min(steps, 4) + 1)) + ("| … | | |\n" if steps > 4 else ""))


def vectors_figure(a: one_head.HeadArithmetic) -> go.Figure:
    keys = [f"position {j}: {token}" for j, token in enumerate(a.key_tokens)]
    return figures.vector_panels({"query q": (a.q[None], [figures.escape(a.query_token)]),
                                  "output Σ weight · v": (a.output[None], ["output"]),
                                  "keys k": (a.k, keys), "values v": (a.v, keys)},
                                 f"Query, keys and values of layer {a.layer}, head {a.head}")


def contributions_figure(a: one_head.HeadArithmetic) -> go.Figure:
    total = float(a.contribution_norms.sum()) or 1.0
    return figures.paired_bars([f"position {j}: {token}" for j, token in enumerate(a.key_tokens)],
                               {"softmax weight": a.weights.tolist(),
                                "share of ‖α v W_O‖": (a.contribution_norms / total).tolist()},
                               f"Where head {a.head} looks, and what each key adds")


def inside_view(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer, head,
                query) -> InsideView:
    a = arithmetic(checkpoint, translation, kind, layer, head, query)
    return InsideView(summary_markdown(a), arithmetic_table(a), vectors_figure(a), contributions_figure(a),
                      merge_markdown(a, checkpoint), cache_markdown(a, translation))


def row_shares(norms: torch.Tensor) -> torch.Tensor:
    """Each row as shares of its total (rows that add nothing stay 0)."""
    totals = norms.sum(-1, keepdim=True)
    return torch.where(totals > 0, norms / totals.clamp_min(1e-12), torch.zeros_like(norms))


def contribution_maps(checkpoint: Checkpoint, translation: Translation | None, kind: str, layer,
                      head) -> tuple[AttentionMap, AttentionMap, AttentionMap]:
    """The whole head beside what it adds: weights, this head's contributions, the layer's contributions."""
    kind, layer, head = chosen_head(checkpoint, translation, kind, layer, head)
    maps = one_head.contribution_maps(checkpoint.model, translation, kind)
    rows, columns, row_title, column_title = attention_axes(translation, kind)
    labels = {"query_title": row_title, "key_title": column_title, "rows_are_steps": kind != "encoder"}
    where = f"layer {layer}, head {head}"
    return (AttentionMap.of(attention_tensor(translation, kind)[layer - 1, head - 1], rows, columns, "Weights",
                            subtitle=where, **labels),
            AttentionMap.of(row_shares(maps.heads[layer - 1, head - 1]), rows, columns, "What this head adds",
                            subtitle=f"{where}, share of ‖α v W_O‖ per row", **labels),
            AttentionMap.of(row_shares(maps.layers[layer - 1]), rows, columns, "What the layer adds",
                            subtitle=f"layer {layer}, all heads together", **labels))


def lens_figures(checkpoint: Checkpoint, translation: Translation | None, step,
                 sampling: Sampling) -> tuple[go.Figure, go.Figure]:
    """The logit lens and one step's distribution as sampling draws from it, from one pass of the model."""
    require_translation(translation)
    lens = one_head.logit_lens(checkpoint.model, translation, top_k=1)
    return logit_lens_figure(checkpoint, translation, lens), temperature_figure(checkpoint, translation, step,
                                                                                sampling, lens=lens)


def logit_lens_figure(checkpoint: Checkpoint, translation: Translation,
                      lens: one_head.LogitLens) -> go.Figure:
    favourite = [[checkpoint.target_tokenizer.piece(int(i)) for i in layer] for layer in lens.top_ids[..., 0]]
    return figures.logit_lens_heatmap(lens.probabilities, favourite, translation.predicted_pieces)


def sampling_settings(temperature, top_k, top_p, seed) -> Sampling:
    """The sliders' values as a ``Sampling`` (numbers past a slider's end mean that end)."""
    return Sampling(temperature=min(max(float(temperature), 0.05), 5.0), top_k=clamp(top_k, 0, 1000),
                    top_p=min(max(float(top_p), 0.01), 1.0), seed=clamp(seed, 0, 2**31 - 1))


def temperature_figure(checkpoint: Checkpoint, translation: Translation | None, step, sampling: Sampling,
                       top: int = 10, lens: one_head.LogitLens | None = None) -> go.Figure:
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
    cut = f", {kept:,} tokens kept" if kept < probabilities.numel() else ""
    return figures.top_k_bar(pieces, best.values.tolist(), translation.predicted_pieces[step - 1],
                             title=f"Step {step}: T = {sampling.temperature:g}, top-k {sampling.top_k or 'off'}, "
                                   f"top-p {sampling.top_p:g}{cut}")


def sampled_translation(checkpoint: Checkpoint, translation: Translation | None, sampling: Sampling) -> str:
    """The same sentence translated by drawing every token with ``sampling``."""
    require_translation(translation)
    drawn = checkpoint.translate(translation.source_text, max_length=translation.max_length,
                                 sampling=sampling)
    return (f"**Drawn with seed {sampling.seed}:** {figures.escape(drawn.text)}  \n"
            f"(greedy or beam gave: {figures.escape(translation.text)}; the model's log-probability of the draw, "
            f"at T = 1 with no cut: {drawn.log_prob:.2f})")


def blackboard(table: pandas.DataFrame | list, causal: bool) -> tuple[str, go.Figure]:
    """Equation 1 on a hand-made example: rows of (token, q…, k…, v…) numbers a student can edit."""
    frame = table if isinstance(table, pandas.DataFrame) else pandas.DataFrame(table)
    try:
        numbers = frame.iloc[:, 1:].apply(pandas.to_numeric, errors="raise").to_numpy(dtype=float)
    except (ValueError, TypeError):
        raise InputError("Every q, k and v cell must be a number (use . for decimals).") from None
    if len(frame) < 1 or numbers.shape[1] % 3 or not numbers.size:
        raise InputError("Give each token the same number of q, k and v columns.")
    if not torch.isfinite(torch.tensor(numbers)).all():
        raise InputError("Every q, k and v cell must be a finite number.")
    d = numbers.shape[1] // 3
    tokens = [str(token) for token in frame.iloc[:, 0]]
    values = torch.tensor(numbers, dtype=torch.float32)
    result = one_head.small_attention(values[:, :d], values[:, d:2 * d], values[:, 2 * d:], causal)
    return blackboard_markdown(tokens, d, result), figures.attention_heatmap(
        result.weights, tokens, tokens, "Your example's weights", "query", "key", subtitle="softmax of each row")


def _matrix_markdown(tokens: list[str], matrix: torch.Tensor, mask: torch.Tensor | None = None,
                     columns: list[str] | None = None) -> str:
    columns = columns or tokens
    head = "| | " + " | ".join(figures.escape(c) for c in columns) + " |\n|---|" + "---|" * len(columns) + "\n"
    body = "".join(f"| **{figures.escape(token)}** | " + " | ".join(
        ("−∞" if mask is not None and not mask[i, j] else f"{value:.3f}") for j, value in enumerate(row)) + " |\n"
        for i, (token, row) in enumerate(zip(tokens, matrix.tolist())))
    return head + body


def blackboard_markdown(tokens: list[str], d: int, result: one_head.SmallAttention) -> str:
    return (f"**1. Scores q·k** (row: query, column: key)\n\n{_matrix_markdown(tokens, result.scores)}\n"
            f"**2. Scaled: ÷ √{d} = {math.sqrt(d):.3f}, masked cells −∞**\n\n"
            f"{_matrix_markdown(tokens, result.scaled, result.mask)}\n"
            f"**3. Softmax of each row** (e^s / Σ e^s; −∞ gives 0)\n\n{_matrix_markdown(tokens, result.weights)}\n"
            f"**4. Output: weights × V**\n\n"
            f"{_matrix_markdown(tokens, result.output, columns=[f'dim {i + 1}' for i in range(result.output.size(1))])}")


def blackboard_table(d: int, current: pandas.DataFrame | None = None) -> pandas.DataFrame:
    """The example's table with ``d`` numbers per q, k and v: the current numbers kept where they fit, 0 added."""
    d = clamp(d, 1, 8)
    current = BLACKBOARD_EXAMPLE if current is None or not len(current) else current
    old_d = max(1, (current.shape[1] - 1) // 3)
    columns = ["token"] + [f"{part}{i + 1}" for part in "qkv" for i in range(d)]
    rows = []
    for _, row in current.iterrows():
        values = list(row)[1:]
        parts = [values[p * old_d:(p + 1) * old_d] for p in range(3)]
        rows.append([row.iloc[0]] + [part[i] if i < len(part) else 0.0 for part in parts for i in range(d)])
    return pandas.DataFrame(rows, columns=columns)


BLACKBOARD_EXAMPLE = pandas.DataFrame(
    [["the", 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], ["cat", 0.0, 1.0, 0.0, 2.0, 0.0, 1.0], ["sat", 1.0, 1.0, 1.0, 1.0, 0.5, 0.5]],
    columns=["token", "q1", "q2", "k1", "k2", "v1", "v2"])
