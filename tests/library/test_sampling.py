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


def test_top_p_counts_the_mass_left_after_the_top_k_cut():
    # After top-k = 2, 0.5 of the 0.75 left is 2/3 of it: the most probable token alone reaches p = 0.6.
    torch.testing.assert_close(Sampling(top_k=2, top_p=0.6).distribution(LOGITS), torch.tensor([[1.0, 0, 0, 0]]))


def test_top_k_of_one_leaves_only_the_most_probable_token():
    torch.testing.assert_close(Sampling(top_k=1).distribution(LOGITS), torch.tensor([[1.0, 0, 0, 0]]))


@pytest.mark.parametrize("settings", [dict(), dict(temperature=0.5), dict(top_k=2), dict(top_p=0.7),
                                      dict(top_k=3, top_p=0.8)])
def test_each_row_of_a_batch_is_its_own_distribution(settings):
    """(sentences, beams, vocabulary): every row is cut and normalised alone, whatever the rows beside it."""
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(4))
    together = Sampling(**settings).distribution(logits)
    for sentence in range(2):
        for beam in range(3):
            alone = Sampling(**settings).distribution(logits[sentence, beam])
            torch.testing.assert_close(together[sentence, beam], alone)


def test_a_draw_gives_one_token_per_sentence():
    chosen = Sampling(top_k=1).choose(torch.eye(3, 6) * 5, torch.Generator().manual_seed(0))
    assert chosen.tolist() == [0, 1, 2]


@pytest.mark.parametrize("settings, code, shown", [
    (dict(temperature=0), "decoding.temperature", "0"), (dict(temperature=float("nan")), "decoding.temperature", "nan"),
    (dict(top_p=0), "decoding.top_p", "0"), (dict(top_p=1.5), "decoding.top_p", "1.5"),
    (dict(top_k=-1), "decoding.top_k", "-1")])
def test_settings_that_mean_nothing_are_refused_with_a_message(settings, code, shown):
    with pytest.raises(InputError) as refused:
        Sampling(**settings)
    assert refused.value.code == code and str(refused.value).endswith(f"not {shown}.")


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
