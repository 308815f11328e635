"""Decoding: search finds what the model prefers, and every inspection path reports the same numbers."""

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.paper.config import ModelConfig
from transformer.paper.decoding import (BeamHypothesis, SearchRules, Sampling, _can_improve, _keep_best,
                                       _keep_unfinished, _step_log_probs, beam_search, default_max_length,
                                       greedy_search, length_scored, never_generate, pad_batch)
from transformer.paper.sentences import decode_steps, translate_batch
from transformer.paper.sentences import fit_to_positions
from transformer.paper.translation import forced_decode, forced_steps, translate, translate_together
from transformer.paper.model import HeadMask, Transformer
from transformer.paper.tokenizer import PAD_ID, BOS_ID, EOS_ID
from untrained import unsure_model, untrained_model


@pytest.fixture(scope="module")
def reverse():
    """The bundled reverse-task model: small, real, and right about every sequence."""
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


def test_bundled_reverse_model_reverses_unseen_sequences(reverse):
    sources = ["1 2 3 4", "9 0 9 1 1 5", "7 3 8 2 6 4 5 0 1"]
    translations = translate_batch(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, sources)
    assert translations == [" ".join(reversed(s.split())) for s in sources]


def test_batched_greedy_equals_one_sentence_at_a_time(reverse):
    tok = reverse.source_tokenizer
    sentences = ["5 4 3", "1 1 2 2 3 3 4 4", "8 6"]
    batch = pad_batch([tok.encode(s) for s in sentences], PAD_ID)
    together = greedy_search(reverse.model, batch)
    alone = [greedy_search(reverse.model, torch.tensor([tok.encode(s)]))[0] for s in sentences]
    assert together == alone


@pytest.fixture(scope="module")
def endless():
    """An untrained model that can never choose eos (its eos embedding is zero): every search runs to its limit."""
    return untrained_model(30, seed=0, eos_scale=0.0)


def sentences_of_lengths(*lengths):
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(4, 30, (n - 1,), generator=generator).tolist() + [EOS_ID] for n in lengths]


def test_a_sentence_gets_its_own_length_limit_whatever_it_is_batched_with(endless):
    short, long = sentences_of_lengths(3, 30)
    together, ended = greedy_search(endless, pad_batch([short, long], PAD_ID), return_ended=True)
    assert ended == [False, False]
    assert [len(row) for row in together] == [default_max_length(endless, 3), default_max_length(endless, 30)]
    assert together[0] == greedy_search(endless, torch.tensor([short]))[0]
    assert greedy_search(endless, pad_batch([short, long], PAD_ID), max_length=0) == together, "0 means the default"

    beams = beam_search(endless, pad_batch([short, long], PAD_ID), beam_size=3)
    for hypotheses, sentence in zip(beams, (short, long)):
        alone = beam_search(endless, torch.tensor([sentence]), beam_size=3)[0]
        assert [h.tokens for h in hypotheses] == [h.tokens for h in alone]
        assert all(not h.ended and len(h.tokens) == default_max_length(endless, len(sentence)) for h in hypotheses)


def test_beam_search_of_a_batch_equals_each_sentence_alone_as_sentences_end_and_leave(reverse):
    sentences = ["5 4", "1 1 2 2 3 3 4 4 5", "8 6 7", "3 1 4 1 5 9 2 6 5 3"]
    src = pad_batch([reverse.source_tokenizer.encode(s) for s in sentences], PAD_ID)
    together, tree = beam_search(reverse.model, src, beam_size=3, return_steps=True)
    for i, sentence in enumerate(sentences):
        alone, alone_tree = beam_search(reverse.model, torch.tensor([reverse.source_tokenizer.encode(sentence)]),
                                        beam_size=3, return_steps=True)
        assert [(h.tokens, h.ended) for h in together[i]] == [(h.tokens, h.ended) for h in alone[0]]
        assert [h.log_prob for h in together[i]] == pytest.approx([h.log_prob for h in alone[0]], abs=1e-4)
        assert [(s.parents, s.tokens, s.finished, s.kept) for s in tree[i]] == [
            (s.parents, s.tokens, s.finished, s.kept) for s in alone_tree[0]]
    assert len(tree[0]) < len(tree[3]), "the short sentence ended, and left the batch, first"


