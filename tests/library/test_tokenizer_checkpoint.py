"""Tokenizers and checkpoints: what is saved loads back exactly, and anything broken is refused with a clear message."""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from sentencepiece import sentencepiece_model_pb2

from transformer.files import checkpoint, weights
from transformer.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.files.weights import resolve
from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

PACKAGE = Path(__file__).resolve().parents[2] / "transformer"

SENTENCES = [f"{a} {b} {c}." for a in ("A man", "A woman", "Two dogs", "The child", "A cat", "Some people")
             for b in ("walks", "runs", "sits", "plays", "sleeps")
             for c in ("in the park", "on the street", "near the water")]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(SENTENCES, vocab_size=60)


def tiny_model(tokenizer: Tokenizer, seed: int = 0, **overrides) -> Transformer:
    values = dict(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=32, n_heads=4,
                  n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=64)
    values.update(overrides)
    torch.manual_seed(seed)
    return Transformer(ModelConfig(**values)).eval()


def logits_of(model: Transformer, tokenizer: Tokenizer) -> torch.Tensor:
    src = torch.tensor([tokenizer.encode("A man walks in the park.")])
    tgt = torch.tensor([tokenizer.encode("Two dogs run.", add_bos=True, add_eos=False)])
    with torch.no_grad():
        return model(src, tgt).logits


@pytest.fixture
def saved(tmp_path, tokenizer):
    """A model and the checkpoint directory it was saved to."""
    model = tiny_model(tokenizer)
    directory = save_checkpoint(tmp_path / "ckpt", model, tokenizer, tokenizer, info={"note": "test"})
    return model, directory


# --- tokenizer -----------------------------------------------------------------------------------

def test_tokenizer_trains_on_a_small_corpus_within_its_vocabulary_ceiling(tokenizer):
    assert 4 < tokenizer.vocab_size <= 60


def test_tokenizer_round_trips_text(tokenizer):
    for text in SENTENCES[:10] + ["Two people sit near the park."]:
        ids = tokenizer.encode(text)
        assert ids[-1] == EOS_ID and BOS_ID not in ids
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode_batch(SENTENCES[:3], add_bos=True) == [tokenizer.encode(s, add_bos=True)
                                                                   for s in SENTENCES[:3]]


