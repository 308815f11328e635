"""Every student can use the page: axe-core (WCAG 2.0 and 2.1, levels A and AA) finds no serious or critical
violation wherever a student goes: the opening page, each tab after a translation, the lessons panel, the
projector's large text at 1280 x 720, the Train tab while a job runs and a class's page on a phone; and the keyboard alone reaches and works
every step of a lesson, its focus always in sight."""

import pytest

from accessibility import serious_violations
from browsing import answered, count_requests
from ui.views import lessons

pytest.importorskip("axe_playwright_python.sync_playwright")
playwright = pytest.importorskip("playwright.sync_api")

TABS = ["Inside a head", "Experiments", "Attention vs evidence", "Analysis", "Corpus", "Positional encoding", "Model"]
# No event still pending in the tab on screen: Gradio dims an output while its event runs, which axe would read as
# low contrast.
TAB_SETTLED = """() => [...document.querySelectorAll('[role=tabpanel]')].filter(tab => tab.offsetParent !== null)
  .every(tab => [...tab.querySelectorAll('[data-testid=status-tracker]')].every(t => t.classList.contains('hide')))"""


def layers_by_keyboard(page) -> list[str]:
    """The lenses' sections opened and worked with the keyboard alone: Enter on each section's heading, an arrow
    key on the encoder layer's slider, which draws that layer's cross-attention; then axe's findings there."""
    for section in ("#lens-section", "#layers-section"):
        page.locator(f"{section} > button").first.focus()
        page.keyboard.press("Enter")
    page.wait_for_selector("#decoderlens-map .js-plotly-plot", timeout=60_000)
    page.wait_for_selector("#tuned-lens .js-plotly-plot", timeout=60_000)
    page.locator("#decoderlens-layer input[type=range]").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('#decoderlens-map .gtitle')?.textContent"
                           ".includes('encoder layer 2')", timeout=30_000)
    answered(page)
    page.wait_for_function(TAB_SETTLED, timeout=30_000)
    return serious_violations(page)


def test_no_serious_or_critical_wcag_violation_wherever_a_student_goes(app_url, browser):
    url, _ = app_url
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    count_requests(page)
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)  # the first translation is drawn
    found = {"opening page, translated": serious_violations(page)}
    page.get_by_text("Lessons for a class").click()
    found["lessons panel"] = serious_violations(page)
    page.locator("#large-text input").check()
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot').layout.meta",
                           timeout=20_000)
    found["large text for a projector"] = serious_violations(page)
    page.locator("#show-me").click()
    page.wait_for_selector("#lesson-beside:not([hidden])", timeout=60_000)
    answered(page)
    found["a lesson beside its view"] = serious_violations(page)
    page.locator("#lesson-beside").get_by_role("button", name="Hide").click()
    page.locator("#large-text input").uncheck()
    for tab in TABS:
        page.get_by_role("tab", name=tab).click()
        answered(page)  # the tab's views, asked for as it opened
        page.wait_for_function(TAB_SETTLED, timeout=30_000)
        found[tab] = serious_violations(page)
        if tab == "Inside a head":
            found["Inside a head, what each layer knows"] = layers_by_keyboard(page)
    page.get_by_role("tab", name="Train").click()
    page.locator("#start-training").click()
    page.wait_for_function("() => /running/.test(document.querySelector('#train-status').innerText)",
                           timeout=60_000)
    found["Train, during a job"] = serious_violations(page)
    page.locator("#stop-training").click()
    page.wait_for_function("() => /stopped|finished/.test(document.querySelector('#train-status').innerText)",
                           timeout=120_000)
    page.close()
    for where, violations in found.items():
        print(where, violations or "none")
    assert not any(found.values()), {where: violations for where, violations in found.items() if violations}


@pytest.mark.parametrize("locale", ["en-US", "de-DE", "fr-FR"])
def test_the_students_page_of_a_class_on_a_phone_has_no_serious_violation_in_any_language(app_url, browser, locale):
    from gradio_client import Client

    from ui.runtime.language import table

    url, _ = app_url
    teacher = Client(url, verbose=False)
    code = teacher.predict("no_future", api_name="/class_open")["code"]
    context = browser.new_context(locale=locale, viewport={"width": 390, "height": 844})
    phone = context.new_page()
    phone.goto(f"{url}class/?code={code}")
    phone.locator("#student-choice input[type=radio]").first.wait_for(state="visible", timeout=60_000)
    phone.wait_for_function("() => !document.querySelector('#student-choice input').disabled", timeout=30_000)
    assert phone.evaluate("document.documentElement.lang") == locale[:2]
    found = {"question open": serious_violations(phone)}
    phone.locator("#student-choice label").first.click()
    phone.locator("#student-send").click()
    phone.get_by_text(table(locale[:2])["class.answer_in"]).wait_for(timeout=30_000)
    found["answer sent"] = serious_violations(phone)
    teacher.predict(code, api_name="/class_reveal")
    phone.locator("#student-why table").wait_for(timeout=30_000)
    found["revealed, with the map that shows why"] = serious_violations(phone)
    context.close()
    assert not any(found.values()), found


