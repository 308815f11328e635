"""The model is the paper's Transformer: checked against PyTorch's own implementation and against itself."""

import copy
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from paper_reference import sinusoids
from transformer.paper.config import ModelConfig
from transformer.paper.decoding import pad_batch
from transformer.paper.model import (AddAndNorm, Decoder, DecoderCache, DecoderLayer, Encoder, EncoderLayer, HeadMask,
                                    MultiHeadAttention, PositionalEncoding, PositionwiseFeedForward,
                                    ScaledDotProductAttention, TokenEmbedding, Transformer, sinusoidal_table)
from transformer.paper.reference import copy_attention, to_torch_transformer

PAD = 0
SINUSOID_ROUNDING = 2e-5  # float32 sines of angles up to 60 radians


def tiny_config(**overrides) -> ModelConfig:
    values = dict(src_vocab_size=40, tgt_vocab_size=40, d_model=32, n_heads=4, n_encoder_layers=2,
                  n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)
    values.update(overrides)
    return ModelConfig(**values)


def padded_batch(lengths, vocab=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return pad_batch([torch.randint(4, vocab, (n,), generator=generator).tolist() for n in lengths], PAD)


@pytest.mark.parametrize("seed, norm_first", [(0, False), (1, False), (2, True)])
def test_matches_torch_nn_transformer_on_padded_batches(seed, norm_first):
    torch.manual_seed(seed)
    ours = Transformer(tiny_config(norm_first=norm_first)).eval()
    ref = to_torch_transformer(ours).train()  # train mode with dropout 0: the plain (non-fast-path) kernels
    src = padded_batch([7, 3, 5], seed=seed)
    tgt = padded_batch([4, 6, 2], seed=seed + 10)
    with torch.no_grad():
        logits = ours(src, tgt).logits
        hidden = ref(ours._embed(ours.src_embed, src), ours._embed(ours.tgt_embed, tgt),
                     tgt_mask=~torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril(),
                     src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD,
                     memory_key_padding_mask=src == PAD)
        expected = ours.project(hidden)
    real = tgt != PAD
    assert torch.allclose(logits[real], expected[real], atol=1e-5), (logits[real] - expected[real]).abs().max()


def test_multi_head_attention_matches_torch_including_weights():
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4).eval()
    theirs = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    copy_attention(theirs, ours)
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    key_padding = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    with torch.no_grad():
        out, weights, _ = ours(x, memory, ~key_padding[:, None, None, :], need_weights=True)
        expected, expected_weights = theirs(x, memory, memory, key_padding_mask=key_padding,
                                            average_attn_weights=False)
        self_out, self_weights, _ = ours(x, need_weights=True)
        expected_self, expected_self_weights = theirs(x, x, x, average_attn_weights=False)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)
    assert torch.allclose(self_out, expected_self, atol=1e-6)
    assert torch.allclose(self_weights, expected_self_weights, atol=1e-6)


def test_attention_maps_have_documented_shapes_and_are_probabilities():
    torch.manual_seed(0)
    config = tiny_config(n_encoder_layers=3, n_decoder_layers=2)
    model = Transformer(config).eval()
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    out = model(src, tgt, need_weights=True)
    assert len(out.encoder_attentions) == 3 and len(out.decoder_attentions) == 2 and len(out.cross_attentions) == 2
    assert out.encoder_attentions[0].shape == (2, 4, 6, 6)
    assert out.decoder_attentions[0].shape == (2, 4, 5, 5)
    assert out.cross_attentions[0].shape == (2, 4, 5, 6)
    for maps in (out.encoder_attentions, out.decoder_attentions, out.cross_attentions):
        for weights in maps:
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
    src_pad = (src == PAD)[:, None, None, :]
    for weights in out.encoder_attentions + out.cross_attentions:
        assert (weights.masked_select(src_pad.expand_as(weights)) == 0).all(), "padded source keys get exactly 0"
    above_diagonal = ~torch.ones(5, 5, dtype=torch.bool).tril()
    tgt_pad = (tgt == PAD)[:, None, None, :]
    for weights in out.decoder_attentions:
        assert (weights[..., above_diagonal] == 0).all(), "no position sees the future"
        assert (weights.masked_select(tgt_pad.expand_as(weights)) == 0).all(), "padded target keys get exactly 0"


