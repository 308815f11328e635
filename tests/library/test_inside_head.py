"""Inside one head: the arithmetic shown step by step is the arithmetic the model did, to 1e-5."""

import json
import math
from pathlib import Path

import pytest
import torch

from helpers import run_command
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import one_head
from transformer.paper.config import ModelConfig
from transformer.paper.translation import translate
from transformer.paper.model import Transformer

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "A dog runs across the grass."


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


@pytest.fixture(scope="module")
def translation(bundled):
    return translate(bundled.model, bundled.source_tokenizer, bundled.target_tokenizer, SENTENCE, beam_size=5,
                     length_penalty=bundled.length_penalty)


def keep_input(seen: dict):
    """A forward pre-hook that keeps a module's first input (and, returning None, leaves it unchanged)."""
    def hook(module, args):
        seen["x"] = args[0]
    return hook


CASES = [("encoder", 1, 1, 2), ("encoder", 3, 4, 9), ("decoder", 1, 2, 1), ("decoder", 2, 3, 4),
         ("cross", 1, 4, 2), ("cross", 3, 2, 3)]


@pytest.mark.parametrize("kind, layer, head, query", CASES)
def test_the_softmax_of_the_masked_scaled_scores_is_the_attention_the_model_recorded(bundled, translation, kind,
                                                                                    layer, head, query):
    a = one_head.head_arithmetic(bundled.model, translation, kind, layer, head, query)
    recorded = {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
                "cross": translation.cross_attention}[kind][layer - 1, head - 1, query - 1]
    torch.testing.assert_close(a.scores, a.k @ a.q)
    torch.testing.assert_close(a.scaled, a.scores / math.sqrt(a.d_k))
    torch.testing.assert_close(one_head.masked_scaled(a).softmax(-1), a.weights, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.weights, recorded, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.weights @ a.v, a.output, atol=1e-5, rtol=1e-5)
    assert a.d_k == bundled.model.config.d_model // bundled.model.config.n_heads


def test_decoder_self_attention_masks_every_later_position(bundled, translation):
    a = one_head.head_arithmetic(bundled.model, translation, "decoder", 2, 1, 3)
    assert a.mask.tolist() == [True, True, True] + [False] * (len(a.key_tokens) - 3)
    assert (a.weights[3:] == 0).all() and (a.contribution_norms[3:] == 0).all()
    assert a.query_token == translation.target_pieces[2] and a.predicts == translation.predicted_pieces[2]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_heads_concatenated_and_projected_by_w_o_give_the_block_output_the_model_used(bundled, translation, kind):
    model = bundled.model
    a = one_head.head_arithmetic(model, translation, kind, 2, 1, 2)
    attention, add_and_norm = one_head.block_modules(model, kind, 2)
    with torch.inference_mode():
        projected = attention.out_proj(a.head_outputs.flatten())
    torch.testing.assert_close(projected, a.projected, atol=1e-5, rtol=1e-5)
    # What the model carried on with after this block: the next sublayer's input (post-norm, as bundled).
    layer = (model.encoder if kind == "encoder" else model.decoder).layers[1]
    following = layer.cross_attn if kind == "decoder" else layer.feed_forward
    seen = {}
    hook = following.register_forward_pre_hook(keep_input(seen))
    try:
        with torch.inference_mode():
            model(torch.tensor([translation.source_ids]), torch.tensor([translation.target_ids]))
    finally:
        hook.remove()
    assert not model.config.norm_first
    torch.testing.assert_close(a.block_output, seen["x"][0, a.query - 1], atol=1e-5, rtol=1e-5)


def test_each_keys_contribution_is_its_weighted_value_through_its_heads_slice_of_w_o(bundled, translation):
    a = one_head.head_arithmetic(bundled.model, translation, "cross", 3, 2, 3)
    attention, _ = one_head.block_modules(bundled.model, "cross", 3)
    heads, d_k = bundled.model.config.n_heads, a.d_k
    with torch.inference_mode():
        for key in range(len(a.key_tokens)):
            alone = torch.zeros(heads, d_k)
            alone[a.head - 1] = a.weights[key] * a.v[key]
            through_w_o = attention.out_proj(alone.flatten()) - attention.out_proj.bias
            assert a.contribution_norms[key].item() == pytest.approx(through_w_o.norm().item(), rel=1e-4, abs=1e-6)


def test_a_head_switched_off_contributes_nothing_whatever_its_weights():
    weights = torch.softmax(torch.randn(2, 3, 4), dim=-1)
    attention = Transformer(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                                        n_encoder_layers=1, n_decoder_layers=1)).encoder.layers[0].self_attn
    norms = one_head.contribution_norms(attention, weights, torch.randn(2, 4, 4), torch.tensor([1.0, 0.0]))
    assert (norms[1] == 0).all() and (norms[0] > 0).all() and (weights[1] > 0).all()


def test_a_pre_norm_model_adds_the_heads_to_the_residual_stream_before_its_norm():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=4, d_ff=32,
                                    n_encoder_layers=2, n_decoder_layers=2, norm_first=True)).eval()
    layer = model.encoder.layers[1]
    seen = {}
    hook = layer.register_forward_pre_hook(keep_input(seen))
    try:
        block = one_head.record_block(model, [5, 6, 7, 2], [1, 8, 9], "encoder", 2)
    finally:
        hook.remove()
    torch.testing.assert_close(block.residual, seen["x"][0])
    with torch.inference_mode():
        torch.testing.assert_close(block.x, layer.self_attn_norm.norm(seen["x"][0]))
    torch.testing.assert_close(block.block_output, block.residual + block.projected)


