"""Reliability and security: load, hostile input, a full queue, crashes mid-save, broken checkpoints, defaults.

All traffic stays on 127.0.0.1. Related checks that live elsewhere and are not repeated here:
pickle weights (.pt/.bin/.pth) in a checkpoint directory are refused without unpickling
(tests/test_tokenizer_checkpoint.py: test_pickle_only_directory_is_refused_without_unpickling,
test_pickle_weights_beside_a_config_are_refused); non-UTF-8 or binary uploads are refused
(tests/test_train_tab.py: test_a_bad_upload_is_reported_and_translation_keeps_working).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

import gradio
import httpx
import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, list_checkpoints, load_checkpoint
from transformer.files.weights import resolve, unique_state_dict

from transformer import errors
from ui.training import jobs, uploads
from ui import services
from ui.runtime import batching, limits
from ui.build import build_app, close_app, launch_options
from ui.views import text as text_views
from ui.views import translate as translate_views

from helpers import calls_ended, serve_on_loopback

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = REPOSITORY_CHECKPOINTS / "reverse-tiny"




def serve(registry, default="reverse-tiny", tmp_path=None, **options):
    """The app served as app.py serves it (its threads, limits and later pages), on ``registry``."""
    manager = jobs.JobManager(tmp_path / "runs") if tmp_path else jobs.JobManager()
    demo = build_app(services.Services(registry, manager), default, **options)
    serve_on_loopback(demo, **launch_options())
    return demo


@functools.cache
def bundled():
    return load_checkpoint(BUNDLED, device="cpu")


# --- load ----------------------------------------------------------------------------------------

def load_test_module():
    """By its package name, which the processes it spawns import it by."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.load_test")


@pytest.mark.slow
def test_a_short_load_test_loses_nothing_and_every_answer_matches_the_single_user_one_streamed_or_not():
    load_test = load_test_module()
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")
    result = load_test.run_load_test(users=5, requests=3, greedy=True, timeout_s=120, registry=registry,
                                     model_name="reverse-tiny", say=lambda *_: None, hostile=0.4, processes=2,
                                     streaming=0.4)
    assert result["users"] == 5 and result["requests"] == 15 and result["hostile_users"] == 2
    assert result["streaming_users"] == 2 and result["first_step_p95_ms"] > 0, "two users stream as the page does"
    assert result["errors"] == result["lost"] == result["mismatches"] == 0, result
    assert result["hostile_refused"] >= 4 and result["hostile_refused"] + result["hostile_answered"] == 6
    assert 0 < result["p50_ms"] <= result["p95_ms"] == result["normal_p95_ms"]
    assert 0 < result["rss_before_mb"] <= result["peak_rss_mb"] and result["rss_after_mb"] > 0


def test_load_test_sentences_suit_the_model():
    load_test = load_test_module()
    digits = load_test.sentences_for("reverse-tiny")
    assert len(set(digits)) == len(digits) >= 10
    assert all(re.fullmatch(r"\d( \d)*", s) for s in digits)
    assert len({len(s.split()) for s in digits}) > 5, "mixed lengths"
    assert all(re.search("[a-z]", s) for s in load_test.sentences_for("multi30k-en-de"))


