"""A converted model's tokenizer: pieces numbered by a vocabulary of its own (Marian's layout: ``</s>`` 0, ``<unk>``
1, ``<pad>`` last, no ``<s>``), and a multilingual model's languages as tokens of that vocabulary, the source marked
by one and the translation forced to start with another."""

import pytest
import sentencepiece as spm

from transformer.errors import InputError
from transformer.paper.tokenizer import Languages, Tokenizer, _pieces_by_id

SENTENCES = [f"{a} {b}." for a in ("A man", "A woman", "Two dogs", "The child") for b in ("walks", "runs", "sits")]
LANGUAGE_TOKENS = {"de": "__de__", "en": "__en__", "fr": "__fr__"}


@pytest.fixture(scope="module")
def proto() -> bytes:
    return Tokenizer.train(SENTENCES, vocab_size=40).model_proto


@pytest.fixture(scope="module")
def vocabulary(proto) -> dict[str, int]:
    processor = spm.SentencePieceProcessor(model_proto=proto)
    pieces = [processor.id_to_piece(i) for i in range(4, processor.get_piece_size())]  # not spm's own specials
    return {piece: i for i, piece in enumerate(["</s>", "<unk>", *pieces, *LANGUAGE_TOKENS.values(), "<pad>"])}


@pytest.fixture(scope="module")
def tokenizer(proto, vocabulary) -> Tokenizer:
    return Tokenizer(proto, vocabulary)


def languages(**changes) -> Languages:
    return Languages(**{"tokens": LANGUAGE_TOKENS, "source": "en", "target": "de", **changes})


def test_a_vocabulary_numbers_the_pieces_and_names_its_own_specials(proto, vocabulary, tokenizer):
    assert (tokenizer.eos_id, tokenizer.unk_id, tokenizer.pad_id, tokenizer.bos_id) == (0, 1, len(vocabulary) - 1,
                                                                                         None)
    assert tokenizer.vocab_size == len(vocabulary) and tokenizer.special_ids == {0, 1, len(vocabulary) - 1}
    segmented = spm.SentencePieceProcessor(model_proto=proto).encode("A man walks.", out_type=str)
    ids = tokenizer.encode("A man walks.")
    assert ids == [vocabulary[piece] for piece in segmented] + [0]
    assert tokenizer.pieces(ids) == segmented + ["</s>"] and [tokenizer.id_of(p) for p in segmented] == ids[:-1]
    assert tokenizer.decode(ids) == "A man walks."
    assert tokenizer.encode_batch(SENTENCES[:3], add_eos=False) == [tokenizer.encode(s, add_eos=False)
                                                                   for s in SENTENCES[:3]]
    assert tokenizer.id_of("Ω") == 1 and tokenizer.encode("Ω", add_eos=False)[-1] == 1, "what it lacks is <unk>"
    with pytest.raises(ValueError, match="^this vocabulary has no beginning-of-sentence token$"):
        tokenizer.encode("A man walks.", add_bos=True)


@pytest.mark.parametrize("change, says", [
    ({"__de__": 99}, "'__de__' has 99"),
    ({"__de__": 2}, "'__de__' has 2"),  # the id of a piece before it
    ({"__de__": True}, "'__de__' has True"),
])
def test_a_vocabulary_whose_ids_skip_or_repeat_is_refused(proto, vocabulary, change, says):
    with pytest.raises(ValueError, match=says):
        Tokenizer(proto, {**vocabulary, **change})


def test_a_vocabulary_without_pad_unk_or_eos_is_refused_naming_them(proto, vocabulary):
    kept = [piece for piece in vocabulary if piece not in ("<pad>", "</s>")]
    with pytest.raises(ValueError, match="the vocabulary has no <pad>, </s>"):
        Tokenizer(proto, {piece: i for i, piece in enumerate(kept)})


def test_languages_mark_the_source_and_force_the_target_and_are_left_out_of_the_text(tokenizer, vocabulary):
    source, target = languages().tokenizers(tokenizer, tokenizer)
    assert source.prefix_ids == (vocabulary["__en__"],) and target.prefix_ids == (vocabulary["__de__"],)
    assert source.encode("A man walks.")[0] == vocabulary["__en__"]
    assert source.decode(source.encode("A man walks.")) == "A man walks.", "the source's marker is no word either"
    assert target.decode([vocabulary["__de__"], *tokenizer.encode("A man walks.")]) == "A man walks."
    assert {vocabulary[token] for token in LANGUAGE_TOKENS.values()} <= target.special_ids
    assert tokenizer.prefix_ids == () and vocabulary["__de__"] not in tokenizer.special_ids, "the original stays"
    source, target = languages().tokenizers(tokenizer, tokenizer, "fr", "en")
    assert (source.prefix_ids, target.prefix_ids) == ((vocabulary["__fr__"],), (vocabulary["__en__"],))


