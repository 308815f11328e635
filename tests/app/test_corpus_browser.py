"""The Corpus tab in a real browser: a click on a head's cell opens its queries and keys, a click on a point or on a
row opens that sentence in Translate, on that head and step, with the step view on the screen; and the tab speaks
the page's language."""

import pytest

from browsing import answered, brought_into_sight, count_requests

playwright = pytest.importorskip("playwright.sync_api")

SPACE_TITLE = "#corpus-space .js-plotly-plot .gtitle"
# Where the picture's first query is on the screen: its points are drawn with WebGL, not as elements to find.
POINT_ON_SCREEN = """() => {
  const plot = document.querySelector('#corpus-space .js-plotly-plot'), layout = plot._fullLayout;
  const box = plot.getBoundingClientRect(), queries = plot.data[0];
  return [box.left + layout._size.l + layout.xaxis.l2p(queries.x[0]),
          box.top + layout._size.t + layout.yaxis.l2p(queries.y[0])];
}"""


def corpus_page(browser, url: str, path: str = "", tab: str = "Corpus"):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    count_requests(page)
    page.goto(url.rstrip("/") + path)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    answered(page)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector("#corpus-space .js-plotly-plot", timeout=120_000)
    answered(page, timeout=120_000)
    return page, errors


def click_at(page, selector: str, x_share: float, y_share: float) -> None:
    """A mouse click at a place within the element (scrolled into sight first), as a visitor's."""
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    box = element.bounding_box()
    x, y = box["x"] + box["width"] * x_share, box["y"] + box["height"] * y_share
    page.mouse.move(x, y)
    page.mouse.click(x, y)


# Every word of the tab's table headers that the page breaks across lines: a header reads whole words.
BROKEN_HEADER_WORDS = """() => [...document.querySelectorAll('.sentences thead th')].flatMap((header) => {
  const broken = [], walker = document.createTreeWalker(header, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const word of node.textContent.matchAll(/[^\\s-]+/g)) {  // a hyphen may end a line
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].filter((rect) => rect.width > 0).map((rect) => rect.top));
      if (lines.size > 1) broken.push(word[0]);
    }
  }
  return broken;
})"""


def shown_tab(page) -> str:
    return page.locator("#visible-tab textarea, #visible-tab input").first.input_value()


def test_a_click_on_a_cell_then_on_a_point_opens_the_head_then_its_sentence_in_translate(app_url, browser):
    url, _ = app_url
    page, errors = corpus_page(browser, url)
    assert page.locator(SPACE_TITLE).text_content().startswith("Cross-attention")
    assert page.evaluate(BROKEN_HEADER_WORDS) == [], "at 1366 x 900 every header reads whole words"
    # The first panel is the encoder's: its last column's middle row is one of its heads.
    click_at(page, "#corpus-heads .nsewdrag", 0.9, 0.5)
    playwright.expect(page.locator(SPACE_TITLE)).to_contain_text("Encoder self-attention, layer 2, head 4")
    answered(page)
    page.locator("#corpus-space").scroll_into_view_if_needed()
    x, y = page.evaluate(POINT_ON_SCREEN)
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_function("() => document.querySelector('#visible-tab textarea, #visible-tab input').value === "
                           "'translate'", timeout=30_000)
    answered(page)
    assert "layer 2, head 4" in page.locator("#attention-plot .js-plotly-plot .infolayer").first.text_content()
    brought_into_sight(page, "step-view")
    sentence = page.locator("#source-text textarea").input_value()
    for row, (width, height) in enumerate([(1366, 900), (1280, 720)]):
        page.set_viewport_size({"width": width, "height": height})
        page.get_by_role("tab", name="Corpus").click()
        rows = page.locator("#corpus-least [role=row]:has([role=gridcell])")
        source_cell = rows.nth(row).locator("[role=gridcell]").nth(4)  # the row's source
        source_of_row = source_cell.inner_text().strip()
        source_cell.scroll_into_view_if_needed()  # the list is at the tab's bottom: Translate opens scrolled there
        source_cell.click()
        page.wait_for_function(f"() => document.querySelector('#source-text textarea').value === "
                               f"{source_of_row!r}", timeout=30_000)
        assert shown_tab(page) == "translate" and sentence
        brought_into_sight(page, "step-view")
    assert not errors


def test_the_tab_opens_in_german_with_its_words(app_url, browser):
    url, _ = app_url
    page, errors = corpus_page(browser, url, "/de/", tab="Korpus")
    assert page.locator(SPACE_TITLE).text_content().startswith("Cross-Attention")
    assert page.get_by_text("Köpfe auf einen Blick").count() >= 1
    assert not errors