def test_a_length_limit_beyond_the_models_positions_stops_where_the_positions_end(endless):
    src = pad_batch(sentences_of_lengths(3, 5), PAD_ID)
    room = endless.config.max_len - 1  # bos takes the first position
    assert [len(row) for row in greedy_search(endless, src, max_length=500)] == [room, room]
    assert all(len(h.tokens) == room for h in beam_search(endless, src, beam_size=2, max_length=500)[0])


def test_sentences_leave_the_batch_once_they_have_ended(reverse, monkeypatch):
    rows_decoded = []
    decode = reverse.model.decode
    monkeypatch.setattr(reverse.model, "decode", lambda tgt, *a, **kw: rows_decoded.append(tgt.size(0)) or
                        decode(tgt, *a, **kw))
    src = pad_batch([reverse.source_tokenizer.encode(s) for s in ["1 2", "1 2 3 4 5 6 7 8 9"]], PAD_ID)
    assert greedy_search(reverse.model, src)[0] == reverse.target_tokenizer.encode("2 1", add_eos=False)
    assert rows_decoded[:3] == [2, 2, 2] and set(rows_decoded[3:]) == {1}  # "2", "1", eos, then the long one alone

    rows_decoded.clear()
    beam_search(reverse.model, src, beam_size=2)
    assert rows_decoded[0] == 4 and rows_decoded[-1] == 2


def test_greedy_search_keeps_each_sentence_with_its_own_head_mask(endless):
    sentences = sentences_of_lengths(3, 12)
    masks = torch.ones(2, 2, 4)
    masks[1, :, 1:] = 0.0  # the second sentence decodes with one head per layer
    together = greedy_search(endless, pad_batch(sentences, PAD_ID), head_mask=HeadMask(cross=masks))
    alone = [greedy_search(endless, torch.tensor([s]), head_mask=HeadMask(cross=m))[0]
             for s, m in zip(sentences, masks)]
    assert together == alone


def test_beam_of_one_equals_greedy(reverse):
    src = pad_batch([reverse.source_tokenizer.encode(s) for s in ["3 1 4 1 5", "2 7 1 8"]], PAD_ID)
    greedy = greedy_search(reverse.model, src)
    beams = beam_search(reverse.model, src, beam_size=1)
    assert [hyps[0].tokens for hyps in beams] == greedy


def test_beam_hypotheses_are_sorted_and_scored_consistently(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("3 1 4 1 5 9")])
    hypotheses = beam_search(reverse.model, src, beam_size=4, length_penalty=1.0)[0]
    assert len(hypotheses) == 4
    scores = [h.score for h in hypotheses]
    assert scores == sorted(scores, reverse=True)
    for hypothesis in hypotheses:
        # the reported log-probability is the model's own for that token sequence
        forced = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer,
                               src[0].tolist(), hypothesis.tokens)
        assert hypothesis.log_prob == pytest.approx(forced.log_prob, abs=1e-3)
        assert hypothesis.score == pytest.approx(hypothesis.log_prob / (len(hypothesis.tokens) + 1), abs=1e-6)


def test_beam_search_never_scores_worse_than_greedy(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("6 6 1 0 2")])
    greedy = greedy_search(reverse.model, src)[0]
    best = beam_search(reverse.model, src, beam_size=5, length_penalty=0.0)[0][0]
    greedy_log_prob = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer,
                                    src[0].tolist(), greedy).log_prob
    assert best.log_prob >= greedy_log_prob - 1e-4


