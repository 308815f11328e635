"""Server-side latency of one Translate click, and the app's start-up time to its first served page.

A Translate click decodes (beam 5), then builds the step view and the
attention heatmap exactly as the app's handlers do. Start-up is measured by
launching ``python app.py`` on a free port and polling until the page answers; beside it, in the same run,
``imports_s``: a fresh interpreter importing torch, gradio and plotly (the libraries the app starts by loading, as
it loads them: without garbage collection),
so that ``startup_s - imports_s`` is the app's own start-up; and ``every_page_s``, until the pages built after the
server serves (ui/build.py's ``later_pages``) answer too.

Opening a model as the app's registry opens it (``ModelRegistry.get``: loaded, its speed choices made, sized):
``open_cold_s`` with an empty cache of speed choices (they are timed: ``choosing_s`` of it), ``open_warm_s`` by a
new registry reading them from that cache, and ``load_s`` for ``load_checkpoint`` alone, each the median of
``--opens`` (the files read once before, so each finds them in the page cache). ``--checkpoint DIR``: that model,
e.g. one of opus-mt-en-de's shapes made by ``opus_shaped.py`` (default: the bundled default model).
Prints JSON last: {"translate_median_ms", "translate_p95_ms", "startup_s", "imports_s", "own_startup_s",
"every_page_s", "open_cold_s", "open_warm_s", "load_s", "choosing_s", "speed_choices"}.

    python benchmarks/app_latency.py --json
    python benchmarks/app_latency.py --checkpoint /tmp/opus/opus-mt-en-de-shaped --json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from browser_latency import PAGES_BUILT_LATER
from common import ROOT, machine, repeat_ms
from transformer.files.checkpoint import load_checkpoint
from transformer.speed_choices import CACHE_FILE
from ui import services
from ui.views import choices
from ui.views import exports
from ui.views import explorer as explorer_views
from ui.views import translate as translate_views


SENTENCE = "A young man in a green jacket is carrying a heavy box up the old stairs."  # 15 words


def one_click(checkpoint) -> None:
    result = translate_views.run_translation(checkpoint, SENTENCE, "beam", 5)
    tr = result.translation
    translate_views.source_pieces(tr)
    translate_views.step_view(tr, tr.num_steps)
    explorer_views.attention_figure(tr, "cross", choices.VIEWS[0], 1, 1).to_json()
    exports.attention_json_file(tr)


def startup_seconds() -> tuple[float, float]:
    """Seconds from ``python app.py`` until its page answers, and until the page it builds last answers too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        serving = seconds_until_answered(f"http://127.0.0.1:{port}/", started)
        return serving, max(seconds_until_answered(f"http://127.0.0.1:{port}/{path}", started)
                            for path in PAGES_BUILT_LATER)
    finally:
        process.terminate()
        process.wait(timeout=30)


def seconds_until_answered(url: str, started: float) -> float:
    while time.perf_counter() - started < 120:
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within 120 s")


def opening_seconds(directory: Path, opens: int) -> dict:
    """Seconds to open ``directory``'s model as the app does, with a cold and a warm cache of speed choices, and
    to load it alone; medians of ``opens``."""
    load_checkpoint(directory, "cpu")  # its files into the page cache, as every later open finds them
    times: dict[str, list[float]] = {"open_cold_s": [], "open_warm_s": [], "load_s": [], "choosing_s": []}
    for _ in range(opens):
        with tempfile.TemporaryDirectory() as folder:
            cache = Path(folder) / CACHE_FILE
            for state in ("open_cold_s", "open_warm_s"):
                registry = services.ModelRegistry([directory.parent], device="cpu", speed_cache=cache)
                started = time.perf_counter()
                registry.get(directory.name)
                times[state].append(time.perf_counter() - started)
            times["choosing_s"].append(read_timed(cache))
        started = time.perf_counter()
        load_checkpoint(directory, "cpu")
        times["load_s"].append(time.perf_counter() - started)
    return {name: round(statistics.median(values), 3) for name, values in times.items()}


def read_timed(cache: Path) -> float:
    """What timing the choices took, as the cache records it."""
    return next(iter(json.loads(cache.read_text()).values()))["timed_s"]


LIBRARIES = ("torch", "gradio", "plotly.graph_objects")


def imports_seconds() -> float:
    """A fresh interpreter's time to import the libraries, as ``app.py`` is started (analytics off, as ui sets;
    no garbage collection, as app.py sets)."""
    started = time.perf_counter()
    importing = subprocess.Popen([sys.executable, "-c", "; ".join(["import gc", "gc.disable()",
                                                                   *(f"import {name}" for name in LIBRARIES),
                                                                   "print('imported', flush=True)"])],
                                 cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    try:
        if importing.stdout.readline().strip() != "imported":
            raise RuntimeError("the libraries did not import")
        return time.perf_counter() - started  # not the interpreter's exit, which the app's start-up does not wait for
    finally:
        importing.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--opens", type=int, default=3, help="times the model is opened, each way")
    parser.add_argument("--checkpoint", type=Path, help="the model opened and clicked (default: the bundled one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    registry = services.ModelRegistry([args.checkpoint.parent] if args.checkpoint else None, device="cpu")
    name = args.checkpoint.name if args.checkpoint else registry.default_name()
    checkpoint = registry.get(name)
    median, p95 = repeat_ms(lambda: one_click(checkpoint), args.repeats)
    opening = opening_seconds(registry.available()[name], args.opens)  # after the clicks: it leaves models to free
    imports = min(imports_seconds() for _ in range(2))  # the second from a warm file cache, as the app's start
    startup, every_page = startup_seconds()
    result = {"translate_median_ms": round(median, 1), "translate_p95_ms": round(p95, 1),
              "startup_s": round(startup, 2), "imports_s": round(imports, 2),
              "own_startup_s": round(startup - imports, 2), "every_page_s": round(every_page, 2),
              **opening, "model": checkpoint.name, "machine": machine()}
    if not args.json:
        print(f"Translate: median {result['translate_median_ms']} ms, p95 {result['translate_p95_ms']} ms; "
              f"start-up {startup:.2f} s, of which importing the libraries {imports:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
