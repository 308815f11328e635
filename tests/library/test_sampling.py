"""Sampling: the next token drawn from the tempered, cut distribution instead of taken as the most probable."""

import pytest
import torch

from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.paper.decoding import Sampling, greedy_search
from transformer.paper.translation import translate
from transformer.paper.tokenizer import EOS_ID

LOGITS = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


def test_temperature_one_keeps_the_models_distribution():
    torch.testing.assert_close(Sampling().distribution(LOGITS), torch.tensor([[0.5, 0.25, 0.15, 0.1]]))


def test_a_low_temperature_sharpens_and_a_high_one_flattens():
    sharp, flat = Sampling(temperature=0.25).distribution(LOGITS), Sampling(temperature=4).distribution(LOGITS)
    assert sharp[0, 0] > 0.9 and flat[0, 0] < 0.35 and flat[0, 3] > 0.15


def test_top_k_keeps_the_k_most_probable_tokens_renormalised():
    torch.testing.assert_close(Sampling(top_k=2).distribution(LOGITS), torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))


def test_top_p_keeps_the_smallest_set_that_reaches_p():
    # 0.5 alone does not reach 0.7; 0.5 + 0.25 does.
    torch.testing.assert_close(Sampling(top_p=0.7).distribution(LOGITS), torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]))
    torch.testing.assert_close(Sampling(top_p=0.5).distribution(LOGITS), torch.tensor([[1.0, 0.0, 0.0, 0.0]]))


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=float("nan")), dict(top_p=0),
                                      dict(top_p=1.5), dict(top_k=-1)])
def test_settings_that_mean_nothing_are_refused_with_a_message(settings):
    with pytest.raises(InputError):
        Sampling(**settings)


def test_a_seed_repeats_a_draw_and_another_seed_can_differ(bundled):
    model, src, tgt = bundled.model, bundled.source_tokenizer, bundled.target_tokenizer
    text = "A man in a red shirt is riding a bicycle down the street."
    draws = [translate(model, src, tgt, text, sampling=Sampling(temperature=1.5, seed=seed)).text for seed in range(6)]
    assert translate(model, src, tgt, text, sampling=Sampling(temperature=1.5, seed=0)).text == draws[0]
    assert len(set(draws)) > 1, "six seeds at T = 1.5 do not all draw the same translation"


def test_sampling_from_only_the_top_token_is_greedy_decoding(bundled):
    model, tokenizer = bundled.model, bundled.source_tokenizer
    src = torch.tensor([tokenizer.encode("Two dogs are running through the snow.") + [EOS_ID]])
    assert greedy_search(model, src, sampling=Sampling(top_k=1, seed=3)) == greedy_search(model, src)