def test_step_by_step_decoding_matches_the_forced_pass(reverse):
    steps = list(decode_steps(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2 8"))
    assert steps[-1].token_id == EOS_ID
    produced = [s.token_id for s in steps[:-1]]
    forced = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2 8", produced)
    assert forced.predicted_ids == [s.token_id for s in steps]
    for i, step in enumerate(steps):
        assert step.probability == pytest.approx(forced.token_probs[i], abs=1e-5)
        assert step.top_ids == forced.top_ids[i]
        assert torch.allclose(step.cross_attention, forced.cross_attention[:, :, i], atol=1e-5)
        assert torch.allclose(step.self_attention, forced.decoder_attention[:, :, i, : i + 1], atol=1e-5)


def test_translation_carries_every_attention_map_with_matching_labels(reverse):
    result = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "4 5 6", beam_size=3)
    layers, heads = reverse.model.config.n_encoder_layers, reverse.model.config.n_heads
    source, target = len(result.source_pieces), len(result.target_pieces)
    assert result.source_ids[-1] == EOS_ID and result.target_ids[0] == BOS_ID
    assert result.encoder_attention.shape == (layers, heads, source, source)
    assert result.decoder_attention.shape == (reverse.model.config.n_decoder_layers, heads, target, target)
    assert result.cross_attention.shape == (reverse.model.config.n_decoder_layers, heads, target, source)
    assert result.text == "6 5 4"
    assert len(result.top_pieces) == target and all(len(row) == 5 for row in result.top_pieces)


def test_json_contract_of_a_translation(reverse):
    result = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2")
    payload = result.to_json()
    assert set(payload) == {"source", "translation", "source_tokens", "target_tokens", "attention"}
    assert payload["source"] == "1 2" and payload["translation"] == "2 1"
    assert payload["source_tokens"][-1] == "</s>" and payload["target_tokens"][0] == "<s>"
    cross = payload["attention"]["cross"]
    assert len(cross[0][0]) == len(payload["target_tokens"]) and len(cross[0][0][0]) == len(payload["source_tokens"])
    for name, weights in (("encoder", result.encoder_attention), ("decoder", result.decoder_attention),
                          ("cross", result.cross_attention)):
        written = torch.tensor(payload["attention"][name], dtype=torch.float64)
        millionths = written * 1e6
        assert written.shape == weights.shape and (millionths - millionths.round()).abs().max() < 0.1, name
        torch.testing.assert_close(written, weights.double(), rtol=0, atol=1e-6)  # to six decimals


def test_overlong_input_is_cut_to_the_model_positions_and_flagged(reverse):
    text = " ".join(["7"] * (reverse.model.config.max_len + 20))
    result = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, text, max_length=5)
    assert result.truncated
    assert len(result.source_ids) == reverse.model.config.max_len
    assert len(result.predicted_ids) <= 5 + 1


def test_translate_batch_keeps_input_order_and_handles_empty_lists(reverse):
    sources = ["1 2 3 4 5 6 7 8", "9 0 3", "4 4 5"]
    out = translate_batch(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, sources, beam_size=3,
                          max_tokens=16)
    assert out == ["8 7 6 5 4 3 2 1", "3 0 9", "5 4 4"]
    assert translate_batch(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, []) == []