class GatedRegistry(services.ModelRegistry):
    """Once closed, holds every request at the door until the test opens it, so the queue can be filled on purpose."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()  # open while the app is built, which reads models too
        self.waiting = threading.Semaphore(0)

    def close(self):
        """From now on every request waits at the door; ``waiting`` counts those that have arrived."""
        self.waiting = threading.Semaphore(0)
        self.gate.clear()

    def get(self, name):
        if not self.gate.is_set():
            self.waiting.release()
            self.gate.wait(60)
        return super().get(name)


def test_past_the_queue_limit_a_user_is_told_the_app_is_busy_instead_of_hanging(tmp_path):
    # Gradio answers a full queue with HTTP 503; gradio_client raises QueueError("Queue is full! Please try
    # again."), and the browser shows "This application is currently busy. Please try again." Both are clear.
    registry = GatedRegistry([REPOSITORY_CHECKPOINTS], device="cpu")
    demo = serve(registry, tmp_path=tmp_path, queue_size=1)
    try:  # a client with room for every request it keeps waiting (gradio_client's default is 40)
        client = Client(demo.local_url, verbose=False, max_workers=batching.CONCURRENCY["concurrency_limit"] + 2)
        registry.close()
        args = ("reverse-tiny", "1 2 3", "greedy", 2, 20)
        running = []
        # As many as may be translated at once, one at a time, so none meets a queue of size 1 still full.
        for _ in range(batching.CONCURRENCY["concurrency_limit"]):
            running.append(client.submit(*args, api_name="/translate"))
            assert registry.waiting.acquire(timeout=60), "the first requests should be running"
        queued = client.submit(*args, api_name="/translate")
        deadline = time.monotonic() + 60
        while len(demo._queue) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(demo._queue) == 1, "the third request waits in the queue"

        started = time.monotonic()
        with pytest.raises(QueueError, match="Queue is full"):
            client.submit(*args, api_name="/translate").result(timeout=60)
        assert time.monotonic() - started < 30, "refused at once, not after a wait"

        registry.gate.set()
        assert [job.result(timeout=60)[0] for job in running + [queued]] == ["3 2 1"] * (len(running) + 1)
        calls_ended(client, *running, queued)
        assert client.predict(*args, api_name="/translate")[0] == "3 2 1", "serves again once drained"
        client.close()
    finally:
        registry.gate.set()
        close_app(demo)


# --- hostile and unusual input -------------------------------------------------------------------

NASTY = ["", " ", "\t\n\r  \u3000", "1 " * 5000, "x" * 10_000, "\x00\x07\x1b[31m1 2\x7f", "a\x00b",
         "😀" * 50, "👩‍👩‍👧‍👦🏳️‍🌈", "\u202eabc\u202c", "שלום עולם", "مرحبا بالعالم", "<script>alert(1)</script>",
         "<img src=x onerror=alert(1)>", "\ud800", "a\udfffb", "\u200b\ufeff\u2028\u2029", "e\u0301" * 300,
         "\U0010ffff", "${jndi:ldap://127.0.0.1/a}", "'; DROP TABLE users; --", "\\x00 %s %n {0}"]
# Any Unicode, lone surrogates (possible in JSON: "\ud800") and control characters included.
ANY_TEXT = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.characters(), st.characters(categories=["Cs"]), st.characters(categories=["Cc"])),
             max_size=300).map("".join))


def translated_or_refused(text: str, decoding: str = "greedy") -> None:
    try:
        result = translate_views.run_translation(bundled(), text, decoding, 3)
    except errors.InputError as error:
        assert str(error)
        return
    translation, config = result.translation, bundled().model.config
    steps, sources = len(translation.predicted_pieces), len(translation.source_pieces)
    assert translation.source_pieces[-1] == "</s>" and steps == len(translation.token_probs) >= 1
    assert tuple(translation.cross_attention.shape) == (config.n_decoder_layers, config.n_heads, steps, sources)
    assert torch.allclose(translation.cross_attention.sum(-1), torch.ones(()), atol=1e-4)
    assert all(0 <= p <= 1 for p in translation.token_probs) and all(note.strip() for note in result.notes)


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
@pytest.mark.parametrize("text", NASTY, ids=range(len(NASTY)))
def test_nasty_input_is_translated_or_refused_with_an_input_error(text, decoding):
    translated_or_refused(text, decoding)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_TEXT)
def test_any_text_is_translated_or_refused_with_an_input_error(text):
    translated_or_refused(text)


def check_clean(text) -> None:
    try:
        cleaned, notes = text_views.clean_text(text)
    except errors.InputError:  # refused only when nothing visible is left to translate
        assert not isinstance(text, str) or not "".join(
            ch for ch in text[:text_views.MAX_RAW_CHARS] if unicodedata.category(ch) not in ("Cc", "Cs")
            and ord(ch) not in text_views.INVISIBLE and ch != "\ufffd").strip()
        return
    assert cleaned and len(cleaned) <= text_views.MAX_INPUT_CHARS
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in cleaned), repr(cleaned)
    cleaned.encode("utf-8")  # always encodable, so the tokenizer can take it
    assert cleaned == cleaned.lstrip() and "  " not in cleaned


@pytest.mark.parametrize("text", NASTY + [None, 123, b"1 2"], ids=range(len(NASTY) + 3))
def test_clean_text_of_nasty_input(text):
    check_clean(text)


@settings(max_examples=40, deadline=None)
@given(ANY_TEXT)
def test_clean_text_never_lets_control_characters_through_and_respects_the_limit(text):
    check_clean(text)


def test_unpaired_surrogates_become_replacement_characters_with_a_note():
    cleaned, notes = text_views.clean_text("1 \ud800 2")
    assert cleaned == "1 \ufffd 2"
    assert any("surrogate" in note for note in notes)


# --- a training process killed while saving ------------------------------------------------------

SAVE_AND_HANG = r"""
import sys, time
from pathlib import Path
import torch
import transformer.files.checkpoint as ck
import transformer.files.weights as stored

