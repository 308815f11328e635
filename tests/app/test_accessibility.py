"""Every student can use the page: axe-core (WCAG 2.0 and 2.1, levels A and AA) finds no serious or critical
violation wherever a student goes: the opening page, each tab after a translation, the lessons panel, the
projector's large text at 1280 x 720, and the Train tab while a job runs."""

import pytest

axe_playwright = pytest.importorskip("axe_playwright_python.sync_playwright")

WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
TABS = ["Inside a head", "Experiments", "Attention vs evidence", "Analysis", "Positional encoding", "Model"]
SETTLE_MS = 1500  # a tab's views arrive within this after it is opened


def serious_violations(page) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now, one line per rule."""
    options = {"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]}
    found = axe_playwright.Axe().run(page, options=options).response["violations"]
    return [f"{v['id']} ({v['impact']}, {len(v['nodes'])} elements, e.g. {v['nodes'][0]['target']}: "
            f"{v['nodes'][0].get('failureSummary', '')[:160]})"
            for v in found if v["impact"] in ("serious", "critical")]


def test_no_serious_or_critical_wcag_violation_wherever_a_student_goes(app_url, browser):
    url, _ = app_url
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)  # the first translation is drawn
    found = {"opening page, translated": serious_violations(page)}
    page.get_by_text("Lessons for a class").click()
    found["lessons panel"] = serious_violations(page)
    page.locator("#large-text input").check()
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot').layout.meta",
                           timeout=20_000)
    found["large text for a projector"] = serious_violations(page)
    page.locator("#large-text input").uncheck()
    for tab in TABS:
        page.get_by_role("tab", name=tab).click()
        page.wait_for_timeout(SETTLE_MS)
        found[tab] = serious_violations(page)
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