def test_sentences_are_batched_by_length_up_to_the_token_budget(reverse, monkeypatch):
    """Sorted by length, so that few pads are computed; each batch as full as rows x longest x beam <= max_tokens
    allows (a single sentence longer than the budget goes alone)."""
    batches = []
    encode = reverse.model.encode
    monkeypatch.setattr(reverse.model, "encode", lambda src, *a, **kw: batches.append(tuple(src.shape)) or
                        encode(src, *a, **kw))
    args = reverse.model, reverse.source_tokenizer, reverse.target_tokenizer
    by_length = {n: " ".join(["4"] * n) for n in (2, 5, 8)}
    lengths = {n: len(reverse.source_tokenizer.encode(text)) for n, text in by_length.items()}
    sentences = [by_length[8], by_length[2], by_length[5], by_length[2]]
    budget = 2 * lengths[5]  # two short ones fit, a third row of 5 does not; 5 and 8 together do not
    out = translate_batch(*args, sentences, max_tokens=budget)
    assert batches == [(2, lengths[2]), (1, lengths[5]), (1, lengths[8])]
    assert out == [" ".join(["4"] * n) for n in (8, 2, 5, 2)]

    batches.clear()
    same = [by_length[5]] * 5
    translate_batch(*args, same, beam_size=2, max_tokens=2 * lengths[5] * 2)  # exactly two rows of two beams
    assert batches == [(2, lengths[5])] * 2 + [(1, lengths[5])]


def test_batched_translation_forces_a_multilingual_models_target_language(reverse):
    """A target tokenizer that starts every sequence (a language token, here the piece "9") is obeyed by every
    search, in batches as alone."""
    nine = reverse.target_tokenizer.encode("9", add_eos=False)
    forced = reverse.target_tokenizer.starting_with(nine)
    for beam_size in (1, 3):
        batched = translate_batch(reverse.model, reverse.source_tokenizer, forced, ["1 2 3", "5 6"],
                                  beam_size=beam_size)
        assert [text.split()[0] for text in batched] == ["9", "9"]
        alone = translate(reverse.model, reverse.source_tokenizer, forced, "1 2 3", beam_size=beam_size)
        assert alone.predicted_ids[:len(nine)] == nine and alone.text == batched[0]


def test_a_translation_keeps_to_its_head_mask_and_positions_in_search_and_in_its_numbers(reverse):
    """What the app shows for a masked head or a model without positions is that model's own: the searched tokens
    and every probability come from the same changed model."""
    model, tokenizer = reverse.model, reverse.source_tokenizer
    masks = torch.ones(model.config.n_decoder_layers, model.config.n_heads)
    masks[:, 1:] = 0.0
    text = "3 1 4 1 5"
    src = torch.tensor([tokenizer.encode(text)])
    for change in (dict(head_mask=HeadMask(cross=masks)), dict(positions=False)):
        for beam_size in (1, 3):
            made = translate(model, tokenizer, reverse.target_tokenizer, text, beam_size=beam_size, **change)
            searched = (greedy_search(model, src, **change)[0] + [EOS_ID] if beam_size == 1 else
                        beam_search(model, src, beam_size, **change)[0][0].tokens + [EOS_ID])
            assert made.predicted_ids == searched, (change, beam_size)
            tgt = torch.tensor([[BOS_ID] + searched[:-1]])
            probs = model(src, tgt, **change).logits[0].softmax(-1)
            expected = probs[torch.arange(len(searched)), torch.tensor(searched)]
            assert made.token_probs == pytest.approx(expected.tolist(), abs=1e-5), (change, beam_size)
        plain = translate(model, tokenizer, reverse.target_tokenizer, text)
        assert plain.token_probs != pytest.approx(made.token_probs, abs=1e-3), "the change changes the numbers"


def test_translating_together_shows_the_search_as_it_goes(reverse):
    args = reverse.model, reverse.source_tokenizer, reverse.target_tokenizer
    for beam_size in (1, 3):
        seen = []
        made = translate_together(*args, ["1 2 3"], beam_size=beam_size,
                                  watch=lambda progress: seen.append(progress) or True)[0]
        assert [progress[0].tokens for progress in seen] == [made.predicted_ids[:n] for n in range(1, 5)], beam_size


@pytest.fixture(scope="module")
def unsure(reverse):
    """An untrained model over the reverse task's vocabulary, with its tokenizers."""
    return unsure_model(reverse.model.config.tgt_vocab_size), reverse.source_tokenizer, reverse.target_tokenizer


