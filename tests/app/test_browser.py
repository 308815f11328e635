"""End to end in a real browser (Debian's chromium driven by Playwright): what a student sees and does."""

import math
import re
import os
from pathlib import Path

import pytest

from browsing import answered, brought_into_sight, count_requests
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from ui.views import lessons
from ui.views import explorer as explorer_views
from ui.views import translate as translate_views
from ui.views.choices import ATTENTION_KINDS, VIEWS
from ui.views.translate import DEFAULT_TARGET_TOKENS
from ui.views.text import EXAMPLES, REVERSE_EXAMPLES
from helpers import panel_size, panels_drawn

SCREENSHOT = Path(__file__).resolve().parents[2] / "assets" / "screenshot.png"

playwright = pytest.importorskip("playwright.sync_api")


def opened(browser, url: str):
    """A laptop-sized page on the app once its first translation is drawn, and the script errors it meets."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    return page, errors


def choose_lesson(page, choice: str) -> None:
    """As a keyboard user does: type the lesson's name and press Enter (a click on its option could land where
    the opened list reached past the window's edge)."""
    box = page.locator("#lessons input").first
    box.click()
    box.fill(choice)
    box.press("Enter")
    playwright.expect(box).to_have_value(choice)


def plot_title(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} .js-plotly-plot .gtitle").first.text_content()


def translation_text(page) -> str:
    return page.locator("#translation textarea, #translation input").first.input_value()


def test_clicking_an_example_translates_it_and_an_empty_box_keeps_the_last_translation(app_url, browser):
    url, model = app_url
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    page.wait_for_function("() => document.querySelector('#translation textarea').value.length > 0", timeout=60_000)
    answered(page)
    first = translation_text(page)
    example = (REVERSE_EXAMPLES if model.startswith("reverse") else EXAMPLES)[2]
    page.get_by_text(example, exact=True).click()
    page.wait_for_function("old => document.querySelector('#translation textarea').value !== old", arg=first,
                           timeout=60_000)
    answered(page)  # the translation is drawn as it decodes: until it is done
    assert page.locator("#source-text textarea").input_value() == example
    shown = translation_text(page)

    page.locator("#source-text textarea").fill("")
    page.locator("#translate-button").click()
    toast = page.locator("[data-testid='toast-body']").filter(has_text="the text box is empty")
    toast.wait_for(timeout=30_000)
    assert translation_text(page) == shown, "the last translation stays in view"
    assert page.locator("#translation .error").count() == 0
    page.close()