def run_cli(module, *args):
    return run_command(module, *args)


def test_the_command_line_reports_row_q_of_the_matrix_translate_json_prints():
    inspected = run_cli("transformer.inside_head", SENTENCE, "--kind", "cross", "--layer", "2", "--head", "3",
                        "--query", "4", "--json")
    translated = run_cli("transformer.translate", "--json", SENTENCE)
    assert inspected.returncode == 0, inspected.stderr
    report, full = json.loads(inspected.stdout.splitlines()[-1]), json.loads(translated.stdout.splitlines()[-1])
    assert report["translation"] == full["translation"]
    assert report["weights"] == pytest.approx(full["attention"]["cross"][1][2][3], abs=1e-5)
    assert report["key_tokens"] == full["source_tokens"] and report["query_token"] == full["target_tokens"][3]
    assert report["d_k"] == len(report["q"]) == len(report["output"]) == len(report["k"][0]) == len(report["v"][0])
    assert len(report["scores"]) == len(report["scaled"]) == len(report["mask"]) == \
        len(report["contribution_norms"]) == len(report["key_tokens"])


@pytest.mark.parametrize("args, message", [
    (["--kind", "encoder", "--query", "99"], "query 99 is out of range"),
    (["--layer", "0"], "expected a whole number of at least 1"),
    (["--head", "5"], "head 5 is out of range"),
    (["--kind", "sideways"], "invalid choice"),
])
def test_command_line_mistakes_are_one_line_errors(args, message):
    done = run_cli("transformer.inside_head", "A dog.", *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_the_logit_lens_at_the_last_layer_is_the_models_own_next_token_distribution(bundled, translation):
    lens = one_head.logit_lens(bundled.model, translation, top_k=3)
    layers = bundled.model.config.n_decoder_layers
    assert lens.probabilities.shape == (layers, translation.num_steps)
    torch.testing.assert_close(lens.probabilities[-1], torch.tensor(translation.token_probs), atol=1e-5, rtol=0)
    assert lens.top_ids[-1, :, 0].tolist() == [ids[0] for ids in translation.top_ids], "its favourite is the top one"
    assert lens.top_probs.shape == (layers, translation.num_steps, 3)


def test_layer_contributions_add_the_heads_as_vectors_so_never_exceed_their_norms(bundled, translation):
    maps = one_head.contribution_maps(bundled.model, translation, "cross")
    layers, heads = bundled.model.config.n_decoder_layers, bundled.model.config.n_heads
    assert maps.heads.shape == (layers, heads, translation.num_steps, len(translation.source_ids))
    assert maps.layers.shape == (layers, translation.num_steps, len(translation.source_ids))
    assert (maps.layers <= maps.heads.sum(1) + 1e-5).all(), "the triangle inequality"
    one = one_head.head_arithmetic(bundled.model, translation, "cross", 2, 3, 4)
    torch.testing.assert_close(maps.heads[1, 2, 3], one.contribution_norms, atol=1e-5, rtol=1e-5)


def test_switched_off_heads_contribute_nothing_in_the_maps_though_their_weights_stay(bundled, translation):
    from transformer.paper.model import HeadMask

    layers, heads = bundled.model.config.n_decoder_layers, bundled.model.config.n_heads
    off = HeadMask(cross=torch.zeros(layers, heads))
    maps = one_head.contribution_maps(bundled.model, translation, "cross", off)
    assert (maps.heads == 0).all() and (maps.layers == 0).all()
    block = one_head.record_block(bundled.model, translation.source_ids, translation.target_ids, "cross", 1,
                                         off)
    assert block.weights.amax() > 0.5, "the weights alone would still show crisp attention"


def test_the_blackboard_example_goes_through_the_models_own_attention():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    result = one_head.small_attention(q, q, v, causal=True)
    assert result.scores.tolist() == [[1, 0, 1], [0, 1, 1], [1, 1, 2]]
    torch.testing.assert_close(result.scaled, result.scores / math.sqrt(2))
    assert result.mask.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert result.weights[0].tolist() == [1.0, 0.0, 0.0], "the first query sees only itself"
    expected = torch.softmax(torch.tensor([0.0, 1.0]) / math.sqrt(2), -1)
    torch.testing.assert_close(result.weights[1, :2], expected)
    torch.testing.assert_close(result.output, result.weights @ v)
    assert one_head.small_attention(q, q, v).mask.tolist() == [[True] * 3] * 3, "the encoder sees every key"


def test_on_the_blackboard_fewer_queries_than_keys_see_the_keys_up_to_their_own_place():
    """Two new queries after three keys (a decoder step with a prefix): each sees every earlier key and itself."""
    q, k = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, 1.0]])
    v = torch.tensor([[1.0], [2.0], [3.0]])
    result = one_head.small_attention(q, k, v, causal=True)
    assert result.mask.tolist() == [[True, True, False], [True, True, True]]
    assert result.scores.tolist() == [[1.0, 2.0, 0.0], [2.0, 0.0, 2.0]]
    torch.testing.assert_close(result.weights[0, :2], torch.softmax(torch.tensor([1.0, 2.0]) / math.sqrt(2), -1))
    assert result.weights[0, 2] == 0 and result.output.shape == (2, 1)
    torch.testing.assert_close(result.output, result.weights @ v)
    assert one_head.small_attention(q, k, v).mask.all(), "without causal, every key is seen"