def test_beam_search_divides_by_length_once_unless_told(unsure):
    model, *tokenizers = unsure
    penalised = [translate(model, *tokenizers, "9 8 7", beam_size=3, length_penalty=penalty).predicted_ids
                 for penalty in (1.0, 2.0)]
    assert penalised[0] != penalised[1], "the penalty decides here"
    assert translate(model, *tokenizers, "9 8 7", beam_size=3).predicted_ids == penalised[0]
    assert translate_together(model, *tokenizers, ["9 8 7"], beam_size=3)[0].predicted_ids == penalised[0]
    assert translate_batch(model, *tokenizers, ["9 8 7"], beam_size=3) == [tokenizers[1].decode(penalised[0])]


def test_a_translation_cut_by_its_length_limit_says_it_did_not_end(unsure):
    """The best hypothesis ran out of length while another one ended: the translation is the best one's."""
    model, tokenizer, _ = unsure
    hypotheses = beam_search(model, torch.tensor([tokenizer.encode("1 2 3 4 5")]), 3, max_length=3)[0]
    assert [h.ended for h in hypotheses[:2]] == [False, True]
    made = translate(*unsure, "1 2 3 4 5", beam_size=3, max_length=3)
    assert made.predicted_ids == hypotheses[0].tokens and not made.ended


def test_translating_together_decodes_greedily_unless_told(reverse):
    made = translate_together(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, ["1 2 3", "7 7"])
    assert [(t.beam_size, t.max_length) for t in made] == [(1, None), (1, None)]
    assert translate_together(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, ["1 2"],
                              beam_size=0)[0].beam_size == 1, "a beam of none is greedy search"


def test_a_translation_records_how_it_was_decoded_so_others_can_decode_it_alike(reverse):
    beam = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3", beam_size=3,
                     max_length=7)
    assert (beam.beam_size, beam.max_length) == (3, 7)
    drawn = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3", beam_size=3,
                      sampling=Sampling(temperature=0.5, seed=1))
    assert (drawn.beam_size, drawn.max_length) == (1, None)  # a sampled translation is drawn token by token


TRANSLATION_NUMBERS = ("encoder_attention", "decoder_attention", "cross_attention")


@pytest.mark.parametrize("beam_size, max_length", [(1, None), (4, None), (3, 4)])
def test_sentences_translated_together_are_the_translations_each_gets_alone(reverse, beam_size, max_length):
    """A server decodes sentences that arrive at once in one batch; nobody may get another translation for it."""
    texts = ["5 4 3", "1 1 2 2 3 3 4 4 5 5 6", "8", " ".join(["7"] * (reverse.model.config.max_len + 5)), "9 0"]
    args = (reverse.model, reverse.source_tokenizer, reverse.target_tokenizer)
    together = translate_together(*args, texts, beam_size=beam_size, max_length=max_length)
    for text, made in zip(texts, together):
        alone = translate(*args, text, beam_size=beam_size, max_length=max_length)
        assert (made.text, made.source_ids, made.target_ids, made.predicted_ids, made.top_ids, made.ended,
                made.truncated, made.source_text, made.beam_size, made.max_length) == (
            alone.text, alone.source_ids, alone.target_ids, alone.predicted_ids, alone.top_ids, alone.ended,
            alone.truncated, alone.source_text, alone.beam_size, alone.max_length)
        assert made.token_probs == pytest.approx(alone.token_probs, abs=1e-5)
        for name in TRANSLATION_NUMBERS:  # padding is masked: only float rounding differs
            torch.testing.assert_close(getattr(made, name), getattr(alone, name), rtol=0, atol=1e-5)
    assert not together[1].ended if max_length == 4 else together[1].ended


# --- one step's log-probabilities ------------------------------------------------------------------------------

def step_model() -> Transformer:
    """pad 0, start 2, eos 3 over a vocabulary of 6."""
    return Transformer(ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, n_encoder_layers=1,
                                   n_decoder_layers=1, d_ff=4))


