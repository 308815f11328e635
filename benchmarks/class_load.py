"""A class at once: one teacher opens a class, then ``--students`` students, each its own ``gradio_client.Client``,
join and answer within a few seconds of each other, on loopback only.

Starts the app in this process (the bundled checkpoints, as ``python app.py`` serves them). The teacher opens a
class on lesson 1 (``/class_open``); every student asks for the question (``/class_question``, which joins them)
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
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from load_test import LOOPBACK, free_port, percentile  # noqa: E402


def run_class(students: int = 60, spread_s: float = 5.0, timeout_s: float = 120.0, seed: int = 0) -> dict:
    """Serve the app on loopback, open a class, let ``students`` join and answer; the figures."""
    from gradio_client import Client
    from ui import services
    from ui.build import LAUNCH_OPTIONS, build_app, close_app

    demo = build_app(services.Services(services.ModelRegistry()))
    demo.launch(prevent_thread_lock=True, server_name=LOOPBACK, server_port=free_port(), quiet=True, **LAUNCH_OPTIONS)
    url = demo.local_url
    assert url.startswith(f"http://{LOOPBACK}:"), url
    rng = random.Random(seed)
    try:
        teacher = Client(url, verbose=False)
        opened = teacher.predict(1, api_name="/class_open")
        code, choices = opened["code"], len(opened["choices"])
        classmates = [Client(url, verbose=False) for _ in range(students)]
        plan = [(client, rng.uniform(0, spread_s), rng.randrange(choices)) for client in classmates]
        sent = [0] * choices

        def take_part(client, delay: float, choice: int) -> float:
            time.sleep(delay)
            started = time.perf_counter()
            client.predict(code, api_name="/class_question")
            reply = client.predict(code, choice, api_name="/class_answer")
            if not reply.get("accepted"):
                raise RuntimeError(reply)
            return (time.perf_counter() - started) * 1000

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=students) as pool:
            futures = {}
            for client, delay, choice in plan:
                futures[pool.submit(take_part, client, delay, choice)] = choice
                sent[choice] += 1
            done, _ = wait(futures, timeout=timeout_s)
        latencies = [future.result() for future in done if future.exception() is None]
        seconds = time.perf_counter() - started
        counted = teacher.predict(code, api_name="/class_results")["counts"]
        answered = len(latencies)
        lost = students - answered + sum(abs(a - b) for a, b in zip(sent, counted))
        return {"students": students, "answers_sent": students, "answers_counted": sum(counted), "lost": lost,
                "p95_ms": percentile(latencies, 95), "p50_ms": percentile(latencies, 50),
                "seconds": round(seconds, 1)}
    finally:
        close_app(demo)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=60, help="students, each its own client (default 60)")
    parser.add_argument("--spread", type=float, default=5.0, help="seconds over which they start (default 5)")
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
