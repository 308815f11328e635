"""A process computes on as many threads as the cores nothing else keeps busy as it starts (transformer/cpu.py):
torch's default of one per core lost 1.5-1.8x beside a busy core on two cores, and won 1.3-1.4x alone."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer import arguments, cpu


@pytest.mark.parametrize("busy, threads", [(0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (1.9, 1), (6.0, 1)])
def test_threads_are_the_cores_nothing_else_keeps_busy_and_at_least_one(busy, threads):
    assert cpu.threads_for_machine(cores=2, busy=busy) == threads


def test_busy_cores_are_the_cpu_seconds_other_processes_spent_over_the_wait():
    samples = iter([{10: 5.0, 11: 1.0, 12: 3.0}, {10: 5.15, 11: 1.05, 13: 9.0}])  # 12 ended, 13 started meanwhile
    times = iter([100.0, 100.0, 100.2])  # the first reading, the time left to wait, the second reading
    waited = []
    busy = cpu.busy_cores(sample_s=0.2, read=lambda: next(samples), clock=lambda: next(times), sleep=waited.append)
    assert waited == [0.2] and busy == pytest.approx(1.0)


def test_busy_cores_counted_since_an_earlier_reading_wait_only_for_what_is_left_of_the_sample():
    recent = cpu.OthersUse(at=99.95, seconds={10: 5.0})
    times, waited = iter([100.0, 100.05]), []  # the time left to wait, the second reading
    busy = cpu.busy_cores(recent, sample_s=0.1, read=lambda: {10: 5.05}, clock=lambda: next(times),
                          sleep=waited.append)
    assert waited == [pytest.approx(0.05)] and busy == pytest.approx(0.5)
    long_ago = cpu.OthersUse(at=100.0, seconds={10: 5.0})
    times = iter([101.0, 101.0])
    assert cpu.busy_cores(long_ago, read=lambda: {10: 5.5}, clock=lambda: next(times), sleep=waited.append) == 0.5
    assert len(waited) == 1, "a reading taken long enough ago is not waited on"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="other processes' CPU time is read from Linux's /proc")
def test_a_process_spinning_beside_this_one_is_seen_as_a_busy_core():
    spinning = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert spinning.stdout.readline().strip() == "spinning"
        assert spinning.pid in cpu.cpu_seconds_of_others()
        assert cpu.busy_cores(sample_s=0.3) >= 0.5, "a core it kept busy at least half the time"
        assert cpu.threads_for_machine(cores=2) == 1
    finally:
        spinning.kill()
        spinning.wait()


def test_a_count_given_wins_then_omp_num_threads_then_the_machine(monkeypatch):
    monkeypatch.setattr(cpu, "threads_for_machine", lambda busy=None: 7)
    monkeypatch.setattr(cpu, "busy_cores", lambda since=None: 0.0)
    monkeypatch.setattr(cpu, "cores_available", lambda: 8)
    assert cpu.threads_to_use(3) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))
    assert cpu.threads_to_use() == torch.get_num_threads(), "torch's own variable, where set, stands"
    monkeypatch.setenv("OMP_NUM_THREADS", " ")
    assert cpu.threads_to_use() == 7
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpu.threads_to_use() == 7
    monkeypatch.setattr(cpu, "cores_available", lambda: 1)
    assert cpu.threads_to_use() == 1, "one core: nothing to look at"


def test_a_command_computes_on_the_cores_left_to_it_and_leaves_the_threads_as_they_were(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu, "busy_cores", lambda since=None: 1.0)
    monkeypatch.setattr(cpu, "cores_available", lambda: 2)
    before, seen = torch.get_num_threads(), []
    parser = arguments.CommandLine("example", "a command that notes its threads")
    assert arguments.run(parser, lambda args: seen.append(torch.get_num_threads()), []) == 0
    assert seen == [1] and torch.get_num_threads() == before
    parser.add_argument("--threads", type=int)
    arguments.run(parser, lambda args: seen.append(torch.get_num_threads()), ["--threads", "2"])
    assert seen[-1] == 2 and torch.get_num_threads() == before, "a command's own --threads wins"