def test_a_step_never_produces_padding_or_the_start_and_at_its_limit_only_eos():
    logits = torch.tensor([[[0.5, 1.0, 2.0, -1.0, 0.0, 3.0]], [[1.0, 0.0, 0.0, 2.0, 1.0, 0.5]]])
    log_probs = _step_log_probs(step_model(), logits.clone(), [1], SearchRules())
    expected = torch.log_softmax(logits, -1)
    expected[..., [0, 2]] = float("-inf")  # removed after the softmax: what they held is lost
    expected[1, :, [1, 4, 5]] = float("-inf")
    torch.testing.assert_close(log_probs, expected)
    renormalized = _step_log_probs(step_model(), logits.clone(), [1], SearchRules(renormalize=True))
    torch.testing.assert_close(renormalized.exp().sum(-1), torch.ones(2, 1))
    assert renormalized[1, 0, 3] == 0.0 and renormalized[0, 0, 5] > log_probs[0, 0, 5]


def test_a_forced_step_gives_its_token_every_chance_whatever_the_logits():
    log_probs = _step_log_probs(step_model(), torch.randn(2, 3, 6), [0], SearchRules(), forced=4)
    assert log_probs[..., 4].eq(0).all() and log_probs[..., [0, 1, 2, 3, 5]].eq(float("-inf")).all()


def test_search_rules_read_from_a_generation_config_default_to_fairseqs():
    assert SearchRules.from_dict({}) == SearchRules(early_stopping=True, renormalize=False)
    assert SearchRules.from_dict({"early_stopping": 0, "renormalize": 1, "num_beams": 4}) == \
        SearchRules(early_stopping=False, renormalize=True)


def test_sentences_translated_in_batches_are_each_translated_with_the_settings_given(caplog):
    """A small untrained model over the bundled vocabulary, where beam search, greedy search and the search rules
    part ways; blank sentences are left blank and a sentence past the model's positions is cut, and said so."""
    bundled = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    tokenizers = bundled.source_tokenizer, bundled.target_tokenizer
    torch.manual_seed(3)
    model = Transformer(ModelConfig(src_vocab_size=8000, tgt_vocab_size=8000, d_model=16, n_heads=2,
                                    n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=40)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[EOS_ID] *= 6  # within reach, so that some hypotheses end
    sentences = ["A dog runs.", "", "Two girls play in the sand.", "  ", "The doctor said that she was tired."]
    settings = [{}, {"beam_size": 2, "max_length": 9}, {"beam_size": 4, "rules": SearchRules(False, True)},
                {"max_length": 3}]
    for setting in settings:
        batched = translate_batch(model, *tokenizers, sentences, max_tokens=20, **setting)
        alone = [translate(model, *tokenizers, sentence, **setting).text if sentence.strip() else ""
                 for sentence in sentences]
        assert batched == alone, setting
    greedy, beam, rules, short = (translate_batch(model, *tokenizers, sentences, **setting) for setting in settings)
    assert short != greedy
    assert greedy != beam and translate_batch(model, *tokenizers, sentences, beam_size=4) != rules
    longest = max(len(translate(model, *tokenizers, sentence, beam_size=2, max_length=9).predicted_ids)
                  for sentence in sentences if sentence.strip())
    assert longest == 9, "the limit binds: a sentence is cut at nine pieces"
    with caplog.at_level("WARNING", logger="transformer.paper.sentences"):
        translate_batch(model, *tokenizers, ["A man sits.", " ".join(["dog"] * 60)])
    assert caplog.messages == ["input 2 has 61 pieces; only its first 39 are translated (the model's positions)"]


def test_ended_hypotheses_fill_k_places_and_without_early_stopping_a_better_one_replaces_the_worst():
    def ended(score):
        return BeamHypothesis([4], score, score)

    finished = []
    assert _keep_best(finished, ended(-2.0), 2, True) and _keep_best(finished, ended(-3.0), 2, True)
    assert not _keep_best(finished, ended(-0.5), 2, early_stopping=True), "fairseq: k ended, the sentence is done"
    assert [h.score for h in finished] == [-2.0, -3.0]
    assert not _keep_best(finished, ended(-3.0), 2, early_stopping=False), "no better than the worst"
    assert _keep_best(finished, ended(-1.0), 2, early_stopping=False)
    assert [h.score for h in finished] == [-2.0, -1.0]


def test_a_default_length_limit_is_one_and_a_half_times_the_source_and_ten_within_the_positions():
    model = step_model()  # max_len 256
    assert [default_max_length(model, n) for n in (1, 4, 100, 200)] == [11, 16, 160, 255]
    assert default_max_length(Transformer(ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1,
                                                      d_ff=4, max_len=2)), 5) == 1, "bos and one token"


