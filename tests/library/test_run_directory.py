"""A run's directory: logs, probes and the step checkpoints it keeps; only the writing process touches it."""

import json

from transformer.train.run_directory import LOG_EVERY, RunDirectory, step_name


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_updates_are_logged_the_first_and_every_so_many_and_evaluations_every_one(tmp_path):
    directory = RunDirectory(tmp_path / "run")
    for step in range(1, 2 * LOG_EVERY + 1):
        directory.log_update({"step": step, "loss": 1.0})
    directory.log({"event": "eval", "step": 2 * LOG_EVERY})
    directory.add_probe({"step": 2 * LOG_EVERY, "cross": []})
    assert [(r["event"], r["step"]) for r in records(tmp_path / "run" / "log.jsonl")] == \
        [("step", 1), ("step", LOG_EVERY), ("step", 2 * LOG_EVERY), ("eval", 2 * LOG_EVERY)]
    assert records(tmp_path / "run" / "probes.jsonl") == [{"step": 2 * LOG_EVERY, "cross": []}]


def test_only_the_last_step_checkpoints_are_kept(tmp_path):
    directory = RunDirectory(tmp_path, keep=2)
    for step in (10, 20, 30):
        (tmp_path / step_name(step)).mkdir()
    (tmp_path / "last").mkdir()
    directory.prune_step_checkpoints()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last", "step-000020", "step-000030"]


def test_a_process_that_does_not_write_leaves_the_directory_alone(tmp_path):
    (tmp_path / step_name(10)).mkdir()
    (tmp_path / step_name(20)).mkdir()
    directory = RunDirectory(tmp_path / "other", writes=False, keep=0)
    directory.open(step=0)
    directory.log({"event": "eval", "step": 1})
    directory.add_probe({"step": 1})
    directory.add_command("python -m transformer.train")
    assert directory.save("last", None, None, None, {}) is None and directory.average_last(5) is None
    RunDirectory(tmp_path, writes=False, keep=0).prune_step_checkpoints()
    assert not (tmp_path / "other").exists() and len(list(tmp_path.glob("step-*"))) == 2


def test_averaging_needs_two_step_checkpoints(tmp_path):
    (tmp_path / step_name(10)).mkdir()
    assert RunDirectory(tmp_path).average_last(5) is None and not (tmp_path / "averaged").exists()
    assert RunDirectory(tmp_path).average_last(1) is None
