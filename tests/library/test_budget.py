"""Planning for a time budget: the plan is a pure function of the budget, the measured speeds and the corpus, chosen
by the work they buy. More work never gives a smaller model, more epochs never less dropout, a faster machine gets
what a longer budget gets, and sizes never measured are never chosen."""

import itertools

import pytest

from transformer.train.budget import LADDER, Speed, dropout_for_epochs, plan_for_work, warmup_for_updates

EPOCH_TOKENS = 480_000  # Multi30K's target pieces, about
# Seconds per update as measured on the 2-core AMD EPYC, roughly, and the target tokens an update holds.
AMD = {"d128": Speed(0.39, 2070), "d192": Speed(0.56, 2070), "d256": Speed(1.5, 3300), "d512": Speed(12.0, 13000)}


def faster(speeds: dict, factor: float) -> dict:
    return {name: Speed(speed.update_s / factor, speed.tokens_per_update) for name, speed in speeds.items()}


def rung(plan) -> int:
    """The plan's place on the ladder of sizes."""
    return next(i for i, size in enumerate(LADDER) if size.model["d_model"] == plan.model["d_model"])


MINUTES = (0.2, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 45, 60, 120, 240, 600)
FACTORS = (0.5, 1, 1.5, 2, 3, 5, 10, 30, 100, 300)


def test_more_work_never_gives_a_smaller_model():
    for factor in FACTORS:  # longer budgets on one machine
        plans = [plan_for_work(minutes, faster(AMD, factor), EPOCH_TOKENS) for minutes in MINUTES]
        assert [rung(p) for p in plans] == sorted(rung(p) for p in plans), f"{factor}x the AMD machine"
    for minutes in MINUTES:  # faster machines in one budget
        plans = [plan_for_work(minutes, faster(AMD, factor), EPOCH_TOKENS) for factor in FACTORS]
        assert [rung(p) for p in plans] == sorted(rung(p) for p in plans), f"{minutes} minutes"


def test_more_epochs_never_less_dropout():
    epochs = [e / 4 for e in range(0, 400)]
    dropouts = [dropout_for_epochs(e) for e in epochs]
    assert dropouts == sorted(dropouts)
    assert dropouts[0] == (0.0, 0.0) and dropouts[-1] == (0.3, 0.1), "none for a few passes, the bundled 0.3 at many"
    for minutes, factor in itertools.product(MINUTES, FACTORS):
        plan = plan_for_work(minutes, faster(AMD, factor), EPOCH_TOKENS)
        assert (plan.model["dropout"], plan.model["attention_dropout"]) == dropout_for_epochs(plan.expected_epochs)


def test_the_plan_follows_the_work_not_the_minutes():
    """A machine three times as fast gets in 5 minutes what the slower one gets in 15: the model, the dropout and
    the schedule."""
    fast, slow = plan_for_work(5, faster(AMD, 3), EPOCH_TOKENS), plan_for_work(15, AMD, EPOCH_TOKENS)
    assert (fast.model, fast.max_tokens, fast.lr) == (slow.model, slow.max_tokens, slow.lr)
    assert abs(fast.expected_updates - slow.expected_updates) <= 1
    assert fast.warmup_steps == slow.warmup_steps


def test_on_the_amd_machine_the_plans_are_the_measured_best():
    """d_model 128 for a minute, 192 from five minutes; no dropout for the few epochs of 15 minutes, some for the
    thirteen of 30; the bundled recipe's size once its 3,000 updates fit."""
    assert rung(plan_for_work(1, AMD, EPOCH_TOKENS)) == 0
    five, fifteen, thirty = (plan_for_work(minutes, AMD, EPOCH_TOKENS) for minutes in (5, 15, 30))
    assert rung(five) == rung(fifteen) == rung(thirty) == 1
    assert fifteen.model["dropout"] == 0 and thirty.model["dropout"] > 0
    assert five.expected_updates < fifteen.expected_updates < thirty.expected_updates
    assert rung(plan_for_work(120, AMD, EPOCH_TOKENS)) == 2


def test_a_gpu_gets_a_larger_model_from_its_measured_speed_alone():
    gpu = faster(AMD, 100)
    assert rung(plan_for_work(15, gpu, EPOCH_TOKENS)) == len(LADDER) - 1, "the paper's base model"
    assert plan_for_work(15, gpu, EPOCH_TOKENS).model["n_heads"] == 8
    assert rung(plan_for_work(5, gpu, EPOCH_TOKENS)) > rung(plan_for_work(5, AMD, EPOCH_TOKENS))


def test_a_size_never_measured_is_never_chosen_and_the_smallest_must_be():
    assert rung(plan_for_work(600, {"d128": AMD["d128"]}, EPOCH_TOKENS)) == 0
    with pytest.raises(ValueError, match="smallest size, d128, must be measured"):
        plan_for_work(5, {"d192": AMD["d192"]}, EPOCH_TOKENS)


def test_time_spent_measuring_is_time_not_trained():
    measured_for_30_s = plan_for_work(5, AMD, EPOCH_TOKENS, spent_s=30)
    assert measured_for_30_s.expected_updates == plan_for_work(4.5, AMD, EPOCH_TOKENS).expected_updates
    assert measured_for_30_s.expected_updates < plan_for_work(5, AMD, EPOCH_TOKENS).expected_updates


def test_expected_epochs_are_the_updates_tokens_over_the_corpus():
    plan = plan_for_work(15, AMD, EPOCH_TOKENS)
    assert plan.expected_epochs == pytest.approx(plan.expected_updates * 2070 / EPOCH_TOKENS, abs=0.05)
    assert plan_for_work(15, AMD, EPOCH_TOKENS // 10).expected_epochs == pytest.approx(10 * plan.expected_epochs,
                                                                                         rel=0.01)


def test_warm_up_grows_with_the_run_within_bounds():
    assert [warmup_for_updates(u) for u in (0, 1000, 1600, 3200, 8000, 10**6)] == [100, 100, 100, 200, 500, 500]


def test_a_small_corpus_bounds_the_vocabulary():
    assert plan_for_work(5, AMD, EPOCH_TOKENS, pairs=1000).vocab_size == 500
    assert plan_for_work(5, AMD, EPOCH_TOKENS, pairs=100).vocab_size == 200
    assert plan_for_work(5, AMD, EPOCH_TOKENS, pairs=10**6).vocab_size == plan_for_work(5, AMD, EPOCH_TOKENS).vocab_size


@pytest.mark.parametrize("minutes", [0, -1, float("nan")])
def test_a_budget_must_be_some_time(minutes):
    with pytest.raises(ValueError, match="positive number of minutes"):
        plan_for_work(minutes, AMD, EPOCH_TOKENS)


def test_a_plan_says_what_it_expects_and_why():
    line = plan_for_work(15, AMD, EPOCH_TOKENS).describe()
    assert line.startswith("d_model 192, 2+2 layers") and "vocabulary 4,000" in line and "warm-up" in line
    assert "expects about 1," in line and "epochs" in line and "target tokens/s measured" in line
    assert "d_model 256 would make" in line and "of the 3,000 it needs" in line
