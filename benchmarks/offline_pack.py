"""The offline pack (``python -m transformer.pack``) opened from disk in Chromium, side by side with the app's first
visit, in one run:

- pack_s, folder_mb and each part's MB (``part_mb``): making the pack of both bundled translators, and what it
  weighs on disk;
- ready_ms: a first visit (a new browser context) from navigation until the page is ready to translate, the
  default translator loaded; median over ``--visits``;
- translate_greedy_ms, translate_beam_ms: a 12-word sentence translated in the page (window.explorerPack), timed
  in the page, greedy and with the model's beam; medians over ``--clicks`` after one warm-up;
- translate_drawn_ms: the same sentence typed and Translate clicked (greedy), until its views are drawn (the step
  view and the heatmap); step_ms: "next ▶" / "◀ previous" until the step view and the heatmap's outline are
  redrawn; model_view_ms: the model view chosen until it is drawn; each timed in the page, medians;
- renderer_mb: the page's renderer process's resident memory after those translations and a garbage collection
  (its process id and the collection through the DevTools protocol, its memory from /proc);
- app_first_load_ms, app_first_translation_ms: the app's first visit on the same machine in the same run
  (browser_latency.py's ``first_visit_ms``), unless ``--no-app``;
- agreement: for ``--sentences`` Multi30K test_2016_flickr sentences (1,000 by default; MULTI30K_DIR), each model
  greedy and with its beam, how many translations have the tokens ``python -m transformer.translate --json`` gives,
  the largest attention difference, and for each that differs, the first step that differs and the gap between the
  command line's two most probable tokens there.

    MULTI30K_DIR=... python benchmarks/offline_pack.py --json
    python benchmarks/offline_pack.py --sentences 0 --no-app
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks"), str(REPO / "tests")]

from browser_latency import first_visit_ms, start_app, stop_app, wait_until_every_page  # noqa: E402
from common import machine, report  # noqa: E402
from transformer import translate as translate_command  # noqa: E402
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint  # noqa: E402
from transformer.pack import make_pack  # noqa: E402
from ui.views.pack_lessons import pack_lessons  # noqa: E402

MODELS = ("multi30k-en-de", "multi30k-en-fr")
TWELVE_WORDS = "A young girl in a pink dress is climbing up a wooden ladder outside."
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
READY_JS = ("document.getElementById('translate')?.disabled === false || "
            "document.getElementById('problem')?.textContent")
# Timed in the page: from the click until the views the click changes are drawn (explorer.js's numbers shown, no
# chart waiting to be drawn).
CLICK_DRAWN_JS = """async (selector) => {
  const drawn = () => window.explorer.drawn(), before = drawn() && drawn().numbers.sent;
  const element = document.querySelector(selector), started = performance.now();
  if (element.type === "radio") { element.checked = true; element.dispatchEvent(new Event("change", {bubbles: true})); }
  else element.click();
  const done = () => drawn() && (selector !== "#translate" || drawn().numbers.sent !== before)
    && window.explorerCharts.pending() === 0;
  while (!done()) await new Promise(requestAnimationFrame);
  return performance.now() - started;
}"""
MODEL_VIEW = "input[name=view][value='model view: every layer and head']"
ONE_HEAD = "input[name=view][value='one head']"
TIMED_JS = """async ([text, options]) => {
  const started = performance.now();
  await explorerPack.translate(text, options);
  return performance.now() - started;
}"""


def refusing_outside(page) -> None:
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "data:", "blob:"))
               else route.abort())


def ready_ms(browser, index: Path) -> float:
    context = browser.new_context()
    try:
        page = context.new_page()
        refusing_outside(page)
        started = time.perf_counter()
        page.goto(index.as_uri(), wait_until="commit")
        page.wait_for_function(READY_JS, timeout=120_000)
        if page.text_content("#problem"):
            raise RuntimeError(page.text_content("#problem"))
        return 1000 * (time.perf_counter() - started)
    finally:
        context.close()


def renderer_mb(page) -> float:
    page.context.new_cdp_session(page).send("HeapProfiler.collectGarbage")  # what the page holds, not its garbage
    session = page.context.browser.new_browser_cdp_session()
    processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
    renderers = [process["id"] for process in processes if process["type"] == "renderer"]
    resident = []
    for pid in renderers:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                resident.append(int(line.split()[1]) / 1024)
    return round(max(resident), 1)


def clicks_ms(page, clicks: int) -> dict:
    """The page's own clicks timed until drawn: Translate, a step, the model view."""
    times = {"translate_drawn_ms": [], "step_ms": [], "model_view_ms": []}
    page.evaluate(CLICK_DRAWN_JS, "#translate")  # warm-up: Plotly.js loads with the first chart
    for click in range(clicks):
        times["translate_drawn_ms"].append(page.evaluate(CLICK_DRAWN_JS, "#translate"))
        times["step_ms"].append(page.evaluate(CLICK_DRAWN_JS, "#next" if click % 2 == 0 else "#previous"))
        times["model_view_ms"].append(page.evaluate(CLICK_DRAWN_JS, MODEL_VIEW))
        page.evaluate(CLICK_DRAWN_JS, ONE_HEAD)
    return {name: round(statistics.median(values)) for name, values in times.items()}


