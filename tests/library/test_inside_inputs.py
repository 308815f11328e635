"""What the inspection tools make of what a person gives them, exactly: the positions a minimal pair is aligned by,
noise on chosen tokens, the alternative a contrast is made against, and what each refusal names (positions from
1, as the command line counts); and one head's arithmetic as a terminal and a script read it."""

import dataclasses
import math

import pytest
import torch

from transformer.errors import InputError
from transformer.inside import contrastive, one_head, patching
from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import Tokenizer


def refused(call, *args, **kwargs) -> InputError:
    with pytest.raises(InputError) as raised:
        call(*args, **kwargs)
    return raised.value


# --- a minimal pair's alignment ---------------------------------------------------------------------------------

def test_sources_of_one_length_pair_every_position_and_others_their_shared_start_and_end():
    assert patching.default_alignment([1, 2, 3], [1, 9, 3]) == [(0, 0), (1, 1), (2, 2)]
    assert patching.default_alignment([1, 2, 3, 4, 5], [1, 2, 9, 8, 7, 4, 5]) == [(0, 0), (1, 1), (4, 6), (3, 5)]
    assert patching.default_alignment([1, 2, 3], [1, 2, 3, 4]) == [(0, 0), (1, 1), (2, 2)], "a prefix: its start"
    assert patching.default_alignment([7, 2, 3], [8, 9, 2, 3]) == [(2, 3), (1, 2)], "no shared start: the end"
    assert patching.default_alignment([5, 6], [1, 2, 3]) == []
    assert patching.default_alignment([1, 2, 3], [1, 9, 8, 3]) == [(0, 0), (2, 3)], "an end of one piece"
    assert patching.default_alignment([5, 6], [5, 6, 6]) == [(0, 0), (1, 1)], "the end starts after the start"


def test_an_alignment_is_checked_against_both_lengths_and_named_from_1():
    assert patching.check_alignment([(2, 1), (0, 0)], 3, 2) == [(0, 0), (2, 1)]
    for pair in ((3, 0), (0, 2), (-1, 0), (0, -1)):
        error = refused(patching.check_alignment, [pair], 3, 2)
        assert error.code == "inside.alignment_outside"
        assert error.values == {"clean": pair[0] + 1, "corrupted": pair[1] + 1, "clean_length": 3,
                                "corrupted_length": 2}
    for pairs in ([(0, 0), (0, 1)], [(0, 1), (1, 1)]):
        assert refused(patching.check_alignment, pairs, 3, 2).code == "inside.alignment_repeats"


# --- noise on chosen tokens -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    torch.manual_seed(3)
    config = ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, n_encoder_layers=1,
                         n_decoder_layers=1, d_ff=8, dropout=0.0, max_len=16)
    return Transformer(config).eval()


def test_noise_of_three_standard_deviations_of_the_scaled_embeddings_is_added_to_the_chosen_tokens_alone(small):
    src = torch.tensor([[4, 5, 6, 3]])
    clean = small.src_embed(src).detach()
    spread = 3 * float((small.src_embed.weight.detach() * math.sqrt(8)).std())
    noised = patching.noised_embeddings(small, src, [1, 2], seed=5)
    expected = clean.clone()
    expected[0, [1, 2]] += torch.randn(2, 8, generator=torch.Generator().manual_seed(5)) * spread
    torch.testing.assert_close(noised, expected)
    assert noised.dtype == small.src_embed.weight.dtype
    every = patching.noised_embeddings(small, src, None, seed=5)
    assert torch.equal(every[0, 3], clean[0, 3]), "without positions: every token but the final </s>"
    assert not torch.isclose(every[0, :3], clean[0, :3]).any()


def test_noise_outside_the_source_is_refused_naming_the_position_from_1(small):
    src = torch.tensor([[4, 5, 6, 3]])
    for position in (4, -1):
        error = refused(patching.noised_embeddings, small, src, [position], 0)
        assert error.code == "inside.position_outside" and error.values == {"position": position + 1, "length": 4}
    assert patching.noised_embeddings(small, src, [0], 0).shape == (1, 4, 8)


# --- the alternative a contrast is made against -----------------------------------------------------------------

class Pieces:
    """A tokenizer of a few named pieces; anything else is <unk> (1)."""

    unk_id = 1
    ids = {"<unk>": 1, "▁Arzt": 5, "▁Ärztin": 6, "Arzt": 7, "▁er": 8}

    def id_of(self, piece: str) -> int:
        return self.ids.get(piece, self.unk_id)

    def piece(self, token: int) -> str:
        return {v: k for k, v in self.ids.items()}[token]

    typed_id = Tokenizer.typed_id  # how the real tokenizer reads a typed piece, on these pieces


class Steps:
    """Two steps: the first chose 5 with 6 and 8 runners-up, the second chose 6 and had no other candidate."""

    predicted_ids, top_ids, num_steps = [5, 6], [[5, 6, 8], [6]], 2


def test_the_alternative_is_the_runner_up_a_piece_a_word_start_or_an_id():
    tokens, steps = Pieces(), Steps()
    assert contrastive.alternative_id(steps, tokens, 1, None) == 6
    assert contrastive.alternative_id(steps, tokens, 1, "") == 6
    assert contrastive.alternative_id(steps, tokens, 1, "Arzt") == 7, "a piece as it is, where it is one"
    assert contrastive.alternative_id(steps, tokens, 1, "er") == 8, "a typed word, tried as a word start"
    assert contrastive.alternative_id(steps, tokens, 1, "<unk>") == 1
    assert contrastive.alternative_id(steps, tokens, 1, 8) == 8


