"""The multilingual translators (M2M100, NLLB-200, SMaLL-100, mBART-50) open in this project's own modules and compute
what transformers computes: the same logits and attention maps, the same greedy and beam-5 translations with the
target language's token forced, the same tokens and language ids."""

import copy
import json
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from transformers import (M2M100ForConditionalGeneration, M2M100Tokenizer, MBart50Tokenizer,
                          MBartForConditionalGeneration, NllbTokenizer)

from helpers import assert_same_pass, passes_of_both, run_command
from marian_models import ENGLISH, GERMAN
from multilingual_models import FAMILIES, build_multilingual
from transformer import evaluate as evaluate_module
from transformer.errors import InputError
from transformer.files import hub
from transformer.files.checkpoint import CheckpointError, load_checkpoint
from transformer.files.hub import HubError
from transformer.files.multilingual import iso_code
from transformer.inside.decoder_lens import read_at_layer
from transformer.paper.decoding import beam_search, greedy_search

MAX_TOKENS = 12
LANGUAGE_LISTS = Path(__file__).resolve().parents[2] / "transformer" / "files" / "languages.json"
TARGETS = {"m2m100": "ru", "small100": "ja", "nllb": "fra_Latn", "mbart50": "fr_XX"}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def original(family, tmp_path_factory):
    return build_multilingual(tmp_path_factory.mktemp(family), family, seed=FAMILIES.index(family))


@pytest.fixture(scope="module")
def converted(original, tmp_path_factory):
    return load_checkpoint(hub.convert(original, tmp_path_factory.mktemp("ours") / original.name), device="cpu")


@pytest.fixture(scope="module")
def reference(family, original):
    kind = MBartForConditionalGeneration if family == "mbart50" else M2M100ForConditionalGeneration
    return kind.from_pretrained(original, attn_implementation="eager").eval()


def their_tokenizer(family, original, source, target):
    if family in ("m2m100", "small100"):  # SMaLL-100's own tokenizer marks the source with the target language
        return M2M100Tokenizer(original / "vocab.json", original / "sentencepiece.bpe.model",
                               language_codes="m2m100", src_lang=target if family == "small100" else source,
                               tgt_lang=target)
    kind = NllbTokenizer if family == "nllb" else MBart50Tokenizer
    return kind.from_pretrained(original, src_lang=source, tgt_lang=target)


def test_logits_and_every_attention_map_equal_transformers(converted, reference):
    model = converted.model
    ours, theirs, src = passes_of_both(model, reference,
                                       [converted.source_tokenizer.encode(s) for s in ENGLISH[1:5]], lowest_id=3)
    # fairseq gives padding the position table's zero row, so a padding query's own row differs; no real
    # token sees it (padding is masked as a key), and those rows are compared here.
    assert_same_pass(ours, theirs, encoder_queries=(src != model.config.pad_id)[:, None, :, None])


def test_greedy_and_beam_translations_with_the_forced_language_equal_generate(family, converted, reference):
    checkpoint = converted.in_languages(target=TARGETS[family])
    model, forced = checkpoint.model, checkpoint.target_tokenizer.prefix_ids
    assert len(forced) == (0 if family == "small100" else 1)
    options = {"forced_bos_token_id": forced[0]} if forced else {}
    for sentence in ENGLISH[1:7]:
        src = torch.tensor([checkpoint.source_tokenizer.encode(sentence)])
        for beams in (1, 5):
            generated = reference.generate(src, num_beams=beams, do_sample=False, max_new_tokens=MAX_TOKENS + 1,
                                           early_stopping=False, length_penalty=1.0, forced_eos_token_id=2,
                                           **options)[0].tolist()
            theirs = generated[1:]
            theirs = theirs[: theirs.index(2)] if 2 in theirs else theirs
            ours = greedy_search(model, src, MAX_TOKENS, forced=forced)[0] if beams == 1 else beam_search(
                model, src, 5, 1.0, MAX_TOKENS, rules=checkpoint.rules, forced=forced)[0][0].tokens
            assert ours == theirs, (sentence, beams)
            assert list(ours[:len(forced)]) == list(forced)


