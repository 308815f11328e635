"""A Marian (opus-mt) translator opens in this project's own modules and computes what transformers computes: the
same logits and attention maps, the same greedy and beam translations, the same tokens."""

import copy
import json
import os
import shutil

import pytest
import torch
from transformers import MarianMTModel, MarianTokenizer

from helpers import assert_same_pass, passes_of_both, run_command
from marian_models import ENGLISH, GERMAN, build_marian
from transformer.cpu import DecodingWeight
from transformer.data import load_multi30k
from transformer.files import download, hub
from transformer.files.checkpoint import load_checkpoint
from transformer.files.hub import HubError
from transformer.inside.decoder_lens import read_at_layer
from transformer.paper.config import ModelConfig
from transformer.paper.decoding import SearchRules, beam_search, greedy_search
from transformer.paper.sentences import translate_batch

MAX_TOKENS = 30  # enough for every sentence the test model copies to end by itself


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    return build_marian(tmp_path_factory.mktemp("marian"), trained_steps=100)


@pytest.fixture(scope="module")
def converted(marian_dir, tmp_path_factory):
    return load_checkpoint(hub.convert(marian_dir, tmp_path_factory.mktemp("ours") / "tiny-marian"), device="cpu")


@pytest.fixture(scope="module")
def reference(marian_dir):
    return MarianMTModel.from_pretrained(marian_dir, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def marian_tokenizer(marian_dir):
    return MarianTokenizer.from_pretrained(marian_dir)


@pytest.mark.parametrize("packed", [False, True], ids=["as-stored", "prepacked"])
def test_logits_and_every_attention_map_equal_transformers(converted, reference, packed, monkeypatch):
    """With the weights as stored, and prepacked as decoding on a CPU reads large ones (cpu.DecodingWeight)."""
    monkeypatch.setattr(DecodingWeight, "LARGE", 1 if packed else 2**62)
    monkeypatch.setattr(DecodingWeight, "WIDE", 1)
    ours, theirs, _ = passes_of_both(converted.model, reference,
                                     [converted.source_tokenizer.encode(s) for s in ENGLISH[:4]], lowest_id=2)
    assert_same_pass(ours, theirs)


def ended_body(generated: list[int], eos_id: int) -> list[int]:
    """transformers' output without its start token, up to its end of sentence."""
    tokens = generated[1:]
    return tokens[: tokens.index(eos_id)] if eos_id in tokens else tokens


def test_greedy_translations_are_identical(converted, reference):
    model = converted.model
    for sentence in ENGLISH[:24]:
        src = torch.tensor([converted.source_tokenizer.encode(sentence)])
        theirs = reference.generate(src, num_beams=1, do_sample=False, max_new_tokens=MAX_TOKENS + 1)[0].tolist()
        assert greedy_search(model, src, MAX_TOKENS)[0] == ended_body(theirs, model.config.eos_id), sentence


def test_decoderlens_from_each_encoder_layer_is_transformers_with_its_encoder_cut_there(converted, reference):
    """DecoderLens held to transformers' own model whose encoder keeps its first k layers (Marian is post-norm: no
    final norm)."""
    model = converted.model
    for layer in range(1, model.config.n_encoder_layers):
        cut = copy.deepcopy(reference)
        cut.model.encoder.layers = cut.model.encoder.layers[:layer]
        differ = 0
        for sentence in ENGLISH[:12]:
            src = torch.tensor([converted.source_tokenizer.encode(sentence)])
            theirs = ended_body(cut.generate(src, num_beams=1, do_sample=False, max_new_tokens=MAX_TOKENS + 1)[0]
                                .tolist(), model.config.eos_id)
            assert greedy_search(read_at_layer(model, layer), src, MAX_TOKENS)[0] == theirs, (layer, sentence)
            differ += theirs != greedy_search(model, src, MAX_TOKENS)[0]
        assert differ, "reading an earlier layer changes some translations"


def test_beam_search_with_the_published_settings_is_identical(converted, reference):
    """The generation config's settings (beam 4, no early stopping, renormalised scores): the same translation on
    every sentence. fairseq's rules (done at k ended hypotheses) give other translations on some, so the rules are
    what makes them equal."""
    model, rules = converted.model, converted.rules
    assert (converted.search["beam_size"], rules) == (4, SearchRules(early_stopping=False, renormalize=True))
    lengths, fairseq_differs = set(), 0
    for sentence in ENGLISH[:24]:
        src = torch.tensor([converted.source_tokenizer.encode(sentence)])
        theirs = ended_body(reference.generate(src, max_new_tokens=MAX_TOKENS + 1)[0].tolist(), model.config.eos_id)
        ours = beam_search(model, src, 4, converted.length_penalty, MAX_TOKENS, rules=rules)[0][0].tokens
        assert ours == theirs, sentence
        lengths.add(len(ours))
        fairseq_differs += beam_search(model, src, 4, converted.length_penalty, MAX_TOKENS)[0][0].tokens != theirs
    assert len(lengths) > 5, "the test model's translations end at many lengths"
    assert fairseq_differs > 0


def test_batched_translations_follow_the_published_rules_and_read_as_transformers_decodes(converted, reference,
                                                                                        marian_tokenizer):
    sentences = ENGLISH[24:32]
    ours = translate_batch(converted.model, converted.source_tokenizer, converted.target_tokenizer, sentences,
                           beam_size=4, max_length=MAX_TOKENS, rules=converted.rules)
    inputs = marian_tokenizer(sentences, return_tensors="pt", padding=True)
    generated = reference.generate(**inputs, max_new_tokens=MAX_TOKENS + 1)
    assert ours == marian_tokenizer.batch_decode(generated, skip_special_tokens=True)


def test_tokens_and_texts_equal_marian_tokenizer(converted, marian_tokenizer):
    """On the test's own sentences, and on all of Multi30K's val sentences where the data is present."""
    english, german = list(ENGLISH), list(GERMAN)
    if os.environ.get("MULTI30K_DIR"):
        val = load_multi30k("val", "en", "de")
        english, german = english + val.sources, german + val.targets
        assert len(english) > 1000
    source, target = converted.source_tokenizer, converted.target_tokenizer
    assert [source.encode(s) for s in english] == marian_tokenizer(english).input_ids
    expected = marian_tokenizer(text_target=german).input_ids
    assert [target.encode(s) for s in german] == expected
    assert [target.decode(ids) for ids in expected] == marian_tokenizer.batch_decode(expected, skip_special_tokens=True)


def test_pytorch_model_bin_is_read_as_tensors_only(marian_dir, converted, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(marian_dir, pickled)
    (pickled / "model.safetensors").unlink()
    torch.save(MarianMTModel.from_pretrained(marian_dir).state_dict(), pickled / "pytorch_model.bin")
    reloaded = load_checkpoint(hub.convert(pickled, tmp_path / "from-bin"), device="cpu")
    for name, tensor in converted.model.state_dict().items():
        torch.testing.assert_close(reloaded.model.state_dict()[name], tensor, atol=0, rtol=0, msg=name)

    class Payload:
        def __reduce__(self):
            return (os.system, ("echo unpickled > " + str(tmp_path / "ran"),))

    torch.save({"weights": Payload()}, pickled / "pytorch_model.bin")
    with pytest.raises(HubError, match="weights cannot be read"):
        hub.convert(pickled, tmp_path / "refused")
    assert not (tmp_path / "ran").exists() and not (tmp_path / "refused").exists()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_model_published_in_half_precision_is_kept_in_it_on_disk(marian_dir, converted, tmp_path, dtype):
    half = tmp_path / "half"
    shutil.copytree(marian_dir, half)
    MarianMTModel.from_pretrained(marian_dir).to(dtype).save_pretrained(half)
    out = hub.convert(half, tmp_path / "converted")
    assert {tensor.dtype for tensor in hub.read_weights(out).values()} == {dtype}
    reloaded = load_checkpoint(out, device="cpu")  # decoded in float32 unless asked otherwise
    assert reloaded.model.dtype == torch.float32
    for name, tensor in converted.model.state_dict().items():
        torch.testing.assert_close(reloaded.model.state_dict()[name], tensor.to(dtype).float(), atol=0, rtol=0,
                                   msg=name)
    assert load_checkpoint(out, device="cpu", dtype=torch.bfloat16).model.dtype == torch.bfloat16


def test_the_converted_directory_is_an_ordinary_checkpoint_with_its_origin(converted):
    config = converted.model.config
    assert (config.activation, config.position_layout, config.output_bias) == ("silu", "halves", True)
    assert (config.start_id, config.pad_id, config.eos_id) == (config.tgt_vocab_size - 1,) * 2 + (0,)
    assert converted.info["source"]["license"] == "cc-by-4.0"
    for words in ("Converted from", "cc-by-4.0", "not measured here", "A tiny test translator"):
        assert words in converted.card
    translation = converted.translate("A dog runs.", beam_size=4)
    assert translation.target_pieces[0] == "<pad>" and translation.predicted_pieces[-1] == "</s>"


def test_the_papers_layout_stays_the_default():
    config = ModelConfig(src_vocab_size=10, tgt_vocab_size=10)
    assert (config.activation, config.position_layout, config.scale_embeddings, config.output_bias) == \
        ("relu", "interleaved", True, False)
    assert (config.pad_id, config.start_id, config.eos_id) == (0, 2, 3)


@pytest.mark.parametrize("change, message", [
    (lambda d: (d / "config.json").write_text(json.dumps({"model_type": "bert"})), "bert model, not a translator this project opens"),
    (lambda d: (d / "source.spm").unlink(), "no source.spm"),
    (lambda d: (d / "config.json").write_text(json.dumps(
        {**json.loads((d / "config.json").read_text()), "activation_function": "tanh"})), "uses 'tanh'"),
    (lambda d: (d / "model.safetensors").write_bytes(b"not weights"), "weights cannot be read"),
    (lambda d: (d / "vocab.json").write_text("[1, 2]"), "vocab.json is not a JSON object"),
])
def test_a_model_that_cannot_be_opened_gets_one_sentence_and_nothing_is_written(marian_dir, tmp_path, change,
                                                                                message):
    broken = tmp_path / "broken"
    shutil.copytree(marian_dir, broken)
    change(broken)
    with pytest.raises(HubError, match=message):
        hub.convert(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_hub_id_is_read_from_the_download_cache_when_the_hub_cannot_be_reached(marian_dir, tmp_path):
    """As huggingface_hub lays out its cache: refs/main names the commit, snapshots/COMMIT holds the files."""
    repo = tmp_path / "cache" / "models--Helsinki-NLP--opus-mt-tiny"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(marian_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    out = download.open_model("Helsinki-NLP/opus-mt-tiny", tmp_path / "opus-mt-tiny", cache_dir=tmp_path / "cache")
    checkpoint = load_checkpoint(out, device="cpu")
    assert checkpoint.info["source"] == {"name": "Helsinki-NLP/opus-mt-tiny", "revision": commit,
                                         "license": "cc-by-4.0", "converted_from": "transformers MarianMTModel"}
    assert "https://huggingface.co/Helsinki-NLP/opus-mt-tiny" in checkpoint.card and commit in checkpoint.card


@pytest.mark.parametrize("name, message", [
    ("Helsinki-NLP/opus-mt-xx-yy", "cannot be reached"),
    ("not an id", "not a Hub model id"),
    ("../../etc/passwd", "not a Hub model id"),
])
def test_a_hub_id_that_cannot_be_fetched_gets_one_sentence(tmp_path, name, message):
    with pytest.raises(HubError, match=message):
        download.open_model(name, tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "out").exists()


def test_command_line_converts_and_translate_limits_generated_tokens(marian_dir, tmp_path):
    out = tmp_path / "converted"
    run = run_command
    converted = run("transformer.hub", str(marian_dir), "--out", str(out))
    assert converted.returncode == 0, converted.stderr
    translated = run("transformer.translate", "--checkpoint", str(out), "--max-length", "3", "--json",
                     "Two dogs play in the snow.")
    assert translated.returncode == 0, translated.stderr
    result = json.loads(translated.stdout)
    assert result["target_tokens"][0] == "<pad>" and len(result["target_tokens"]) <= 1 + 3
    refused = run("transformer.hub", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x"))
    assert refused.returncode == 2 and refused.stderr.startswith("error [hub.not_repo_id]: ")
    assert len(refused.stderr.splitlines()) == 1
