"""The page in German and in French, in Chromium: a browser asking for German gets the German page, every tab of it
in German with no English left on the screen, its switch to French remembered, and axe-core finds nothing serious
in either language."""

import functools
import re

import pytest

from browsing import answered, count_requests
from test_accessibility import TAB_SETTLED, serious_violations
from ui.runtime.language import LANGUAGES, table

playwright = pytest.importorskip("playwright.sync_api")


# The page's words, less what a sentence or a model says: the English example sentences, the charts' labels
# (pieces of sentences), tables of sentences (the Corpus tab's) and values written as code (a sacreBLEU
# signature's "case:mixed").
PAGE_WORDS = """() => {
  const style = document.createElement("style");  // hidden, not removed: nothing moves, no chart redraws
  style.textContent = ":is(#examples, .js-plotly-plot, .sentences, code) { visibility: hidden !important; }";
  document.head.append(style);
  const seen = document.body.innerText;
  style.remove();
  return seen;
}"""


def whole(words: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(words)}(?![\w-])", text) is not None


@functools.cache
def said_otherwise(language: str) -> tuple[str, ...]:
    """The English of every string the page says otherwise in ``language``: not the words that language uses too
    (a German "Download") or each language's name in its own words (the switch)."""
    english, other = table("en"), table(language)
    theirs = "\n".join(other.values())
    return tuple(words for key, words in english.items()
                 if "{" not in words and "<" not in words and len(words) > 3 and words != other[key]
                 and words not in LANGUAGES.values() and not whole(words, theirs))


def english_left(language: str, seen: str) -> list[str]:
    """What ``language`` says otherwise, found whole in English on the screen."""
    return sorted({words for words in said_otherwise(language) if whole(words, seen)})


@pytest.mark.parametrize("language", ["de", "fr"])
def test_a_browser_in_german_or_french_gets_every_tab_in_its_language_and_nothing_serious(app_url, browser,
                                                                                         language):
    url, _ = app_url
    context = browser.new_context(locale=language, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=90_000)
    assert page.url == f"{url}{language}/" and page.evaluate("document.documentElement.lang") == language
    assert page.title() == table(language)["page.title"]
    found, left = {}, {}
    page.locator("#lessons .label-wrap").first.click()  # the lessons panel open
    left["opening page"] = english_left(language, page.evaluate(PAGE_WORDS))
    tooltips = page.evaluate("[...document.querySelectorAll('.modebar-btn[data-title]')].map(b => b.dataset.title)")
    plotlys = {words for key, words in table("en").items()
               if key.startswith("figures.toolbar.") and words != table(language)[key]}
    assert tooltips and not plotlys & set(tooltips), "Plotly's tool bar speaks the page's language too"
    found["opening page"] = serious_violations(page)
    for tab in page.get_by_role("tab").all()[1:]:
        tab.click()
        answered(page, timeout=120_000)  # the tab's views, asked for as it opened (the Corpus tab's run: seconds)
        page.wait_for_function(TAB_SETTLED, timeout=60_000)
        name = tab.inner_text()
        left[name] = english_left(language, page.evaluate(PAGE_WORDS))
        found[name] = serious_violations(page)
    context.close()
    assert not any(left.values()), {where: words for where, words in left.items() if words}
    assert not any(found.values()), {where: violations for where, violations in found.items() if violations}


def test_the_pages_switch_goes_to_another_language_and_is_remembered(app_url, browser):
    url, _ = app_url
    context = browser.new_context(locale="de-DE", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{url}?model=reverse-tiny")
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=90_000)
    assert page.url == f"{url}de/?model=reverse-tiny", "a shared link's settings kept"
    page.locator("#page-languages").get_by_role("link", name="Français").click()
    page.wait_for_function("() => document.documentElement.lang === 'fr'", timeout=60_000)
    assert page.url == f"{url}fr/?model=reverse-tiny" or page.url == f"{url}fr/"
    page.goto(url)
    page.wait_for_function("() => document.documentElement.lang === 'fr'", timeout=60_000)
    assert page.url == f"{url}fr/", "the choice is remembered over the browser's German"
    page.locator("#page-languages").get_by_role("link", name="English").click()
    page.wait_for_function("() => document.documentElement.lang === 'en'", timeout=60_000)
    assert page.url == url
    context.close()