def test_decoderlens_reads_an_encoder_layer_through_the_final_norm_as_transformers_with_its_encoder_cut(
        family, converted, reference):
    """DecoderLens on a pre-norm family: transformers' own model whose encoder keeps its first layer, and so
    applies its final norm to that layer's output, translates as ours reads encoder layer 1."""
    checkpoint = converted.in_languages(target=TARGETS[family])
    model, forced = checkpoint.model, checkpoint.target_tokenizer.prefix_ids
    options = {"forced_bos_token_id": forced[0]} if forced else {}
    cut = copy.deepcopy(reference)
    cut.model.encoder.layers = cut.model.encoder.layers[:1]
    for sentence in ENGLISH[1:9]:
        src = torch.tensor([checkpoint.source_tokenizer.encode(sentence)])
        with torch.inference_mode():
            memory = read_at_layer(model, 1).encode(src).memory
            torch.testing.assert_close(memory, cut.model.encoder(src).last_hidden_state, atol=1e-5, rtol=1e-4)
            assert not torch.allclose(memory, model.encode(src).memory, atol=1e-3)
        generated = cut.generate(src, num_beams=1, do_sample=False, max_new_tokens=MAX_TOKENS + 1,
                                 forced_eos_token_id=2, **options)[0].tolist()[1:]
        theirs = generated[: generated.index(2)] if 2 in generated else generated
        assert greedy_search(read_at_layer(model, 1), src, MAX_TOKENS, forced=forced)[0] == theirs, sentence


def test_a_translation_starts_with_its_language_marks_that_step_forced_and_leaves_it_out_of_the_text(
        family, converted):
    checkpoint = converted.in_languages(target=TARGETS[family])
    translation = checkpoint.translate(ENGLISH[0], max_length=6)
    languages = checkpoint.languages
    marker = TARGETS[family] if family == "small100" else languages.source
    assert translation.source_pieces[0] == languages.tokens[marker]
    if family == "small100":
        assert translation.forced_steps == 0
    else:
        assert translation.target_pieces[:2] == ["</s>", languages.tokens[TARGETS[family]]]
        assert translation.forced_steps == 1
    assert not any(piece in translation.text for piece in languages.tokens.values())


def test_tokens_and_language_ids_equal_the_families_tokenizers(family, original, converted):
    """NLLB numbers its pieces as mBART-50 does (tested against MBart50Tokenizer); transformers 5 builds
    NllbTokenizer from a SentencePiece model alone without its language codes, so NLLB is held to fairseq's rule."""
    languages = converted.languages
    if family == "nllb":
        processor = spm.SentencePieceProcessor(model_file=str(original / "sentencepiece.bpe.model"))
        first_code = processor.get_piece_size() + 1
        codes = json.loads(LANGUAGE_LISTS.read_text())["nllb"]
        for index, code in enumerate(codes):
            assert converted.target_tokenizer.id_of(code) == first_code + index
        for sentence in ENGLISH[1:21] + ["Ωμέγα"]:  # unknown letters are <unk>, 3
            pieces = [i + 1 if i else 3 for i in processor.encode(sentence)]
            assert converted.source_tokenizer.encode(sentence) == [first_code + codes.index("eng_Latn")] + pieces + [2]
        return
    target = TARGETS[family]
    source_code = "en" if family in ("m2m100", "small100") else languages.source
    theirs = their_tokenizer(family, original, source_code, target)
    checkpoint = converted.in_languages(source_code, target)
    for sentence in ENGLISH[1:21]:
        assert checkpoint.source_tokenizer.encode(sentence) == theirs(sentence).input_ids, sentence
    for code, piece in languages.tokens.items():
        assert converted.target_tokenizer.id_of(piece) == theirs.convert_tokens_to_ids(piece), code
    language_ids = {theirs.convert_tokens_to_ids(piece) for piece in languages.tokens.values()}
    for sentence in GERMAN:
        ids = theirs(text_target=sentence).input_ids
        assert ids[0] in language_ids  # which M2M100Tokenizer's decode keeps, unlike the others'
        text = theirs.decode([i for i in ids if i not in language_ids], skip_special_tokens=True)
        assert checkpoint.target_tokenizer.decode(ids) == text


