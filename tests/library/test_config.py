"""A model's config: the paper's base model by default, named presets, a JSON file that reads back as written, and
a message naming each value that cannot build a model."""

import re

import pytest

from transformer.paper.config import PRESETS, ModelConfig, preset


def test_the_defaults_are_the_papers_base_model():
    """Table 3, row "base": d_model 512, 8 heads of 64, 6 layers each side, d_ff 2048, dropout 0.1; post-norm with
    one shared embedding that is also the output projection (section 3.4)."""
    config = ModelConfig(src_vocab_size=100, tgt_vocab_size=100)
    assert (config.d_model, config.n_heads, config.head_dim, config.n_encoder_layers, config.n_decoder_layers,
            config.d_ff, config.dropout) == (512, 8, 64, 6, 6, 2048, 0.1)
    assert config.share_embeddings and config.tie_output_projection and not config.norm_first
    assert (config.position_layout, config.activation, config.scale_embeddings) == ("interleaved", "relu", True)
    assert ModelConfig(**PRESETS["base"], src_vocab_size=100, tgt_vocab_size=100) == config


def test_each_attention_kind_lives_in_its_stacks_layers():
    config = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, n_encoder_layers=2, n_decoder_layers=3)
    assert [config.layers(kind) for kind in ("encoder", "decoder", "cross")] == [2, 3, 3]


def test_a_preset_is_named_sizes_with_any_field_overridden_and_none_meaning_the_presets():
    tiny = preset("tiny", 50, 60, share_embeddings=False, d_model=None, n_heads=2)
    assert (tiny.src_vocab_size, tiny.tgt_vocab_size, tiny.d_model, tiny.n_heads) == (50, 60, 64, 2)
    assert tiny.d_ff == PRESETS["tiny"]["d_ff"] and tiny.max_len == PRESETS["tiny"]["max_len"]
    with pytest.raises(ValueError, match=re.escape("unknown preset 'huge'; choose one of tiny, small, base")):
        preset("huge", 50, 50)


def test_a_config_file_reads_back_as_written_and_unknown_keys_are_named(tmp_path):
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=40, share_embeddings=False, position_layout="fairseq",
                         position_offset=2, output_bias=True, activation="gelu")
    config.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == config
    written = (tmp_path / "config.json").read_text()
    assert written.startswith('{\n  "') and '\n  "d_model": 512,\n' in written and written.endswith("\n}\n"), \
        "a setting a line, indented by two spaces, for people to read"
    with pytest.raises(ValueError, match=re.escape("unknown model config keys: colour, size")):
        ModelConfig.from_dict({**config.to_dict(), "size": 1, "colour": "red"})


@pytest.mark.parametrize("values, message", [
    ({"src_vocab_size": 0}, "src_vocab_size must be a positive whole number, got 0"),
    ({"d_model": True}, "d_model must be a positive whole number, got True"),
    ({"n_decoder_layers": 1.5}, "n_decoder_layers must be a positive whole number, got 1.5"),
    ({"d_model": 30, "n_heads": 4}, "d_model (30) must be divisible by n_heads (4)"),
    ({"tgt_vocab_size": 11}, "share_embeddings needs one joint vocabulary (src_vocab_size == tgt_vocab_size)"),
    ({"dropout": 1.0}, "dropout rates must lie in [0, 1)"),
    ({"dropout": -0.1}, "dropout rates must lie in [0, 1)"),
    ({"attention_dropout": 1.0}, "dropout rates must lie in [0, 1)"),
    ({"pad_id": -1}, "pad_id must be a token id (a whole number from 0), got -1"),
    ({"eos_id": True}, "eos_id must be a token id (a whole number from 0), got True"),
    ({"activation": "tanh"}, "activation must be one of relu, silu, gelu, got 'tanh'"),
    ({"position_offset": -2}, "position_offset must be a whole number from 0, got -2"),
    ({"position_offset": False}, "position_offset must be a whole number from 0, got False"),
    ({"position_layout": "spiral"},
     "position_layout must be one of interleaved, halves, fairseq, learned, got 'spiral'"),
])
def test_each_value_that_cannot_build_a_model_is_named(values, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ModelConfig(**{"src_vocab_size": 10, "tgt_vocab_size": 10, "d_model": 8, "n_heads": 2, **values})