def test_attentions_are_not_computed_unless_requested():
    model = Transformer(tiny_config()).eval()
    out = model(padded_batch([4]), padded_batch([3]))
    assert out.encoder_attentions == [] and out.decoder_attentions == [] and out.cross_attentions == []


def test_no_module_computes_attention_weights_unless_asked():
    """The weights cost a (heads, queries, keys) tensor per layer; the fused kernel runs without them."""
    torch.manual_seed(0)
    config = tiny_config()
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 6, 32)
    assert ScaledDotProductAttention()(x, x, x)[1] is None
    assert MultiHeadAttention(32, 4)(x)[1] is None
    assert EncoderLayer(config)(x, None)[1] is None and Encoder(config)(x, None)[1] == []
    assert DecoderLayer(config)(x, memory, None, None)[1:] == (None, None)
    assert Decoder(config)(x, memory, None, None)[1:] == ([], [])
    model = Transformer(config).eval()
    encoded = model.encode(padded_batch([4]))
    assert encoded.attentions == [] and model.decode(padded_batch([3]), encoded).self_attentions == []


def test_modules_built_without_their_optional_settings_are_the_papers():
    """No dropout unless a rate is given, ReLU, sinusoids interleaved from position 0, embeddings scaled by
    sqrt(d_model)."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    attention, feed_forward = MultiHeadAttention(8, 2).train(), PositionwiseFeedForward(8, 16).train()
    torch.testing.assert_close(attention(x)[0], attention.eval()(x)[0])
    torch.testing.assert_close(feed_forward(x), feed_forward.linear2(F.relu(feed_forward.linear1(x))))
    q = torch.randn(1, 2, 5, 4)
    torch.testing.assert_close(ScaledDotProductAttention().train()(q, q, q, need_weights=True)[0],
                               (q @ q.transpose(-2, -1) / 2).softmax(-1) @ q)
    torch.testing.assert_close(PositionalEncoding(8, 10)(torch.zeros(1, 3, 8)),
                               sinusoids(3, 8).float()[None], atol=SINUSOID_ROUNDING, rtol=0)
    torch.testing.assert_close(sinusoidal_table(10, 8), sinusoids(10, 8).float(), atol=SINUSOID_ROUNDING, rtol=0)
    assert TokenEmbedding(12, 8, 0).scale == math.sqrt(8)


@pytest.mark.parametrize("need_weights", [False, True])
def test_attention_dropout_falls_in_training_on_either_path(need_weights):
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, dropout=0.5).train()
    x = torch.randn(2, 5, 8)
    dropped = attention(x, need_weights=need_weights)[0]
    assert not torch.allclose(dropped, attention.eval()(x, need_weights=need_weights)[0])


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_a_masked_head_is_its_slice_of_the_output_projection_set_to_zero(kind):
    """Head 3 of layer 2 masked equals the model whose W_O never reads that head's output (section 3.2.2), on the
    whole pass and step by step."""
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    mask = torch.ones(2, 4)
    mask[1, 2] = 0.0
    without = copy.deepcopy(model)
    layer = (without.encoder if kind == "encoder" else without.decoder).layers[1]
    with torch.no_grad():
        (layer.cross_attn if kind == "cross" else layer.self_attn).out_proj.weight[:, 16:24] = 0.0
        expected, masked = without(src, tgt).logits, model(src, tgt, head_mask=HeadMask(**{kind: mask})).logits
        encoded, cache = model.encode(src[:1], head_mask=HeadMask(**{kind: mask})), DecoderCache()
        steps = [model.decode(tgt[:1, t:t + 1], encoded, cache, head_mask=HeadMask(**{kind: mask})).logits
                 for t in range(5)]
    torch.testing.assert_close(masked, expected)
    torch.testing.assert_close(torch.cat(steps, dim=1), expected[:1], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(masked, model(src, tgt).logits, atol=1e-4)


def test_without_positions_the_model_is_itself_with_a_table_of_zeros():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    zeroed = copy.deepcopy(model)
    zeroed.source_positions.table.zero_()  # one table of sinusoids serves both stacks
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.no_grad():
        without = model(src, tgt, positions=False)
        torch.testing.assert_close(without.logits, zeroed(src, tgt).logits)
        torch.testing.assert_close(without.encoder_output, zeroed.encode(src).memory)
        encoded = model.encode(src, positions=False)
        torch.testing.assert_close(model.decode(tgt, encoded, positions=False).logits, without.logits)


def test_without_positions_a_sequence_still_keeps_to_max_len_and_says_so():
    model = Transformer(tiny_config(max_len=8)).eval()
    model.encode(padded_batch([8]), positions=False)
    with pytest.raises(ValueError, match="^sequence of 9 positions exceeds max_len 8$"):
        model.encode(padded_batch([9]), positions=False)
    encoded, cache = model.encode(padded_batch([3]), positions=False), DecoderCache()
    model.decode(padded_batch([7]), encoded, cache, positions=False)
    with pytest.raises(ValueError, match="^sequence of 9 positions exceeds max_len 8$"):
        model.decode(padded_batch([2]), encoded, cache, positions=False)


def test_a_models_shapes_can_be_built_without_memory():
    """Sizing a download builds the model on the meta device: every tensor has its shape and no values."""
    with torch.device("meta"):
        model = Transformer(tiny_config(position_layout="learned"))
        sinusoidal = Transformer(tiny_config())
    assert model.source_positions.table.shape == sinusoidal.source_positions.table.shape == (64, 32)
    assert sinusoidal.source_positions.table.is_meta and model.src_embed.weight.shape == (40, 32)


@pytest.mark.parametrize("norm_first", [False, True])
def test_fused_and_explicit_attention_paths_agree(norm_first):
    torch.manual_seed(0)
    model = Transformer(tiny_config(norm_first=norm_first)).eval()
    src, tgt = padded_batch([6, 2, 4]), padded_batch([3, 5, 1], seed=4)
    with torch.no_grad():
        fused = model(src, tgt).logits
        explicit = model(src, tgt, need_weights=True).logits
    assert torch.allclose(fused, explicit, atol=1e-5)


def test_incremental_decoding_with_cache_equals_full_forward_pass():
    torch.manual_seed(0)
    model = Transformer(tiny_config(n_decoder_layers=3)).eval()
    src, tgt = padded_batch([6, 4]), padded_batch([5, 5], seed=5)
    with torch.no_grad():
        full = model(src, tgt, need_weights=True)
        encoded = model.encode(src)
        cache = DecoderCache()
        steps = [model.decode(tgt[:, t:t + 1], encoded, cache, need_weights=True) for t in range(tgt.size(1))]
    step_logits = torch.cat([s.logits for s in steps], dim=1)
    assert torch.allclose(step_logits, full.logits, atol=1e-5)
    for layer in range(3):
        for t, step in enumerate(steps):
            assert torch.allclose(step.self_attentions[layer][:, :, 0], full.decoder_attentions[layer][:, :, t, :t + 1],
                                  atol=1e-6)
            assert torch.allclose(step.cross_attentions[layer][:, :, 0], full.cross_attentions[layer][:, :, t],
                                  atol=1e-6)
    assert cache.length == tgt.size(1)


def test_cache_reorder_follows_selected_hypotheses():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = padded_batch([5, 3]), padded_batch([4, 4], seed=6)
    with torch.no_grad():
        encoded = model.encode(src)
        cache = DecoderCache()
        model.decode(tgt[:, :2], encoded, cache)
        cache.reorder(torch.tensor([1, 1]))
        swapped = type(encoded)(encoded.memory[[1, 1]], encoded.source_mask[[1, 1]])
        step = model.decode(tgt[[1, 1], 2:3], swapped, cache).logits
        expected = model(src[[1, 1]], tgt[[1, 1], :3]).logits[:, -1:]
    assert torch.allclose(step, expected, atol=1e-5)


def test_a_cache_projects_the_sources_keys_and_values_once_per_sentence(monkeypatch):
    """Each step reuses the cross-attention's keys and values: only the new position's query is projected."""
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = padded_batch([5]), padded_batch([4], seed=6)
    projected = []
    for i, layer in enumerate(model.decoder.layers):
        project = layer.cross_attn.project_rows
        monkeypatch.setattr(layer.cross_attn, "project_rows", lambda x, rows, i=i, project=project:
                            projected.append((i, x.size(1), rows.start)) or project(x, rows))
    with torch.no_grad():
        encoded, cache = model.encode(src), DecoderCache()
        for t in range(4):
            model.decode(tgt[:, t:t + 1], encoded, cache)
    keys_and_values = [(layer, length) for layer, length, start in projected if start != 0]
    assert keys_and_values == [(0, 5), (1, 5)], "the first step's, for each layer"
    assert len(projected) - len(keys_and_values) == 4 * 2, "a query each step in each layer"


@pytest.mark.parametrize("layout", ["interleaved", "halves", "fairseq"])
@pytest.mark.parametrize("d_model", [16, 7])
def test_every_sinusoid_of_each_layout_is_its_formula(layout, d_model):
    torch.testing.assert_close(sinusoidal_table(60, d_model, layout).double(), sinusoids(60, d_model, layout),
                               atol=SINUSOID_ROUNDING, rtol=0)


def test_the_position_table_starts_after_its_offset_rows_and_refuses_what_does_not_fit():
    encoding = PositionalEncoding(16, max_len=10, layout="fairseq", offset=2)
    torch.testing.assert_close(encoding.table.double(), sinusoids(12, 16, "fairseq"), atol=SINUSOID_ROUNDING, rtol=0)
    x = torch.zeros(1, 3, 16)
    torch.testing.assert_close(encoding(x, offset=4), encoding.table[6:9].unsqueeze(0))
    assert "table" not in encoding.state_dict(), "rebuilt from the config, never stored"
    with pytest.raises(ValueError, match="sequence of 11 positions exceeds max_len 10"):
        encoding(torch.zeros(1, 11, 16))
    learned = PositionalEncoding(16, max_len=10, layout="learned", offset=2)
    assert learned.table.shape == (12, 16) and "table" in learned.state_dict()


def test_switched_off_head_contributes_nothing():
    torch.manual_seed(0)
    attention = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 5, 32)
    mask = torch.tensor([1.0, 0.0, 1.0, 1.0])
    with torch.no_grad():
        out, _, _ = attention(x, head_mask=mask)
        heads_out = attention.out_proj.weight[:, 8:16]  # columns fed by head 1
        perturbed = attention.in_proj.weight.clone()
        attention.in_proj.weight[8:16] += 5.0  # change head 1's queries: output must not move
        out_again, _, _ = attention(x, head_mask=mask)
        attention.in_proj.weight.copy_(perturbed)
    assert heads_out.shape == (32, 8)
    assert torch.allclose(out, out_again, atol=1e-6)


def test_head_mask_of_ones_changes_nothing():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src, tgt = padded_batch([5]), padded_batch([4], seed=2)
    ones = torch.ones(2, 4)
    with torch.no_grad():
        plain = model(src, tgt).logits
        masked = model(src, tgt, head_mask=HeadMask(ones, ones, ones)).logits
    assert torch.allclose(plain, masked, atol=1e-6)


def test_max_len_is_enforced_with_a_clear_error():
    model = Transformer(tiny_config(max_len=8)).eval()
    with pytest.raises(ValueError, match="max_len"):
        model(padded_batch([9]), padded_batch([3]))


def test_config_rejects_inconsistent_sizes():
    with pytest.raises(ValueError, match="divisible"):
        tiny_config(d_model=30)
    with pytest.raises(ValueError, match="joint vocabulary"):
        tiny_config(tgt_vocab_size=41)


# --- where a converted model departs from the paper ------------------------------------------------------------

def converted_like(**switches) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(src_vocab_size=12, tgt_vocab_size=14 if not switches.get("share_embeddings", True)
                                   else 12, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16,
                                   dropout=0.0, max_len=16, **switches)).eval()


def test_the_paper_shares_one_embedding_as_source_target_and_output_projection():
    model = converted_like()
    assert model.tgt_embed is model.src_embed and model.output_proj is None and model.output_bias is None
    assert model.target_positions is model.source_positions, "one table of sinusoids serves both stacks"
    hidden = torch.randn(1, 3, 8)
    torch.testing.assert_close(model.project(hidden), hidden @ model.src_embed.weight.T)


def test_separate_embeddings_an_untied_projection_and_an_output_bias_are_each_used():
    model = converted_like(share_embeddings=False, tie_output_projection=False, output_bias=True, pad_id=1,
                           scale_embeddings=False)
    assert model.tgt_embed is not model.src_embed and model.tgt_embed.weight.shape == (14, 8)
    assert model.src_embed.padding_idx == model.tgt_embed.padding_idx == 1
    assert model.src_embed.scale == model.tgt_embed.scale == 1.0
    with torch.no_grad():
        model.output_bias.copy_(torch.arange(14.0))
    hidden = torch.randn(1, 3, 8)
    torch.testing.assert_close(model.project(hidden), hidden @ model.output_proj.weight.T + torch.arange(14.0))
    assert model.output_proj.weight.shape == (14, 8) and model.output_proj.bias is None
    untied = converted_like(share_embeddings=False, tie_output_projection=False)
    torch.testing.assert_close(untied.project(hidden), hidden @ untied.output_proj.weight.T)
    assert converted_like(share_embeddings=False).tgt_embed.scale == math.sqrt(8), "each side scaled, as the paper's"
    tied = converted_like(output_bias=True)
    with torch.no_grad():
        tied.output_bias.fill_(2.0)
    torch.testing.assert_close(tied.project(hidden), hidden @ tied.tgt_embed.weight.T + 2.0)


def test_learned_positions_are_a_table_per_stack_and_an_embedding_norm_normalises_both_sides():
    model = converted_like(position_layout="learned", embedding_norm=True, layer_norm_eps=1e-3,
                           share_embeddings=False)
    assert model.target_positions is not model.source_positions
    src, tgt = torch.tensor([[4, 5, 3]]), torch.tensor([[2, 6, 13]])
    with torch.no_grad():
        for norm in (model.source_embedding_norm, model.target_embedding_norm):  # each side's own
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
        memory = model.encode(src).memory
        before = model(src, tgt).logits
        # Not a constant shift, which the embedding norm would take away.
        model.target_positions.table.add_(torch.randn_like(model.target_positions.table))
        assert torch.equal(model.encode(src).memory, memory), "the source's positions are its own"
        assert not torch.allclose(model(src, tgt).logits, before)
        for side, embed, positions, norm in (("source", model.src_embed, model.source_positions,
                                              model.source_embedding_norm),
                                             ("target", model.tgt_embed, model.target_positions,
                                              model.target_embedding_norm)):
            tokens = src if side == "source" else tgt
            expected = F.layer_norm(embed(tokens) + positions.table[:3], (8,), norm.weight, norm.bias, eps=1e-3)
            torch.testing.assert_close(model._embed(side, tokens), expected)


def test_every_setting_of_the_config_reaches_each_module_that_uses_it():
    """Dropout acts only in training and the tests measure models in eval(), so what is built is checked here."""
    model = Transformer(ModelConfig(
        src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, n_encoder_layers=2, n_decoder_layers=3, d_ff=16,
        dropout=0.3, attention_dropout=0.2, layer_norm_eps=1e-3, norm_first=True, activation="gelu"))
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attentions) == 2 + 3 * 2 and {m.attention.dropout.p for m in attentions} == {0.2}
    feed_forwards = [m for m in model.modules() if isinstance(m, PositionwiseFeedForward)]
    assert len(feed_forwards) == 5 and all(f.activation is F.gelu and f.dropout.p == 0.3 for f in feed_forwards)
    sublayers = [m for m in model.modules() if isinstance(m, AddAndNorm)]
    assert len(sublayers) == 2 * 2 + 3 * 3 and all(s.norm_first and s.dropout.p == 0.3 for s in sublayers)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == len(sublayers) + 2 and {norm.eps for norm in norms} == {1e-3}, "and a pre-norm's final two"
    assert model.embed_dropout.p == 0.3


def test_embeddings_start_as_the_paper_scales_them_with_padding_at_zero():
    """N(0, d_model^-1/2), so that with the √d_model scale (section 3.4) an embedding's entries have spread 1."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(src_vocab_size=4000, tgt_vocab_size=4000, d_model=64, n_heads=2,
                                    n_encoder_layers=1, n_decoder_layers=1, d_ff=16, pad_id=5,
                                    position_layout="learned"))
    for table in (model.src_embed.weight[6:].detach(), model.source_positions.table.detach()):
        assert float(table.mean()) == pytest.approx(0.0, abs=0.01)
        assert float(table.std()) == pytest.approx(64 ** -0.5, rel=0.05)
    assert model.src_embed.weight[5].eq(0).all() and model.src_embed.padding_idx == 5