def test_an_alternative_that_cannot_be_compared_is_refused_with_what_it_was():
    tokens, steps = Pieces(), Steps()
    error = refused(contrastive.alternative_id, steps, tokens, 2, None)
    assert (error.code, error.values) == ("inside.no_alternative", {"step": 2})
    error = refused(contrastive.alternative_id, steps, tokens, 1, "qqq")
    assert (error.code, error.values) == ("inside.unknown_piece", {"piece": "qqq"})
    error = refused(contrastive.alternative_id, steps, tokens, 1, "▁Arzt")
    assert (error.code, error.values) == ("inside.alternative_is_chosen", {"piece": "▁Arzt", "step": 1})
    for step in (0, 3):
        error = refused(contrastive.check_step, steps, step)
        assert (error.code, error.values) == ("inside.step_out_of_range", {"step": step, "steps": 2})
    contrastive.check_step(steps, 1)
    contrastive.check_step(steps, 2)


# --- one head's arithmetic, printed -----------------------------------------------------------------------------

def arithmetic(kind: str = "cross") -> one_head.HeadArithmetic:
    """Query 2 of a head over three keys, the last masked, with numbers of more decimals than are printed."""
    return one_head.HeadArithmetic(
        kind=kind, layer=2, head=1, query=2, translation="Ein Hund", query_token="▁Ein",
        predicts=None if kind == "encoder" else "▁Hund", key_tokens=["▁A", "▁dog", "</s>"],
        x=torch.tensor([1.0, -2.0]), q=torch.tensor([0.5, 1.25]), k=torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]),
        v=torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]]), scores=torch.tensor([0.5, 2.5, 1.75]),
        scaled=torch.tensor([0.3535534, 1.7677670, 1.2374369]), mask=torch.tensor([True, True, False]),
        weights=torch.tensor([0.1962867, 0.8037133, 0.0]), output=torch.tensor([1.8037133, 0.1962867]),
        contribution_norms=torch.tensor([0.2775925, 1.6074266, 0.0]),
        head_outputs=torch.tensor([[1.8037133, 0.1962867], [0.1, 0.2]]), projected=torch.tensor([0.3, -0.4]),
        residual=torch.tensor([1.0, -2.0]), block_output=torch.tensor([1.0000004, -1.0000004]))


def test_a_heads_arithmetic_is_printed_key_by_key_with_masked_scores_as_minus_infinity():
    assert one_head.describe(arithmetic()) == "\n".join([
        "translation: Ein Hund",
        "cross attention, layer 2, head 1, query 2 ('▁Ein', the step that produced '▁Hund'), d_k = 2",
        f"{'key':>16} {'q·k':>9} {'÷√d_k':>9} {'weight':>8} {'‖αvW_O‖':>9}",
        f"{'▁A':>16} {0.5:9.3f} {0.3535534:9.3f} {0.1962867:8.4f} {0.2775925:9.4f}",
        f"{'▁dog':>16} {2.5:9.3f} {1.767767:9.3f} {0.8037133:8.4f} {1.6074266:9.4f}",
        f"{'</s>':>16} {1.75:9.3f} {'−∞':>9} {0.0:8.4f} {0.0:9.4f}"])
    encoder = one_head.describe(arithmetic("encoder")).splitlines()
    assert encoder[1] == "encoder attention, layer 2, head 1, query 2 ('▁Ein'), d_k = 2"
    long = dataclasses.replace(arithmetic(), key_tokens=["▁Donaudampfschifffahrt", "▁dog", "</s>"])
    assert one_head.describe(long).splitlines()[3].startswith("▁Donaudampfschif ")


def test_a_heads_arithmetic_as_json_has_every_intermediate_to_6_decimals_and_masked_scores_as_null():
    head = arithmetic()
    assert head.d_k == 2
    assert head.to_json() == {
        "kind": "cross", "layer": 2, "head": 1, "query": 2, "translation": "Ein Hund", "query_token": "▁Ein",
        "predicts": "▁Hund", "key_tokens": ["▁A", "▁dog", "</s>"], "d_k": 2, "x": [1.0, -2.0], "q": [0.5, 1.25],
        "k": [[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], "v": [[1.0, 1.0], [2.0, 0.0], [0.0, 3.0]],
        "scores": [0.5, 2.5, 1.75], "scaled": [0.353553, 1.767767, 1.237437], "mask": [True, True, False],
        "weights": [0.196287, 0.803713, 0.0], "output": [1.803713, 0.196287],
        "contribution_norms": [0.277593, 1.607427, 0.0], "head_outputs": [[1.803713, 0.196287], [0.1, 0.2]],
        "projected": [0.3, -0.4], "residual": [1.0, -2.0], "block_output": [1.0, -1.0]}
    masked = one_head.masked_scaled(head)
    assert masked[:2].tolist() == pytest.approx([0.3535534, 1.767767]) and masked[2] == float("-inf")
    head.scaled = torch.tensor([0.1, float("-inf"), 0.2])
    assert head.to_json()["scaled"] == [0.1, None, 0.2]