# The focused element (named by the elem_id of its component), and whether a ring shows it: its own outline or shadow, or its label's (Gradio draws a
# radio button's or a checkbox's focus on the label around it).
FOCUSED = """() => {
  const element = document.activeElement;
  if (!element || element === document.body) return null;
  const ring = (e) => { if (!e) return false; const s = getComputedStyle(e);
    return (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'; };
  let named = element;  // Gradio's own ids (a slider's range input, a chart's tool bar) are not the component's
  while (named && (!named.id || /^(range_id|modebar)/.test(named.id))) named = named.parentElement;
  return {id: named?.id || '', tag: element.tagName.toLowerCase(), type: element.type || '',
          role: element.getAttribute('role') || '', text: (element.innerText || '').trim().slice(0, 60),
          ring: ring(element) || ring(element.closest('label'))};
}"""


def tab_to(page, wanted, what: str, backwards: bool = False, presses: int = 120) -> dict:
    """Press Tab (Shift+Tab backwards) until ``wanted(focused)``; every element passed on the way shows its focus."""
    for _ in range(presses):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None:
            continue
        assert focused["ring"], f"on the way to {what}, {focused} has the focus but shows no ring"
        if wanted(focused):
            return focused
    raise AssertionError(f"{presses} presses of Tab never reached {what}")


def slider(elem_id: str):
    return lambda focused: focused["id"] == elem_id and focused["type"] == "range"


def text_of(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def test_a_keyboard_alone_translates_steps_changes_head_switches_tabs_and_runs_show_me(app_url, browser):
    """Tab, Shift+Tab, arrows, Enter and Space only, as a student who cannot use a mouse; focus always shows."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url[0])
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)

    tab_to(page, lambda f: f["id"] == "source-text" and f["tag"] == "textarea", "the text box")
    page.keyboard.press("Control+A")
    page.keyboard.type("Two dogs play in the snow.")
    tab_to(page, lambda f: f["id"] == "translate-button", "Translate")
    page.keyboard.press("Enter")
    page.wait_for_function("() => /Hunde/.test(document.querySelector('#translation textarea').value)",
                           timeout=60_000)

    caption = text_of(page, "#step-caption")
    tab_to(page, slider("step-slider"), "the step slider")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("text => document.querySelector('#step-caption').innerText !== text", arg=caption,
                           timeout=30_000)

    title = page.locator("#attention-plot .gtitle").first.text_content()
    tab_to(page, slider("layer-slider"), "the layer slider")
    page.keyboard.press("ArrowLeft")
    tab_to(page, slider("head-slider"), "the head slider")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("text => { const t = document.querySelector('#attention-plot .gtitle'); "
                           "return t && t.textContent !== text && /head 2\\b/i.test(t.textContent); }", arg=title,
                           timeout=30_000)

    tab_to(page, lambda f: f["role"] == "tab" and f["text"] == "Inside a head", "the tabs", backwards=True)
    page.keyboard.press("Enter")
    playwright.expect(page.get_by_role("tab", name="Inside a head")).to_have_attribute("aria-selected", "true")

    tab_to(page, lambda f: "Lessons for a class" in f["text"], "the lessons", backwards=True)
    page.keyboard.press("Enter")
    tab_to(page, lambda f: f["id"] == "lessons" and f["tag"] == "input", "the list of lessons")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    (chosen, _), lesson = lessons.lesson_choice_labels()[2], lessons.LESSONS[2]  # two down from the first
    playwright.expect(page.locator("#lessons input").first).to_have_value(chosen)
    tab_to(page, lambda f: f["id"] == "show-me", "Show me")
    page.keyboard.press("Space")  # at once: the choice's own event may reach the server after this press
    playwright.expect(page.locator("#lesson-text")).to_contain_text(lesson.title)
    playwright.expect(page.locator(f"button[role=tab][data-tab-id={lesson.tab}]")).to_have_attribute(
        "aria-selected", "true", timeout=60_000)
    page.wait_for_function("id => { const box = document.getElementById(id)?.getBoundingClientRect(); "
                           "return box && box.top >= -2 && box.top < innerHeight * 0.6; }", arg=lesson.focus,
                           timeout=30_000)
    page.close()
