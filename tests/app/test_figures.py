"""Figure builders: right shapes, right labels, repeated tokens kept apart, a fixed 0-1 colour scale."""

import numpy as np
import pytest
import torch

from helpers import panel_size
from transformer.files import curves
from ui.drawing import charts, figures, frames
from transformer.paper.model import sinusoidal_table


def test_attention_heatmap_keeps_repeated_tokens_as_separate_columns():
    labels = ["▁the", "▁dog", "▁sees", "▁the", "▁cat", "</s>"]
    weights = torch.softmax(torch.randn(6, 6), dim=-1)
    fig = figures.attention_heatmap(weights, labels, labels, "Encoder")
    heatmap = fig.data[0]
    assert list(heatmap.x) == list(range(6)) and list(heatmap.y) == list(range(6))
    shown = [figures.escape(label) for label in labels]
    assert list(fig.layout.xaxis.ticktext) == shown and list(fig.layout.yaxis.ticktext) == shown
    assert shown[-1] == "&lt;/s&gt;", "Plotly would read </s> as markup and show nothing"
    assert (heatmap.zmin, heatmap.zmax) == (0, 1)
    assert heatmap.z[3][0] == pytest.approx(weights[3, 0].item())


def test_a_very_long_input_labels_every_nth_position_instead_of_a_smear():
    labels = [f"▁w{i}" for i in range(220)]
    fig = figures.attention_heatmap(torch.full((220, 220), 1 / 220), labels, labels, "Encoder")
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert len(axis.ticktext) <= figures.MOST_TICK_LABELS
        assert list(axis.tickvals) == list(range(0, 220, 4))
        assert [axis.ticktext[i] for i in (0, 1)] == ["▁w0", "▁w4"], "each label names its own position"
    assert fig.data[0].text[0][219].startswith("position 0: ▁w0 → position 219: ▁w219"), \
        "hover still names every position"


def test_hover_counts_positions_from_0_and_decoding_steps_from_1_as_the_step_slider_does():
    weights = [[0.25, 0.75], [1.0, 0.0]]
    encoder = figures.attention_heatmap(weights, ["▁A", "</s>"], ["▁A", "</s>"], "Encoder", "source", "source")
    assert encoder.data[0].text[1][0] == "position 1: &lt;/s&gt; → position 0: ▁A"
    cross = figures.attention_heatmap(weights, ["▁Ein", "</s>"], ["▁A", "</s>"], "Cross", "producing", "source",
                                      rows_are_steps=True)
    assert cross.data[0].text[0][1] == "step 1: ▁Ein → position 1: &lt;/s&gt;"
    grid = figures.attention_grid([[weights]], ["▁Ein", "</s>"], ["▁A", "</s>"], "Cross", [""], ["head 1"],
                                  rows_are_steps=True)
    assert grid.data[0].text[1][0] == "head 1<br>step 2: &lt;/s&gt; → position 0: ▁A", "and the panel first"


def test_toolbars_keep_only_the_buttons_a_chart_needs():
    for fig in (figures.top_k_bar(["▁a", "▁b"], [0.6, 0.4], "▁a"), figures.source_attention_bar([1.0], ["▁a"], "t"),
                figures.token_probability_bar(["▁a"], [0.5], "t"),
                charts.probability_comparison([("▁a", 0.5, 0.4)], "t")):
        assert {"zoom", "pan", "resetscale"} <= set(fig.layout.modebar.remove), "bar charts need no zooming"
        assert fig.layout.dragmode is False, "nor can a stray drag zoom them, with no button left to undo it"
    heatmap = figures.attention_heatmap([[1.0]], ["▁a"], ["▁a"])
    assert "zoom" not in heatmap.layout.modebar.remove and "zoomin" in heatmap.layout.modebar.remove, \
        "a long sentence's heatmap keeps its zoom box and reset, not the buttons that repeat them"
    assert heatmap.layout.dragmode is None


def test_attention_heatmap_titles_rows_as_queries_and_columns_as_keys():
    fig = figures.attention_heatmap([[1.0, 0.0]], ["▁Hund"], ["▁dog", "</s>"], "Cross", "producing", "source")
    assert fig.layout.yaxis.title.text == "producing (queries)"
    assert "columns: source (keys)" in fig.layout.title.text, "named in the title's second line, clear of the labels"
    assert not fig.layout.xaxis.title.text
    assert fig.data[0].text[0][0] == "position 0: ▁Hund → position 0: ▁dog"
    assert fig.data[0].hovertemplate == "%{text}<br>weight %{z:.4f}<extra></extra>", \
        "the weight is Plotly's own: every map of a sentence shares its hover text, and another head sends numbers only"


