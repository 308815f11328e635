"""Attribution of each output token to the source: gradients that obey their own axioms, rollout that is a
distribution, and a command line that speaks translate's --json language."""

import copy
import json
from pathlib import Path

import math
import statistics

import pytest
import torch

from helpers import run_command
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import attribution
from transformer.paper.translation import translate

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = ["A dog runs across the grass.", "Two children are playing football on the beach."]


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


@pytest.fixture(scope="module")
def translations(bundled):
    return [translate(bundled.model, bundled.source_tokenizer, bundled.target_tokenizer, text, beam_size=5,
                      length_penalty=bundled.length_penalty) for text in SENTENCES]


def test_integrated_gradients_with_64_steps_add_up_to_the_change_in_log_probability(bundled, translations):
    gaps = torch.cat([attribution.integrated_gradients(bundled.model, t, steps=64).completeness_gap
                      for t in translations])
    assert gaps.median() < 0.05, gaps


def test_integrated_gradients_point_each_noun_at_its_english_noun(bundled, translations):
    dog = translations[0]
    scores = attribution.integrated_gradients(bundled.model, dog, steps=32).scores
    assert scores.shape == (dog.num_steps, len(dog.source_ids))
    for german, english in (("▁Hund", "▁dog"), ("▁Gras", "▁grass"), ("▁rennt", "▁runs")):
        row = dog.predicted_pieces.index(german)
        assert dog.source_pieces[int(scores[row].argmax())] == english


def test_gradient_times_input_sums_to_the_directional_derivative_along_the_input(bundled, translations):
    model = copy.deepcopy(bundled.model).double()  # float64, so a finite difference is exact enough to compare
    dog = translations[0]
    scores = attribution.gradient_x_input(model, dog).scores
    embeddings = attribution._source_embeddings(model, dog)
    epsilon = 1e-5
    with torch.no_grad():
        ends = attribution._target_log_probs(model, dog, torch.cat([(1 + epsilon) * embeddings,
                                                                  (1 - epsilon) * embeddings]))
    derivative = (ends[0] - ends[1]) / (2 * epsilon)
    torch.testing.assert_close(scores.sum(-1), derivative, atol=1e-6, rtol=1e-4)


def test_rollout_rows_are_distributions_over_the_source(translations):
    for t in translations:
        rolled = attribution.rollout(t).scores
        assert rolled.shape == (t.num_steps, len(t.source_ids))
        assert (rolled >= 0).all()
        torch.testing.assert_close(rolled.sum(-1), torch.ones(t.num_steps))
        encoder = attribution.encoder_rollout(t)
        torch.testing.assert_close(encoder.sum(-1), torch.ones(len(t.source_ids)))


def test_rollout_of_one_layer_is_half_attention_half_identity():
    attention = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    torch.testing.assert_close(attribution._with_residual(attention), torch.tensor([[0.5, 0.5], [0.5, 0.5]]))


def test_agreement_counts_matching_favourites_and_correlates_ranks():
    attention = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    assert attribution.agreement(attention, attention) == (1.0, pytest.approx(1.0))
    reversed_ranks = torch.tensor([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    top, correlation = attribution.agreement(attention, reversed_ranks)
    assert top == 0.0 and correlation == pytest.approx(-1.0)


def test_rank_correlation_breaks_ties_by_position_and_is_undefined_below_two_values():
    assert attribution.spearman(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([10.0, 30.0, 20.0, 40.0])) == \
        pytest.approx(0.8)  # ranks 0 1 2 3 against 0 2 1 3: 1 - 6 * 2 / (4 * 15)
    assert attribution.spearman(torch.tensor([5.0, 5.0, 1.0]), torch.tensor([2.0, 3.0, 1.0])) == pytest.approx(1.0)
    assert math.isnan(attribution.spearman(torch.tensor([1.0]), torch.tensor([2.0])))
    assert attribution.spearman(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 1.0])) == pytest.approx(-1.0)
    tied = [float(i % 3 == 0) for i in range(20)]  # long enough that a sort need not keep ties in place
    other = [float((7 * i) % 20) for i in range(20)]
    ranks = lambda values: [sorted(range(len(values)), key=values.__getitem__).index(i)  # noqa: E731
                            for i in range(len(values))]
    expected = statistics.correlation(ranks(tied), ranks(other))
    assert attribution.spearman(torch.tensor(tied), torch.tensor(other)) == pytest.approx(expected)
    assert attribution.spearman(torch.tensor(other), torch.tensor(tied)) == pytest.approx(expected)


def test_agreement_is_a_share_of_rows_and_a_mean_of_correlations():
    attention = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.2, 0.5, 0.3]])
    evidence = torch.tensor([[0.9, 0.05, 0.05], [0.6, 0.3, 0.1], [0.1, 0.6, 0.3]])
    top, correlation = attribution.agreement(attention, evidence)
    assert top == pytest.approx(2 / 3)
    expected = [attribution.spearman(a, e) for a, e in zip(attention, evidence)]
    assert correlation == pytest.approx(sum(expected) / 3)


def test_each_method_names_itself_and_an_unknown_one_is_refused(translations):
    translation = translations[0]
    assert attribution.attribute(None, translation, "rollout").method == "rollout"
    with pytest.raises(ValueError, match="method must be one of gradient_x_input, integrated_gradients, rollout"):
        attribution.attribute(None, translation, "saliency")


def run_cli(*args):
    return run_command("transformer.attribute", *args)


def test_the_command_line_prints_attributions_with_translates_tokens():
    done = run_cli(SENTENCES[0], "--method", "integrated_gradients", "--steps", "16", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    full = json.loads(run_command("transformer.translate", "--json", SENTENCES[0]).stdout.splitlines()[-1])
    assert report["translation"] == full["translation"]
    assert report["source_tokens"] == full["source_tokens"] and report["target_tokens"] == full["target_tokens"]
    assert len(report["attribution"]) == len(report["target_tokens"]) == len(report["completeness_gap"])
    assert all(len(row) == len(report["source_tokens"]) for row in report["attribution"])
    rolled = json.loads(run_cli(SENTENCES[0], "--method", "rollout", "--json").stdout.splitlines()[-1])
    assert "completeness_gap" not in rolled
    assert all(min(row) >= 0 and sum(row) == pytest.approx(1, abs=1e-4) for row in rolled["attribution"])


@pytest.mark.parametrize("args, message", [(["--method", "saliency"], "invalid choice"),
                                           (["--steps", "0"], "at least 1"), ([""], "empty")])
def test_command_line_mistakes_are_one_line_errors(args, message):
    done = run_cli(*(args if args == [""] else [SENTENCES[0], *args]))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
