"""Costly computations run in a process of their own: the same answers as here, their progress and problems
reported back, their CPU time charged, and a worker that dies started again with one sentence for its caller."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest
import torch

from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError
from transformer.inside import interventions
from ui.runtime import costly, worker
from ui.runtime.errors import as_user_message
from ui.runtime.language import said
from ui.tabs import explain as explain_tab
from ui.views.choices import NO_TRANSLATION, require_translation
from ui.views.lessons import LESSONS
from ui.views.questions import predict_question

from test_costly import own_user, visitor

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def german(app_services):
    return app_services.registry.get("multi30k-en-de")


def test_a_computation_runs_in_another_process_and_answers_as_it_would_here(german, translation):
    assert costly.WORKER.run(os.getpid) not in (os.getpid(), None)
    there = costly.WORKER.run(interventions.head_importance, german, translation)
    here = interventions.head_importance(german, translation)
    assert there.keys() == here.keys()
    for kind in here:
        torch.testing.assert_close(there[kind], here[kind])


def test_the_worker_computes_at_the_lowest_priority_so_translations_come_first():
    assert costly.WORKER.run(os.nice, 0) == worker.NICENESS == 19


def test_a_lessons_question_is_asked_of_the_models_by_name(app_services):
    there = costly.WORKER.run(predict_question, LESSONS[0], app_services.registry.on_disk())
    here = predict_question(LESSONS[0], app_services.registry.get)
    assert (there.text, there.choices, there.answer, there.why) == (here.text, here.choices, here.answer, here.why)
    with pytest.raises(CheckpointError, match="no checkpoint named 'multi30k-en-de'; choose one of none"):
        costly.WORKER.run(predict_question, LESSONS[0], worker.ModelsOnDisk({}, "cpu"))


def test_the_callers_callback_hears_each_report_in_order(german):
    reports = []
    order = interventions.pruning_order(german, "cross", seed=0)
    costly.WORKER.run(interventions.pruning_curve, german, ["A dog runs.", "Two men sit."], "cross", order[:3],
                      None, on_step=worker.Callback(lambda done, total: reports.append((done, total))))
    assert reports == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_a_problem_raised_there_reaches_the_caller_in_its_own_words():
    with pytest.raises(InputError) as raised:
        costly.WORKER.run(require_translation, None)
    assert str(raised.value) == NO_TRANSLATION
    assert any("Raised in the worker process" in note for note in raised.value.__notes__)


def test_costly_work_goes_to_the_worker_within_a_costly_event_and_is_computed_here_otherwise(german):
    """A lesson's Show me computes one sentence's view at once, never waiting behind another visitor's pruning."""
    work = costly.CostlyWork(seconds=1000, window_s=600)
    assert work.run(os.getpid) == os.getpid()
    with work.share(own_user()):
        assert work.run(os.getpid) != os.getpid()
    reports = []
    order = interventions.pruning_order(german, "cross", seed=0)[:1]
    work.run(interventions.pruning_curve, german, ["A dog runs."], "cross", order, None,
             on_step=worker.Callback(lambda done, total: reports.append(done)))
    assert reports == [1, 2], "here, a Callback is its callback"


def test_the_workers_cpu_time_is_charged_to_the_visitor_who_asked(app_services):
    budget = costly.CostlyWork(seconds=1000, window_s=600)
    with budget.share(visitor("198.51.100.30")):
        budget.run(interventions.mean_head_importance, app_services.registry.get("multi30k-en-de"),
                   ["A dog runs.", "Two men sit on a bench.", "A girl plays in the park."])
    [(_, charged)] = budget.spent["198.51.100.30"]
    assert charged > 0.05, "the worker's CPU time, not only this thread's few milliseconds of waiting"


def test_a_worker_that_dies_is_started_again_and_the_visitor_reads_one_sentence(app_services):
    before = costly.WORKER.run(os.getpid)

    def kill_the_worker(fraction, desc=None):
        if fraction:  # the first sentence is done: the worker is computing the next
            os.kill(before, signal.SIGKILL)

    with pytest.raises(gr.Error) as raised:
        with as_user_message("on_sample_agreement"), app_services.costly.share(own_user()):
            explain_tab.on_sample_agreement(app_services, "multi30k-en-de", "attention rollout", 1,
                                            progress=kill_the_worker)
    assert raised.value.message == str(worker.WorkerDied()) == (
        "The process that runs heavy computations stopped before this one finished (it may have run out of "
        "memory); it has been started again, so you may try once more.")
    after = costly.WORKER.run(os.getpid)
    assert after != before, "a new worker answers the next computation"


def test_the_worker_keeps_the_models_it_used_last_and_reloads_one_made_again(tmp_path):
    directories = []
    for name in ("a", "b", "c"):
        directories.append(str(tmp_path / name))
        shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", directories[-1])
    first = worker.loaded(directories[0], "cpu")
    assert worker.loaded(directories[0], "cpu") is first, "loaded once"
    worker.loaded(directories[1], "cpu")
    worker.loaded(directories[2], "cpu")
    assert [directory for directory, *_ in worker._models] == directories[1:]
    last = worker.loaded(directories[2], "cpu")
    shutil.rmtree(directories[2])
    with pytest.raises(CheckpointError, match="not found"):
        worker.loaded(directories[2], "cpu")
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", directories[2])
    assert worker.loaded(directories[2], "cpu") is not last, "a directory made anew is read anew"


def test_the_worker_ends_with_the_server_even_in_the_middle_of_a_computation():
    server = subprocess.Popen([sys.executable, "-c", (
        "import os, threading\n"
        "from ui.runtime import costly\n"
        "costly.WORKER.start()\n"
        "print(costly.WORKER.process.pid, flush=True)\n"
        "costly.WORKER.run(os.getpid)\n"  # started and serving
        "print('serving', flush=True)\n"
        "costly.WORKER.run(os.system, 'sleep 600')\n")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    worker_pid = int(server.stdout.readline())
    assert server.stdout.readline().strip() == "serving"
    server.kill()
    server.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and running(worker_pid):
        time.sleep(0.1)
    assert not running(worker_pid)


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet collected by init, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False



def test_stop_ends_a_costly_computation_at_its_next_report_and_frees_the_slot(german):
    """Gradio's cancel leaves a handler's thread running, waiting on the worker: Stop asks the costly work itself
    to end, and the worker's process ends with it."""
    import threading

    work = costly.CostlyWork(seconds=1000, window_s=600)
    page = gr.Request(headers={"x-forwarded-for": "203.0.113.9"}, client={"host": "10.0.0.2", "port": 4242},
                      session_hash="page-1")
    order = interventions.pruning_order(german, "cross", seed=0)
    reports, outcome = [], []
    before = work.worker.run(os.getpid)

    def event():
        try:
            with work.share(page):
                work.run(interventions.pruning_curve, german, ["A dog runs.", "Two men sit."], "cross", order, None,
                         on_step=worker.Callback(lambda done, total: (reports.append(done), work.stop(page))))
            outcome.append("finished")
        except worker.Stopped as stopped:
            outcome.append(said(stopped, "de"))

    running = threading.Thread(target=event)
    running.start()
    running.join()
    assert outcome == ["Angehalten."] and reports == [1], "it ended at the report after Stop"
    assert work.worker.run(os.getpid) != before, "the process that computed it was ended"
    with work.share(page):  # the next event of the same page is not stopped by the last one's Stop
        assert work.run(interventions.pruning_order, german, "cross", None, 0) == order
