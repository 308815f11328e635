"""What the libraries alone cost on this machine: the floor under issue 44's browser goals.

Measures, with nothing of the app in it:
- import_s: ``python -c "import torch, gradio, plotly"`` (the app imports all three before it serves);
- blank_startup_s: a blank Gradio page (a text box, a button, a text box; this script with ``--serve``) from
  ``python`` to its first answer, as app_latency.py times ``python app.py``;
- blank_first_load_ms: a first visit to that page in Chromium until its box and button can be used, as
  browser_latency.py times the app's first load;
- blank_click_ms: a click on its button, timed inside the page until the answer is shown, for an event that does
  nothing but echo its input (Gradio's queue, its event stream and its page's update: every click's share);
- plotly_load_ms: Plotly.js (plotly's own plotly.min.js, 4.8 MB, as the app serves it) loaded and run in a blank
  page.
Medians of ``--runs``; the machine is printed with them.

    python benchmarks/gradio_floor.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLICK_IN_PAGE_JS = """async ([text, timeoutMs]) => {
  const box = document.querySelector('#echo-in textarea');
  box.value = text;
  box.dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise((next) => requestAnimationFrame(() => next()));
  const started = performance.now();
  document.querySelector('#echo-button').click();
  await new Promise((done, failed) => {
    const check = () => (document.querySelector('#echo-out textarea').value === text ? done()
      : performance.now() - started > timeoutMs ? failed(new Error('no answer')) : requestAnimationFrame(check));
    check();
  });
  return performance.now() - started;
}"""
USABLE_JS = """() => { const box = document.querySelector('#echo-in textarea');
                       const button = document.querySelector('#echo-button');
                       return !!box && !!button && !box.disabled && box.offsetParent !== null; }"""
PLOTLY_LOAD_JS = """async (source) => {
  const started = performance.now();
  await new Promise((loaded, failed) => {
    const script = document.createElement('script');
    script.textContent = source;
    document.head.append(script);
    window.Plotly ? loaded() : failed(new Error('Plotly did not run'));
  });
  return performance.now() - started;
}"""


def serve(port: int) -> None:
    """The blank page: what every Gradio app has before it adds anything of its own."""
    import gradio as gr

    with gr.Blocks() as demo:
        given = gr.Textbox(label="In", elem_id="echo-in")
        button = gr.Button("Echo", elem_id="echo-button")
        answer = gr.Textbox(label="Out", elem_id="echo-out")
        button.click(lambda text: text, given, answer)
    demo.launch(server_name="127.0.0.1", server_port=port, quiet=True)


def seconds_of(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, list[float]]:
    # Imported here: the blank page's own process (--serve) imports Gradio alone.
    import plotly
    from browser_latency import BROWSER_ARGS, TIMEOUT_MS, stop_app, wait_until_serving
    from playwright.sync_api import sync_playwright

    figures: dict[str, list[float]] = {"import_s": [], "blank_startup_s": [], "blank_first_load_ms": [],
                                       "blank_click_ms": [], "plotly_load_ms": []}
    for _ in range(runs):
        figures["import_s"].append(seconds_of([sys.executable, "-c", "import torch, gradio, plotly"]))
    environment = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    plotly_js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    with tempfile.TemporaryFile() as log, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=BROWSER_ARGS)
        for run in range(runs):
            started = time.perf_counter()
            process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], stdout=log,
                                       stderr=subprocess.STDOUT, env=environment)
            try:
                wait_until_serving(url, process)
                figures["blank_startup_s"].append(time.perf_counter() - started)
                if run == 0:  # the server's first page, untimed
                    warm = browser.new_page()
                    warm.goto(url)
                    warm.wait_for_function(USABLE_JS, timeout=TIMEOUT_MS)
                    warm.close()
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                loading = time.perf_counter()
                page.goto(url, wait_until="commit")
                page.wait_for_function(USABLE_JS, timeout=TIMEOUT_MS)
                figures["blank_first_load_ms"].append(1000 * (time.perf_counter() - loading))
                page.evaluate(CLICK_IN_PAGE_JS, ["warm-up", TIMEOUT_MS])
                figures["blank_click_ms"].append(page.evaluate(CLICK_IN_PAGE_JS, [f"click {run}", TIMEOUT_MS]))
                blank = context.new_page()
                figures["plotly_load_ms"].append(blank.evaluate(PLOTLY_LOAD_JS, plotly_js))
                context.close()
            finally:
                stop_app(process)
        browser.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--serve", type=int, metavar="PORT", help="serve the blank page on PORT (used by the script)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    from common import machine

    runs = measure(max(1, args.runs))
    result = {name: round(statistics.median(values), 3 if name.endswith("_s") else 0) for name, values in runs.items()}
    result.update(machine=machine(), runs=runs)
    for name, values in runs.items():
        print(f"{name}: median {result[name]}; runs {[round(v, 3) for v in values]}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