def command_line(model: str, sentences: list[str], beam: int | None) -> list[dict]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        translate_command.main(["--json", "--checkpoint", str(REPOSITORY_CHECKPOINTS / model),
                                *(["--beam", str(beam)] if beam else []), "--", *sentences])
    return [json.loads(line) for line in printed.getvalue().splitlines()]


def largest_gap(a, b) -> float:
    if isinstance(a, dict):
        return max(largest_gap(a[kind], b[kind]) for kind in a)
    if isinstance(a, list):
        return max((largest_gap(x, y) for x, y in zip(a, b)), default=0.0)
    return abs(a - b)


def top_two_gap(checkpoint, source_tokens: list[str], target_tokens: list[str], step: int) -> float:
    """The command line's probability gap between its two most probable tokens at ``step`` of its translation."""
    source = torch.tensor([[checkpoint.source_tokenizer.id_of(piece) for piece in source_tokens]])
    target = torch.tensor([[checkpoint.target_tokenizer.id_of(piece) for piece in target_tokens[:step + 1]]])
    with torch.inference_mode():
        probabilities = checkpoint.model(source, target).logits[0, -1].softmax(-1)
    first, second = probabilities.topk(2).values.tolist()
    return first - second


def agreement(page, sentences: list[str]) -> dict:
    result = {}
    for model in MODELS:
        checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / model, device="cpu")
        for beam, name in ((1, "greedy"), (None, "beam")):
            same, largest, differing = 0, 0.0, []
            for sentence, theirs in zip(sentences, command_line(model, sentences, beam)):
                options = {"model": model, **({"beam": beam} if beam else {})}
                ours = page.evaluate("([text, options]) => explorerPack.translate(text, options)", [sentence, options])
                if ours["target_tokens"] == theirs["target_tokens"]:
                    same += 1
                    largest = max(largest, largest_gap(ours["attention"], theirs["attention"]))
                    continue
                step = next(i for i, (a, b) in enumerate(zip(ours["target_tokens"] + [None],
                                                             theirs["target_tokens"] + [None])) if a != b)
                differing.append({"sentence": sentence, "step": step,
                                  "top_two_gap": top_two_gap(checkpoint, theirs["source_tokens"],
                                                             theirs["target_tokens"], step - 1)})
            result[f"{model} {name}"] = {"same_tokens": same, "of": len(sentences),
                                         "largest_attention_difference": largest, "differing": differing}
    return result


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def app_first_visit(browser, visits: int) -> dict:
    port = free_port()
    with tempfile.NamedTemporaryFile("w+b", suffix=".log") as log:
        process = start_app(REPO, port, log)
        try:
            url = f"http://127.0.0.1:{port}/"
            wait_until_every_page(url, process)
            loads = [first_visit_ms(browser, url) for _ in range(visits)]
        finally:
            stop_app(process)
    return {"app_first_load_ms": round(statistics.median(load for load, _ in loads)),
            "app_first_translation_ms": round(statistics.median(drawn for _, drawn in loads))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--clicks", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=1000, help="Multi30K test sentences compared (0: none)")
    parser.add_argument("--no-app", action="store_true", help="leave out the app's first visit")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.sentences and not os.environ.get("MULTI30K_DIR"):
        parser.error("--sentences compares Multi30K's test sentences: set MULTI30K_DIR, or give --sentences 0")
    from playwright.sync_api import sync_playwright

    result = {"machine": machine()}
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        pack = make_pack([REPOSITORY_CHECKPOINTS / model for model in MODELS], Path(folder) / "pack",
                         lessons=pack_lessons)  # as the command makes it
        result["pack_s"] = round(time.perf_counter() - started, 1)
        files = [path for path in pack.rglob("*") if path.is_file()]
        result["folder_mb"] = round(sum(path.stat().st_size for path in files) / 1e6, 1)
        result["part_mb"] = {part: round(sum(path.stat().st_size for path in files
                                             if path.relative_to(pack).parts[:len(part.split("/"))] ==
                                             tuple(part.split("/"))) / 1e6, 1)
                             for part in ("runtime", *(f"models/{model}" for model in MODELS))}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            result["ready_ms"] = round(statistics.median(ready_ms(browser, pack / "index.html")
                                                         for _ in range(args.visits)))
            page = browser.new_page()
            refusing_outside(page)
            page.goto((pack / "index.html").as_uri())
            page.wait_for_function(READY_JS, timeout=120_000)
            for name, options in (("greedy", {"beam": 1}), ("beam", {})):
                times = [page.evaluate(TIMED_JS, [TWELVE_WORDS, options]) for _ in range(args.clicks + 1)][1:]
                result[f"translate_{name}_ms"] = round(statistics.median(times))
            page.fill("#source", TWELVE_WORDS)
            result.update(clicks_ms(page, args.clicks))
            result["renderer_mb"] = renderer_mb(page)
            if args.sentences:
                data = Path(os.environ["MULTI30K_DIR"]) / "test_2016_flickr.en.gz"
                with gzip.open(data, "rt", encoding="utf-8") as lines:
                    sentences = [line.strip() for _, line in zip(range(args.sentences), lines)]
                result["agreement"] = agreement(page, sentences)
            if not args.no_app:
                result.update(app_first_visit(browser, args.visits))
            browser.close()
    report(result, args.json)


if __name__ == "__main__":
    main()
