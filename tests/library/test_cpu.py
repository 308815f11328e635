"""``cpu.speed_up`` makes a built model fast on a CPU without changing what it computes: held here to the paper's
plain modules, to itself between training and inference, and through every change of its weights."""

from copy import deepcopy

import pytest
import torch
from torch import nn

from transformer import cpu
from transformer.cpu import DecodingWeight, decoding_copy_bytes, dropout, speed_up
from transformer.files.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.paper.config import ModelConfig
from transformer.paper.model import DecoderCache, Transformer

from test_model import padded_batch, tiny_config


def sped_up_copy(model: Transformer) -> Transformer:
    return speed_up(deepcopy(model))


@pytest.mark.parametrize("tied, norm_first", [(True, False), (False, True)])
def test_a_sped_up_model_computes_what_the_papers_modules_compute(tied, norm_first, monkeypatch):
    """Every weight prepacked however small, so that each faster path runs: logits, every attention map, the
    cached step by step decoding and the gradients of training (without dropout) agree, and so do the state dicts."""
    monkeypatch.setattr(DecodingWeight, "LARGE", 1)
    monkeypatch.setattr(DecodingWeight, "WIDE", 1)
    torch.manual_seed(0)
    plain = Transformer(tiny_config(tie_output_projection=tied, norm_first=norm_first)).eval()
    fast = sped_up_copy(plain)
    assert type(fast) is not Transformer and isinstance(fast, Transformer)
    assert fast.state_dict().keys() == plain.state_dict().keys()
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.no_grad():
        for need_weights in (False, True):
            expected, got = plain(src, tgt, need_weights), fast(src, tgt, need_weights)
            torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=0)
            for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
                for mine, theirs in zip(getattr(got, kind), getattr(expected, kind), strict=True):
                    torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=0)
        prefix = padded_batch([5, 5], seed=4)  # no padding: a cache decodes each position as the full pass does
        encoded, cache = fast.encode(src), DecoderCache()
        steps = [fast.decode(prefix[:, t : t + 1], encoded, cache).logits for t in range(prefix.size(1))]
        torch.testing.assert_close(torch.cat(steps, dim=1), plain(src, prefix).logits, atol=1e-5, rtol=0)
    for model in (plain, fast):
        model.train()
        model.zero_grad()
        model(src, tgt).logits.square().mean().backward()
    for (name, mine), theirs in zip(fast.named_parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_under_bf16_autocast_a_sped_up_model_stays_near_the_plain_one():
    """On a CPU in bf16, attention takes the formula and residuals add in float32: rounding, not results, differ."""
    torch.manual_seed(0)
    plain = Transformer(tiny_config()).train()
    fast = sped_up_copy(plain)
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected, got = plain(src, tgt).logits, fast(src, tgt).logits
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.float(), expected.float(), atol=0.1, rtol=0.05)


def test_speeding_up_twice_changes_nothing_more():
    model = speed_up(Transformer(tiny_config()))
    classes = [type(module) for module in model.modules()]
    assert [type(module) for module in speed_up(model).modules()] == classes


def test_pytorchs_private_prepacking_is_used_only_on_the_versions_it_was_checked_on(monkeypatch):
    """``torch.ops.mkldnn._reorder_linear_weight`` and ``_linear_pointwise`` were checked on PyTorch 2.13; on any
    other version every weight is read through the public fallback (a transposed copy, or the weight itself)."""
    assert cpu.PACKING_CHECKED_ON == ("2.13.",)
    assert cpu.PACKING == (torch.__version__.startswith("2.13.") and torch.backends.mkldnn.is_available())
    monkeypatch.setattr(cpu, "PACKING", False)
    monkeypatch.setattr(DecodingWeight, "LARGE", 1)
    monkeypatch.setattr(DecodingWeight, "WIDE", 1)
    torch.manual_seed(0)
    plain = Transformer(tiny_config()).eval()
    fast = sped_up_copy(plain)
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.no_grad():
        torch.testing.assert_close(fast(src, tgt).logits, plain(src, tgt).logits, atol=1e-5, rtol=0)
    holders = [module.decoding_weight for module in fast.modules() if isinstance(module, cpu.Linear)]
    layouts = {layout for holder in holders for *_, layout in holder._copies.values()}
    assert holders and "prepacked" not in layouts and "transposed" in layouts


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("inference", [torch.no_grad, torch.inference_mode])
def test_inference_computes_what_training_computes_and_follows_every_weight_update(tied, inference, monkeypatch):
    """Without autograd, linear layers on a CPU read a copy of their weights in a faster layout (cpu.DecodingWeight):
    here every weight prepacked, however small."""
    monkeypatch.setattr(DecodingWeight, "LARGE", 1)
    monkeypatch.setattr(DecodingWeight, "WIDE", 1)
    torch.manual_seed(0)
    model = speed_up(Transformer(tiny_config(tie_output_projection=tied))).eval()
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)

    def inference_logits():
        with inference():
            return model(src, tgt).logits.clone()

    def assert_inference_matches_training():
        inferred = inference_logits()
        with torch.enable_grad():
            trained = model(src, tgt).logits
        assert inferred.dtype == trained.dtype
        assert torch.allclose(inferred, trained, atol=1e-5), (inferred - trained).abs().max()
        return inferred

    before = assert_inference_matches_training()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(src, tgt).logits.sum().backward()
    optimizer.step()  # in place: same tensors, new values
    after = assert_inference_matches_training()
    assert not torch.allclose(after, before, atol=1e-3)

    model.load_state_dict(Transformer(tiny_config(tie_output_projection=tied)).state_dict())
    assert not torch.allclose(assert_inference_matches_training(), after, atol=1e-3)
    projection = model.tgt_embed if tied else model.output_proj
    projection.weight.data = torch.randn_like(projection.weight)  # new storage, same version counter
    assert_inference_matches_training()
    model.double()
    assert_inference_matches_training()


