"""The page draws the Translate tab's views itself (ui/static/explorer.js) from a translation's numbers, filling the
server's frames of them (ui/drawing/frames.py, filled, mirrored by ui/static/figures.js, fill): run in Node with the
page's config (tests/page_script.py), each of its figures is the figure the server draws of the same numbers, value
for value and label for label (ui/drawing/figures.py, which the exports, the API and the other tabs use).
tests/app/test_figures.py holds the server's frames and figures to their rules; the browser tests, the page drawing
them in Chromium."""

import json

import pytest

from page_script import needs_node, page_calls
from ui.runtime.chart import Chart
from ui.views import choices
from ui.views import inside as inside_views
from ui.views import live as live_views
from ui.views import explorer as explorer_views
from ui.views import translate as translate_views


@pytest.fixture(scope="module")
def bundled_translation(app_services):
    """A sentence long enough for every rule of the figures but one (more than 30 labels turn upright)."""
    return translate_views.run_translation(
        app_services.registry.get("multi30k-en-de"),
        "A man in a blue shirt is standing on a ladder and cleaning the windows of a tall building.").translation


pytestmark = needs_node


def drawn_in_page(expression: str, arguments: list, shared=None) -> list:
    """``expression`` (a function of the page's scripts) called on each of ``arguments``, in an English page."""
    answers = page_calls("en", [(expression, [argument]) for argument in arguments], shared)
    assert [answer for answer in answers if "error" in answer] == []
    return [answer["value"] for answer in answers]


def as_sent(figure) -> dict:
    return json.loads(figure.to_json())


def differences(page_figure, server_figure, where: str = "", within: float = 1e-12) -> list[str]:
    """Where the two differ: keys, texts and numbers (floats ``within`` 1e-12: the layouts' domains are sums)."""
    if isinstance(server_figure, dict) and isinstance(page_figure, dict):
        keys = set(server_figure) | set(page_figure)
        return [problem for key in sorted(keys) for problem in
                (differences(page_figure.get(key), server_figure.get(key), f"{where}.{key}", within)
                 if key in page_figure and key in server_figure else [f"{where}.{key} only in one"])]
    if isinstance(server_figure, list) and isinstance(page_figure, list) and len(server_figure) == len(page_figure):
        return [problem for i, (a, b) in enumerate(zip(page_figure, server_figure))
                for problem in differences(a, b, f"{where}[{i}]", within)]
    numbers = (int, float)
    if isinstance(server_figure, numbers) and isinstance(page_figure, numbers) and not isinstance(page_figure, bool):
        return [] if abs(page_figure - server_figure) <= within else [f"{where}: {page_figure} != {server_figure}"]
    return [] if page_figure == server_figure else [f"{where}: {str(page_figure)[:80]} != {str(server_figure)[:80]}"]


SELECTIONS = [(kind, view, layer, head, average) for kind in choices.ATTENTION_KINDS.values() for view in choices.VIEWS
              for layer, head, average in ((1, 1, False), (3, 4, False), (2, 2, True))]


def test_every_view_of_the_heatmap_is_drawn_in_the_page_as_the_server_draws_it(bundled_translation):
    tr = bundled_translation
    numbers = explorer_views.page_numbers(tr)
    assert [name for name, frame in numbers["frames"]["decoder"].items() if frame] == ["map"], \
        "each kind's one map comes with a translation, the other views' frames when the page shows them"
    numbers["frames"] = {kind: {name: explorer_views.view_frame(tr, kind, name) for name in explorer_views.FIGURES}
                         for kind in numbers["frames"]}
    step = 3
    drawn = drawn_in_page("(values) => explorer.figures(shared, values).heatmap",
                          [dict(kind=kind, view=view, layer=layer, head=head, average=average, step=step)
                           for kind, view, layer, head, average in SELECTIONS], shared=numbers)
    for figure, (kind, view, layer, head, average) in zip(drawn, SELECTIONS, strict=True):
        server = explorer_views.attention_json(tr, kind, view, layer, head, average, marked_step=step)
        assert differences(figure, json.loads(json.dumps(server))) == [], (kind, view, layer, head, average)


@pytest.mark.parametrize("layer, head, average", [(1, 2, False), (3, 1, True), (9, 9, False)])
def test_every_step_of_the_step_view_is_drawn_in_the_page_as_the_server_draws_it(bundled_translation, layer, head,
                                                                                   average):
    tr = bundled_translation
    steps = range(1, tr.num_steps + 1)
    figures = drawn_in_page("(values) => explorer.figures(shared, values)",
                            [dict(kind="cross", view=choices.VIEWS[0], layer=layer, head=head, average=average,
                                  step=step) for step in steps], shared=explorer_views.page_numbers(tr))
    for step, drawn in zip(steps, figures, strict=True):
        server = translate_views.step_view(tr, step, layer, None if average else head)
        assert differences(drawn["candidates"], as_sent(server.candidates)) == [], step
        assert differences(drawn["sources"], as_sent(server.source_attention)) == [], step
        revealed = [(piece["token"], piece["class_or_confidence"]) for piece in drawn["text"]["revealed"]]
        assert (revealed, drawn["text"]["step_caption"]) == (server.revealed, server.caption)


def test_each_step_drawn_while_decoding_is_the_step_view_of_the_finished_translation(app_services):
    """Greedy decoding's steps as they are decided (ui/views/live.py) are drawn as the finished translation's step
    view draws them: the same candidates and attention, up to the rounding of the incremental pass (1e-4)."""
    checkpoint = app_services.registry.get("multi30k-en-de")
    sentence = "Two dogs are running through the snow."
    reports = []
    tr = translate_views.run_translation(checkpoint, sentence, "greedy", on_step=reports.append).translation
    assert len(reports) == tr.num_steps
    source = live_views.source_pieces_read(checkpoint, sentence)
    live = [live_views.live_numbers(checkpoint, report, source, 2, 3, 1, sent=1) for report in reports]
    figures = drawn_in_page("explorer.liveFigures", live)
    for step, drawn in enumerate(figures, start=1):
        server = translate_views.step_view(tr, step, 2, 3)
        assert differences(drawn["candidates"], as_sent(server.candidates), within=1e-4) == [], step
        assert differences(drawn["sources"], as_sent(server.source_attention), within=1e-4) == [], step
        revealed = [(piece["token"], piece["class_or_confidence"]) for piece in drawn["text"]["revealed"]]
        assert revealed == server.revealed[:step], step
        assert drawn["text"]["step_caption"].startswith(f"Step {step}, decoding: the model chose")


def test_a_map_a_chart_is_sent_as_numbers_is_drawn_in_the_page_as_the_server_draws_it(app_services,
                                                                                     bundled_translation):
    """The Inside tab's maps and a lesson's pair travel as numbers (AttentionMap): the page's figure of them is the
    server's, weights rounded as the page receives them."""
    tr = bundled_translation
    checkpoint = app_services.registry.get("multi30k-en-de")
    maps = [*inside_views.contribution_maps(checkpoint, tr, choices.ATTENTION_KINDS["decoder"], 2, 3),
            translate_views.map_of(tr, "encoder", 1, None), translate_views.map_of(tr, "cross", 6, 8, marked_step=4)]
    values = [Chart().postprocess(sent) for sent in maps]
    assert {value["type"] for value in values} == {"attentionMap"}, "charts.js's figureOf draws each with this"
    for sent, drawn in zip(maps, drawn_in_page("explorerFigures.attentionMap", values), strict=True):
        assert differences(drawn, as_sent(sent.figure())) == [], sent.title
    assert maps[-1].figure().layout.shapes, "the marked step outlined"
