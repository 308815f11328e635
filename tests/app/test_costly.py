"""Costly events are shared fairly: one at a time, leaving a core to translations, within each visitor's budget of
CPU-seconds, with the memory they freed handed back."""

import sys
import threading

import gradio as gr
import pytest
import torch

from helpers import QuickTrainer
from page_driver import PageDriver
from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui.training import jobs
from ui import services
from ui.runtime import costly, memory
from ui.build import build_app

COSTLY_HANDLERS = {"on_sample_agreement", "on_attribute", "on_prune", "on_importance", "on_importance_sample",
                   "on_patch", "on_contrast", "on_statistics_sample", "on_tree"}


def visitor(address: str = "203.0.113.9") -> gr.Request:
    """A request as a Space's proxy forwards it: from a private address, the visitor's address appended."""
    return gr.Request(headers={"x-forwarded-for": address}, client={"host": "10.0.0.2", "port": 4242})


def own_user() -> gr.Request:
    return gr.Request(headers={}, client={"host": "127.0.0.1", "port": 4242})


def test_a_client_within_its_budget_waits_for_nothing():
    budget = costly.CostlyWork(seconds=100, window_s=600)
    budget.charge("a", 60, now=0)
    assert budget.wait_s("a", now=10) == 0
    assert budget.wait_s("b", now=10) == 0


def test_a_client_past_its_budget_waits_until_enough_of_it_leaves_the_window():
    budget = costly.CostlyWork(seconds=100, window_s=600)
    budget.charge("a", 60, now=0)
    budget.charge("a", 30, now=100)
    budget.charge("a", 30, now=200)  # 120 spent: back under 100 once the first 60 leave, at 600
    assert budget.wait_s("a", now=250) == pytest.approx(350)
    assert budget.wait_s("a", now=601) == 0
    assert budget.wait_s("other", now=250) == 0


def test_the_budget_is_read_from_the_environment_blank_meaning_the_default(monkeypatch):
    monkeypatch.setenv("EXPLORER_COSTLY_CPU_SECONDS", "45")
    monkeypatch.setenv("EXPLORER_COSTLY_WINDOW_S", " ")
    budget = costly.CostlyWork()
    assert (budget.seconds, budget.window_s) == (45, 600)


def test_a_visitor_past_the_budget_is_told_when_to_come_back_and_the_event_does_not_run():
    budget = costly.CostlyWork(seconds=1, window_s=600)
    budget.charge("203.0.113.9", 5)
    ran = []
    with pytest.raises(InputError, match=r"continue in \d+ seconds"):
        with budget.share(visitor()):
            ran.append(True)
    assert not ran
    with budget.share(visitor("203.0.113.10")):  # another visitor is not held up
        ran.append(True)
    assert ran == [True]


def test_costly_events_run_one_at_a_time_and_a_visitor_has_one_in_line():
    work = costly.CostlyWork(seconds=1000, window_s=600)
    first_running, release, order = threading.Event(), threading.Event(), []

    def run(request, name, hold=False):
        with work.share(request):
            order.append(f"{name} starts")
            if hold:
                first_running.set()
                release.wait()
            order.append(f"{name} ends")

    first = threading.Thread(target=run, args=(visitor("203.0.113.1"), "first", True))
    second = threading.Thread(target=run, args=(visitor("203.0.113.2"), "second"))
    first.start()
    first_running.wait()
    second.start()
    with pytest.raises(InputError, match="still running or waiting"):
        run(visitor("203.0.113.1"), "first again")
    release.set()
    first.join()
    second.join()
    assert order == ["first starts", "first ends", "second starts", "second ends"]
    run(visitor("203.0.113.1"), "first's next")  # once done, the visitor may start another
    assert order[-1] == "first's next ends"


def test_the_cpu_time_of_a_costly_event_is_charged_to_its_visitor_and_not_to_this_machines_user():
    budget = costly.CostlyWork(seconds=1000, window_s=600)
    with budget.share(visitor()):
        torch.randn(400, 400).matmul(torch.randn(400, 400)).sum()
        sum(i * i for i in range(300_000))
    with budget.share(own_user()):
        sum(i * i for i in range(300_000))
    assert list(budget.spent) == ["203.0.113.9"]
    [(_, charged)] = budget.spent["203.0.113.9"]
    assert 0.005 < charged < 5


def resident_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's, VmRSS Linux's")
def test_memory_freed_after_costly_work_or_a_job_goes_back_to_the_system():
    blocks = [bytearray(64 * 1024) for _ in range(3200)]  # 200 MB in pieces glibc keeps in its heap once freed
    pinned = bytearray(64 * 1024)  # above them, so the heap cannot simply shrink from its top
    del blocks
    freed_but_held = resident_mb()
    assert memory.release_memory(collect=False) is True
    assert freed_but_held - resident_mb() > 150
    del pinned


@pytest.fixture
def torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def in_new_thread(fn):
    answers = []
    thread = threading.Thread(target=lambda: answers.append(fn()))
    thread.start()
    thread.join()
    return answers[0]


def test_costly_work_takes_half_the_cores_and_ordinary_events_the_rest_meanwhile(torch_threads):
    cores = costly.Cores(total=4)
    assert in_new_thread(cores.for_ordinary_event) == 4
    with cores.reserve() as reserved:
        assert reserved == torch.get_num_threads() == 2
        assert in_new_thread(cores.for_ordinary_event) == 2
        assert in_new_thread(torch.get_num_threads) == 2  # why every ordinary event sets its count
    assert torch.get_num_threads() == 4
    assert in_new_thread(cores.for_ordinary_event) == 4


def test_a_single_core_is_shared_by_everyone(torch_threads):
    cores = costly.Cores(total=1)
    with cores.reserve() as reserved:
        assert reserved == 1 and in_new_thread(cores.for_ordinary_event) == 1


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    manager = jobs.JobManager(tmp_path_factory.mktemp("runs"), trainer=QuickTrainer)
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS, manager.published_dir], device="cpu")
    shared = services.Services(registry, manager, costly=costly.CostlyWork(seconds=0.001, window_s=600))
    yield build_app(shared, "reverse-tiny")
    manager.stop()
    manager.wait(60)


def test_the_costly_events_run_one_at_a_time_in_one_group(demo):
    groups = {event.name: (event.concurrency_id, event.concurrency_limit) for event in demo.fns.values()}
    group = (costly.CONCURRENCY["concurrency_id"], costly.CONCURRENCY["concurrency_limit"])
    assert {name: groups[name] for name in COSTLY_HANDLERS} == {name: group for name in COSTLY_HANDLERS}
    assert groups["on_translate_click"][0] != "costly"


def test_a_visitor_who_spent_the_budget_gets_a_warning_and_keeps_what_the_page_shows(demo):
    page = PageDriver(demo)
    page.run(page.event("on_open", "ui.tabs.header"))
    page.run(page.event("on_translate_click"))
    event, plot = page.event("on_importance"), demo.named_components["importance_plot"]
    page.run(event, request=visitor("198.51.100.4"))
    shown = page.value(plot)
    assert shown is not None  # the first one runs: the budget was not spent yet
    with pytest.warns(UserWarning, match="continue in"):
        again = page.run(event, request=visitor("198.51.100.4"))
    assert all(value == gr.skip() for value in again.values()) and page.value(plot) is shown
    page.run(event, request=own_user())
    assert page.value(plot) is not shown
