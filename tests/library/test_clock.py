"""A run's clock: measuring and earlier segments count, the time limit ends the run, warm-up's end is noted once."""

import pytest
import torch

from transformer.train import clock as clock_module
from transformer.train.clock import THROUGHPUT_WINDOW_S, RunClock, Throughput
from transformer.train.processes import Processes

ONE_CPU_PROCESS = Processes(distributed=False, rank=0, world_size=1, device=torch.device("cpu"))


class FakeTime:
    """time.monotonic, moved by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def now(monkeypatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(clock_module.time, "monotonic", fake)
    return fake


def test_the_clock_counts_measuring_for_the_plan_and_this_segment_from_its_start(now):
    clock = RunClock(max_minutes=1.0, processes=ONE_CPU_PROCESS, measuring_s=4.0)
    now.now += 30  # data and tokenizers: not on the clock
    assert clock.elapsed_s() == 4.0
    clock.start()
    now.now += 50
    assert clock.elapsed_s() == 54.0 and not clock.out_of_time()
    now.now += 7
    assert clock.out_of_time() and clock.agreed_elapsed_s() == 61.0


def test_without_a_time_limit_the_run_never_runs_out_of_time_and_the_schedule_reads_no_clock(now):
    clock = RunClock(max_minutes=None, processes=ONE_CPU_PROCESS)
    clock.start()
    now.now += 10**6
    assert not clock.out_of_time() and clock.agreed_elapsed_s() is None


def test_warm_up_ends_on_the_clock_at_the_update_that_completes_it_and_only_then(now):
    clock = RunClock(max_minutes=1.0, processes=ONE_CPU_PROCESS)
    clock.start()
    now.now += 3
    clock.after_update(step=9, warmup_steps=10)
    assert clock.warmup_end_s is None
    clock.after_update(step=10, warmup_steps=10)
    now.now += 3
    clock.after_update(step=11, warmup_steps=10)
    assert clock.warmup_end_s == 3.0


def test_a_resumed_clock_goes_on_from_the_saved_one_plus_its_own_measuring(now):
    first = RunClock(max_minutes=5.0, processes=ONE_CPU_PROCESS)
    first.start()
    now.now += 2
    first.after_update(step=1, warmup_steps=1)
    now.now += 40
    saved = first.state()
    assert saved == {"elapsed_s": 42.0, "warmup_end_s": 2.0}
    resumed = RunClock(max_minutes=5.0, processes=ONE_CPU_PROCESS, measuring_s=1.0)
    resumed.resume(saved, warmed_up=True)
    resumed.start()
    now.now += 5
    assert resumed.elapsed_s() == 48.0 and resumed.warmup_end_s == 2.0


def test_a_run_saved_before_the_clock_was_saved_starts_it_again_at_its_warm_up_if_past_it():
    clock = RunClock(max_minutes=5.0, processes=ONE_CPU_PROCESS)
    clock.resume({}, warmed_up=True)
    assert clock.elapsed_s() == 0.0 and clock.warmup_end_s == 0.0
    clock.resume({}, warmed_up=False)
    assert clock.warmup_end_s is None


def test_throughput_counts_the_tokens_of_all_processes_over_a_recent_window(now):
    throughput = Throughput(processes=2)
    now.now += 2
    assert throughput.add(100) == 100.0  # 200 tokens in 2 s
    now.now += THROUGHPUT_WINDOW_S
    assert throughput.add(1100) == pytest.approx(2 * 1200 / (2 + THROUGHPUT_WINDOW_S))
    now.now += 1
    assert throughput.add(50) == 100.0, "a new window began after the last"