def test_translate_step_through_and_see_the_heatmaps(app_url, browser, tmp_path):
    url, model = app_url
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)  # opens on a working example
    sentence = "2 7 1 8 2 8" if model.startswith("reverse") else "A small dog runs through the snow."
    page.locator("#source-text textarea").fill(sentence)
    page.locator("#translate-button").click()
    page.wait_for_function(
        "text => document.querySelector('#translation textarea, #translation input').value.length > 0 && "
        "document.querySelector('#source-text textarea').value === text", arg=sentence, timeout=60_000)
    answered(page)
    translation = page.locator("#translation textarea, #translation input").first.input_value()
    if model.startswith("reverse"):
        assert translation == "8 2 8 1 7 2"
    heatmap_cells = page.locator("#attention-plot .js-plotly-plot .heatmaplayer, #attention-plot .js-plotly-plot image")
    assert heatmap_cells.count() >= 1

    last_title = plot_title(page, "topk-plot")
    steps = int(page.locator("#step-slider input[type=number]").input_value())
    assert f"Step {steps}:" in last_title
    number = page.locator("#step-slider input[type=number]")
    number.fill("2")
    number.press("Enter")
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 2:')",
                           timeout=30_000)
    assert plot_title(page, "topk-plot") != last_title
    assert plot_title(page, "step-attention").startswith("Step 2:")
    page.get_by_role("button", name="◀ previous").click()
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 1:')",
                           timeout=30_000)
    page.screenshot(path=str(tmp_path / "app.png"), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOT"):
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.screenshot(path=str(SCREENSHOT), full_page=True)

    head_number = page.locator("#head-slider input[type=number]")
    head_number.fill("99")  # typed beyond the model's heads: the slider moves to its last head, drawn at once
    head_number.press("Enter")
    heads = head_number.get_attribute("max")
    playwright.expect(head_number).to_have_value(heads, timeout=30_000)
    wait_for_step_title(page, "step-attention", "Step 1:", f"head {heads}")
    assert f"head {heads} " in plot_title(page, "attention-plot")
    answered(page)
    assert page.locator("[data-testid='toast-body']").count() == 0
    page.close()


# What the step view shows: each chart's data and layout as drawn (Plotly forgets a layout's height once it has
# resized a chart to it: the drawn height is compared), the caption, the pieces so far and the step.
STEP_SHOWN_JS = """() => {
    const chart = id => { const gd = document.querySelector(`#${id} .js-plotly-plot`);
                          const layout = {...gd.layout, height: gd._fullLayout.height};
                          return JSON.parse(JSON.stringify({data: gd.data, layout})); };
    const text = id => document.querySelector(`#${id}`).innerText;
    return [chart('topk-plot'), chart('step-attention'), text('step-caption'), text('revealed'),
            document.querySelector('#step-slider input[type=number]').value];
}"""


def wait_for_step_title(page, chart: str, start: str, has: str = "") -> None:
    page.wait_for_function("([chart, start, has]) => { const title = document.querySelector(`#${chart} .gtitle`);"
                           "return !!title && title.textContent.startsWith(start) && title.textContent.includes(has); }",
                           arg=[chart, start, has], timeout=30_000)


def test_stepping_is_drawn_in_the_page_without_the_server_and_as_the_server_draws_it(app_url, browser):
    page, errors = opened(browser, app_url[0])
    page.wait_for_function("() => document.querySelector('#step-caption').innerText.startsWith('Step 1 of')")
    drawn_by_server = page.evaluate(STEP_SHOWN_JS)  # the page's first translation, at its first step
    number = page.locator("#step-slider input[type=number]")
    steps = int(number.get_attribute("max"))
    assert steps >= 3, "the opening example decodes in three steps or more"
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.get_by_role("button", name="◀ previous").click()  # at the first step: it stays there
    page.get_by_role("button", name="next ▶").click()
    page.get_by_role("button", name="next ▶").click()
    wait_for_step_title(page, "topk-plot", "Step 3:")
    number.fill("99")  # past the last step: the slider moves to it
    number.press("Enter")
    wait_for_step_title(page, "step-attention", f"Step {steps}:")
    assert number.input_value() == str(steps)
    assert f"Step {steps} of {steps}" in page.locator("#step-caption").inner_text()
    number.fill("1")
    number.press("Enter")
    wait_for_step_title(page, "topk-plot", "Step 1:")
    answered(page)  # a request the steps had made would have been counted
    assert [url for url in asked if "/gradio_api/" in url] == [], "no round trip"
    assert page.evaluate(STEP_SHOWN_JS) == drawn_by_server
    assert errors == []
    page.close()


CHART_SHOWN_JS = """id => { const gd = document.querySelector(`#${id} .js-plotly-plot`);
                            const layout = {...gd.layout, height: gd._fullLayout.height};
                            return JSON.parse(JSON.stringify({data: gd.data, layout})); }"""


def heatmap_and_bars(page) -> list[dict]:
    return [page.evaluate(CHART_SHOWN_JS, name) for name in ("attention-plot", "step-attention")]


def choose(page, kind: str, layer: int, head: int) -> None:
    page.locator("#attention-kind").get_by_label(ATTENTION_KINDS[kind]).check()
    for name, value in (("layer", layer), ("head", head)):
        box = page.locator(f"#{name}-slider input[type=number]")
        box.fill(str(value))
        box.press("Enter")
    page.wait_for_function("([kind, which]) => { const title = document.querySelector('#attention-plot .gtitle');"
                           "return !!title && title.textContent.startsWith(kind) && title.textContent.includes(which); }",
                           arg=[ATTENTION_KINDS[kind], f"layer {layer}, head {head} "], timeout=30_000)
    wait_for_step_title(page, "step-attention", "Step ", f"layer {layer}, head {head}")


def test_a_layer_head_attention_type_or_view_shown_before_is_drawn_in_the_page_without_the_server(app_url, browser):
    """Each kind's one map comes with a translation; the frame of another view, the first time it is shown."""
    url, model = app_url
    page, errors = opened(browser, url)
    page.wait_for_function("() => document.querySelector('#step-caption').innerText.startsWith('Step 1 of')")
    answered(page)
    first = heatmap_and_bars(page)
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    choose(page, "decoder", 2, 3)
    heatmap, bars = heatmap_and_bars(page)
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / model, device="cpu")
    sentence = page.locator("#source-text textarea").input_value()
    tr = translate_views.run_translation(checkpoint, sentence, "beam", 5, DEFAULT_TARGET_TOKENS).translation
    expected = explorer_views.attention_figure(tr, "decoder", VIEWS[0], 2, 3, marked_step=1)
    assert heatmap["data"][0]["z"] == [list(row) for row in expected.data[0].z]
    assert heatmap["layout"]["title"]["text"] == expected.layout.title.text
    expected_bars = translate_views.step_view(tr, 1, 2, 3).source_attention
    assert bars["data"][0]["y"] == list(expected_bars.data[0].y)
    assert bars["layout"]["title"]["text"] == expected_bars.layout.title.text
    answered(page)
    assert [url for url in asked if "/gradio_api/" in url] == [], "no round trip"

    def show_views() -> None:
        for view in (VIEWS[2], VIEWS[1]):  # every layer and head, then the layer's heads
            page.locator("#attention-view").get_by_label(view).check()
            page.wait_for_function(f"n => ({PANELS_DRAWN_JS})() === n", arg=expected_panels(tr, view), timeout=30_000)
        page.locator("#attention-view").get_by_label(VIEWS[0]).check()
        answered(page)
    show_views()  # a view not shown before of this translation: its frame is asked for, once
    asked.clear()
    show_views()
    assert [url for url in asked if "/gradio_api/" in url] == [], "no round trip for a view shown before"

    page.get_by_role("tab", name="Inside a head").click()  # the tab's charts stay as the page drew them
    page.get_by_role("tab", name="Translate").click()
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot').offsetParent !== null")
    assert page.evaluate(CHART_SHOWN_JS, "attention-plot") == heatmap
    choose(page, "cross", 1, 1)  # as the page opened
    answered(page)
    assert heatmap_and_bars(page) == first
    assert errors == []
    page.close()