def test_a_model_made_under_inference_mode_runs_and_copies_leave_the_weight_cache_behind():
    torch.manual_seed(0)
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    model = speed_up(Transformer(tiny_config())).eval()
    with torch.no_grad():
        expected = model(src, tgt).logits
    with torch.inference_mode():
        made_there = speed_up(Transformer(tiny_config())).eval()
        made_there.load_state_dict(model.state_dict())
        assert torch.allclose(made_there(src, tgt).logits, expected, atol=1e-6)
    copy = deepcopy(model)
    assert copy.decoder.layers[0].feed_forward.linear1.decoding_weight._copies == {}
    with torch.no_grad():
        assert torch.allclose(copy(src, tgt).logits, expected, atol=1e-6)


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_dropout_zeroes_a_share_p_of_independent_elements_and_keeps_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(1000, 1000)
    kept = dropout(x, p) != 0
    assert kept.float().mean().item() == pytest.approx(1 - p, abs=0.002)
    assert dropout(x, p).mean().item() == pytest.approx(1.0, abs=0.005), "kept elements are scaled by 1/(1-p)"
    neighbours = torch.corrcoef(torch.stack([kept[:, :-1].flatten().float(), kept[:, 1:].flatten().float()]))[0, 1]
    assert abs(neighbours.item()) < 0.005, "four elements share a random draw, yet fall independently"
    assert dropout(x, p, training=False) is x and dropout(x, 0.0) is x


def test_dropout_repeats_with_the_seed_and_its_gradient_is_its_mask():
    x = torch.randn(64, 33, requires_grad=True)
    torch.manual_seed(5)
    y = dropout(x, 0.3)
    y.sum().backward()
    torch.manual_seed(5)
    assert torch.equal(dropout(x, 0.3), y)
    assert torch.equal(x.grad, (y != 0).float() * (65536 / (65536 - round(0.3 * 65536))))
    assert dropout(torch.ones(8, dtype=torch.bfloat16), 0.5).dtype == torch.bfloat16


def test_every_dropout_of_a_sped_up_model_is_the_fast_one_and_none_acts_in_evaluation():
    model = speed_up(Transformer(ModelConfig(50, 50, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1,
                                             d_ff=64, dropout=0.3, attention_dropout=0.2)))
    assert not [name for name, module in model.named_modules() if type(module) is nn.Dropout]
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    model.eval()
    assert torch.equal(model(src, tgt).logits, model(src, tgt).logits)
    model.train()
    assert not torch.equal(model(src, tgt).logits, model(src, tgt).logits)


def copies_made(model: Transformer) -> int:
    holders = [module.decoding_weight for module in model.modules() if hasattr(module, "decoding_weight")]
    holders += [model.tied_output] if model.tied_output is not None else []
    return sum(copy.numel() * copy.element_size() for holder in holders
               for _, _, copy, layout in holder._copies.values() if layout != "stored")


@pytest.mark.parametrize("every_weight_prepacked", [False, True])
def test_the_memory_decodings_copies_will_take_is_known_before_they_are_made(every_weight_prepacked, monkeypatch):
    """A server bounding its loaded models by memory counts these copies when it loads a model (ui/services.py)."""
    if every_weight_prepacked:
        monkeypatch.setattr(DecodingWeight, "LARGE", 1)
        monkeypatch.setattr(DecodingWeight, "WIDE", 1)
    checkpoint = load_checkpoint(DEFAULT_CHECKPOINT, device="cpu")
    expected = decoding_copy_bytes(checkpoint.model)
    assert copies_made(checkpoint.model) == 0 and expected > 0
    checkpoint.translate("A dog runs across the grass.", beam_size=5)
    assert copies_made(checkpoint.model) == expected


def test_a_faster_part_built_by_hand_or_replaced_by_a_plain_one_computes_the_same():
    torch.manual_seed(0)
    linear, x = cpu.Linear(8, 6), torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(linear(x), nn.functional.linear(x, linear.weight, linear.bias))
    plain = Transformer(tiny_config()).eval()
    fast = sped_up_copy(plain)
    attention = fast.decoder.layers[0].cross_attn
    replaced = nn.Linear(attention.in_proj.in_features, attention.in_proj.out_features)
    replaced.load_state_dict(attention.in_proj.state_dict())
    attention.in_proj = replaced
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.no_grad():
        torch.testing.assert_close(fast(src, tgt).logits, plain(src, tgt).logits, atol=1e-5, rtol=0)