def test_the_converted_directory_names_its_family_licence_and_languages(family, converted):
    card, info = converted.card, converted.info
    assert info["source"]["converted_from"].startswith("transformers")
    assert "pre-norm layers" in card and "a token per language" in card
    if family == "nllb":
        assert "non-commercial" in card
    assert converted.model.config.norm_first and converted.model.config.position_offset == 2
    assert TARGETS[family] in converted.languages.tokens


def test_an_unknown_language_or_a_language_for_a_one_pair_model_is_one_sentence(converted, tmp_path):
    with pytest.raises(InputError, match="is not one of this model's languages"):
        converted.in_languages(target="tlh")
    one_pair = load_checkpoint("checkpoints/multi30k-en-de", device="cpu")
    with pytest.raises(InputError, match="translates one pair of languages"):
        one_pair.in_languages(target="fr")


def test_command_line_translates_into_the_language_it_is_asked_for(family, converted):
    target = TARGETS[family]
    result = run_command("transformer.translate", "--checkpoint", str(converted.path), "--target-language", target,
                         "--max-length", "4", "--beam", "1", "--json", ENGLISH[0])
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout.strip().splitlines()[-1])
    if family != "small100":
        assert output["target_tokens"][1] == converted.languages.tokens[target]
    refused = run_command("transformer.translate", "--checkpoint", str(converted.path), "--target-language", "xx",
                          "A dog.")
    assert refused.returncode == 2 and "is not one of this model's languages" in refused.stderr


def test_a_multilingual_model_that_cannot_be_opened_gets_one_sentence_and_nothing_is_written(original, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "tokenizer_config.json", "model.safetensors"):
        (broken / name).write_bytes((original / name).read_bytes())
    with pytest.raises(HubError, match="it has no sentencepiece.bpe.model"):
        hub.convert(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_whose_languages_cannot_be_used_is_refused_in_one_sentence(converted, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(converted.path, copy)
    config = json.loads((copy / "config.json").read_text())
    config["languages"]["tokens"]["tlh"] = "__tlh__"
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="cannot be used .a language's token is not in the vocabulary"):
        load_checkpoint(copy, device="cpu")
    config["languages"] = {**config["languages"], "names": {}}
    del config["languages"]["tokens"]["tlh"]
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="unknown language keys: names"):
        load_checkpoint(copy, device="cpu")
    del config["languages"]["names"]
    for broken, message in ((["de"], "must map each code to its piece"), ("de", "must map each code to its piece")):
        config["languages"]["tokens"] = broken
        (copy / "config.json").write_text(json.dumps(config))
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(copy, device="cpu")


def test_one_sentence_into_several_languages_in_one_batch_is_each_languages_own_translation(family, converted):
    languages = list(converted.languages.tokens)[:4]
    together = converted.translate_into(ENGLISH[1], languages, max_length=8)
    for code, translation in zip(languages, together, strict=True):
        alone = converted.in_languages(target=code).translate(ENGLISH[1], beam_size=1, max_length=8)
        assert translation.target_ids == alone.target_ids, code
        assert translation.source_ids == alone.source_ids and translation.forced_steps == alone.forced_steps
        torch.testing.assert_close(translation.cross_attention, alone.cross_attention, atol=1e-5, rtol=0)


def test_evaluation_scores_a_multilingual_model_in_the_datas_languages(family, original, converted, tmp_path):
    """--source/--reference files of English and German: scored with the model set for English into German."""
    (tmp_path / "src.en").write_text("\n".join(ENGLISH[1:4]) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(GERMAN[:3]) + "\n")
    result = run_command("transformer.evaluate", "--checkpoint", str(converted.path), "--source",
                         str(tmp_path / "src.en"), "--reference", str(tmp_path / "ref.de"), "--beam", "1",
                         "--batch-tokens", "4", "--output", str(tmp_path / "hyp.txt"), "--json")
    assert result.returncode == 0, result.stderr
    source, target = evaluate_module.in_data_languages(converted, "en", "fr").pair
    assert (iso_code(source), iso_code(target)) == ("en", "fr")
    with pytest.raises(InputError, match="does not write tlh"):
        evaluate_module.in_data_languages(converted, "en", "tlh")
    one_pair = load_checkpoint("checkpoints/multi30k-en-de", device="cpu")
    assert evaluate_module.in_data_languages(one_pair, "en", "fr") is one_pair