def expected_panels(translation, view: str) -> int:
    return panels_drawn(explorer_views.attention_figure(translation, "decoder", view, 2, 3).data[0])


# The maps the heatmap chart draws, as panels_drawn counts them, once Plotly has drawn its trace.
PANELS_DRAWN_JS = """() => {
    const plot = document.querySelector('#attention-plot .js-plotly-plot');
    const trace = plot && plot.data && plot.data[0];
    if (!trace || !trace.z || !plot.querySelector('.heatmaplayer .hm')) return 0;
    const grid = trace.meta && trace.meta.panel;
    if (!grid) return 1;
    const {queries, keys, rowsApart, columnsApart} = grid;
    return Math.floor((trace.z.length + rowsApart) / (queries + rowsApart))
        * Math.floor((trace.z[0].length + columnsApart) / (keys + columnsApart));
}"""


def test_maps_a_long_translation_did_not_bring_come_when_the_page_shows_them(app_url, browser, monkeypatch):
    """Past MOST_PAGE_NUMBERS a translation brings the maps shown; the model view asks for the rest, once."""
    monkeypatch.setattr(translate_views, "MOST_PAGE_NUMBERS", 1)
    page, errors = opened(browser, app_url[0])
    page.wait_for_function("() => document.querySelector('#step-caption').innerText.startsWith('Step 1 of')")
    answered(page)
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/queue/join" in request.url else None)
    page.locator("#attention-view").get_by_label(VIEWS[2]).check()
    layers, heads = (int(page.locator(f"#{name}-slider input[type=number]").get_attribute("max"))
                     for name in ("layer", "head"))
    page.wait_for_function(f"n => ({PANELS_DRAWN_JS})() === n", arg=layers * heads, timeout=30_000)
    answered(page)
    page.locator("#attention-view").get_by_label(VIEWS[0]).check()
    page.locator("#attention-view").get_by_label(VIEWS[2]).check()
    answered(page)
    assert len(asked) == 1, "asked once, and kept"
    assert errors == []
    page.close()


CELL_CENTRE_JS = """([chart, row, column]) => {
    const gd = document.querySelector(`${chart} .js-plotly-plot`);
    const x = gd._fullLayout.xaxis, y = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return [box.left + x._offset + x.l2p(column), box.top + y._offset + y.l2p(row)];
}"""


def click_heatmap_cell(page, row: int, column: int, chart: str = "#attention-plot") -> None:
    """As a mouse does: onto the cell (Plotly picks the point it hovers), then a click."""
    page.locator(f"{chart} .js-plotly-plot").first.scroll_into_view_if_needed()
    x, y = page.evaluate(CELL_CENTRE_JS, [chart, row, column])
    page.mouse.move(x, y)
    page.wait_for_selector(f"{chart} .hoverlayer .hovertext")  # Plotly has picked the point under the mouse
    page.mouse.click(x, y)


def test_clicking_a_heatmap_row_goes_to_its_decoding_step_where_rows_are_steps(app_url, browser):
    page, errors = opened(browser, app_url[0])
    step = page.locator("#step-slider input[type=number]")
    assert int(step.get_attribute("max")) >= 3, "the opening example decodes in three steps or more"
    click_heatmap_cell(page, 1, 0)  # cross-attention: row 2 is step 2
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 2:')",
                           timeout=30_000)
    assert step.input_value() == "2"

    page.locator("#attention-view").get_by_label(VIEWS[2]).check()  # the model view: a grid of one heatmap
    page.wait_for_function(f"() => ({PANELS_DRAWN_JS})() > 1", timeout=30_000)
    answered(page)
    queries, keys, rows_apart, columns_apart = panel_size(page.evaluate(
        "() => document.querySelector('#attention-plot .js-plotly-plot').data[0].meta.panel"))
    click_heatmap_cell(page, queries + rows_apart + 2, 2 * (keys + columns_apart))  # layer 2, head 3: row 3
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 3:')",
                           timeout=30_000)

    page.locator("#attention-view").get_by_label(VIEWS[0]).check()
    page.get_by_label("Encoder self-attention").check()  # rows are source positions: a click picks no step
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot').data[0].meta == null",
                           timeout=30_000)
    click_heatmap_cell(page, 0, 0)
    answered(page)  # a step picked would be drawn by now
    assert step.input_value() == "3" and plot_title(page, "topk-plot").startswith("Step 3:")
    assert errors == []
    page.close()

