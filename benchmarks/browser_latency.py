"""Latency a person sees in a real browser: from a click until every chart it changes shows its new data.

Starts ``python app.py`` on a free loopback port (offline, training disabled) and drives Debian's Chromium
with Playwright. Each figure is the median over ``--clicks`` clicks, after one untimed warm-up click:

- first_step_drawn_ms: Translate tab, a new sentence's Translate click timed inside the page until the step view
  draws its first step (the candidates chart holds new data): at once where the page draws the decoding as it
  happens, with the whole translation where it does not;
- translate_settled_ms: Translate tab, default model, a new sentence typed and Translate clicked;
  translate_in_page_ms: the same timed inside the page (the button's click() to the first frame that finds every
  chart and the translation settled), without Playwright's overhead;
- model_view_settled_ms: the same with the View "model view: every layer and head"; model_view_in_page_ms: the
  same timed inside the page;
- switch_model_settled_ms: the Model dropdown switched between reverse-tiny and multi30k-en-de;
  switch_model_in_page_ms: the same timed inside the page, from the option's press until settled (Playwright takes
  250 ms or more to find the open list's option and see it still before pressing it);
- step_settled_ms: "◀ previous" / "next ▶" under the step view of a long sentence; step_in_page_ms: the same
  timed inside the page (click() to the first frame that finds the charts settled), without Playwright's overhead;
- head_settled_ms: the Head slider of the heatmaps typed between 1 and 2 (Enter), on the same sentence, until the
  heatmap and the step view's cross-attention show the new head; head_in_page_ms: the same timed inside the page;
- first_load_ms: a first visit (a new browser context, nothing cached) from navigation until the text box and
  the Translate button are shown and enabled; first_translation_ms: until the page's own first translation is
  drawn (the same settled test as a click's). Medians over ``--clicks`` loads.

- tab_first_open_ms: on a first visit (its first translation drawn), each tab but Translate clicked in turn, timed
  in the page from the click until a control of the tab can be used (TAB_OPENED_JS); tab_switch_ms: each again,
  from Translate, once all were opened. Each figure is the median over ``--clicks`` visits of a visit's slowest
  tab; ``*_by_tab`` gives each tab's median.

- translate_answer_bytes: what the page reads from Gradio's event stream for a Translate click of a 21-word
  sentence until it is settled; translate_bytes: the same until the stream is quiet again (anything the page asks
  for after drawing). Counted in the page as it reads the stream (COUNT_STREAM_JS), medians over ``--clicks``.
  (Chromium's own count, DevTools' Network.dataReceived, reports that long-lived stream in chunks that land in
  other clicks' windows: a click read 0.4 kB or twice its answer.)

``--checkpoint DIR`` opens the app on that checkpoint (``python app.py --checkpoint DIR``: its folder's checkpoints
are listed; the model switch goes to another of them, and is skipped where there is none), e.g. one of
opus-mt-en-de's shapes made by ``opus_shaped.py``. ``--max-tokens N`` sets "Maximum target tokens" first (a model
of random weights rarely ends a sentence: every translation is then N tokens long).

Settled: the translation box has a new non-empty value (not for steps), every chart the click changes
(#topk-plot, #step-attention, #attention-plot; the first two for steps) holds a new Plotly data array
(steps: titled "Step N:" for the new N), and no Gradio status tracker in them is pending.
Goals on a 2-core CPU (issue 44): translate and model view <= 300 ms, model switch <= 500 ms, step and head
<= 100 ms, first load <= 1,000 ms, a 21-word click <= 150 kB; a tab's first opening <= 500 ms (issue 85); on
opus-mt-en-de's shapes (20 tokens, beam 5) translate <= 700 ms and model view <= 800 ms; the first step drawn
<= 150 ms, and <= 400 ms at opus-mt's shapes (issue 61).
- translate_server_ms, model_view_server_ms: the server's own working time for the clicks of translate_in_page_ms
  and model_view_in_page_ms (the Translate handler's time in its code, from the app's log: ui/runtime/page.py's
  ``handler_times``), so that the rest of the in-page figure is the page's part and the trip.

Prints JSON last (with --json): {"first_step_drawn_ms", "translate_settled_ms", "translate_in_page_ms",
"model_view_settled_ms", "model_view_in_page_ms", "switch_model_settled_ms", "switch_model_in_page_ms",
"step_settled_ms", "step_in_page_ms", "head_settled_ms", "head_in_page_ms", "first_load_ms", "first_translation_ms",
"tab_first_open_ms", "tab_switch_ms", "tab_first_open_ms_by_tab", "tab_switch_ms_by_tab", "translate_answer_bytes",
"translate_bytes", "translate_server_ms", "model_view_server_ms", "clicks", "runs",
"failures"}.

    python benchmarks/browser_latency.py --clicks 5 --json
    python benchmarks/browser_latency.py --checkpoint /tmp/opus-shaped/opus-mt-en-de-shaped --max-tokens 20 --json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
CHARTS = ("topk-plot", "step-attention", "attention-plot")  # the first two are the step view's
DEFAULT_MODELS = ("multi30k-en-de", "reverse-tiny")  # the default first
MODELS = DEFAULT_MODELS  # or the --checkpoint's, and another beside it
MODEL_VIEW = "model view: every layer and head"
SENTENCES = ["A man in a red shirt is riding a bicycle down the street.", "Two dogs are running through the snow.",
             "A woman is reading a book on a bench in the park.", "Children are playing football on the beach."]
LONG_SENTENCE = "An old man with a grey beard is playing the guitar on a busy corner of the market."
SENTENCES_21_WORDS = ["A young woman in a long blue dress is walking her two small dogs along the river on a cold "
                      "and windy morning.",
                      "Two old men in dark coats are sitting on a wooden bench and feeding the birds in the park "
                      "near the station."]
QUIET_S = 1.0  # the network is quiet once nothing has arrived for this long
TIMEOUT_MS = 60_000  # a click not settled by then is a failure
LOADS = ["first_load_ms", "first_translation_ms"]
TAB_OPENINGS = ["tab_first_open_ms", "tab_switch_ms"]
BYTES = ["translate_answer_bytes", "translate_bytes"]
NAMES = ["first_step_drawn_ms", "translate_settled_ms", "translate_in_page_ms", "model_view_settled_ms",
         "model_view_in_page_ms", "switch_model_settled_ms", "switch_model_in_page_ms", "step_settled_ms",
         "step_in_page_ms", "head_settled_ms", "head_in_page_ms",
         *LOADS, *TAB_OPENINGS, *BYTES]
HEAD_CHARTS = ("step-attention", "attention-plot")  # what a head changes
USABLE_JS = """() => {
  const box = document.querySelector('#source-text textarea'), button = document.querySelector('#translate-button');
  return !!box && !!button && !box.disabled && !button.disabled && box.offsetParent !== null
         && button.offsetParent !== null;
}"""

# Marks each chart's current data array (Plotly.react gives the div a new one; a replaced div loses the mark)
# and returns the translation box's value.
MARK_JS = """charts => {
  for (const id of charts) document.querySelectorAll(`#${id} .js-plotly-plot`).forEach(el => { el.__old = el.data; });
  const box = document.querySelector('#translation textarea, #translation input');
  return box ? box.value : null;
}"""
# Gradio 6 shows a pending event on each of its outputs' status tracker: that [data-testid=status-tracker]
# element loses its class "hide" while the event is queued or running. Events with show_progress="hidden"
# (the View radio's redraw) never show it: their charts are caught by the new-data test alone.
# What a click still waits for: "" once it has settled, else the first thing not yet there, named (so that a click
# that cannot settle fails saying what it waited for).
UNSETTLED_JS = """({charts, oldTranslation, stepPrefix, titleHas}) => {
  if (oldTranslation !== null) {
    const box = document.querySelector('#translation textarea, #translation input');
    if (!box) return 'the translation box';
    if (!box.value || box.value === oldTranslation) return 'a new translation in #translation';
  }
  for (const id of [...charts, 'translation']) {
    const root = document.getElementById(id);
    if (!root) return `#${id} on the page`;
    if ([...root.querySelectorAll('[data-testid=status-tracker]')].some(t => !t.classList.contains('hide')))
      return `#${id}'s pending status to end`;
    if (id === 'translation') continue;
    const plots = [...root.querySelectorAll('.js-plotly-plot')];
    if (!plots.length) return `a chart in #${id}`;
    if (!plots.every(el => el.data && el.data !== el.__old)) return `new data in #${id}`;
    const title = (root.querySelector('.gtitle') || {}).textContent || '';
    if (stepPrefix && !title.startsWith(stepPrefix)) return `#${id}'s title to start "${stepPrefix}": "${title}"`;
    if (titleHas && !title.includes(titleHas)) return `#${id}'s title to hold "${titleHas}": "${title}"`;
  }
  return '';
}"""
SETTLED_JS = f"(args) => ({UNSETTLED_JS})(args) === ''"


def wait_settled(page, settled: dict) -> None:
    """Until SETTLED_JS(``settled``) holds; past TIMEOUT_MS a RuntimeError naming what the page still waited for."""
    try:
        page.wait_for_function(SETTLED_JS, arg=settled, timeout=TIMEOUT_MS)
    except PlaywrightError:
        left = page.evaluate(UNSETTLED_JS, settled)
        raise RuntimeError(f"not settled within {TIMEOUT_MS} ms: waited for {left or 'nothing (settled late)'}") \
            from None


def start_app(repo: Path, port: int, log, device: str | None = None,
              checkpoint: Path | None = None) -> subprocess.Popen:
    """``python app.py`` in ``repo``, offline, training disabled; its models on ``device`` (default: CUDA when
    PyTorch sees a GPU, else the CPU), opened on ``checkpoint`` (default: the bundled model)."""
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "EXPLORER_DISABLE_TRAINING": "1"}
    if device:
        env["EXPLORER_DEVICE"] = device
    opened = ["--checkpoint", str(checkpoint)] if checkpoint else []
    # app.py as itself, with each handler's working time logged (ui/runtime/page.py's handler_times)
    launch = ("import logging, runpy, sys; logging.getLogger('ui.handler_times').setLevel(logging.DEBUG); "
              "sys.argv = ['app.py', *sys.argv[1:]]; runpy.run_path('app.py', run_name='__main__')")
    return subprocess.Popen([sys.executable, "-c", launch, "--port", str(port), *opened], cwd=repo, env=env,
                            stdout=log, stderr=subprocess.STDOUT)


HANDLER_TIME = re.compile(rb"ui\.handler_times: (\w+) worked ([0-9.]+) ms")


class HandlerTimes:
    """The server's working time for each handler it ran, read from the app's log as it grows (through a file
    object of its own: the app writes through another)."""

    def __init__(self, path: str):
        self.log = open(path, "rb")  # noqa: SIM115 (read as the app writes, until the benchmark ends)

    def since_last(self, handler: str) -> list[float]:
        """``handler``'s working times logged since the last call (any handler's are passed over)."""
        lines = self.log.read()
        return [float(ms) for name, ms in HANDLER_TIME.findall(lines) if name.decode() == handler]


def models_beside(checkpoint: Path | None) -> tuple[str, ...]:
    """The models the page opens on and switches to: ``checkpoint`` first, then another of its folder's."""
    if checkpoint is None:
        return DEFAULT_MODELS
    others = sorted(p.name for p in checkpoint.parent.iterdir()
                    if p.name != checkpoint.name and (p / "config.json").is_file())
    return (checkpoint.name, *others[:1])


