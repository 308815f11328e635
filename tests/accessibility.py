"""axe-core in Chromium, as every accessibility test of the project runs it: WCAG 2.0 and 2.1, levels A and AA."""

from __future__ import annotations

WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# No colour still changing: a button Gradio has just enabled fades into its colour (a CSS transition), and axe
# read its half-way colour as low contrast once (white on #c26542, 4.0:1).
TRANSITIONS_ENDED = """() => document.getAnimations().filter(animation => animation instanceof CSSTransition)
  .every(transition => transition.playState !== 'running')"""


def serious_violations(page) -> list[str]:
    """axe-core's serious and critical findings on the page once its colours have settled, one line per rule."""
    page.wait_for_function(TRANSITIONS_ENDED, timeout=10_000)
    from axe_playwright_python.sync_playwright import Axe

    options = {"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]}
    found = Axe().run(page, options=options).response["violations"]
    return [f"{v['id']} ({v['impact']}, {len(v['nodes'])} elements, e.g. {v['nodes'][0]['target']}: "
            f"{v['nodes'][0].get('failureSummary', '')[:160]})"
            for v in found if v["impact"] in ("serious", "critical")]