directory, stage = Path(sys.argv[1]), sys.argv[2]
current = ck.load_checkpoint(directory, device="cpu")
with torch.no_grad():
    for parameter in current.model.parameters():
        parameter.add_(1.0)  # the "newer" weights being saved

if stage == "mid-write":
    real_write = stored._write_safetensors
    def write_half_then_hang(path, tensors):
        real_write(path, tensors)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])  # half written when the kill comes
        print("HANGING", flush=True)
        time.sleep(120)
    stored._write_safetensors = write_half_then_hang
else:  # between the two renames: the old checkpoint moved aside, the new one not yet in place
    real_rename = Path.rename
    def rename(self, target):
        result = real_rename(self, target)
        if str(target).endswith(".old"):
            print("HANGING", flush=True)
            time.sleep(120)
        return result
    Path.rename = rename

ck.save_checkpoint(directory, current.model, current.source_tokenizer, current.target_tokenizer, info={"step": 1})
print("SAVED", flush=True)
"""


def kill_while_saving(directory: Path, stage: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", SAVE_AND_HANG, str(directory), stage], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        line = process.stdout.readline().strip()
        assert line == "HANGING", f"the save should hang before finishing: {line!r} {process.stderr.read()}"
        process.send_signal(signal.SIGKILL)
        assert process.wait(30) == -signal.SIGKILL
    finally:
        watchdog.cancel()
        process.kill()
        process.wait()
        process.stdout.close()
        process.stderr.close()


def same_weights(loaded, reference) -> bool:
    ours, theirs = unique_state_dict(loaded.model), unique_state_dict(reference.model)
    return ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.parametrize("stage", ["mid-write", "between-renames"])
def test_a_save_killed_midway_leaves_the_previous_checkpoint_loadable_and_listed(tmp_path, stage):
    directory = tmp_path / "reverse-tiny"
    shutil.copytree(BUNDLED, directory)
    kill_while_saving(directory, stage)

    if stage == "mid-write":
        assert (tmp_path / "reverse-tiny.tmp").is_dir(), "killed with the new checkpoint half written"
        assert resolve(directory) == directory
    else:
        assert not directory.exists() and (tmp_path / "reverse-tiny.old").is_dir()
        assert resolve(directory) == tmp_path / "reverse-tiny.old"
    assert same_weights(load_checkpoint(resolve(directory), device="cpu"), bundled())
    assert list_checkpoints(tmp_path) == [directory], "listed once, under its own name, never the .tmp"
    registry = services.ModelRegistry([tmp_path], device="cpu")
    assert registry.names() == ["reverse-tiny"]
    tr = translate_views.run_translation(registry.get("reverse-tiny"), "1 2 3", "greedy").translation
    assert tr.text == "3 2 1"


# --- broken checkpoints beside a good one --------------------------------------------------------

def damage(directory: Path, how: str) -> None:
    weights, config_path = directory / "model.safetensors", directory / "config.json"
    if how == "corrupt-weights":
        weights.write_bytes(bytes(range(256)) * 40)
    elif how == "truncated-weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif how == "config-mismatch":
        config = json.loads(config_path.read_text())
        config["model"]["d_ff"] *= 2
        config_path.write_text(json.dumps(config))
    elif how == "extra-layer":
        config = json.loads(config_path.read_text())
        config["model"]["n_encoder_layers"] += 1
        config_path.write_text(json.dumps(config))
    elif how == "no-tokenizer":
        (directory / "tokenizer.model").unlink()
    elif how == "bad-tokenizer-entry":
        config = json.loads(config_path.read_text())
        config["source_tokenizer"] = 5
        config_path.write_text(json.dumps(config))
    elif how == "invalid-config":
        config_path.write_bytes(b"\xff{not json")


BROKEN = {"corrupt-weights": "unreadable or truncated", "truncated-weights": "unreadable or truncated",
          "config-mismatch": "do not match config.json", "extra-layer": "do not match config.json",
          "no-tokenizer": "tokenizer .* missing", "bad-tokenizer-entry": "tokenizer .* invalid",
          "invalid-config": "not a valid model config"}


@pytest.fixture(scope="module")
def broken_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    shutil.copytree(BUNDLED, root / "reverse-tiny")
    for how in BROKEN:
        shutil.copytree(BUNDLED, root / how)
        damage(root / how, how)
    registry = services.ModelRegistry([root], device="cpu")
    assert sorted(registry.names()) == sorted(["reverse-tiny", *BROKEN])
    demo = serve(registry, tmp_path=tmp_path_factory.mktemp("app"))
    client = Client(demo.local_url, verbose=False)
    yield client, registry
    client.close()
    close_app(demo)


@pytest.mark.parametrize("how", BROKEN)
def test_a_broken_checkpoint_is_reported_clearly_and_the_good_model_keeps_serving(broken_app, how):
    client, registry = broken_app
    assert client.predict("reverse-tiny", "1 2 3", "greedy", 2, 20, api_name="/translate")[0] == "3 2 1"
    with pytest.raises(AppError) as selected:
        client.predict(how, "1 2 3", api_name="/select_model")
    with pytest.raises(AppError) as translated:
        client.predict(how, "1 2 3", "greedy", 2, 20, api_name="/translate")
    for error in (selected.value, translated.value):
        message = str(error)
        assert re.search(BROKEN[how], message), message  # the specific reason, not "something went wrong"
        assert "Traceback" not in message
    assert how not in registry._loaded, "a broken checkpoint is never cached"
    assert client.predict("reverse-tiny", "4 5 6 7", "beam", 3, 20, api_name="/translate")[0] == "7 6 5 4"


# --- security ------------------------------------------------------------------------------------

@pytest.fixture
def launched(monkeypatch, tmp_path):
    """app.main with Blocks.launch replaced by a recorder of its keyword arguments."""
    calls = []
    monkeypatch.setattr(gradio.Blocks, "launch", lambda self, *args, **kwargs: calls.append(kwargs))
    monkeypatch.setenv("EXPLORER_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv(jobs.DISABLE_VARIABLE, "1")  # a smaller app to build; launching is what is checked
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)

    def run(*argv):
        calls.clear()
        app.main(["--port", "0", *argv])
        assert len(calls) == 1
        return calls[0]
    return run


def test_the_app_listens_on_loopback_unless_told_otherwise(launched, monkeypatch):
    kwargs = launched()
    assert kwargs["server_name"] == "127.0.0.1"
    assert kwargs["share"] is False, "no public link unless asked for"
    assert kwargs["server_port"] == 0
    assert launched("--host", "::1")["server_name"] == "::1"
    monkeypatch.setenv("GRADIO_SERVER_NAME", "")
    assert launched()["server_name"] == "127.0.0.1", "an empty variable is as good as unset"


def test_gradio_server_name_wins_when_set(launched, monkeypatch):
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")  # as Hugging Face Spaces set it
    assert launched()["server_name"] == "0.0.0.0"
    assert launched("--host", "127.0.0.1")["server_name"] == "0.0.0.0"


def test_a_broken_default_checkpoint_does_not_stop_the_app_from_starting(tmp_path):
    for name in ("multi30k-en-de", "reverse-tiny"):
        shutil.copytree(REPOSITORY_CHECKPOINTS / name, tmp_path / name)
    for weights in (tmp_path / "multi30k-en-de").glob("*.safetensors"):  # its shards, as a Space may hold them
        weights.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    demo = build_app(services.Services(services.ModelRegistry([tmp_path], device="cpu")))
    config = demo.get_config_file()
    notes = [c["props"].get("value") for c in config["components"] if c["props"].get("elem_id") == "broken-models"]
    assert notes and "multi30k-en-de" in notes[0] and "Git LFS pointer" in notes[0]
    dropdown = next(c for c in config["components"] if c["props"].get("label") == "Model")
    assert dropdown["props"]["value"] == "reverse-tiny", "the app opens on a model that loads"


def test_with_no_checkpoint_that_loads_start_up_ends_with_every_reason(tmp_path):
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / "reverse-tiny")
    (tmp_path / "reverse-tiny" / "model.safetensors").write_bytes(b"\0" * 10)
    with pytest.raises(SystemExit, match="no checkpoint loads:\nreverse-tiny: weights in .* unreadable"):
        build_app(services.Services(services.ModelRegistry([tmp_path], device="cpu")))


def test_an_upload_over_the_limit_is_refused_while_it_arrives(tmp_path):
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")),
                     "reverse-tiny")
    serve_on_loopback(demo, **launch_options())
    try:
        big = tmp_path / "big.tsv"
        big.write_bytes(b"a\tb\n" * (uploads.MAX_UPLOAD_BYTES // 4 + 1000))
        with big.open("rb") as file:
            answer = httpx.post(demo.local_url + "gradio_api/upload", files={"files": ("big.tsv", file)}, timeout=60)
        assert answer.status_code == 413, answer.text
        small = tmp_path / "small.tsv"
        small.write_bytes(b"a\tb\n")
        with small.open("rb") as file:
            assert httpx.post(demo.local_url + "gradio_api/upload", files={"files": ("small.tsv", file)},
                              timeout=60).status_code == 200
    finally:
        close_app(demo)


def test_a_refused_value_is_a_message_without_a_traceback_in_the_server_log(capfd):
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")),
                     "reverse-tiny")
    serve_on_loopback(demo)
    try:
        client = Client(demo.local_url, verbose=False)
        for beam, decoding in ((99, "beam"), (5, "sideways")):
            with pytest.raises(AppError, match="greater than maximum|not in the list of choices"):
                client.predict("reverse-tiny", "1 2 3", decoding, beam, 40, api_name="/translate")
    finally:
        close_app(demo)
    assert "Traceback" not in capfd.readouterr().err, "a client's bad value writes no traceback"


def test_a_request_body_over_the_limit_is_refused_before_it_is_parsed():
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")),
                     "reverse-tiny")
    serve_on_loopback(demo, **launch_options())
    try:
        client = Client(demo.local_url, verbose=False)
        with pytest.raises(Exception, match="413|larger than"):
            client.predict("reverse-tiny", "1 " * 1_000_000, "greedy", 2, 40, api_name="/translate")
        assert client.predict("reverse-tiny", "1 2 3", "greedy", 2, 40, api_name="/translate")[0] == "3 2 1"
        answer = httpx.post(demo.local_url + "gradio_api/queue/join", content=b"{" + b" " * 2_000_000 + b"}",
                            headers={"content-type": "application/json"}, timeout=60)
        assert answer.status_code == 413 and "at most a thousand characters" in answer.json()["detail"]
    finally:
        close_app(demo)


def test_one_remote_client_gets_only_its_share_of_the_work():
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")),
                     "reverse-tiny")
    serve_on_loopback(demo, **launch_options())
    try:
        def join(address=None, page=""):
            headers = {"x-forwarded-for": address} if address else {}
            return httpx.post(f"{demo.local_url}{page}gradio_api/queue/join", json={}, headers=headers, timeout=30)

        answers = [join("203.0.113.7").status_code for _ in range(limits.CLIENT_EVENTS + 1)]
        assert 429 not in answers[:-1] and answers[-1] == 429
        assert "wait a moment" in join("203.0.113.7").json()["detail"]
        assert join("203.0.113.8").status_code != 429, "another client keeps its share"
        phones = [join("203.0.113.7", "class/").status_code for _ in range(limits.CLIENT_EVENTS + 1)]
        assert 429 not in phones, "a class's phones behind one school address are counted apart, with more room"
        assert all(join().status_code != 429 for _ in range(limits.CLIENT_EVENTS + 1)), "the app run locally"
    finally:
        close_app(demo)


def test_only_a_proxy_on_a_private_network_may_name_the_client_it_forwards(monkeypatch):
    forwarded = {"x-forwarded-for": "6.6.6.6, 1.1.1.1"}  # what the client sent, then what the Space's proxy saw
    assert limits.client_address(forwarded, "10.0.0.2") == "1.1.1.1", "a Space's proxy"
    assert limits.client_address(forwarded, "127.0.0.1") == "1.1.1.1"
    assert limits.client_address(forwarded, "8.8.4.4") == "8.8.4.4", "a client cannot pose as another"
    assert limits.client_address({}, "8.8.4.4") == "8.8.4.4"
    monkeypatch.setenv("EXPLORER_TRUSTED_PROXIES", "2")  # a load balancer behind the edge proxy
    assert limits.client_address({"x-forwarded-for": "6.6.6.6, 1.1.1.1, 10.0.0.9"}, "10.0.0.2") == "1.1.1.1"


def test_a_client_that_prepends_addresses_to_x_forwarded_for_still_gets_only_its_share():
    """The proxy appends the address it saw; whatever a client writes before it changes nothing."""
    share = limits.ClientShare(app=None)
    admitted = [share.admit(limits.client_address({"x-forwarded-for": f"203.0.113.{i}, 198.51.100.7"}, "10.0.0.2"))
                for i in range(40)]
    assert sum(admitted) == limits.CLIENT_EVENTS


def test_a_page_in_every_language_is_one_page_to_a_clients_share():
    """The students' pages at /class/, /class/de/ and /class/fr/ are one class's: its phones' work is counted
    together, apart from the main page; the main page at /, /de/ and /fr/ is one page too. A client cannot escape
    its share by changing language."""
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    share = limits.ClientShare(app, own_allowance={"/class/": 2})

    def status(path: str) -> int:
        sent = []

        async def send(message):
            sent.append(message)
        async def receive():
            return {"type": "http.request", "body": b"{}"}
        scope = {"type": "http", "method": "POST", "path": path, "client": ("10.0.0.2", 1),
                 "headers": [(b"x-forwarded-for", b"203.0.113.7")]}
        asyncio.run(share(scope, receive, send))
        return sent[0]["status"]

    pages = ("/class/", "/class/de/", "/class/fr/")
    answers = [status(f"{pages[i % 3]}gradio_api/queue/join") for i in range(2 * limits.CLIENT_EVENTS + 1)]
    assert 429 not in answers[:-1] and answers[-1] == 429
    pages = ("/", "/de/", "/fr/")  # the main page in every language: one share too, its own
    answers = [status(f"{pages[i % 3]}gradio_api/queue/join") for i in range(limits.CLIENT_EVENTS + 1)]
    assert 429 not in answers[:-1] and answers[-1] == 429


def test_an_address_starts_few_new_sessions_a_window_and_is_refused_before_gradio_sets_one_up():
    """A page opens one session; a script that sends each request in a new one made Gradio set up a session each
    time. Past ``CLIENT_SESSIONS`` new ones in a window an address is refused, the app never reached; the sessions
    it has keep working, and a class's phones behind one address have their page's allowance."""
    reached = []

    async def app(scope, receive, send):
        reached.append(json.loads((await receive())["body"] or b"{}").get("session_hash"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    share = limits.ClientShare(app, own_allowance={"/class/": 3})

    def join(session: str | None, address: str = "203.0.113.7", path: str = "/gradio_api/queue/join") -> dict:
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": json.dumps({"session_hash": session} if session else {}).encode()}
        scope = {"type": "http", "method": "POST", "path": path, "client": ("10.0.0.2", 1),
                 "headers": [(b"x-forwarded-for", address.encode())]}
        asyncio.run(share(scope, receive, send))
        body = sent[1]["body"] if len(sent) > 1 else b""
        return {"status": sent[0]["status"], "detail": json.loads(body)["detail"] if body else ""}

    first = [join(f"page-{n}")["status"] for n in range(limits.CLIENT_SESSIONS)]
    assert first == [200] * limits.CLIENT_SESSIONS and reached[-1] == f"page-{limits.CLIENT_SESSIONS - 1}"
    refused = join("one-too-many")
    assert refused["status"] == 429 and "new sessions" in refused["detail"] and reached[-1] != "one-too-many"
    assert join("page-0")["status"] == 200, "a session it has goes on"
    assert join(None)["status"] == 200, "a join naming no session is Gradio's to refuse"
    assert join(None, path="/gradio_api/call/translate")["status"] == 429, "a call is a new session of its own"
    assert join("elsewhere", address="198.51.100.9")["status"] == 200, "another address keeps its share"
    phones = [join(f"phone-{n}", path="/class/gradio_api/queue/join")["status"]
              for n in range(3 * limits.CLIENT_SESSIONS + 1)]
    assert phones == [200] * (3 * limits.CLIENT_SESSIONS) + [429]
