"""A class at once: one teacher opens a class, then ``--students`` students, each its own ``gradio_client.Client``,
join and answer within a few seconds of each other, on loopback only.

Starts the app in this process (the bundled checkpoints, as ``python app.py`` serves them). The teacher opens a
class on the first lesson (``/class_open`` with its key); every student, a client of the students' page, asks for the question (``/class_question``, which joins them)
and sends one answer (``/class_answer``), all started within ``--spread`` seconds. Then the teacher's counts
(``/class_results``) must equal the answers sent.

Prints JSON last: {"students", "answers_sent", "answers_counted", "lost", "p95_ms", "p50_ms", "seconds"}: ``lost``
are answers sent that were not answered (an error, or no reply by the deadline) or not counted; latency is a
student's join and answer together, measured by the client.

    python benchmarks/class_load.py --students 60 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from load_test import LOOPBACK, free_port, percentile  # noqa: E402
from ui.classes.class_page import STUDENT_PATH

CLIENT_TIMEOUT_S = 60.0  # a slow answer is measured, not cut off and counted as lost
CONNECT_S = 20.0  # for every student's client to connect (fetch the app's description) before the clock starts


def take_part(url: str, code: str, start_at: float, choice: int) -> float:
    """One student: connect, wait until ``start_at`` (time.time()), ask for the question (joining), answer;
    the milliseconds asking and answering took."""
    from gradio_client import Client

    # Plain http on loopback has no certificates to check; verifying would load the certificate bundle again for
    # every request (about 60 ms of CPU each), and the benchmark would measure its own clients.
    client = Client(f"{url}{STUDENT_PATH}/", verbose=False, ssl_verify=False,
                    httpx_kwargs={"timeout": CLIENT_TIMEOUT_S})
    time.sleep(max(0.0, start_at - time.time()))
    started = time.perf_counter()
    client.predict(code, api_name="/class_question")
    reply = client.predict(code, choice, api_name="/class_answer")
    if not reply.get("accepted"):
        raise RuntimeError(reply)
    return (time.perf_counter() - started) * 1000


def group(url: str, code: str, plan: list[tuple[float, int]]) -> list[float | str]:
    """Some students in one process, a thread each: milliseconds, or why a request failed."""
    def one(start_at: float, choice: int) -> float | str:
        try:
            return take_part(url, code, start_at, choice)
        except Exception as error:  # counted as lost, and said
            return f"{type(error).__name__}: {str(error)[:200]}"
    with ThreadPoolExecutor(max_workers=len(plan)) as threads:
        return list(threads.map(lambda item: one(*item), plan))


def run_class(students: int = 60, spread_s: float = 10.0, timeout_s: float = 120.0, seed: int = 0,
              processes: int = 4) -> dict:
    """Serve the app on loopback, open a class, let ``students`` join and answer; the figures. The students run
    in ``processes`` other processes, as phones are other machines: in the server's own process their clients
    would share its interpreter lock."""
    from gradio_client import Client
    from ui import services
    from ui.build import build_app, close_app, launch_options

    demo = build_app(services.Services(services.ModelRegistry()))
    demo.launch(prevent_thread_lock=True, server_name=LOOPBACK, server_port=free_port(), quiet=True, **launch_options())
    url = demo.local_url
    assert url.startswith(f"http://{LOOPBACK}:"), url
    rng = random.Random(seed)
    try:
        teacher = Client(url, verbose=False)
        opened = teacher.predict("where_each_word_looks", api_name="/class_open")
        code, choices = opened["code"], len(opened["choices"])
        plan = [(rng.uniform(0, spread_s), rng.randrange(choices)) for _ in range(students)]
        sent = [0] * choices
        for _, choice in plan:
            sent[choice] += 1
        start = time.time() + CONNECT_S  # the students' clients connect first
        timed = [(start + delay, choice) for delay, choice in plan]
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            groups = [pool.submit(group, url, code, timed[i::processes]) for i in range(processes)]
            done, _ = wait(groups, timeout=timeout_s)
        outcomes = [outcome for future in done if future.exception() is None for outcome in future.result()]
        latencies = [ms for ms in outcomes if isinstance(ms, float)]
        failures = sorted({why for why in outcomes if isinstance(why, str)})
        counted = teacher.predict(code, api_name="/class_results")["counts"]
        lost = students - len(latencies) + sum(abs(a - b) for a, b in zip(sent, counted))
        return {"students": students, "answers_sent": students, "answers_counted": sum(counted), "lost": lost,
                "p95_ms": percentile(latencies, 95), "p50_ms": percentile(latencies, 50),
                "seconds": round(time.time() - start, 1), "failures": failures[:3]}
    finally:
        close_app(demo)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=60, help="students, each its own client (default 60)")
    parser.add_argument("--spread", type=float, default=10.0, help="seconds over which they start (default 10)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= 250:
        parser.error("--students must be 1-250 (a class's most)")
    logging.basicConfig(level=logging.WARNING)
    result = run_class(args.students, args.spread)
    if not args.json:
        print(f"{result['students']} students: {result['answers_counted']} answers counted, {result['lost']} lost, "
              f"p95 {result['p95_ms']} ms")
    print(json.dumps(result))
    sys.exit(0 if result["lost"] == 0 else 1)


if __name__ == "__main__":
    main()