def test_clicking_a_cell_of_the_whole_heads_maps_looks_inside_its_rows_query(app_url, browser):
    page, errors = opened(browser, app_url[0])
    page.get_by_role("tab", name="Inside a head").click()
    page.wait_for_selector("#inside-contributions .js-plotly-plot", timeout=60_000)
    page.get_by_text("The whole head: weights beside what it adds").click()
    page.wait_for_selector("#inside-maps .js-plotly-plot", timeout=60_000)
    click_heatmap_cell(page, 2, 0, "#inside-maps")  # the weights' third row: query 3
    page.wait_for_function("() => document.querySelector('#inside-summary').innerText.includes('Query 3 ')",
                           timeout=30_000)
    assert page.locator("#inside-query input[type=number]").input_value() == "3"
    assert errors == []
    page.close()


def test_html_in_the_input_is_shown_as_text_never_run(app_url, browser):
    url, _ = app_url
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    answered(page)
    shown = translation_text(page)
    page.locator("#source-text textarea").fill("<img src=x onerror=alert(1)> <script>alert(2)</script>")
    page.locator("#translate-button").click()
    page.wait_for_function("text => document.querySelector('#translation textarea').value !== text", arg=shown,
                           timeout=60_000)
    answered(page)  # the translation, its pieces and charts drawn
    assert dialogs == []
    assert page.locator("img[src=x]").count() == 0
    page.close()


def test_start_training_and_watch_the_loss_curve_grow(app_url, browser):
    url, _ = app_url
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    page.get_by_role("tab", name="Train").click()
    for setting, value in (("train-steps", "3000"), ("train-minutes", "15")):  # to outlast a second visitor
        page.locator(f"#{setting} input[type='number']").fill(value)
        page.locator(f"#{setting} input[type='number']").press("Enter")
    page.locator("#start-training").click()
    count = "() => { const p = document.querySelector('#train-curves .js-plotly-plot'); " \
            "return p && p.data && p.data.length ? p.data[0].x.length : 0; }"
    page.wait_for_function(f"({count})() >= 2", timeout=120_000)
    first = page.evaluate(count)
    page.wait_for_function(f"({count})() > {first}", timeout=120_000)
    assert page.evaluate(count) > first
    assert "running" in page.locator("#train-status").inner_text()

    visitor = browser.new_page(viewport={"width": 1400, "height": 1000})  # another student, same server
    count_requests(visitor)
    visitor.goto(url)
    visitor.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    visitor.get_by_role("tab", name="Train").click()
    visitor.locator("#start-training").click()
    playwright.expect(visitor.get_by_text("you are number 1 in line").first).to_be_visible(timeout=30_000)
    shown_trackers = ("() => [...document.querySelectorAll('#train-status [data-testid=status-tracker], "
                      "#train-curves [data-testid=status-tracker]')].filter(e => !e.classList.contains('hide'))"
                      ".length")
    visitor.wait_for_function(f"({shown_trackers})() === 0", timeout=30_000)
    assert visitor.evaluate(shown_trackers) == 0, "waiting is a message, not error badges over the progress"
    visitor.locator("#stop-training").click()
    playwright.expect(visitor.get_by_text("started by another visitor").first).to_be_visible(timeout=30_000)
    assert "running" in page.locator("#train-status").inner_text()
    seen = visitor.evaluate(count)
    visitor.wait_for_function(f"({count})() > {seen}", timeout=60_000)  # the job advances on the visitor's page
    assert "you are number 1 in line" in visitor.locator("#train-status").inner_text(), "their place stays shown"

    page.locator("#stop-training").click()
    ended = "() => /stopped|finished/.test(document.querySelector('#train-status').innerText)"
    page.wait_for_function(ended, timeout=120_000)
    visitor.wait_for_function("() => /: running, update/.test(document.querySelector('#train-status').innerText)",
                              timeout=120_000)  # the slot is free: the visitor's own job starts by itself
    visitor.locator("#stop-training").click()
    visitor.wait_for_function(ended, timeout=120_000)
    visitor.close()
    page.close()


def translation_is(page, expected: str) -> None:
    page.wait_for_function(
        "text => (document.querySelector('#translation textarea, #translation input') || {}).value === text",
        arg=expected, timeout=60_000)


def test_a_shared_link_opens_its_model_and_view_without_errors_and_enter_translates(app_url, browser):
    url, _ = app_url
    for _ in range(3):  # switching the model on load once raced a slider redraw into an out-of-range error
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        count_requests(page)
        page.goto(url.rstrip("/") + "/?model=reverse-tiny&text=1+2+3+4+5&kind=encoder&view=2&layer=99&head=3")
        translation_is(page, "5 4 3 2 1")
        answered(page)  # every event the link set off, and every head's frames after it
        assert page.locator("[data-testid='toast-body']").all_inner_texts() == []
        assert page.locator("#source-text").get_by_text("Digits").count() == 1, "the box says what this model reads"
        page.close()
    page = browser.new_page()
    count_requests(page)
    page.goto(url.rstrip("/") + "/?model=reverse-tiny&text=1+2+3&beam=1&max=30")
    translation_is(page, "3 2 1")
    playwright.expect(page.get_by_label("greedy")).to_be_checked()  # the link's decoding, not the default beam
    playwright.expect(page.locator("#beam-size input[type=number]")).to_be_disabled()  # and no beam to size
    playwright.expect(page.locator("#max-tokens input[type=number]")).to_have_value("30")
    page.locator("#source-text textarea").fill("4 5 6 7")
    page.locator("#source-text textarea").press("Enter")
    translation_is(page, "7 6 5 4")
    page.get_by_role("tab", name="Experiments").click()
    playwright.expect(page.get_by_label("Sentence (the last one translated)")).to_have_value("4 5 6 7")
    page.get_by_text("Override a token").click()
    playwright.expect(page.locator("#override-choice input")).not_to_have_value("", timeout=30_000)  # step 1's
    page.get_by_role("button", name="Translate with these heads off").click()
    playwright.expect(page.get_by_text("Tick the heads to switch off first").first).to_be_visible(timeout=30_000)
    answered(page)
    assert page.evaluate("() => [...document.querySelectorAll('#experiment-before [data-testid=status-tracker]')]"
                         ".filter(e => !e.classList.contains('hide')).length") == 0, "a warning, not error badges"
    page.close()


