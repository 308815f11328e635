"""Fixed-size runs: settings a TrainConfig takes for each kind of data, scaled to the updates the run has."""

import pytest

from transformer.train.recipes import KINDS, fixed_size_run
from transformer.train.settings import TrainConfig


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("steps", [10, 400, 3000])
def test_every_kind_gives_a_config_that_validates_with_warm_up_a_fifth_of_the_run_at_most(kind, steps):
    settings = fixed_size_run(kind, steps, pairs=1000)
    TrainConfig(steps=steps, **settings).validate()
    assert settings["warmup_steps"] <= steps // 5
    assert settings["eval_every"] <= max(50, steps // 8)


def test_the_digit_tasks_learn_without_dropout_and_text_with_the_presets_own():
    assert fixed_size_run("synthetic", 400)["model"] == {"dropout": 0.0}
    assert "model" not in fixed_size_run("multi30k", 400)


def test_an_uploads_vocabulary_is_bounded_by_its_size():
    assert fixed_size_run("upload", 400, pairs=600)["vocab_size"] == 300
    assert fixed_size_run("upload", 400, pairs=10)["vocab_size"] == 200
    assert fixed_size_run("upload", 400, pairs=10**6)["vocab_size"] == 8000


def test_an_unknown_kind_is_named():
    with pytest.raises(ValueError, match="no recipe for 'poetry'"):
        fixed_size_run("poetry", 400)
