"""Load test of the app: many concurrent gradio_client users translating at once, on loopback only.

Starts the app in this process (``app.build_app`` with the bundled checkpoints,
the registry's default model) on 127.0.0.1 and a free port. First every
distinct sentence is translated once by a single user: that is the expected
answer. Then ``--users`` users, each with its own ``gradio_client.Client``,
send ``--requests`` translations each (mixed sentence lengths) to the
``/translate`` endpoint at the same time, and every answer is compared with
the expected one. The users run in ``--processes`` other processes (clients
in the server's process would share its interpreter lock).

Counted per planned request: ``errors`` (the server or client raised),
``lost`` (no answer and no error before the overall deadline), ``mismatches``
(an answer that differs from the single-user one). Latency is measured by the
client, for answered requests. RSS is the server's process's VmRSS just
before and just after the concurrent phase.
Traffic goes to 127.0.0.1 only; request count and total time are bounded.

With ``--hostile SHARE`` that share of the users are hostile: each of their requests is one of the inputs a
public server must shrug off (a 10 MB sentence, NaN or an out-of-range beam as raw JSON, text of only invisible
characters, a model name that does not exist). They must be refused with a message, quickly; the normal users'
figures are counted apart (``normal_p95_ms``), so a run with and without ``--hostile`` compare the same users.
``peak_rss_mb`` is the server's process's highest resident size during the run.

With ``--streaming SHARE`` that share of the normal users translate as the page does: the Translate button's event,
which streams each decoding step as it is decided and then the finished translation's numbers (joined and read
as the browser does, each user with a session of its own); an answer matches when the single-user translation is
in what it streamed. Their latencies count with the others (to the last message); ``first_step_p95_ms`` is the
95th percentile of their first step's arrival.

Prints JSON last: {"users", "hostile_users", "requests", "errors", "lost", "mismatches", "p50_ms", "p95_ms",
"normal_p95_ms", "hostile_refused", "hostile_answered", "rss_before_mb", "rss_after_mb", "peak_rss_mb",
"streaming_users", "first_step_p95_ms"}.

    python benchmarks/load_test.py --users 40 --requests 5 --json
    python benchmarks/load_test.py --users 40 --requests 5 --hostile 0.25 --json
    python benchmarks/load_test.py --users 40 --requests 10 --streaming 0.5 --json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

LOOPBACK = "127.0.0.1"
BEAM = 5
MAX_TOKENS = 80

ENGLISH = [
    "A dog runs.",
    "Two children are playing in the snow.",
    "A man in a red shirt is riding a bicycle down the street.",
    "A woman is reading a book on a bench while her dog sleeps at her feet.",
    "Several people are standing in front of a small shop and waiting for the bus to arrive in the rain.",
    "An old man with a grey beard is playing the guitar on a busy corner of the market, and a small crowd "
    "has gathered around him to listen.",
]


HOSTILE = [  # (what, arguments after the model name, as /translate takes them)
    ("10 MB sentence", ("a " * 5_000_000, "beam", BEAM, MAX_TOKENS)),
    ("NaN beam", ("A dog runs.", "beam", float("nan"), MAX_TOKENS)),
    ("beam past its end", ("A dog runs.", "beam", 99, MAX_TOKENS)),
    ("only invisible characters", ("\u200b\ufeff\u200b", "greedy", BEAM, MAX_TOKENS)),
    ("infinite maximum", ("A dog runs.", "greedy", BEAM, float("inf"))),
]


def peak_rss_mb() -> float:
    """The highest resident size this process has had (VmHWM)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def sentences_for(model_name: str, count: int = 12, seed: int = 0) -> list[str]:
    """Distinct test sentences of mixed lengths: digit sequences for synthetic models, English otherwise."""
    if not model_name.startswith(("reverse", "copy", "sort")):
        return ENGLISH
    rng = random.Random(seed)
    lengths = [2, 3, 5, 8, 10, 15, 20, 30, 4, 7, 12, 25][:count]
    return [" ".join(str(rng.randrange(10)) for _ in range(n)) for n in lengths]


