"""Experiments change the model's behaviour exactly as described, and leave the unmodified model untouched."""

import copy

import pytest
import torch

from transformer import errors
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import interventions
from transformer.paper.translation import forced_decode, translate
from transformer.paper.model import HeadMask


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


def logits(checkpoint, head_mask=None, positions=True, model=None):
    model = model or checkpoint.model
    src = torch.tensor([checkpoint.source_tokenizer.encode("3 1 4 1 5")])
    tgt = torch.tensor([[2] + checkpoint.target_tokenizer.encode("5 1 4 1 3", add_eos=False)])
    with torch.no_grad():
        return model(src, tgt, head_mask=head_mask, positions=positions).logits


def test_a_switched_off_head_contributes_exactly_nothing(reverse):
    mask = interventions.make_head_mask(reverse, {"cross": ["L2H3"]})
    # The same effect by surgery on a copy: zero the output-projection columns fed by that head.
    surgical = copy.deepcopy(reverse.model)
    head_dim = surgical.config.head_dim
    with torch.no_grad():
        surgical.decoder.layers[1].cross_attn.out_proj.weight[:, 2 * head_dim:3 * head_dim] = 0
    assert torch.allclose(logits(reverse, mask), logits(reverse, model=surgical), atol=1e-5)
    assert not torch.allclose(logits(reverse, mask), logits(reverse), atol=1e-3)


def test_unknown_heads_are_refused(reverse):
    with pytest.raises(errors.InputError, match="does not exist"):
        interventions.make_head_mask(reverse, {"encoder": ["L9H1"]})
    assert interventions.make_head_mask(reverse, {}) is None


def test_head_importance_in_one_batch_equals_one_head_at_a_time(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2")
    importance = interventions.head_importance(reverse, tr)
    assert set(importance) == {"encoder", "decoder", "cross"}
    assert importance["cross"].shape == (2, 4)
    kind, layer, head = "cross", 1, 2
    alone = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2")
    mask = interventions.make_head_mask(reverse, {kind: [interventions.head_label(layer, head)]})
    rescored = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, alone.source_ids,
                             alone.predicted_ids[:-1], head_mask=mask)
    assert importance[kind][layer, head].item() == pytest.approx(alone.log_prob - rescored.log_prob, abs=1e-3)
    ranked = interventions.ranked_heads(importance)
    assert len(ranked) == 24 and ranked[0][2] >= ranked[-1][2]


def test_token_override_continues_from_the_forced_prefix(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3 4 5")
    comparison = interventions.override_token(reverse, tr, step=2, token="▁9")
    after = comparison.after
    assert after.predicted_ids[0] == tr.predicted_ids[0]
    assert after.predicted_pieces[1] == "▁9"
    assert after.text.split()[:2] == ["5", "9"]
    assert comparison.before.text == tr.text == "5 4 3 2 1"


def test_removing_positions_changes_the_encoder_output(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("1 2 3 4")])
    with torch.no_grad():
        with_positions = reverse.model.encode(src).memory
        without = reverse.model.encode(src, positions=False).memory
    assert not torch.allclose(with_positions, without, atol=1e-3)
    comparison = interventions.without_positions(reverse, "1 2 3 4")
    assert comparison.before.text == "4 3 2 1"
    assert len(comparison.probability_changes()) == len(comparison.before.predicted_pieces)


def test_shuffled_source_changes_the_reversal(reverse):
    comparison = interventions.shuffled_source(reverse, "1 2 3 4 5 6", seed=1)
    shuffled = interventions.shuffle_words("1 2 3 4 5 6", seed=1)
    assert shuffled != "1 2 3 4 5 6"
    assert comparison.after.text == " ".join(reversed(shuffled.split()))


def test_the_unmodified_model_is_unaffected_afterwards(reverse):
    before = logits(reverse)
    interventions.ablate_heads(reverse, "3 1 4 1 5", {"encoder": ["L1H1"], "cross": ["L2H2"]})
    interventions.without_positions(reverse, "3 1 4 1 5")
    assert torch.equal(logits(reverse), before)


def test_head_mask_may_differ_per_batch_row(reverse):
    ones = torch.ones(2, 4)
    off = ones.clone()
    off[0, 0] = 0
    batch = HeadMask(encoder=torch.stack([ones, off]))
    src = torch.tensor([reverse.source_tokenizer.encode("1 2 3")] * 2)
    tgt = torch.tensor([[2, 5, 6]] * 2)
    with torch.no_grad():
        both = reverse.model(src, tgt, head_mask=batch).logits
        plain = reverse.model(src[:1], tgt[:1]).logits
        single = reverse.model(src[:1], tgt[:1], head_mask=HeadMask(encoder=off)).logits
    assert torch.allclose(both[0], plain[0], atol=1e-5) and torch.allclose(both[1], single[0], atol=1e-5)
