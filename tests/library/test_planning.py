"""Choosing a run's settings: one function for the command line and the app, by kind of data, size, updates or
minutes, and corpus size."""

import pytest
import torch

from transformer.train.budget import SYNTHETIC_PLAN, Speed
from transformer.train.calibrate import CorpusShape, Measurement
from transformer.train.planning import (CLOCK_EVALUATIONS, KINDS, QUICK_EVAL_SENTENCES, data_kind, plan_for,
                                        planned_config, run_settings, tuned_for_updates)
from transformer.train.processes import Processes
from transformer.train.settings import AUTO_PRESET, TrainConfig

ONE_CPU_PROCESS = Processes(distributed=False, rank=0, world_size=1, device=torch.device("cpu"))


def test_the_kind_of_data_is_the_digit_tasks_multi30k_or_an_uploaded_file():
    assert [data_kind(d) for d in ("copy", "reverse", "sort", "multi30k", "runs/upload-1.tsv")] == \
        ["synthetic", "synthetic", "synthetic", "multi30k", "upload"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("steps", [10, 400, 3000])
def test_every_kind_gives_a_config_that_validates_with_warm_up_a_fifth_of_the_run_at_most(kind, steps):
    settings = tuned_for_updates(kind, steps, pairs=1000)
    TrainConfig(steps=steps, **settings).validate()
    assert settings["warmup_steps"] <= steps // 5
    assert settings["eval_every"] <= max(50, steps // 8)


def test_the_digit_tasks_learn_without_dropout_and_text_with_the_presets_own():
    assert tuned_for_updates("synthetic", 400)["model"] == {"dropout": 0.0}
    assert "model" not in tuned_for_updates("multi30k", 400)


def test_an_uploads_vocabulary_is_bounded_by_its_size():
    assert tuned_for_updates("upload", 400, pairs=600)["vocab_size"] == 300
    assert tuned_for_updates("upload", 400, pairs=10)["vocab_size"] == 200
    assert tuned_for_updates("upload", 400, pairs=10**6)["vocab_size"] == 8000


def test_an_unknown_kind_is_named():
    with pytest.raises(ValueError, match="no settings for data of kind 'poetry'"):
        tuned_for_updates("poetry", 400)


def test_a_short_run_of_a_chosen_size_is_tuned_for_its_updates_and_evaluates_by_the_clock_too():
    settings = run_settings("upload", "small", steps=400, minutes=5.0, pairs=600, short_run=True)
    assert settings == {"preset": "small", "max_minutes": 5.0, "steps": 400, "schedule": "cosine",
                        "eval_every_minutes": 5.0 / CLOCK_EVALUATIONS, **tuned_for_updates("upload", 400, 600)}
    TrainConfig(**settings).validate()


def test_a_planned_run_leaves_size_batch_and_schedule_to_the_plan_made_when_it_starts():
    assert run_settings("multi30k", AUTO_PRESET, steps=400, minutes=5.0, short_run=True) == \
        {"preset": AUTO_PRESET, "max_minutes": 5.0, "eval_sentences": QUICK_EVAL_SENTENCES}
    assert run_settings("synthetic", AUTO_PRESET, minutes=5.0, short_run=True) == \
        {"preset": AUTO_PRESET, "max_minutes": 5.0}, "the digit tasks' validation set is quick to decode whole"
    assert run_settings("multi30k", AUTO_PRESET, minutes=5.0, given={"lr": 2e-3}) == \
        {"preset": AUTO_PRESET, "max_minutes": 5.0, "lr": 2e-3}, "what was set by hand, the plan keeps"


def test_other_runs_take_the_configs_defaults_and_what_was_set_by_hand_wins():
    assert run_settings("multi30k", "small", steps=3600, given={"lr": 1.5e-3}) == \
        {"preset": "small", "max_minutes": None, "steps": 3600, "lr": 1.5e-3}
    tuned = run_settings("synthetic", "tiny", steps=400, short_run=True, given={"lr": 1e-2, "max_tokens": 500})
    assert tuned["lr"] == 1e-2 and tuned["max_tokens"] == 500 and tuned["warmup_steps"] == 80


def test_only_a_planned_run_is_planned_and_the_digit_tasks_need_no_measuring(tmp_path):
    fixed = TrainConfig(preset="tiny", max_minutes=1.0)
    assert planned_config(fixed, None, ONE_CPU_PROCESS, bf16=False) == (fixed, None, 0.0)
    config, plan, measuring_s = planned_config(TrainConfig(preset=AUTO_PRESET, max_minutes=1.0), None,
                                               ONE_CPU_PROCESS, bf16=False)
    assert plan == SYNTHETIC_PLAN and measuring_s == 0.0
    assert config.plan == AUTO_PRESET and config.preset == SYNTHETIC_PLAN.base and config.lr == SYNTHETIC_PLAN.lr


def test_auto_plans_the_digit_tasks_alike_and_a_corpus_by_the_speed_measured():
    assert plan_for("synthetic", 5.0) == SYNTHETIC_PLAN
    shape = CorpusShape(((12, 13),) * 300)
    speeds = Measurement({"d128": Speed(0.39, 2070), "d192": Speed(0.56, 2070), "d256": Speed(1.5, 3300),
                          "d512": Speed(12.0, 13000)}, seconds=4.0)
    text = plan_for("multi30k", 5.0, shape, speeds)
    upload = plan_for("upload", 5.0, shape, speeds)
    assert text == speeds.plan(5.0, shape) and upload == speeds.plan(5.0, shape, shape.pairs)