def test_attention_heatmap_rejects_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="does not match"):
        figures.attention_heatmap([[0.5, 0.5]], ["a", "b"], ["x", "y"])


def test_attention_grid_draws_every_layer_and_head_as_a_panel_of_one_heatmap():
    """Plotly draws one heatmap of twelve panels two to three times faster than twelve heatmaps of a panel each."""
    weights = torch.softmax(torch.randn(3, 4, 5, 6), dim=-1)
    fig = figures.attention_grid(weights, list("abcde"), list("uvwxyz"), "Model view",
                                 [f"layer {i}" for i in range(3)], [f"head {h}" for h in range(4)])
    (trace,) = fig.data
    assert (trace.zmin, trace.zmax, trace.hoverongaps) == (0, 1, False)
    assert trace.meta == {figures.GRID_META: {"queries": 5, "keys": 6, "rowsApart": 1, "columnsApart": 1}}, \
        "panels of 5 x 6, a row and a column apart"
    assert len(trace.z) == 3 * 5 + 2 and len(trace.z[0]) == 4 * 6 + 3
    for layer in range(3):
        for head in range(4):
            panel = panel_of(trace, layer, head)
            np.testing.assert_allclose(np.asarray(panel, dtype=float), weights[layer, head].numpy(), rtol=1e-6)
    assert all(value is None for value in trace.z[5]) and all(row[6] is None for row in trace.z), "the gaps"
    # labels along the outer edges only (left and bottom), each panel's row and column labelled
    assert list(fig.layout.yaxis.ticktext) == list("abcde") * 3 and fig.layout.yaxis.tickvals[5] == 6
    assert list(fig.layout.xaxis.ticktext) == list("uvwxyz") * 4 and fig.layout.xaxis.tickvals[6] == 7


def panel_of(trace, row: int, column: int) -> list[list]:
    """Panel (``row``, ``column``) of a grid drawn as one heatmap, by the size and spacing its meta names."""
    queries, keys, rows_apart, columns_apart = panel_size(trace.meta[figures.GRID_META])
    top, left = row * (queries + rows_apart), column * (keys + columns_apart)
    return [list(line[left:left + keys]) for line in trace.z[top:top + queries]]


def test_top_k_bar_highlights_the_chosen_token():
    fig = figures.top_k_bar(["▁Hund", "▁Katze", "▁Maus"], [0.7, 0.2, 0.1], chosen="▁Katze")
    colors = list(fig.data[0].marker.color)
    assert colors[1] != colors[0] and colors[0] == colors[2]
    assert list(fig.layout.yaxis.ticktext) == ["▁Hund  70.0%", "▁Katze  20.0%", "▁Maus  10.0%"]
    assert fig.data[0].text is None, "no label on or beside a bar, where a short bar's runs into its neighbour"


def test_positional_encoding_figures_describe_the_table():
    table = sinusoidal_table(20, 16)
    heatmap = charts.positional_encoding_heatmap(table)
    assert len(heatmap.data[0].z) == 20 and len(heatmap.data[0].z[0]) == 16
    lines = charts.positional_encoding_lines(table, [0, 3, 99])
    assert [trace.name for trace in lines.data] == ["dim 0 (sin)", "dim 3 (cos)"]
    dots = charts.position_similarity(table)
    z = dots.data[0].z
    assert z[4][4] == pytest.approx(float(table[4] @ table[4]), rel=1e-5)
    assert z[2][7] == pytest.approx(z[7][2])


def test_training_curves_plot_loss_learning_rate_and_score():
    steps = [{"step": s, "loss": 5 - s / 100, "lr": 1e-3} for s in range(1, 101, 10)]
    evals = [{"step": 50, "val_loss": 3.0, "bleu": 10.0, "exact_match": 0.1},
             {"step": 100, "val_loss": 2.0, "bleu": 20.0, "exact_match": 0.3}]
    fig = charts.training_curves(steps, evals)
    panels = {trace.name: trace.xaxis for trace in fig.data}
    assert panels["train loss (smoothed labels)"] == panels["validation loss"] == "x"
    assert panels["learning rate"] == "x2" and panels["val BLEU (greedy)"] == panels["val exact match %"] == "x3"


def test_the_apps_training_chart_and_a_model_cards_picture_draw_the_same_lines():
    """One drawing of the curves (transformer.files.curves.panels): the English chart's panels, lines, points and
    colours are the card's SVG's, and a run without exact match draws no such line in either."""
    steps = [{"step": s, "loss": 5 - s / 100, "lr": 1e-3} for s in range(1, 101, 10)]
    for evals in ([{"step": 50, "val_loss": 3.0, "bleu": 10.0, "exact_match": 0.1}],
                  [{"step": 50, "val_loss": 3.0, "bleu": 10.0}, {"step": 90, "val_loss": 2.5, "bleu": 12.0}]):
        fig = charts.training_curves(steps, evals)
        card = curves.panels(steps, evals)
        assert [annotation.text for annotation in fig.layout.annotations] == list(card)
        assert [(trace.name, list(zip(trace.x, trace.y)), trace.line.color) for trace in fig.data] == \
            [(line.name, line.points, line.colour) for series in card.values() for line in series]
        assert ("exact_match" in evals[0]) == any("exact match" in trace.name for trace in fig.data)