def test_a_length_limit_of_one_decodes_one_token(endless):
    src = pad_batch(sentences_of_lengths(4), PAD_ID)
    assert [len(row) for row in greedy_search(endless, src, max_length=1)] == [1]


def test_a_model_that_starts_its_decoder_with_eos_may_still_end():
    """fairseq's models start the decoder with eos: what a step never makes is padding alone."""
    fairseq_like = Transformer(ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4,
                                           start_id=3))
    removed = never_generate(fairseq_like, torch.zeros(1, 6)).isinf()
    assert removed.nonzero()[:, 1].tolist() == [0]
    assert never_generate(step_model(), torch.zeros(1, 6)).isinf().nonzero()[:, 1].tolist() == [0, 2]


def test_a_sentence_goes_on_while_it_has_fewer_than_k_hypotheses_or_a_live_beam_could_beat_one():
    def ended(*scores):
        return [BeamHypothesis([4], score, score) for score in scores]

    assert _can_improve(ended(-1.0), -9.0, 4, k=2, length_penalty=1.0, early_stopping=True)
    assert not _can_improve(ended(-1.0, -2.0), 0.0, 4, k=2, length_penalty=1.0, early_stopping=True)
    # Without early stopping: the best live beam, -6 over 4 tokens to the power 1 or 0.5, against the worst, -2.
    assert _can_improve(ended(-1.0, -2.0), -6.0, 4, k=2, length_penalty=1.0, early_stopping=False)  # -1.5
    assert not _can_improve(ended(-1.0, -2.0), -6.0, 4, k=2, length_penalty=0.5, early_stopping=False)  # -3
    assert not _can_improve(ended(-1.0, -2.0), -8.0, 4, k=2, length_penalty=1.0, early_stopping=False), "a tie"


def test_a_search_stopped_early_keeps_the_best_live_beam_of_each_sentence_not_done_as_not_ended():
    finished = [[], [BeamHypothesis([5], -1.0, -0.5)]]
    _keep_unfinished(finished, [(0, [4, 6], -3.0), (1, [7], -2.0)], unfinished={0}, length_penalty=1.0)
    assert finished == [[BeamHypothesis([4, 6], -3.0, length_scored(-3.0, 2, 1.0), ended=False)],
                        [BeamHypothesis([5], -1.0, -0.5)]]
    assert finished[0][0].ended is False


def test_forced_steps_count_the_forced_tokens_a_target_starts_with():
    assert forced_steps([7, 8, 9], (7, 8)) == 2
    assert forced_steps([8, 7, 9], (7,)) == 0 and forced_steps([7, 8], ()) == 0


def test_a_source_that_fills_the_positions_exactly_is_not_cut():
    model = Transformer(ModelConfig(src_vocab_size=6, tgt_vocab_size=6, d_model=4, n_heads=1, d_ff=4, max_len=4))
    assert fit_to_positions(model, [4, 5, 4, EOS_ID]) == ([4, 5, 4, EOS_ID], False)
    assert fit_to_positions(model, [4, 5, 4, 5, EOS_ID]) == ([4, 5, 4, EOS_ID], True)