# The pages the app builds after it serves (ui/build.py, later_pages): a request for one waits until it is built.
PAGES_BUILT_LATER = ("de/", "fr/", "class/", "class/de/", "class/fr/")


def wait_until_every_page(url: str, process: subprocess.Popen) -> None:
    """Until the page at ``url`` and those built after the server serves answer: the server's start-up is over."""
    for path in ("", *PAGES_BUILT_LATER):
        wait_until_serving(url + path, process)


def wait_until_serving(url: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited with code {process.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return  # any answer but an error status
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the app did not answer within {seconds:.0f} s")


def stop_app(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def settle_ms(page, click, charts=CHARTS, translation_changes=True, step_prefix=None, title_has=None) -> float:
    """Milliseconds from ``click()`` until the charts hold new data (and the translation box a new value)."""
    old_translation = page.evaluate(MARK_JS, list(charts))
    started = time.perf_counter()
    click()
    wait_settled(page, {"charts": list(charts), "stepPrefix": step_prefix, "titleHas": title_has,
                        "oldTranslation": (old_translation or "") if translation_changes else None})
    return 1000 * (time.perf_counter() - started)


def translate_ms(page, i: int, sentence: str | None = None) -> float:
    page.fill("#source-text textarea", sentence or SENTENCES[i % len(SENTENCES)])
    # A model of random weights writes the same text for every sentence: its charts alone say it has answered.
    return settle_ms(page, lambda: page.click("#translate-button"), translation_changes=MODELS == DEFAULT_MODELS)


def translate_in_page_ms(page, i: int) -> float:
    """The same click timed inside the page (IN_PAGE_JS), without Playwright's own round trips."""
    shown = page.locator("#source-text textarea").input_value()
    page.fill("#source-text textarea", next(s for s in SENTENCES[i % 2::2] if s != shown))  # a new sentence
    old_translation = page.evaluate(MARK_JS, list(CHARTS))
    changes = MODELS == DEFAULT_MODELS
    return in_page_ms(page, "#translate-button", {"charts": list(CHARTS), "stepPrefix": None,
                                                  "oldTranslation": (old_translation or "") if changes else None})


def choose_model_ms(page, name: str) -> float:
    page.get_by_label("Model", exact=True).first.click()  # opens the dropdown; not timed
    return settle_ms(page, page.get_by_role("option", name=name, exact=True).click)


def switch_model_ms(page, i: int) -> float:
    return choose_model_ms(page, MODELS[(i + 1) % 2])  # the warm-up (i = 0) leaves the default model


# A pick in the model list timed inside the page: from the moment the option is pressed (its pointerdown) until a
# frame finds the charts settled. Playwright finds the option by its role and name and waits for it to be still
# before it presses it, 250 ms or more here that nobody waits for once the list is open.
PRESSED_UNTIL_SETTLED_JS = """([settledSource, args, timeoutMs]) => {
  const settled = (0, eval)(settledSource);
  window.explorerBenchmarkSettled = new Promise((done, failed) => {
    document.addEventListener('pointerdown', (event) => {
      const started = event.timeStamp;
      const check = () => {
        const left = settled(args);
        if (left === '') done(performance.now() - started);
        else if (performance.now() - started > timeoutMs) {
          failed(new Error(`not settled within ${timeoutMs} ms: waited for ${left}`));
        } else requestAnimationFrame(check);
      };
      requestAnimationFrame(check);
    }, {capture: true, once: true});
  });
}"""


def switch_model_in_page_ms(page, i: int) -> float:
    page.get_by_label("Model", exact=True).first.click()
    option = page.get_by_role("option", name=MODELS[(i + 1) % 2], exact=True)
    option.wait_for()
    old_translation = page.evaluate(MARK_JS, list(CHARTS))
    page.evaluate(PRESSED_UNTIL_SETTLED_JS, [UNSETTLED_JS, {"charts": list(CHARTS), "stepPrefix": None,
                                                            "oldTranslation": old_translation or ""}, TIMEOUT_MS])
    option.click()
    return page.evaluate("() => window.explorerBenchmarkSettled")


def set_max_tokens(page, tokens: int) -> None:
    """"Maximum target tokens" typed in (it takes effect at the next translation)."""
    box = page.locator("#max-tokens input[type=number]")
    box.fill(str(tokens))
    box.press("Enter")


# Before the page's own scripts: every response of Gradio's event stream (queue/data) is counted as the page reads
# it, in window.streamBytes.
COUNT_STREAM_JS = """(() => {
  window.streamBytes = 0;
  const fetched = window.fetch;
  window.fetch = async (...args) => {
    const response = await fetched(...args);
    const url = String((args[0] && args[0].url) || args[0]);
    if (!url.includes("/queue/data") || !response.body) return response;
    const counted = response.body.pipeThrough(new TransformStream({transform(chunk, stream) {
      window.streamBytes += chunk.byteLength;
      stream.enqueue(chunk);
    }}));
    return new Response(counted, {status: response.status, statusText: response.statusText,
                                  headers: response.headers});
  };
})()"""


def stream_bytes_until_quiet(page) -> int:
    """window.streamBytes once nothing has arrived for QUIET_S."""
    count, quiet_since = page.evaluate("window.streamBytes"), time.monotonic()
    while time.monotonic() - quiet_since < QUIET_S:
        page.wait_for_timeout(100)
        now = page.evaluate("window.streamBytes")
        if now != count:
            count, quiet_since = now, time.monotonic()
    return count


def translate_bytes(page, i: int) -> tuple[int, int]:
    """Bytes the page reads for a 21-word sentence's Translate click: until settled, and until the stream is
    quiet."""
    before = stream_bytes_until_quiet(page)
    page.fill("#source-text textarea", SENTENCES_21_WORDS[i % len(SENTENCES_21_WORDS)])
    settle_ms(page, lambda: page.click("#translate-button"), translation_changes=MODELS == DEFAULT_MODELS)
    answer = page.evaluate("window.streamBytes") - before
    return answer, stream_bytes_until_quiet(page) - before


def model_view_ms(page, i: int) -> float:
    if i == 0:  # choose the view once, and let its own redraw finish first
        settle_ms(page, page.get_by_label(MODEL_VIEW, exact=True).click, ["attention-plot"], False)
    return translate_ms(page, i)


def model_view_in_page_ms(page, i: int) -> float:
    """After model_view_ms, which leaves the view on."""
    return translate_in_page_ms(page, i)


def step_ms(page, i: int) -> float:
    label, target = next_step(page, i)
    return settle_ms(page, page.get_by_role("button", name=label).click, CHARTS[:2], False, f"Step {target}:")


# A click timed inside the page: from the button's click() until a frame finds the charts settled, without
# Playwright's own round trips for the click and the waiting (a hundred milliseconds or more on this machine).
# ``target`` is a button's label or "#id", or with a ``number`` the id of the slider whose box it is typed into,
# sent as the page does on Enter (its input event, then the key).
IN_PAGE_JS = """async ([target, settledSource, args, number, timeoutMs]) => {
  const settled = (0, eval)(settledSource);
  const button = number === null && (target.startsWith('#') ? document.querySelector(target)
    : [...document.querySelectorAll('button')].find(b => b.textContent.trim() === target));
  const box = number !== null && document.querySelector(`#${target} input[type=number]`);
  const started = performance.now();
  if (button) button.click();
  else {
    box.value = number;
    box.dispatchEvent(new Event("input", {bubbles: true}));
    box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
  }
  await new Promise((done, failed) => {
    const check = () => {
      const left = settled(args);
      if (left === true || left === '') done();
      else if (performance.now() - started > timeoutMs) {
        failed(new Error(`not settled within ${timeoutMs} ms: waited for ${left || 'its condition'}`));
      } else requestAnimationFrame(check);
    };
    check();
  });
  return performance.now() - started;
}"""


def in_page_ms(page, target: str, settled: dict, number: str | None = None, until: str = UNSETTLED_JS) -> float:
    """IN_PAGE_JS: ``target`` clicked (or ``number`` typed into it) until ``until``(``settled``) holds: returns
    true, or "" (UNSETTLED_JS: else what it still waits for)."""
    return page.evaluate(IN_PAGE_JS, [target, until, settled, number, TIMEOUT_MS])


# The first step of a translation drawn: the step view's candidates hold new data (MARK_JS). A page that draws the
# steps as they are decided draws the first one then; one that waits for the whole translation draws it last.
FIRST_STEP_JS = """() => {
  const root = document.getElementById('topk-plot');
  const plots = root ? [...root.querySelectorAll('.js-plotly-plot')] : [];
  return plots.length > 0 && plots.every(el => el.data && el.data !== el.__old);
}"""


def first_step_ms(page, i: int) -> float:
    """A new sentence's Translate click timed inside the page until its first step is drawn; then, untimed, until
    the whole translation is."""
    shown = page.locator("#source-text textarea").input_value()
    page.fill("#source-text textarea", next(s for s in SENTENCES[i % 2::2] if s != shown))
    old_translation = page.evaluate(MARK_JS, list(CHARTS))
    ms = in_page_ms(page, "#translate-button", {}, until=FIRST_STEP_JS)
    changes = MODELS == DEFAULT_MODELS
    wait_settled(page, {"charts": list(CHARTS), "stepPrefix": None, "titleHas": None,
                        "oldTranslation": (old_translation or "") if changes else None})
    return ms


def step_in_page_ms(page, i: int) -> float:
    label, target = next_step(page, i)
    page.evaluate(MARK_JS, list(CHARTS[:2]))
    return in_page_ms(page, label, {"charts": list(CHARTS[:2]), "oldTranslation": None,
                                    "stepPrefix": f"Step {target}:"})


def head_ms(page, i: int) -> float:
    """Head 2, then 1, ... on the heatmaps of the sentence the step view was timed on."""
    box = page.locator("#head-slider input[type=number]")
    head = str(2 - i % 2)

    def type_head() -> None:  # the box sends its value as it is typed, and again on Enter
        box.fill(head)
        box.press("Enter")
    return settle_ms(page, type_head, HEAD_CHARTS, False, title_has=f"head {head}")


def head_in_page_ms(page, i: int) -> float:
    head = str(2 - i % 2)
    page.evaluate(MARK_JS, list(HEAD_CHARTS))
    return in_page_ms(page, "head-slider", {"charts": list(HEAD_CHARTS), "oldTranslation": None, "stepPrefix": None,
                                            "titleHas": f"head {head}"}, head)


def next_step(page, i: int) -> tuple[str, int]:
    """The step button to press and the step it goes to, on the default model's long sentence."""
    if i == 0 and page.locator("#source-text textarea").input_value() != LONG_SENTENCE:
        if page.get_by_label("Model", exact=True).first.input_value() != MODELS[0]:
            choose_model_ms(page, MODELS[0])
        translate_ms(page, i, LONG_SENTENCE)  # the default model, on a sentence long enough to step back and forth
    caption = page.locator("#step-caption").first.text_content() or ""
    if not (match := re.search(r"Step (\d+) of (\d+)", caption)):
        raise RuntimeError(f"no step number in the step caption {caption!r}")
    step, last = int(match[1]), int(match[2])
    # Back and forth from wherever the step view opened (the first step; the last before 2026-12-01).
    forward = step == 1 or (step < last and i % 2 == 0)
    return ("next ▶", step + 1) if forward else ("◀ previous", step - 1)


def first_visit_ms(browser, url: str) -> tuple[float, float]:
    """A first visit: milliseconds until the page can be used, and until its first translation is drawn."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        started = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_function(USABLE_JS, timeout=TIMEOUT_MS)
        usable = time.perf_counter()
        wait_settled(page, {"charts": list(CHARTS), "oldTranslation": "", "stepPrefix": None, "titleHas": None})
        return 1000 * (usable - started), 1000 * (time.perf_counter() - started)
    finally:
        context.close()


# A tab clicked by its name, timed in the page until a control of its panel can be used: the panel shown is not the
# one shown before the click (Gradio mounts a tab's panel when it is first opened, and keeps it), and holds a
# visible, enabled button or field, or none at all once it shows its text (the Train tab of a server that does not
# train is a note).
TAB_OPENED_JS = """async ([name, timeout]) => {
  const shown = () => [...document.querySelectorAll('[role=tabpanel]')].filter((panel) => panel.offsetParent !== null);
  const before = shown()[0];
  const tab = [...document.querySelectorAll('button[role=tab]')].find((button) => button.textContent.trim() === name);
  const started = performance.now();
  tab.click();
  const usable = () => shown().some((panel) => {
    const controls = [...panel.querySelectorAll('button, input, textarea, select')];
    return panel !== before && panel.innerText.trim() !== ''
           && (!controls.length || controls.some((one) => one.offsetParent !== null && !one.disabled));
  });
  while (!usable()) {
    if (performance.now() - started > timeout) throw new Error(`the ${name} tab was not usable after ${timeout} ms`);
    await new Promise(requestAnimationFrame);
  }
  return performance.now() - started;
}"""


def tab_openings_ms(browser, url: str) -> tuple[dict[str, float], dict[str, float]]:
    """A first visit's first opening of each tab but the first, by its name, then a later opening of each (from the
    first tab again): milliseconds from the click until a control of the tab can be used."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        wait_settled(page, {"charts": list(CHARTS), "oldTranslation": "", "stepPrefix": None, "titleHas": None})
        first, *others = page.evaluate("() => [...document.querySelectorAll('button[role=tab]')]"
                                       ".map((button) => button.textContent.trim())")
        opened = {name: page.evaluate(TAB_OPENED_JS, [name, TIMEOUT_MS]) for name in others}
        again = {}
        for name in others:
            page.evaluate(TAB_OPENED_JS, [first, TIMEOUT_MS])
            again[name] = page.evaluate(TAB_OPENED_JS, [name, TIMEOUT_MS])
        return opened, again
    finally:
        context.close()


def repeat_tab_openings(browser, url: str, visits: int, runs: dict, failures: dict, slowest: dict) -> None:
    """``tab_openings_ms`` over ``visits`` first visits, into ``runs``: each visit's slowest tab (the goal is each
    tab's); ``slowest`` gets each tab's median, by its name."""
    by_tab: dict[str, dict[str, list[float]]] = {name: {} for name in TAB_OPENINGS}
    for name in TAB_OPENINGS:
        runs[name] = []
    for i in range(visits):
        try:
            openings = tab_openings_ms(browser, url)
        except PlaywrightError as error:
            failures[TAB_OPENINGS[0]].append(f"visit {i}: {str(error).splitlines()[0]}")
            continue
        for name, times in zip(TAB_OPENINGS, openings):
            runs[name].append(round(max(times.values()), 1))
            for tab, ms in times.items():
                by_tab[name].setdefault(tab, []).append(ms)
    for name in TAB_OPENINGS:
        slowest[name] = {tab: round(statistics.median(times)) for tab, times in by_tab[name].items()}


def repeat_loads(browser, url: str, loads: int, runs: dict, failures: dict) -> None:
    """``first_visit_ms`` after one untimed warm-up load (the server's first page), into ``runs``."""
    for name in LOADS:
        runs[name] = []
    for i in range(loads + 1):
        try:
            times = first_visit_ms(browser, url)
        except PlaywrightError as error:
            failures[LOADS[0]].append(f"{f'load {i}' if i else 'warm-up'}: {str(error).splitlines()[0]}")
            continue
        if i:
            for name, ms in zip(LOADS, times):
                runs[name].append(round(ms, 1))


def repeat_clicks(page, one_click, clicks: int, failures: list[str]) -> list[float]:
    """Times ``one_click(page, i)`` for i = 1..clicks after the untimed warm-up i = 0. A failure is noted with what
    the click waited for, and ends this figure's clicks: a page that cannot settle one would fail each after its
    full TIMEOUT_MS (a run that seemed to hang)."""
    times = []
    for i in range(clicks + 1):
        try:
            ms = one_click(page, i)
        except (PlaywrightError, RuntimeError) as error:  # a wait past 60 s is a playwright TimeoutError
            failures.append(f"{f'click {i}' if i else 'warm-up'}: {str(error).splitlines()[0]}")
            break
        if i:
            times.append(round(ms, 1))
    return times


def repeat_bytes(page, clicks: int, runs: dict, failures: dict) -> None:
    """``translate_bytes`` after one untimed warm-up click, into ``runs``."""
    for name in BYTES:
        runs[name] = []
    for i in range(clicks + 1):
        try:
            counts = translate_bytes(page, i)
        except PlaywrightError as error:
            failures[BYTES[0]].append(f"{f'click {i}' if i else 'warm-up'}: {str(error).splitlines()[0]}")
            continue
        if i:
            for name, count in zip(BYTES, counts):
                runs[name].append(count)


# The figures beside which the server's working time for their clicks is printed, and its handler.
SERVER_TIMES = {"translate_in_page_ms": "on_translate_click", "model_view_in_page_ms": "on_translate_click"}


def measure(url: str, clicks: int, screenshots: Path | None, max_tokens: int | None,
            handler_times: HandlerTimes) -> tuple[dict, dict, dict, dict]:
    runs, failures, server, by_tab = {}, {name: [] for name in NAMES}, {}, {}
    plan = {"first_step_drawn_ms": first_step_ms, "translate_settled_ms": translate_ms,
            "translate_in_page_ms": translate_in_page_ms,
            "switch_model_settled_ms": switch_model_ms, "switch_model_in_page_ms": switch_model_in_page_ms,
            "step_settled_ms": step_ms, "step_in_page_ms": step_in_page_ms, "head_settled_ms": head_ms,
            "head_in_page_ms": head_in_page_ms, "model_view_settled_ms": model_view_ms,
            "model_view_in_page_ms": model_view_in_page_ms}  # model view last: it stays on
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=BROWSER_ARGS)
        try:
            repeat_loads(browser, url, clicks, runs, failures)
            repeat_tab_openings(browser, url, clicks, runs, failures, by_tab)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(COUNT_STREAM_JS)
            page.goto(url)
            wait_settled(page, {"charts": list(CHARTS), "oldTranslation": "", "stepPrefix": None,
                                "titleHas": None})  # the page's own first translation
            if max_tokens:
                set_max_tokens(page, max_tokens)
            repeat_bytes(page, clicks, runs, failures)
            if len(MODELS) < 2:
                for name in ("switch_model_settled_ms", "switch_model_in_page_ms"):
                    del plan[name]
                    runs[name] = []
                    failures[name].append("no other model beside the checkpoint to switch to")
            for name, one_click in plan.items():
                handler_times.since_last("")
                runs[name] = repeat_clicks(page, one_click, clicks, failures[name])
                if name in SERVER_TIMES:  # the timed clicks' own, the warm-up's first
                    logged = handler_times.since_last(SERVER_TIMES[name])
                    server[name] = logged[-len(runs[name]):] if runs[name] else []
                if screenshots:
                    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
        finally:
            browser.close()
    return runs, failures, server, by_tab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--clicks", type=int, default=5, help="timed clicks of each kind, and first visits")
    parser.add_argument("--port", type=int, help="default: a free port on 127.0.0.1")
    parser.add_argument("--screenshots", type=Path, help="folder for a full-page screenshot after each measurement")
    parser.add_argument("--device", help="where the app's models run (cpu, cuda; default: the app's own choice)")
    parser.add_argument("--checkpoint", type=Path, help="open the app on this checkpoint (default: the bundled one)")
    parser.add_argument("--max-tokens", type=int, help='"Maximum target tokens" set before measuring')
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    clicks = max(1, args.clicks)
    global MODELS
    checkpoint = args.checkpoint.resolve() if args.checkpoint else None
    MODELS = models_beside(checkpoint)
    with socket.socket() as s:  # a free port, unless one is given
        s.bind(("127.0.0.1", 0))
        port = args.port or s.getsockname()[1]
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile() as log:
        process = start_app(args.repo.resolve(), port, log, args.device, checkpoint)
        try:
            # A visitor's first visit, not the server's first seconds: every page built first.
            wait_until_every_page(f"http://127.0.0.1:{port}/", process)
            runs, failures, server, by_tab = measure(f"http://127.0.0.1:{port}/", clicks, args.screenshots,
                                                     args.max_tokens, HandlerTimes(log.name))
        except RuntimeError:  # the app did not start: show its log's end
            log.seek(0)
            sys.stderr.write(log.read()[-4000:].decode(errors="replace"))
            raise
        finally:
            stop_app(process)
    result = {name: round(statistics.median(runs[name])) if runs[name] else None for name in NAMES}
    for name, times in server.items():
        result[name.replace("_in_page_ms", "_server_ms")] = round(statistics.median(times)) if times else None
    result.update({f"{name}_by_tab": by_tab.get(name, {}) for name in TAB_OPENINGS})
    result.update(clicks=clicks, runs={name: runs[name] for name in NAMES}, failures=failures)
    for name in NAMES:
        unit = "bytes" if name in BYTES else "ms"
        beside = (f" (the server working {result[name.replace('_in_page_ms', '_server_ms')]} ms of it)"
                  if name in server else "")
        print(f"{name}: median {result[name]} {unit}{beside} over {len(runs[name])} of {clicks} clicks; "
              f"runs {runs[name]}; failures {len(failures[name])}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