@pytest.mark.parametrize("build", [
    lambda labels: figures.attention_heatmap(torch.full((3, 3), 1 / 3), labels, labels),
    lambda labels: figures.top_k_bar(labels, [0.5, 0.3, 0.2]),
    lambda labels: figures.source_attention_bar([0.5, 0.3, 0.2], labels, "Cross"),
    lambda labels: figures.token_probability_bar(labels, [0.5, 0.3, 0.2], "Forced"),
    lambda labels: charts.probability_comparison([(label, 0.5, 0.4) for label in labels], "Ablation"),
], ids=["heatmap", "top-k", "source attention", "token probability", "comparison"])
def test_token_labels_are_escaped_exactly_once(build):
    fig = build(["▁Hund", "<unk>", "</s>"])
    ticks = [tick.split("  ")[0] for tick in fig.layout.xaxis.ticktext or fig.layout.yaxis.ticktext]  # top-k: + "  50.0%"
    assert ticks == ["▁Hund", "&lt;unk&gt;", "&lt;/s&gt;"], "twice escaped shows as &lt;/s&gt; on screen"


def test_alignment_labels_of_a_long_sentence_alternate_between_two_heights():
    def label_rows(fig, y):
        rows = [trace for trace in fig.data if trace.mode == "text" and (trace.y[0] > 0.5) == (y > 0.5)]
        return sorted([list(trace.text) for trace in rows], key=len, reverse=True)

    short, long = [f"w{i}" for i in range(charts.STAGGERED_WORDS)], [f"w{i}" for i in range(30)]
    fig = charts.alignment_figure(torch.full((30, 24), 1 / 24), short, long, "alignment")
    assert label_rows(fig, 1) == [short], "a short sentence: one row of labels"
    assert label_rows(fig, 0) == [long[0::2], long[1::2]], "every word labelled, alternating rows"
    heights = sorted(trace.y[0] for trace in fig.data if trace.mode == "text" and trace.y[0] < 0.5)
    assert heights == pytest.approx([-0.13, -0.03])


def test_attention_grid_names_rows_and_columns_once_each():
    weights = torch.softmax(torch.randn(3, 4, 5, 6), dim=-1)
    fig = figures.attention_grid(weights, list("abcde"), list("uvwxyz"), "Model view",
                                 [f"layer {i}" for i in (1, 2, 3)], [f"head {h}" for h in (1, 2, 3, 4)])
    titles = sorted(annotation.text for annotation in fig.layout.annotations)
    assert titles == ["head 1", "head 2", "head 3", "head 4", "layer 1", "layer 2", "layer 3"], \
        "a title over every panel ('layer 1 · head 1') runs into its neighbours on a phone"
    assert fig.data[0].text[5 + 1][6 + 1].startswith("layer 2 · head 2<br>"), "hover still names the panel"


def test_attention_grid_labels_a_long_sentence_sparsely_enough_to_read():
    labels = [f"▁w{i}" for i in range(60)]
    weights = torch.full((3, 4, 60, 60), 1 / 60)
    fig = figures.attention_grid(weights, labels, labels, "Model view", ["layer 1", "layer 2", "layer 3"],
                                 ["head 1", "head 2", "head 3", "head 4"])
    rows_shown, columns_shown = fig.layout.yaxis.ticktext, fig.layout.xaxis.ticktext
    assert len(rows_shown) <= 3 * figures.MOST_PANEL_LABELS, "about a dozen labels fit down a panel"
    assert len(columns_shown) <= figures.MOST_GRID_COLUMN_LABELS
    assert [fig.layout.yaxis.tickvals[i] for i in (0, 1)] == [0, 5] and rows_shown[1] == "▁w5"
    assert fig.data[0].meta[figures.GRID_META] == frames.grid_panel(60, 60, 3, 3), \
        "a long sentence's panels further apart"


@pytest.mark.parametrize("name", [figures.ATTENTION_COLORSCALE, "RdBu_r", "Viridis", "cividis_r"])
def test_a_named_colour_scale_is_expanded_as_a_plotly_trace_expands_it(name):
    import plotly.graph_objects as go

    assert figures.colorscale(name) == [list(step) for step in go.Heatmap(colorscale=name).colorscale]
