"""What one visitor of a public server may take of what everyone shares: classes, Hub downloads, the training slot
and the costly computations, measured against ``python app.py`` served on loopback with visitors behind a proxy
(each request carries the ``X-Forwarded-For`` entry a Space's proxy appends), as ``hostile_events.py`` plays them.

- ``classes_opened_by_one_address``: of 5 classes one address asks to open, how many open; then
  ``teacher_opened_after``: whether a teacher at another address still opens one.
- ``hub_opens_admitted_per_address_hour``: of 5 new Hub ids one address asks for within the hour, how many the
  server tries to open (offline here, so each tried one ends "cannot be reached"; the others are refused at once).
- ``second_visitor_training_wait_s``: a public visitor starts a 15-minute job; a second one presses Start 10 s
  later: seconds until the second one's job runs (the first one's ends at 5 minutes of training now that someone
  waits). ``first_job_cut``: whether it was ended for that.
- ``victim_slowdown_at_rate_limit``: another visitor's translation p50 while one visitor asks for a costly
  computation every 0.4 s (all the rate limit lets through), over its p50 alone (``hostile_events.slowdown``).

    python benchmarks/fair_share.py --json
    python benchmarks/fair_share.py --only victim --json     (one part: classes, hub, training, victim)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, machine, run_against_server
from browser_latency import stop_app, wait_until_serving
from hostile_events import RATE_S, Page, slowdown
from load_test import free_port

TEACHERS, OTHER_TEACHER, HUB_VISITOR, TRAINERS, HOSTILE = ("203.0.113.20", "198.51.100.21", "203.0.113.22",
                                                            ("203.0.113.23", "198.51.100.24"), "203.0.113.25")
ASKED = 5
FIRST_JOB_MINUTES = 15
RUNNING = ": running, update"  # how the Train tab's status line starts while a job runs


def start_server(port: int, work: Path, log) -> subprocess.Popen:
    """``python app.py`` as a public server runs it, training on, with its runs and Hub cache in ``work``."""
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
           "EXPLORER_RUNS_DIR": str(work / "runs"), "EXPLORER_HUB_CACHE": str(work / "hub")}
    env.pop("EXPLORER_DISABLE_TRAINING", None)
    return subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def classes_opened(page: Page, url: str) -> tuple[int, bool]:
    data = page.inputs("on_class_open", i1=url + "/")
    opened = sum(page.call("on_class_open", data, TEACHERS)["status"] == "answered" for _ in range(ASKED))
    return opened, page.call("on_class_open", data, OTHER_TEACHER)["status"] == "answered"


def hub_opens_admitted(page: Page) -> int:
    tried = [page.call("on_open_from_hub", page.inputs("on_open_from_hub", i0=f"Helsinki-NLP/opus-mt-en-x{n}"),
                       HUB_VISITOR) for n in range(ASKED)]
    return sum("in the last hour" not in outcome["message"] for outcome in tried)


def training_wait_s(url: str) -> tuple[float, bool]:
    from gradio_client import Client

    first, second = (Client(url, verbose=False, headers={"X-Forwarded-For": address}) for address in TRAINERS)
    first_job = first.submit("copy", None, "small", 3000, FIRST_JOB_MINUTES, api_name="/train")
    while not any(RUNNING in str(output[0]) for output in first_job.outputs()):
        time.sleep(0.5)
    time.sleep(10)  # the second visitor comes a little later
    asked = time.perf_counter()
    second_job = second.submit("reverse", None, "tiny", 40, 1, api_name="/train")
    while not any(RUNNING in str(output[0]) for output in second_job.outputs()):
        time.sleep(0.5)
    waited = time.perf_counter() - asked
    ended = first_job.result(timeout=600)
    second_job.result(timeout=600)
    cut = "another visitor was waiting" in str(ended[0])
    return round(waited, 1), cut


PARTS = ("classes", "hub", "training", "victim")


def measure(seconds: float, say, parts: set[str] = frozenset(PARTS)) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    result = {}
    with tempfile.TemporaryDirectory() as work, open(ROOT / "runs" / "fair_share.log", "w") as log:
        process = start_server(port, Path(work), log)
        try:
            wait_until_serving(url, process)
            page = Page(url)
            model = page.values[page.events["translate"]["inputs"][0]]
            if "classes" in parts:
                opened, other = classes_opened(page, url)
                say(f"classes: {opened} of {ASKED} opened from one address; another address opened one: {other}")
                result.update(classes_opened_by_one_address=opened, teacher_opened_after=other)
            if "hub" in parts:
                result["hub_opens_admitted_per_address_hour"] = hub_opens_admitted(page)
                say(f"Hub: {result['hub_opens_admitted_per_address_hour']} of {ASKED} new ids tried for one address")
            if "training" in parts:
                waited, cut = training_wait_s(url)
                say(f"training: the second visitor waited {waited} s; the first job was cut: {cut}")
                result.update(second_visitor_training_wait_s=waited, first_job_cut=cut)
            if "victim" in parts:
                result["victim_slowdown_at_rate_limit"] = slowdown(url, page, model, seconds, RATE_S, HOSTILE, say)
            return {**result, "machine": machine()}
        finally:
            stop_app(process)


def main() -> None:
    run_against_server(measure, __doc__.splitlines()[0], 60, "how long the costly visitor keeps asking", PARTS)


if __name__ == "__main__":
    main()