def test_results_for_the_previous_sentence_are_cleared_when_the_model_changes(app_url, browser):
    url, _ = app_url
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    count_requests(page)
    page.goto(url.rstrip("/") + "/?model=reverse-tiny&text=1+2+3")
    translation_is(page, "3 2 1")
    answered(page)  # the text shows as it decodes: the translation the statistics read comes with its last answer
    page.get_by_role("tab", name="Analysis").click()
    # The tab names the sentence its views read once the server holds its translation: only then may they ask.
    playwright.expect(page.get_by_label("Sentence (the last one translated in the Translate tab)")).to_have_value(
        "1 2 3", timeout=30_000)
    page.get_by_role("button", name="Statistics for this sentence").click()
    table = page.locator("#statistics-table")
    playwright.expect(table).to_contain_text("encoder", timeout=30_000)
    page.get_by_role("tab", name="Translate").click()
    page.get_by_label("Your translation").fill("3 2 1")
    page.get_by_label("Your translation").press("Enter")
    forced = page.locator("#forced-probability .js-plotly-plot")
    playwright.expect(forced).to_have_count(1, timeout=30_000)
    page.get_by_label("Model").first.click()
    page.get_by_role("option", name="multi30k-en-de").click()
    page.wait_for_function(
        "() => /[a-z]/i.test((document.querySelector('#translation textarea, #translation input') || {}).value)",
        timeout=60_000)
    playwright.expect(forced).to_have_count(0, timeout=30_000)  # a score of another model's sentence
    page.get_by_role("tab", name="Analysis").click()  # a hidden tab is redrawn when it is opened
    playwright.expect(table).not_to_contain_text("encoder", timeout=30_000)  # a row would open the wrong heatmap
    page.get_by_role("tab", name="Translate").click()
    playwright.expect(page.get_by_label("Your translation")).to_have_value("")  # digits mean nothing to it
    page.close()


def test_a_model_switch_redraws_the_tab_on_screen_and_the_others_when_opened(app_url, browser):
    url, model = app_url
    page, errors = opened(browser, url)
    page.get_by_role("tab", name="Inside a head").click()
    summary = page.locator("#inside-summary")
    playwright.expect(summary).to_contain_text(re.compile(r"produced ▁?[A-Za-zÄÖÜäöüß]"), timeout=30_000)
    page.get_by_label("Model").first.click()
    page.get_by_role("option", name="reverse-tiny").click()
    # Still on the Inside tab: its views follow the new model's translation (of its example: words mean nothing
    # to it), drawn once the switch has landed, never the new model over the last model's translation.
    playwright.expect(summary).to_contain_text(re.compile(r"produced ▁\d"), timeout=60_000)
    answered(page)
    assert page.locator("[data-testid='toast-body']").all_inner_texts() == [] and not errors
    page.get_by_role("tab", name="Translate").click()
    playwright.expect(page.locator("#translation textarea, #translation input")).to_have_value(
        re.compile(r"^[\d ]+$"), timeout=30_000)
    page.get_by_role("tab", name="Model", exact=True).click()  # drawn as it opens, for the model shown
    playwright.expect(page.get_by_label("Config")).to_contain_text("src_vocab_size 14", timeout=30_000)
    page.close()


def test_look_inside_a_step_and_work_equation_1_on_the_blackboard(app_url, browser):
    url, model = app_url
    page, errors = opened(browser, url)
    number = page.locator("#step-slider input[type=number]")
    number.fill("2")
    number.press("Enter")
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 2:')",
                           timeout=30_000)
    page.set_viewport_size({"width": 1280, "height": 720})  # a laptop's: the step view is far down the tab
    page.locator("#look-inside").click()
    page.wait_for_selector("#inside-contributions .js-plotly-plot", timeout=60_000)
    brought_into_sight(page, "inside-head")  # the head and query it set
    summary = page.locator("#inside-summary").inner_text()
    assert "Query 2 is step 2: it reads" in summary
    assert page.locator("#inside-query input[type=number]").input_value() == "2"
    page.get_by_text("On the blackboard").click()
    page.get_by_role("button", name="Compute").click()
    page.get_by_text("1. Scores q·k").wait_for(timeout=30_000)
    assert page.get_by_text("3. Softmax of each row").is_visible()
    assert not errors
    page.close()


