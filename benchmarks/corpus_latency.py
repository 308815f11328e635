"""What a visitor waits for in the Corpus tab, in a real browser: ``python app.py`` on a free loopback port, a new
runs folder (so the first opening runs the corpus), driven by Debian's Chromium with Playwright. Each click figure is
the median over ``--clicks`` clicks after one untimed warm-up, timed inside the page (from the click to the first
frame that finds its views drawn and nothing pending), without Playwright's own round trips:

- first_open_ms: the tab opened the first time: the default model's corpus run (the first 200 Multi30K test
  sentences where ``MULTI30K_DIR`` has them, else the app's 64 samples) computed in the worker, until the heads map
  and a head's picture are drawn; reopened_ms: the same run opened by a second page (read from disk);
- head_in_page_ms: a click on a cell of the heads map (Plotly's click, as the chart emits it) until that head's
  queries and keys are drawn;
- colour_in_page_ms: "Colour by" switched between place and token, until the picture is drawn again;
- search_in_page_ms: "Find the nearest tokens" (a token of the page's first translation) until the table holds them;
- open_sentence_in_page_ms: a click on a point of the picture until Translate shows that sentence translated, its
  heatmap drawn.

Goal (issue 72): every click drawn within 300 ms on a 2-core CPU.

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/corpus_latency.py --clicks 5 --json
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from browser_latency import BROWSER_ARGS, TIMEOUT_MS, start_app, stop_app, wait_until_every_page
from common import machine, report

CLICKS = ("head_in_page_ms", "colour_in_page_ms", "search_in_page_ms", "open_sentence_in_page_ms")
CROSS_HEADS = ((3, 1), (3, 2), (2, 3), (2, 4))  # the bundled model's cross-attention heads a click alternates

# One action inside the page, timed from just before it to the first frame where ``until`` holds. ``act`` and
# ``until`` are functions' source; ``args`` goes to both. Each chart's current data is marked first (Plotly.react
# gives a redrawn chart a new data array).
TIMED_JS = """async ([actSource, untilSource, args, timeoutMs]) => {
  const act = (0, eval)(actSource), until = (0, eval)(untilSource);
  document.querySelectorAll('.js-plotly-plot').forEach(el => { el.__old = el.data; });
  const started = performance.now();
  act(args);
  await new Promise((done, failed) => {
    const check = () => {
      const left = until(args);
      if (left === '') done();
      else if (performance.now() - started > timeoutMs) failed(new Error(`not drawn within ${timeoutMs} ms: ${left}`));
      else requestAnimationFrame(check);
    };
    check();
  });
  return performance.now() - started;
}"""
# What a view still waits for: '' once its chart (or table) holds new content and nothing in it is pending.
DRAWN_JS = """(id, titleHas) => {
  const root = document.getElementById(id);
  if (!root) return `#${id}`;
  if ([...root.querySelectorAll('[data-testid=status-tracker]')].some(t => !t.classList.contains('hide')))
    return `#${id} pending`;
  const plot = root.querySelector('.js-plotly-plot');
  if (!plot || !plot.data || plot.data === plot.__old) return `new data in #${id}`;
  const title = (root.querySelector('.gtitle') || {}).textContent || '';
  return titleHas && !title.includes(titleHas) ? `#${id}'s title to hold ${titleHas}` : '';
}"""
# The pointer comes over the chart (the page listens for clicks on a chart once it does), then Plotly's click.
EMIT_CLICK_JS = """({chart, customdata}) => {
  const plot = document.querySelector(`#${chart} .js-plotly-plot`);
  plot.dispatchEvent(new PointerEvent('pointerover', {bubbles: true}));
  plot.emit('plotly_click', {points: [{customdata}]});
}"""
HEAD_DRAWN_JS = f"({{title}}) => ({DRAWN_JS})('corpus-space', title)"
ROWS_JS = """() => {
  const root = document.getElementById('corpus-neighbours');
  if ([...root.querySelectorAll('[data-testid=status-tracker]')].some(t => !t.classList.contains('hide')))
    return 'the search pending';
  return root.querySelectorAll('[role=row] [role=gridcell]').length ? '' : 'rows in #corpus-neighbours';
}"""
OPENED_JS = f"""({{sentence}}) => {{
  const tab = document.querySelector('#visible-tab textarea, #visible-tab input');
  if (!tab || tab.value !== 'translate') return 'the Translate tab';
  if (document.querySelector('#source-text textarea').value !== sentence) return 'the sentence in the text box';
  return ({DRAWN_JS})('attention-plot', null);
}}"""


def timed(page, act: str, until: str, args: dict) -> float:
    return page.evaluate(TIMED_JS, [act, until, args, TIMEOUT_MS])


def click_head(page, i: int) -> float:
    """A head other than the one shown (a chart given the same figure again is not drawn again)."""
    shown = page.locator("#corpus-space .gtitle").first.text_content()
    layer, head = next(choice for offset in range(len(CROSS_HEADS))
                       if f"layer {(choice := CROSS_HEADS[(i + offset) % len(CROSS_HEADS)])[0]}, head {choice[1]}:"
                       not in shown)
    return timed(page, EMIT_CLICK_JS, HEAD_DRAWN_JS, {"chart": "corpus-heads", "customdata": ["cross", layer, head],
                                                      "title": f"layer {layer}, head {head}"})


def switch_colour(page, i: int) -> float:
    label = ("token", "place in the sentence")[i % 2]
    return timed(page, f"() => [...document.querySelectorAll('label')].find(l => l.textContent.trim() === "
                       f"{label!r}).click()", HEAD_DRAWN_JS, {"title": ""})


def search(page, i: int) -> float:
    click_head(page, i)  # untimed: a new head empties the table
    return timed(page, "() => [...document.querySelectorAll('button')].find(b => b.textContent.trim() === "
                       "'Find the nearest tokens').click()", ROWS_JS, {})


def open_sentence(page, i: int) -> float:
    """The sentence of the least-source table's (i+1)-th row, opened from a point of the picture at step 2."""
    rows = page.evaluate("() => [...document.querySelectorAll('#corpus-least [role=row]')].map(r => "
                         "[...r.querySelectorAll('[role=gridcell]')].map(c => c.textContent.trim()))"
                         ".filter(cells => cells.length)")
    number, source = int(rows[i][0]), rows[i][4]
    ms = timed(page, EMIT_CLICK_JS, OPENED_JS, {"chart": "corpus-space", "customdata": [number, 2],
                                                "sentence": source})
    page.get_by_role("tab", name="Corpus").click()
    return ms


