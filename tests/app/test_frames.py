"""Every rule of a figure's looks is the server's: the page fills a frame of it (ui/drawing/frames.py) with numbers, and a
frame filled with a view's numbers is the figure the server draws of them, for every view, kind, layer, head and
step, and every map a chart sends as numbers. (tests/app/test_page_figures.py holds the page's fill equal to this
one in Chromium.)"""

import json

import pytest
import torch

from ui.drawing import figures
from ui.drawing.frames import Hole, Outer, Template, expanded, filled, framed, hole
from ui.runtime.chart import Chart
from ui.runtime.language import text
from ui.views import choices
from ui.views import explorer as explorer_views
from ui.views import translate as translate_views

LONG = " ".join(["A man in a blue shirt is standing on a ladder and cleaning the windows of a tall building."] * 2)


def as_sent(figure) -> dict:
    return json.loads(figure.to_json())


def sent(frame: dict) -> dict:
    return json.loads(json.dumps(frame))  # as the page receives it


def fill(frame: dict, **values) -> dict:
    """What the page draws of ``frame``: its config's parts (figures.known) and ``values``."""
    return json.loads(json.dumps(filled(sent(frame), {**figures.known(), **values})))


@pytest.fixture(scope="module", params=["short", "long"])
def translated(request, app_services):
    """A sentence of a few pieces, and one of more than 30 (its labels turn upright)."""
    sentence = "Two dogs play in the snow." if request.param == "short" else LONG
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), sentence).translation


def test_a_hole_is_filled_with_its_value_a_template_with_its_words_and_a_table_from_its_rows_and_columns():
    frame = framed({"a": hole("step") - 1.5, "b": Template("step {step} of {steps}"),
                    "c": Outer(("r0", "r1"), ("c0",), " → "), "d": hole("map", layer=2),
                    "e": [list(range(40))] * 3})
    assert frame["figure"]["a"] == {"$": "step", "plus": -1.5}
    assert frame["figure"]["e"] == [{"$ref": 0}] * 3 and frame["shared"] == [list(range(40))], "repeats sent once"
    drawn = filled(sent(frame), {"step": 4, "steps": 9, "map": lambda layer, head=1: [[layer, head]]})
    assert drawn == {"a": 2.5, "b": "step 4 of 9", "c": [["r0 → c0"], ["r1 → c0"]], "d": [[2, 1]],
                     "e": [list(range(40))] * 3}
    assert framed({"t": figures.TEMPLATE}, figures.known())["figure"] == {"t": {"$": "template"}}, \
        "what the page's config holds is not sent again"
    with pytest.raises(TypeError):
        expanded({"z": Hole("map")})


@pytest.mark.parametrize("kind", list(choices.ATTENTION_KINDS))
def test_every_view_filled_with_its_numbers_is_the_figure_the_server_draws(translated, kind):
    weights = translate_views.attention_tensor(translated, kind)
    layers, heads = weights.shape[:2]
    frames = {name: explorer_views.view_frame(translated, kind, name) for name in explorer_views.FIGURES}
    for view in choices.VIEWS:
        for layer, head, average in ((1, 1, False), (layers, heads, False), (2, 2, True)):
            shown_head = 0 if average else head

            def maps(layer=layer, head=shown_head):
                chosen = weights[layer - 1].mean(dim=0) if head == 0 else weights[layer - 1, head - 1]
                return translate_views.shown_weights(chosen).tolist()
            which = text("en", "map.mean_of_heads", layer=layer, heads=heads) if average \
                else text("en", "map.one_head", layer=layer, head=head)
            frame = frames[explorer_views.VIEW_FIGURES[view]["mean" if average else "heads"]]
            drawn = fill(frame, map=maps, which=which, layer=layer, step=3)
            server = explorer_views.attention_json(translated, kind, view, layer, head, average, marked_step=3)
            assert drawn == sent(server), (view, layer, head, average)
            if layer == 1:  # the same figure as Plotly writes it, for exports and the API
                assert sent(server) == as_sent(explorer_views.attention_figure(translated, kind, view, layer, head,
                                                                               average, marked_step=3))


def test_every_step_of_the_step_view_filled_with_its_numbers_is_the_figure_the_server_draws(translated):
    numbers = explorer_views.page_numbers(translated)
    cross = translate_views.attention_tensor(translated, "cross")
    for step in range(1, translated.num_steps + 1):
        server = translate_views.step_view(translated, step, 2, 3)
        candidates = fill(numbers["candidatesFrame"], **numbers["steps"][step - 1], step=step)
        assert candidates == as_sent(server.candidates), step
        sources = fill(numbers["sourcesFrame"], row=translate_views.shown_weights(cross[1, 2])[step - 1].tolist(),
                       step=step, which=text("en", "map.one_head", layer=2, head=3))
        assert sources == as_sent(server.source_attention), step


def test_a_map_a_chart_sends_as_numbers_is_its_frame_filled_with_them(translated):
    attention_map = translate_views.map_of(translated, "cross", 2, None, marked_step=2)
    value = json.loads(json.dumps(Chart().postprocess(attention_map)))
    assert value["type"] == "attentionMap" and (value["rows"], value["columns"]) == tuple(
        attention_map.weights.shape)
    drawn = fill(value["frame"], map=lambda: attention_map.weights.tolist())
    assert drawn == as_sent(attention_map.figure())


def test_labels_of_a_sentence_longer_than_30_pieces_turn_upright_in_every_chart():
    for count, heatmap_angle, grid_angle in ((30, -45, -60), (31, -90, -90)):
        labels = [f"▁w{i}" for i in range(count)]
        weights = torch.full((count, count), 1 / count)
        assert figures.attention_heatmap(weights, labels, labels).layout.xaxis.tickangle == heatmap_angle
        assert figures.attention_grid([[weights]], labels, labels, "t", [""], ["h"]).layout.xaxis.tickangle == \
            grid_angle
        assert figures.source_attention_bar(weights[0], labels, "t").layout.xaxis.tickangle == heatmap_angle


def test_a_translation_brings_the_frames_of_the_view_shown_and_the_page_asks_for_the_others(translated):
    from ui.tabs import translate as translate_tab
    numbers = explorer_views.page_numbers(translated, "decoder", figure="everyHead")
    assert {kind: [name for name, frame in frames.items() if frame] for kind, frames in numbers["frames"].items()} \
        == {"encoder": ["map"], "decoder": ["map", "everyHead"], "cross": ["map"]}
    asked = translate_tab.on_maps_wanted(translated, f"{numbers['sent']}:cross everyMean,encoder 2")["more_maps"]
    assert asked["frames"] == {"cross": {"everyMean": explorer_views.view_frame(translated, "cross", "everyMean")}}
    assert list(asked["blocks"]) == ["encoder 2"]