def test_put_evidence_beside_attention_and_open_a_head_from_the_agreement_table(app_url, browser):
    url, model = app_url
    page, errors = opened(browser, url)
    page.get_by_role("tab", name="Attention vs evidence").click()
    page.get_by_role("button", name="Attribute the last translation").click()
    page.wait_for_selector("#explain-attribution .js-plotly-plot", timeout=60_000)
    assert "Completeness" in page.locator("#explain-summary").inner_text()
    assert plot_title(page, "explain-attention").startswith("Cross-attention")
    page.locator("#explain-agreement").get_by_text("L1H2", exact=True).click()
    page.wait_for_function("() => document.querySelector('#explain-attention .gtitle') && "
                           "document.querySelector('#explain-attention .gtitle').parentNode.textContent"
                           ".includes('layer 1, head 2')", timeout=30_000)
    assert not errors
    page.close()


def test_a_lesson_sets_up_its_view_and_large_text_enlarges_the_page(app_url, browser):
    url, model = app_url
    page, errors = opened(browser, url)
    page.get_by_text("Lessons for a class").click()
    choose_lesson(page, "2. The decoder cannot see the future")
    page.locator("#lesson-text").get_by_text("The decoder cannot see the future").wait_for(timeout=30_000)
    assert "<s>" in page.locator("#lesson-text").inner_text(), "shown as text, not read as a tag"
    page.locator("#show-me").click()
    page.wait_for_function("() => document.querySelector('#attention-plot .gtitle') && document.querySelector("
                           "'#attention-plot .gtitle').textContent.startsWith('Decoder self-attention')",
                           timeout=60_000)
    assert page.locator("#source-text textarea").input_value() == "A young girl is playing with a red ball in the park."
    before = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#lesson-text p')).fontSize)")
    page.locator("#large-text input").check()
    page.wait_for_function("() => document.body.classList.contains('large-text')", timeout=10_000)
    after = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#lesson-text p')).fontSize)")
    assert after > before * 1.2
    assert not errors
    page.close()


def test_a_lesson_that_compares_two_runs_shows_them_side_by_side_until_another_lesson_is_chosen(app_url, browser):
    page, errors = opened(browser, app_url[0])
    page.get_by_text("Lessons for a class").click()
    assert not page.locator("#lesson-pair").is_visible(), "a lesson of one run shows no pair"
    choose_lesson(page, "5. Word order differs across languages")
    page.locator("#lesson-text").get_by_text("Word order differs across languages").wait_for(timeout=30_000)
    page.locator("#show-me").click()
    page.wait_for_function("() => document.querySelectorAll('#lesson-pair .js-plotly-plot').length === 2",
                           timeout=90_000)
    pair = page.locator("#lesson-pair").inner_text()
    assert "English → German" in pair and "English → French" in pair and "ballon rouge" in pair
    assert page.locator("#lesson-pair .js-plotly-plot").first.bounding_box()["y"] == pytest.approx(
        page.locator("#lesson-pair .js-plotly-plot").last.bounding_box()["y"], abs=2), "side by side, not stacked"
    choose_lesson(page, "1. Where each word looks")
    page.locator("#lesson-pair").wait_for(state="hidden", timeout=30_000)
    assert not errors
    page.close()


IN_VIEW = """id => { const element = document.getElementById(id);
                     if (!element) return false;  // a tab's content is drawn once the tab opens
                     const box = element.getBoundingClientRect();
                     return box.top >= -2 && box.top < window.innerHeight * 0.6 && box.height > 0; }"""


# Where the lesson's panel is beside the view Show me brought into sight: both on screen, neither covering the other.
BESIDE = """id => { const panel = document.getElementById('lesson-beside'), view = document.getElementById(id);
                    if (!panel || panel.hidden || !view) return null;
                    const p = panel.getBoundingClientRect(), v = view.getBoundingClientRect();
                    return {text: panel.innerText, onScreen: p.top >= 0 && p.bottom <= innerHeight + 1
                              && p.right <= innerWidth + 1 && p.width > 0,
                            apart: p.left >= v.right - 1 || p.top >= v.bottom - 1}; }"""