def opened_corpus_ms(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=TIMEOUT_MS)
    started = time.perf_counter()
    page.get_by_role("tab", name="Corpus").click()
    page.wait_for_function(f"() => ({DRAWN_JS})('corpus-heads', null) === '' && "
                           f"({DRAWN_JS})('corpus-space', null) === ''", timeout=10 * TIMEOUT_MS)
    ms = 1000 * (time.perf_counter() - started)
    return page, ms


def measure(url: str, clicks: int) -> dict:
    runs = {name: [] for name in CLICKS}
    plan = dict(zip(CLICKS, (click_head, switch_colour, search, open_sentence)))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=BROWSER_ARGS)
        try:
            page, first = opened_corpus_ms(browser, url)
            status = page.locator("#corpus-status").text_content().strip()
            second_page, again = opened_corpus_ms(browser, url)
            second_page.close()
            for name, one_click in plan.items():
                for i in range(clicks + 1):
                    ms = one_click(page, i)
                    if i:
                        runs[name].append(round(ms, 1))
        finally:
            browser.close()
    return {"corpus": status, "first_open_ms": round(first), "reopened_ms": round(again),
            **{name: round(statistics.median(times)) for name, times in runs.items()}, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--clicks", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as runs_dir, tempfile.TemporaryFile() as log:
        os.environ["EXPLORER_RUNS_DIR"] = runs_dir  # a new server's runs: the first opening computes the corpus
        if os.environ.get("MULTI30K_DIR"):  # the app runs in the repository: a relative path would miss it
            os.environ["MULTI30K_DIR"] = str(Path(os.environ["MULTI30K_DIR"]).resolve())
        process = start_app(args.repo.resolve(), port, log)
        try:
            wait_until_every_page(f"http://127.0.0.1:{port}/", process)
            result = measure(f"http://127.0.0.1:{port}/", max(1, args.clicks))
        finally:
            stop_app(process)
    report({"machine": machine(), "clicks": args.clicks, **result}, args.json)


if __name__ == "__main__":
    main()