def test_a_model_may_mark_the_source_with_the_target_language_or_force_nothing(tokenizer, vocabulary):
    """SMaLL-100 puts the target language's token on the source; mBART-style models may force no first token."""
    source, target = languages(source_marked_by="target").tokenizers(tokenizer, tokenizer)
    assert (source.prefix_ids, target.prefix_ids) == ((vocabulary["__de__"],), (vocabulary["__de__"],))
    _, target = languages(target_forced=False).tokenizers(tokenizer, tokenizer)
    assert target.prefix_ids == ()


def test_a_language_the_model_lacks_is_refused_naming_at_most_twelve_it_has(tokenizer):
    assert languages().check("fr") == "fr"
    with pytest.raises(InputError) as raised:
        languages().tokenizers(tokenizer, tokenizer, "xx")
    assert (raised.value.code, raised.value.values) == ("tokenizer.unknown_language",
                                                        {"language": "xx", "languages": "de, en, fr"})
    many = languages(tokens={f"l{i:02}": "__de__" for i in range(13)}, source="l00", target="l01")
    with pytest.raises(InputError) as raised:
        many.check("xx")
    assert raised.value.values["languages"] == ", ".join(f"l{i:02}" for i in range(12)) + ", …"
    twelve = languages(tokens={f"l{i:02}": "__de__" for i in range(12)}, source="l00", target="l01")
    with pytest.raises(InputError) as raised:
        twelve.check("xx")
    assert raised.value.values["languages"] == ", ".join(f"l{i:02}" for i in range(12)), "all of them: no …"
    with pytest.raises(ValueError, match="^a language's token is not in the vocabulary$"):
        languages(tokens={**LANGUAGE_TOKENS, "it": "__it__"}).tokenizers(tokenizer, tokenizer)


def test_languages_are_read_back_as_written_and_anything_else_is_refused():
    written = languages(source_marked_by="target", target_forced=False)
    assert Languages.from_dict(written.to_dict()) == written
    assert Languages.from_dict({"tokens": LANGUAGE_TOKENS, "source": "en", "target": "de"}) == languages(), \
        "what is left out takes its default"
    tokens_said = "the language tokens must map each code to its piece"
    for values, says in (({"tokens": LANGUAGE_TOKENS, "source": "en", "target": "de", "extra": 1, "colour": 2},
                          "unknown language keys: colour, extra"),
                         ({"tokens": {}, "source": "en", "target": "de"}, tokens_said),
                         ({"tokens": ["__de__"], "source": "en", "target": "de"}, tokens_said),
                         ({"tokens": {"de": 5}, "source": "en", "target": "de"}, tokens_said),
                         ({"tokens": LANGUAGE_TOKENS, "source": "en"}, "the default source and target must be "
                                                                       "language codes"),
                         ({"tokens": LANGUAGE_TOKENS, "source": 1, "target": "de"}, "the default source and target "
                                                                                     "must be language codes"),
                         ({"tokens": LANGUAGE_TOKENS, "source": "en", "target": "de", "source_marked_by": "x"},
                          'source_marked_by must be "source" or "target"')):
        with pytest.raises(ValueError) as refused:
            Languages.from_dict(values)
        assert str(refused.value) == says


def test_ids_that_are_not_each_of_zero_to_the_size_once_are_refused_naming_the_range():
    assert _pieces_by_id({"b": 1, "a": 0}) == ["a", "b"]
    for vocabulary, says in (({"a": 0, "b": 2}, "'b' has 2"), ({"a": 0, "b": True}, "'b' has True"),
                             ({"a": 0, "b": "1"}, "'b' has '1'")):
        with pytest.raises(ValueError) as refused:
            _pieces_by_id(vocabulary)
        assert str(refused.value) == f"the vocabulary's ids must run from 0 to 1 once each ({says})"


def test_a_vocabulary_piece_its_segmenter_lacks_is_decoded_as_it_is_without_its_word_start(proto, vocabulary):
    """transformers' MarianTokenizer does the same: the piece's text, a word start shown as a space."""
    with_zebra = Tokenizer(proto, {**vocabulary, "▁zebra": len(vocabulary)})
    assert with_zebra.decode([len(vocabulary), *with_zebra.encode("A man walks.")]) == "zebra A man walks."