@pytest.mark.parametrize("width, height", [(1400, 1000), (1280, 720)])
def test_show_me_brings_the_view_a_lesson_is_about_into_sight(app_url, browser, width, height):
    """After Show me the chart the lesson talks about starts in the upper part of the screen, outlined a moment,
    with the lesson's questions and what to look for beside it, until another lesson is chosen or Hide pressed."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(app_url[0])
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    page.get_by_text("Lessons for a class").click()
    for number, focus in ((1, "step-view"), (3, "corpus-heads"), (8, "inside-arithmetic")):
        choice = lessons.lesson_choice_labels()[number - 1][0]
        assert lessons.LESSONS[number - 1].focus == focus
        page.evaluate("window.scrollTo(0, 0)")
        choose_lesson(page, choice)
        page.locator("#show-me").click()
        try:  # lesson 3's Show me may run the model's corpus first (seconds, more beside the other worker)
            page.wait_for_function(IN_VIEW, arg=focus, timeout=120_000)
        except playwright.Error:
            where = page.evaluate("id => JSON.stringify(document.getElementById(id)?.getBoundingClientRect())", focus)
            said = page.evaluate("() => [document.querySelector('#visible-tab textarea, #visible-tab input')?.value, "
                                 "[...document.querySelectorAll('.toast-body')].map((toast) => toast.innerText)]")
            raise AssertionError(f"{choice}: #{focus} is at {where} in a {width}x{height} window; the tab shown "
                                 f"and the page's messages: {said}") from None
        assert page.evaluate(f"document.getElementById('{focus}').classList.contains('lesson-focus')"), choice
        beside = page.evaluate(BESIDE, focus)
        lesson = lessons.LESSONS[number - 1]
        assert beside and beside["onScreen"] and beside["apart"], (choice, beside)
        assert lesson.questions[0] in beside["text"] and lesson.look_for in beside["text"], choice
    choose_lesson(page, lessons.lesson_choice_labels()[1][0])
    page.wait_for_function("() => document.getElementById('lesson-beside').hidden", timeout=30_000)
    page.locator("#show-me").click()
    page.locator("#lesson-beside").get_by_text(lessons.LESSONS[1].look_for).wait_for(timeout=60_000)
    page.locator("#lesson-beside").get_by_role("button", name="Hide").click()
    assert page.locator("#lesson-beside").is_hidden()
    page.close()


def test_on_a_phone_a_heatmaps_columns_are_wide_enough_and_their_labels_never_overlap(app_url, browser):
    page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True)
    page.goto(app_url[0])
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    page.locator("#source-text textarea").fill("A man in a blue shirt is riding a bike down the busy street.")
    page.locator("#translate-button").click()
    page.wait_for_function("() => document.querySelector('#attention-plot .xtick text') && [...document.querySelectorAll("
                           "'#attention-plot .xtick text')].some(t => t.textContent.includes('street'))",
                           timeout=60_000)
    # Each label is anchored where Plotly translates it to (its column), and turned about that point.
    labels = page.evaluate("""() => [...document.querySelectorAll('#attention-plot .xtick text')].map(t => {
        const move = t.getAttribute('transform') || '', at = move.match(/translate\\((-?[0-9.]+)/),
              turn = move.match(/rotate\\((-?[0-9.]+)/), box = t.getBoundingClientRect();
        return {x: at ? parseFloat(at[1]) : (box.left + box.right) / 2, size: parseFloat(getComputedStyle(t).fontSize),
                angle: turn ? Math.abs(parseFloat(turn[1])) : 0, width: box.width}; })""")
    cells = page.evaluate("""() => document.querySelector('#attention-plot .nsewdrag').getBoundingClientRect().width""")
    columns = len(labels)
    assert cells / columns >= 18, f"{cells / columns:.1f} px per column"
    for left, right in zip(labels, labels[1:]):
        gap = right["x"] - left["x"]
        if left["angle"]:  # parallel slanted lines of text: apart by the gap across them
            assert gap * math.sin(math.radians(left["angle"])) >= left["size"], (left, right)
        else:
            assert gap >= (left["width"] + right["width"]) / 2, (left, right)
    page.close()


SMALLEST_TEXT = """() => {
    const sizes = [];
    const visible = (e) => e.getBoundingClientRect().width > 0 && e.textContent.trim();
    for (const e of document.querySelectorAll('label span, button, [data-testid="block-info"], .prose p'))
        if (visible(e)) sizes.push(['page', e.textContent.trim().slice(0, 30), parseFloat(getComputedStyle(e).fontSize)]);
    for (const plot of ['#attention-plot', '#topk-plot', '#step-attention'])
        for (const e of document.querySelectorAll(plot + ' .xtick text, ' + plot + ' .ytick text, ' + plot + ' .gtitle tspan, ' + plot + ' .gtitle'))
            if (visible(e)) sizes.push([plot, e.textContent.trim().slice(0, 30), parseFloat(getComputedStyle(e).fontSize)]);
    return sizes; }"""


def small_text(page) -> list:
    """The page's texts under 16 px once their sizes have settled. Gradio's theme animates a label's or a button's
    every property (``transition: all 0.2s``), so text grows over 0.2 s after the switch: read at once, it was
    still 12-14 px (one fresh-clone run, docs/test-suite.md). Waited for until every text is 16 px or more, then
    read: a text that never grows is still found, 20 s later."""
    try:
        page.wait_for_function(f"() => ({SMALLEST_TEXT})().every((entry) => entry[2] >= 16)", timeout=20_000)
    except playwright.TimeoutError:
        pass
    return [entry for entry in page.evaluate(SMALLEST_TEXT) if entry[2] < 16]


def test_large_text_enlarges_every_label_button_and_chart_text_to_16_px_or_more(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url[0])
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    page.get_by_text("Lessons for a class").click()
    page.locator("#large-text input").check()
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot').layout.meta", timeout=20_000)
    small = small_text(page)
    assert not small, small[:10]
    frame = page.evaluate("() => document.getElementById('attention-plot').getBoundingClientRect().height")
    assert frame <= 720, "a chart taller than the screen scrolls inside its own frame"
    page.locator("#large-text input").uncheck()
    page.wait_for_function("() => !document.querySelector('#attention-plot .js-plotly-plot').layout.meta",
                           timeout=20_000)
    # The one failure's ordering, forced: the sizes read in the moment the switch turns on are still growing.
    growing = page.evaluate(f"() => {{ explorerDisplay.largeText(true); return ({SMALLEST_TEXT})()"
                            ".filter((entry) => entry[2] < 16).length; }")
    assert growing and not small_text(page), "read once grown, not as they grow"
    page.close()


HEATMAP_SCALES = ("() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(div => (div.data || [])"
                  ".filter(trace => trace.type === 'heatmap').map(trace => JSON.stringify(trace.colorscale)))")
SAFE = "(scale) => scale === '\"Cividis\"' || scale.includes('#b35806')"  # cividis, or the blue-orange scale


def test_colour_blind_safe_colours_recolour_every_heatmap_also_those_drawn_later_and_come_back(app_url, browser):
    page, errors = opened(browser, app_url[0])
    assert page.evaluate(HEATMAP_SCALES), "the page opens on a translation's heatmaps"
    page.get_by_text("Lessons for a class").click()
    page.locator("#safe-colours input").check()
    page.wait_for_function(f"() => ({HEATMAP_SCALES})().every({SAFE})", timeout=10_000)
    before = translation_text(page)
    page.locator("#source-text textarea").fill("Two dogs are playing in the snow.")
    page.locator("#translate-button").click()
    page.wait_for_function("text => { const box = document.querySelector('#translation textarea, #translation input');"
                           " return box && box.value && box.value !== text; }", arg=before, timeout=60_000)
    answered(page)  # the whole translation drawn, not its first steps as they are decoded
    page.wait_for_function(f"() => ({HEATMAP_SCALES})().length && ({HEATMAP_SCALES})().every({SAFE})",
                           timeout=20_000)
    click_heatmap_cell(page, 1, 0)  # the recoloured heatmap's rows are still steps: row 2 is step 2
    page.wait_for_function("() => document.querySelector('#topk-plot .gtitle').textContent.startsWith('Step 2:')",
                           timeout=30_000)
    page.locator("#safe-colours input").uncheck()
    page.wait_for_function(f"() => !({HEATMAP_SCALES})().some({SAFE})", timeout=10_000)
    assert not errors
    page.close()


def test_every_chart_is_also_text_a_screen_reader_reads_and_a_table_one_click_away(app_url, browser):
    page, errors = opened(browser, app_url[0])
    plot = page.locator("#attention-plot .js-plotly-plot").first
    playwright.expect(plot).to_have_attribute("role", "figure")
    said = plot.get_attribute("aria-label")
    assert said.startswith("Cross-attention") and ": strongest " in said, said
    rows = page.evaluate("() => document.querySelector('#attention-plot .js-plotly-plot').data[0].z.length")
    assert any(word in said for word in ("Ein", "Mädchen", "junges")), said  # the tokens, named as hover names them
    page.locator("#attention-plot details.chart-text summary").click()
    table = page.locator("#attention-plot details.chart-text table").first
    playwright.expect(table.locator("tbody tr")).to_have_count(rows)  # written when the summary opens
    assert table.locator("tbody tr").first.locator("td").count() == len(page.evaluate(
        "() => document.querySelector('#attention-plot .js-plotly-plot').data[0].z[0]"))
    curves = page.locator("#topk-plot .js-plotly-plot").first  # a bar chart: its series in words
    assert "points; last" in curves.get_attribute("aria-label")
    unlabelled = "() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null)" \
                 ".map(p => [p.closest('[id]')?.id, p.getAttribute('role'), p.getAttribute('aria-label')])"
    for tab in ("Positional encoding", "Model"):  # the sinusoids, and the training curves of the model card
        page.get_by_role("tab", name=tab).click()
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent "
                               "!== null).length >= 2", timeout=30_000)
        answered(page)
        charts = page.evaluate(unlabelled)
        assert all(role == "figure" and label for _, role, label in charts), (tab, charts)
    assert not errors
    page.close()


def test_an_example_pair_is_translated_then_patched_layer_by_layer_and_head_by_head(app_url, browser):
    from ui.views.samples import MINIMAL_PAIRS

    page, errors = opened(browser, app_url[0])
    clean, changed = MINIMAL_PAIRS[1]
    page.get_by_role("tab", name="Experiments").click()
    page.get_by_text("Which layers and heads carry the difference?").click()
    page.locator("#patch-examples").get_by_text(clean, exact=True).click()
    playwright.expect(page.locator("#patch-corrupted textarea")).to_have_value(changed)
    playwright.expect(page.get_by_label("Token to compare with")).to_have_value("▁kleiner", timeout=30_000)
    page.get_by_role("button", name="Patch every layer and head").click()
    playwright.expect(page.locator("#patching-summary")).to_contain_text("“▁kleines” rather than “▁kleiner”",
                                                                         timeout=60_000)
    page.wait_for_selector("#patching-heads .js-plotly-plot", timeout=30_000)
    assert translation_text(page).startswith("Ein kleines Mädchen") and not errors
    page.close()
