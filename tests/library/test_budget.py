"""Planning for a time budget: longer budgets get larger models, small corpora smaller vocabularies, and the
digit tasks the tiny model."""

import pytest

from transformer.budget import CPU_PLANS, plan_for_budget
from transformer.config import PRESETS


def size(plan) -> int:
    sizes = plan.sizes()
    return sizes["d_model"] ** 2 * (sizes["n_encoder_layers"] + sizes["n_decoder_layers"])


def test_longer_budgets_get_models_at_least_as_large():
    plans = [plan_for_budget(minutes) for minutes in (1, 5, 15, 60, 240)]
    assert all(size(a) <= size(b) for a, b in zip(plans, plans[1:]))
    assert size(plans[0]) < size(plans[-1])
    assert plans[-1].model["d_model"] == PRESETS["small"]["d_model"], "a long budget trains the small preset"


def test_every_budget_has_one_plan_and_plans_cover_all_budgets():
    limits = [plan.up_to_minutes for plan in CPU_PLANS]
    assert limits == sorted(limits) and limits[-1] == float("inf")
    assert plan_for_budget(limits[0]) is CPU_PLANS[0] and plan_for_budget(limits[0] + 0.01) is CPU_PLANS[1]


def test_a_small_corpus_bounds_the_vocabulary():
    assert plan_for_budget(5, pairs=1000).vocab_size == 500
    assert plan_for_budget(5, pairs=100).vocab_size == 200
    assert plan_for_budget(5, pairs=10**6).vocab_size == plan_for_budget(5).vocab_size


def test_digit_tasks_keep_the_tiny_model_and_a_gpu_gets_larger_models_sooner():
    digits = plan_for_budget(5, synthetic=True)
    assert digits.base == "tiny" and digits.vocab_size is None, "the digit tasks keep their own symbols"
    assert size(plan_for_budget(5, "cuda")) >= size(plan_for_budget(5, "cpu"))


@pytest.mark.parametrize("minutes", [0, -1, float("nan")])
def test_a_budget_must_be_some_time(minutes):
    with pytest.raises(ValueError, match="positive number of minutes"):
        plan_for_budget(minutes)


def test_a_plan_describes_itself_for_people():
    line = plan_for_budget(5).describe()
    assert line.startswith("d_model ") and "vocabulary" in line and "warm-up" in line