def rss_mb() -> float:
    """Resident memory of this process (VmRSS), in MB; NaN where /proc is not available."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 1)


CLIENT_OPTIONS = {"verbose": False, "ssl_verify": False}  # plain http on loopback: see user_group


def page_translate_event(demo) -> tuple[int, list]:
    """The page's Translate event (a generator that streams each step): its index and its inputs' first values
    (the model, sentence, decoding, beam size and maximum length first, as /translate takes them)."""
    index, event = next((index, event) for index, event in demo.fns.items()
                        if event.fn is not None and event.name == "on_translate_click")
    return index, [component.value for component in event.inputs]


def streamed_translation(url: str, event: tuple[int, list], session: str, arguments: tuple, timeout: float) -> dict:
    """One Translate click as the page makes it: the event joined, then its stream read to its end (each message
    after the first sends changes to the values, as Gradio streams a generator's). Returns the seconds to the first
    step and to the end, and the values the page then holds as text (the answer is in it)."""
    from gradio_client.utils import apply_diff

    index, values = event
    values = [*arguments, *values[len(arguments):]]
    began = time.perf_counter()
    join = json.dumps({"data": values, "fn_index": index, "session_hash": session, "event_data": None,
                       "trigger_id": None}).encode()
    urllib.request.urlopen(urllib.request.Request(f"{url}gradio_api/queue/join", join,
                                                  {"Content-Type": "application/json"}), timeout=timeout).read()
    first, sent, shown = None, None, {}  # each message's values (changes to the last ones after the first); what
    with urllib.request.urlopen(f"{url}gradio_api/queue/data?session_hash={session}", timeout=timeout) as stream:
        for line in stream:  # the page shows of them: an update without a value leaves an output as it was
            if not line.startswith(b"data:"):
                continue
            message = json.loads(line[5:])
            if message.get("msg") == "process_generating":
                data = message["output"]["data"]
                if first is None:
                    first, sent = time.perf_counter() - began, list(data)
                else:
                    sent = [apply_diff(old, change) for old, change in zip(sent, data)]
                for output, value in enumerate(sent):
                    if not (isinstance(value, dict) and value.get("__type__") == "update"):
                        shown[output] = value
                    elif "value" in value:
                        shown[output] = value["value"]
            if message.get("msg") == "process_completed":
                if not message.get("success", True):
                    raise RuntimeError(f"the event failed: {str(message.get('output'))[:200]}")
                break
    return {"first_step_s": first, "total_s": time.perf_counter() - began,
            "streamed": json.dumps(shown, ensure_ascii=False)}


def user_group(url: str, model_name: str, decoding: str, plans: list[list[str]], hostile_numbers: list[int],
               requests: int, expected: dict[str, str], deadline: float, streaming: list[bool] | None = None,
               page_event: tuple[int, list] | None = None) -> dict:
    """Some users in one process, a thread each: their counts, latencies and first errors. ``deadline`` is
    ``time.time()``. ``streaming``: which of ``plans``' users translate as the page does (``page_event``). The
    clients skip certificate checks (plain http on loopback has none to check); checking would load the
    certificate bundle again for every request, about 60 ms of CPU each, and the benchmark would measure its own
    clients."""
    from gradio_client import Client

    lock = threading.Lock()
    latencies: list[float] = []
    first_steps: list[float] = []
    counts = {"errors": 0, "lost": 0, "mismatches": 0, "hostile_refused": 0, "hostile_answered": 0}
    first_errors: list[str] = []
    clients: list = []

    def count(kind: str, detail: str | None = None) -> None:
        with lock:
            counts[kind] += 1
            if detail and len(first_errors) < 5:
                first_errors.append(detail)

    def time_left(unsent: list[str]) -> float | None:
        """Seconds left before the deadline; once it has passed, None, and the requests not sent are lost."""
        left = deadline - time.time()
        if left > 0:
            return left
        for _ in unsent:
            count("lost")
        return None

    def one_streaming_user(plan: list[str]) -> None:
        session = uuid.uuid4().hex[:11]
        for done, text in enumerate(plan):
            if (left := time_left(plan[done:])) is None:
                return
            try:
                click = streamed_translation(url, page_event, session,
                                             (model_name, text, decoding, BEAM, MAX_TOKENS), left)
            except Exception as error:  # noqa: BLE001 - every failure is counted, none stops the test
                count("errors", f"streamed: {type(error).__name__}: {error}")
                continue
            with lock:
                latencies.append(click["total_s"] * 1000)
                if click["first_step_s"] is not None:
                    first_steps.append(click["first_step_s"] * 1000)
            if expected[text] not in click["streamed"]:
                count("mismatches", f"{text!r}: expected {expected[text]!r} in what the page was sent")

    def one_user(plan: list[str]) -> None:
        try:
            client = Client(url, **CLIENT_OPTIONS)
        except Exception as error:  # noqa: BLE001 - every failure is counted, none stops the test
            for _ in plan:
                count("errors", f"connect: {type(error).__name__}: {error}")
            return
        with lock:
            clients.append(client)
        for done, text in enumerate(plan):
            if (left := time_left(plan[done:])) is None:
                return
            began = time.perf_counter()
            job = client.submit(model_name, text, decoding, BEAM, MAX_TOKENS, api_name="/translate")
            try:
                answer = job.result(timeout=left)[0]
            except FutureTimeout:
                job.cancel()
                for _ in plan[done:]:
                    count("lost")
                return
            except Exception as error:  # noqa: BLE001
                count("errors", f"{type(error).__name__}: {error}")
                continue
            with lock:
                latencies.append((time.perf_counter() - began) * 1000)
            if answer != expected[text]:
                count("mismatches", f"{text!r}: expected {expected[text]!r}, got {answer!r}")

    def one_hostile_user(number: int) -> None:
        client = Client(url, **CLIENT_OPTIONS)
        with lock:
            clients.append(client)
        for done in range(requests):
            what, arguments = HOSTILE[(number + done) % len(HOSTILE)]
            try:
                client.predict(model_name, *arguments, api_name="/translate")
                count("hostile_answered")  # a sensible answer is fine too (a long text is cut, not refused)
            except Exception:  # noqa: BLE001 - a refusal is what is expected
                count("hostile_refused")

    pool = ThreadPoolExecutor(max_workers=max(1, len(plans) + len(hostile_numbers)), thread_name_prefix="load-user")
    streaming = streaming or [False] * len(plans)
    futures = [pool.submit(one_streaming_user if streams else one_user, plan)
               for plan, streams in zip(plans, streaming)]
    futures += [pool.submit(one_hostile_user, number) for number in hostile_numbers]
    for future in futures:
        try:
            future.result(timeout=max(0.0, deadline - time.time()) + 5)
        except FutureTimeout:
            pass  # that user's unanswered requests are in no count yet: the caller counts them as lost
    pool.shutdown(wait=False, cancel_futures=True)
    for client in clients:
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass
    with lock:
        return {"counts": dict(counts), "latencies": list(latencies), "first_steps": list(first_steps),
                "first_errors": list(first_errors)}


def run_load_test(users: int = 20, requests: int = 10, greedy: bool = False, timeout_s: float = 600.0,
                  registry=None, model_name: str | None = None, say=print, seed: int = 0,
                  hostile: float = 0.0, processes: int = 4, streaming: float = 0.0) -> dict:
    """Serve the app on loopback, run ``users`` x ``requests`` concurrent translations, return the figures.
    ``streaming``: the share of the users who translate as the page does (its Translate event, streamed).
    The users run in ``processes`` other processes, as a class's browsers are other machines: in the server's
    own process their clients would share its interpreter lock."""
    from gradio_client import Client  # imported here so that --help stays fast
    from ui import services
    from ui.build import build_app, close_app, launch_options

    registry = registry or services.ModelRegistry()  # the bundled checkpoints
    model_name = model_name or registry.default_name()
    if model_name is None:
        raise SystemExit(f"no checkpoints found under {', '.join(map(str, registry.roots))}")
    decoding = "greedy" if greedy else "beam"
    sentences = sentences_for(model_name)

    demo = build_app(services.Services(registry), model_name)
    demo.launch(prevent_thread_lock=True, server_name=LOOPBACK, server_port=free_port(), quiet=True,
                **launch_options())  # as app.py serves it
    url = demo.local_url
    assert url.startswith(f"http://{LOOPBACK}:"), url  # loopback only
    try:
        say(f"model {model_name}, {decoding} decoding, app at {url}")
        single = Client(url, **CLIENT_OPTIONS)
        started = time.perf_counter()
        expected = {text: single.predict(model_name, text, decoding, BEAM, MAX_TOKENS, api_name="/translate")[0]
                    for text in sentences}
        single.close()
        say(f"single user: {len(sentences)} distinct sentences ({min(map(len, sentences))}-"
            f"{max(map(len, sentences))} characters) in {time.perf_counter() - started:.1f} s")

        rng = random.Random(seed)
        plans = [[rng.choice(sentences) for _ in range(requests)] for _ in range(users)]
        streams = [user < round(users * streaming) for user in range(users)][::-1]  # spread over the processes
        hostile_users = round(users * hostile)
        rss_before = rss_mb()
        started = time.perf_counter()
        deadline = time.time() + timeout_s
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            groups = [pool.submit(user_group, url, model_name, decoding, plans[i::processes],
                                  list(range(hostile_users))[i::processes], requests, expected, deadline,
                                  streams[i::processes], page_translate_event(demo))
                      for i in range(processes)]
            outcomes = [group.result() for group in groups]
        elapsed = time.perf_counter() - started
        rss_after = rss_mb()
        counts = {kind: sum(outcome["counts"][kind] for outcome in outcomes) for kind in outcomes[0]["counts"]}
        answered = sorted(ms for outcome in outcomes for ms in outcome["latencies"])
        first_steps = sorted(ms for outcome in outcomes for ms in outcome["first_steps"])
        total = users * requests
        counts["lost"] += max(0, total - len(answered) - counts["errors"] - counts["lost"])  # unaccounted
        say(f"concurrent: {users} users x {requests} requests = {total} in {elapsed:.1f} s "
            f"({len(answered) / elapsed:.1f} answers/s)")
        say(f"errors {counts['errors']}, lost {counts['lost']}, mismatches {counts['mismatches']}")
        for detail in [detail for outcome in outcomes for detail in outcome["first_errors"]][:5]:
            say(f"  e.g. {detail}")
        say(f"latency per request: p50 {percentile(answered, 50)} ms, p95 {percentile(answered, 95)} ms")
        if first_steps:
            say(f"streamed: {sum(streams)} users, their first step after p50 {percentile(first_steps, 50)} ms, "
                f"p95 {percentile(first_steps, 95)} ms")
        say(f"RSS of the server's process: {rss_before} MB before, {rss_after} MB after, {peak_rss_mb()} MB at most")
        if hostile_users:
            say(f"hostile: {hostile_users} users, {counts['hostile_refused']} requests refused, "
                f"{counts['hostile_answered']} answered")
        return {"users": users, "hostile_users": hostile_users, "requests": total, "errors": counts["errors"],
                "lost": counts["lost"], "mismatches": counts["mismatches"], "p50_ms": percentile(answered, 50),
                "p95_ms": percentile(answered, 95), "normal_p95_ms": percentile(answered, 95),
                "hostile_refused": counts["hostile_refused"], "hostile_answered": counts["hostile_answered"],
                "rss_before_mb": rss_before, "rss_after_mb": rss_after, "peak_rss_mb": peak_rss_mb(),
                "streaming_users": sum(streams), "first_step_p95_ms": percentile(first_steps, 95)}
    finally:
        close_app(demo)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=20, help="concurrent users (default 20)")
    parser.add_argument("--requests", type=int, default=10, help="translations per user (default 10)")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of beam search (beam 5)")
    parser.add_argument("--timeout", type=float, default=600.0, help="overall limit in seconds (default 600)")
    parser.add_argument("--hostile", type=float, default=0.0,
                        help="share of additional users sending hostile inputs, e.g. 0.25 (default 0)")
    parser.add_argument("--processes", type=int, default=4, help="processes the users run in (default 4)")
    parser.add_argument("--streaming", type=float, default=0.0,
                        help="share of the users who translate as the page does, streamed (default 0)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if not (0 <= args.hostile <= 1 and 0 <= args.streaming <= 1):
        parser.error("--hostile and --streaming are shares between 0 and 1")
    if not (1 <= args.users <= 200 and 1 <= args.requests <= 1000 and 1 <= args.processes <= 16):
        parser.error("--users must be 1-200, --requests 1-1000 and --processes 1-16")
    import logging
    logging.basicConfig(level=logging.WARNING)
    say = (lambda *_: None) if args.json else print
    result = run_load_test(args.users, args.requests, args.greedy, args.timeout, say=say, hostile=args.hostile,
                           processes=args.processes, streaming=args.streaming)
    print(json.dumps(result))
    sys.exit(0 if result["errors"] == result["lost"] == result["mismatches"] == 0 else 1)


if __name__ == "__main__":
    main()