def test_special_ids_are_fixed_and_shown_in_angle_brackets(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert tokenizer.pieces([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<s>", "</s>"]
    for piece, token_id in (("<pad>", 0), ("<unk>", 1), ("<s>", 2), ("</s>", 3)):
        assert tokenizer.id_of(piece) == token_id


def test_specials_are_named_alike_whatever_a_sentencepiece_model_calls_them():
    """A model trained with its own names for the specials still shows and reads them as <pad>, <unk>, <s>, </s>."""
    renamed = Tokenizer.train(SENTENCES, vocab_size=60, pad_piece="[PAD]", unk_piece="[UNK]", bos_piece="[BOS]",
                              eos_piece="[EOS]")
    assert renamed.processor.id_to_piece(PAD_ID) == "[PAD]", "the options reach sentencepiece"
    for piece, token_id in (("<pad>", PAD_ID), ("<unk>", UNK_ID), ("<s>", BOS_ID), ("</s>", EOS_ID)):
        assert renamed.id_of(piece) == token_id and renamed.piece(token_id) == piece


def test_a_tokenizer_is_trained_with_the_model_type_and_character_coverage_asked_for():
    """Every character of a tiny corpus is kept (coverage 1, not sentencepiece's 0.9995): "ø" occurs once."""
    trained = Tokenizer.train([*SENTENCES, "A man walks to Tromsø."], vocab_size=60, model_type="bpe")
    spec = sentencepiece_model_pb2.ModelProto.FromString(trained.model_proto).trainer_spec
    assert spec.model_type == sentencepiece_model_pb2.TrainerSpec.BPE and spec.character_coverage == 1.0
    assert UNK_ID not in trained.encode("Tromsø")


def test_a_sentencepiece_model_with_other_special_ids_is_refused_naming_them():
    written = io.BytesIO()  # sentencepiece's own numbering: <unk> 0, <s> 1, </s> 2, no padding
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=written, vocab_size=60,
                                   hard_vocab_limit=False, minloglevel=2)
    with pytest.raises(ValueError) as refused:
        Tokenizer(written.getvalue())
    assert str(refused.value) == ("sentencepiece model has special ids {'pad': -1, 'unk': 0, 'bos': 1, 'eos': 2}, "
                                  "expected {'pad': 0, 'unk': 1, 'bos': 2, 'eos': 3}")


def test_encode_adds_bos_and_eos_on_request_and_decode_drops_specials(tokenizer):
    ids = tokenizer.encode("A cat sits.", add_bos=True, add_eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    pieces = tokenizer.pieces(ids)
    assert pieces[0] == "<s>" and pieces[-1] == "</s>"
    assert [tokenizer.id_of(p) for p in pieces] == ids
    assert tokenizer.decode([PAD_ID, BOS_ID] + ids + [PAD_ID]) == "A cat sits."


def test_unseen_characters_become_unk(tokenizer):
    assert UNK_ID in tokenizer.encode("Ωμέγα")


def test_a_typed_piece_is_read_as_shown_else_as_a_word_start_and_none_when_it_is_neither(tokenizer):
    assert tokenizer.typed_id("at") == tokenizer.id_of("at"), "a piece as the page shows it"
    assert tokenizer.typed_id("wa") == tokenizer.typed_id("▁wa") == tokenizer.id_of("▁wa"), "a word typed bare"
    assert tokenizer.typed_id("▁▁wa") == tokenizer.id_of("▁wa")
    assert tokenizer.typed_id("<unk>") == UNK_ID, "<unk> is a piece too"
    assert tokenizer.typed_id("Ωμέγα") is None and tokenizer.typed_id("<UNK>") is None


def test_tokenizer_save_and_load_round_trip(tmp_path, tokenizer):
    tokenizer.save(tmp_path / "tok.model")
    again = Tokenizer.load(tmp_path / "tok.model")
    assert again.model_proto == tokenizer.model_proto
    assert again.vocab_size == tokenizer.vocab_size
    assert again.encode(SENTENCES[7]) == tokenizer.encode(SENTENCES[7])


def test_tokenizer_refuses_missing_or_invalid_files_and_empty_text(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer model not found"):
        Tokenizer.load(tmp_path / "absent.model")
    (tmp_path / "junk.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(ValueError, match="not a valid sentencepiece model"):
        Tokenizer.load(tmp_path / "junk.model")
    with pytest.raises(ValueError, match="^cannot train a tokenizer on no text$"):
        Tokenizer.train(["", "   "])


# --- checkpoints: round trips --------------------------------------------------------------------

def test_checkpoint_round_trip_gives_identical_logits(saved, tokenizer):
    model, directory = saved
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "model.safetensors", "tokenizer.model"]
    loaded = load_checkpoint(directory, device="cpu")
    assert not loaded.model.training
    assert loaded.model.config == model.config
    assert loaded.info == {"note": "test"}
    assert loaded.name == "ckpt" and loaded.path == directory
    assert loaded.source_tokenizer.model_proto == tokenizer.model_proto
    assert torch.equal(logits_of(loaded.model, tokenizer), logits_of(model, tokenizer))


def test_shared_embedding_is_stored_once(saved):
    model, directory = saved
    config = json.loads((directory / "config.json").read_text())
    assert config["source_tokenizer"] == config["target_tokenizer"] == "tokenizer.model"
    stored = weights.read_weights(directory)
    assert set(stored) == set(weights.unique_state_dict(model))
    assert len(stored) < len(model.state_dict())


def test_float16_storage_loads_back_into_float32_parameters(tmp_path, tokenizer):
    model = tiny_model(tokenizer)
    directory = save_checkpoint(tmp_path / "half", model, tokenizer, tokenizer, dtype=torch.float16)
    assert all(t.dtype == torch.float16 for t in weights.read_weights(directory).values())
    loaded = load_checkpoint(directory, device="cpu")
    for (name, original), (_, restored) in zip(model.state_dict().items(), loaded.model.state_dict().items()):
        assert restored.dtype == torch.float32, name
        assert torch.equal(restored, original.half().float()), name
        assert torch.allclose(restored, original, rtol=1e-3, atol=1e-4), name
    assert torch.allclose(logits_of(loaded.model, tokenizer), logits_of(model, tokenizer), atol=1e-2)


def test_large_weights_are_sharded_with_an_index_and_load_back_identically(tmp_path, tokenizer):
    model = tiny_model(tokenizer)
    directory = save_checkpoint(tmp_path / "sharded", model, tokenizer, tokenizer, max_shard_bytes=20_000)
    shards = sorted(p.name for p in directory.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 3
    assert all(re.fullmatch(rf"model-\d{{5}}-of-{len(shards):05d}\.safetensors", name) for name in shards)
    assert not (directory / "model.safetensors").exists()
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == shards
    assert set(index["weight_map"]) == set(weights.unique_state_dict(model))
    loaded = load_checkpoint(directory, device="cpu")
    assert torch.equal(logits_of(loaded.model, tokenizer), logits_of(model, tokenizer))


def test_weights_are_as_readable_as_the_rest_of_the_checkpoint(tmp_path, tokenizer):
    """A checkpoint another user serves must not hold weights only their writer can read."""
    model = tiny_model(tokenizer)
    for directory in (save_checkpoint(tmp_path / "whole", model, tokenizer, tokenizer),
                      save_checkpoint(tmp_path / "sharded", model, tokenizer, tokenizer, max_shard_bytes=20_000)):
        config_mode = (directory / "config.json").stat().st_mode
        assert {p.stat().st_mode for p in directory.glob("*.safetensors")} == {config_mode}


def test_separate_tokenizers_are_saved_per_side(tmp_path, tokenizer):
    other = Tokenizer.train([s.upper() for s in SENTENCES], vocab_size=60)
    model = tiny_model(tokenizer, share_embeddings=False, tgt_vocab_size=other.vocab_size)
    directory = save_checkpoint(tmp_path / "two", model, tokenizer, other)
    assert {"source.model", "target.model"} <= {p.name for p in directory.iterdir()}
    loaded = load_checkpoint(directory, device="cpu")
    assert loaded.target_tokenizer.model_proto == other.model_proto
    assert loaded.source_tokenizer.model_proto == tokenizer.model_proto


def test_card_and_metrics_travel_with_the_checkpoint(tmp_path, tokenizer):
    directory = save_checkpoint(tmp_path / "carded", tiny_model(tokenizer), tokenizer, tokenizer,
                                card="# Tiny\n", metrics={"bleu": 12.5})
    loaded = load_checkpoint(directory, device="cpu")
    assert (loaded.card, loaded.metrics) == ("# Tiny\n", {"bleu": 12.5})
    assert checkpoint.list_checkpoints(tmp_path) == [directory]


# --- checkpoints: errors -------------------------------------------------------------------------

def test_missing_directory_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint directory not found"):
        load_checkpoint(tmp_path / "never-saved")


def test_truncated_weights_are_a_checkpoint_error(saved):
    _, directory = saved
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="unreadable or truncated"):
        load_checkpoint(directory, device="cpu")


@pytest.mark.parametrize("field, value, message", [
    ("d_model", 64, "do not match config.json.*has shape"),
    ("n_encoder_layers", 2, "do not match config.json: missing"),  # an extra layer
])
def test_config_that_does_not_match_the_weights_is_a_checkpoint_error(saved, field, value, message):
    _, directory = saved
    config = json.loads((directory / "config.json").read_text())
    config["model"][field] = value
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(directory, device="cpu")


def edit_config(directory: Path, change) -> None:
    config = json.loads((directory / "config.json").read_text())
    change(config)
    (directory / "config.json").write_text(json.dumps(config))


def test_a_config_claiming_huge_sizes_is_refused_before_anything_is_allocated(saved):
    _, directory = saved
    # Terabytes of parameters: building the model first would fail with an allocation error, not this message.
    edit_config(directory, lambda config: config["model"].update(d_model=2**20, d_ff=2**22, n_heads=8,
                                                                 n_encoder_layers=12, n_decoder_layers=12))
    with pytest.raises(CheckpointError, match="do not match config.json"):
        load_checkpoint(directory, device="cpu")



def test_checking_the_shapes_before_loading_starts_no_compiler(saved):
    """The check builds the model on the meta device. Drawing weights or computing the position table there would
    import PyTorch's compiler stack: 1.5 s more at every start of the app."""
    _, directory = saved
    loads = ("import sys; from transformer.files.checkpoint import load_checkpoint; "
             f"load_checkpoint({str(directory)!r}, device='cpu'); print('torch._dynamo' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", loads], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[2])
    assert answer.stdout.strip() == "False", answer.stderr

@pytest.mark.parametrize("field, value", [("n_heads", 0), ("d_model", -4), ("n_encoder_layers", 0),
                                          ("d_ff", "wide"), ("max_len", 2.5)])
def test_a_config_with_a_size_that_is_not_a_positive_whole_number_is_named(saved, field, value):
    _, directory = saved
    edit_config(directory, lambda config: config["model"].update({field: value}))
    with pytest.raises(CheckpointError, match=f"{field} must be a positive whole number"):
        load_checkpoint(directory, device="cpu")


def test_weights_that_are_a_git_lfs_pointer_are_named_as_one(saved):
    _, directory = saved
    (directory / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\n"
                                                 "oid sha256:0123\nsize 123456\n")
    with pytest.raises(CheckpointError, match="Git LFS pointer.*git lfs pull"):
        load_checkpoint(directory, device="cpu")


def test_a_card_metrics_or_training_record_that_is_not_what_it_should_be_is_ignored(saved):
    _, directory = saved
    (directory / "README.md").write_bytes(b"# Card\n\xff\xfe not UTF-8")
    (directory / "metrics.json").write_text("[]")
    edit_config(directory, lambda config: config.update(training="x"))
    loaded = load_checkpoint(directory, device="cpu")
    assert loaded.card.startswith("# Card") and loaded.metrics == {} and loaded.info["training"] == {}
    (directory / "metrics.json").write_text('{"length_penalty": "strong", "bleu": 30}')
    loaded = load_checkpoint(directory, device="cpu")
    assert loaded.length_penalty == 1.0 and loaded.metrics == {"bleu": 30}


def test_invalid_config_json_is_a_checkpoint_error(saved):
    _, directory = saved
    (directory / "config.json").write_text('{"model": {"d_model": ')
    with pytest.raises(CheckpointError, match="not a valid model config"):
        load_checkpoint(directory, device="cpu")


def test_missing_tokenizer_is_a_checkpoint_error(saved):
    _, directory = saved
    (directory / "tokenizer.model").unlink()
    with pytest.raises(CheckpointError, match="tokenizer of .* is missing or invalid"):
        load_checkpoint(directory, device="cpu")


def test_tokenizer_of_another_size_is_a_checkpoint_error(saved):
    _, directory = saved
    smaller = Tokenizer.train(SENTENCES, vocab_size=30)
    assert smaller.vocab_size != load_checkpoint(directory, device="cpu").source_tokenizer.vocab_size
    smaller.save(directory / "tokenizer.model")
    with pytest.raises(CheckpointError, match="pieces but the model expects"):
        load_checkpoint(directory, device="cpu")


def message_without_path(error: pytest.ExceptionInfo, directory: Path) -> str:
    """The error message with the directory's path taken out (tmp_path holds the test's name)."""
    return str(error.value).replace(str(directory), "<dir>")


def test_pickle_only_directory_is_refused_without_unpickling(tmp_path, tokenizer):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    torch.save(tiny_model(tokenizer).state_dict(), directory / "model.pt")
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(directory, device="cpu")
    assert "pickle" in message_without_path(error, directory)
    with pytest.raises(CheckpointError) as error:
        checkpoint.read_config(directory)
    assert "pickle" in message_without_path(error, directory)


def test_pickle_weights_beside_a_config_are_refused(saved):
    model, directory = saved
    (directory / "model.safetensors").unlink()
    torch.save(model.state_dict(), directory / "model.pt")
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(directory, device="cpu")
    assert "pickle" in message_without_path(error, directory)


def test_directory_without_config_or_weights_is_not_a_checkpoint(tmp_path):
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(CheckpointError, match="not a checkpoint: .* has no config.json"):
        load_checkpoint(tmp_path / "ckpt", device="cpu")


# The one place pickles are read: the pipe between the server and the process it starts for costly work, which
# carries only what one of the two wrote (never a file, a download or a request).
OWN_PIPE = "ui/runtime/worker.py"


def test_no_code_unpickles_anything_but_tensors():
    """torch.load runs only with weights_only=True (tensors, nothing that runs code: a Hub model's
    pytorch_model.bin); pickle itself never loads but from the costly-work process's own pipe. The library, the
    app and app.py."""
    root = PACKAGE.parent
    for path in [root / "app.py", *sorted(PACKAGE.rglob("*.py")), *sorted((root / "ui").rglob("*.py"))]:
        source = path.read_text()
        for call in re.finditer(r"torch\.load\(([^)]*)\)", source):
            assert "weights_only=True" in call.group(1), path.name
        unpickles = re.findall(r"\b(?:c?pickle|dill)\.loads?\((\w*)|import\s+dill|Unpickler\(", source)
        if path.relative_to(root).as_posix() == OWN_PIPE:
            assert sorted(unpickles) == ["reply", "request"], "only what came through the pipe (read_frame)"
        else:
            assert not unpickles, path.name



# --- atomic writes -------------------------------------------------------------------------------

def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_intact(saved, tokenizer):
    model, directory = saved
    before = {p.name: p.read_bytes() for p in directory.iterdir()}

    def write(tmp: Path) -> None:
        (tmp / "config.json").write_text("{}")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        weights.write_directory_atomically(directory, write)
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    loaded = load_checkpoint(directory, device="cpu")
    assert torch.equal(logits_of(loaded.model, tokenizer), logits_of(model, tokenizer))
    assert checkpoint.list_checkpoints(directory.parent) == [directory]


def test_saving_again_replaces_the_checkpoint_and_leaves_no_twins(saved, tokenizer):
    _, directory = saved
    newer = tiny_model(tokenizer, seed=1)
    save_checkpoint(directory, newer, tokenizer, tokenizer)
    loaded = load_checkpoint(directory, device="cpu")
    assert torch.equal(logits_of(loaded.model, tokenizer), logits_of(newer, tokenizer))
    assert sorted(p.name for p in directory.parent.iterdir()) == ["ckpt"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads file descriptors' paths from /proc")
def test_a_save_flushes_its_files_and_the_renames_to_disk(tmp_path, tokenizer, monkeypatch):
    synced, real_fsync = [], weights.os.fsync

    def recording_fsync(fd):
        synced.append(Path(weights.os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(weights.os, "fsync", recording_fsync)
    directory = save_checkpoint(tmp_path / "durable", tiny_model(tokenizer), tokenizer, tokenizer)
    assert tmp_path / "durable.tmp" / "config.json" in synced, "every file is flushed before the rename"
    assert synced[-1] == tmp_path, "the parent directory is flushed after the rename, so the new name is durable"
    assert directory == tmp_path / "durable"


def test_resolve_recovers_the_old_twin_of_a_save_cut_off_between_renames(saved, tokenizer):
    model, directory = saved
    old = directory.with_name(directory.name + ".old")
    directory.rename(old)  # as if killed after moving the previous checkpoint aside
    assert resolve(directory) == old
    loaded = load_checkpoint(directory, device="cpu")
    assert loaded.path == old
    assert torch.equal(logits_of(loaded.model, tokenizer), logits_of(model, tokenizer))


def test_resolve_prefers_the_directory_itself(saved):
    _, directory = saved
    directory.with_name(directory.name + ".old").mkdir()
    assert resolve(directory) == directory
