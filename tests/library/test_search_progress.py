"""A search can be watched step by step (what a page draws while it decodes) and ended early (its Stop button)."""

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.paper.decoding import beam_search, greedy_search, pad_batch
from transformer.paper.tokenizer import EOS_ID, PAD_ID
from transformer.paper.translation import forced_decode
from untrained import unsure_model


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


def watched(search, *args, stop_after: int | None = None, **kwargs):
    """The search's result and every report it made; with ``stop_after``, ended after that many steps."""
    reports = []

    def watch(progress):
        reports.append(progress)
        return stop_after is None or len(reports) < stop_after
    return search(*args, watch=watch, **kwargs), reports


def test_greedy_reports_each_step_as_the_inspecting_pass_sees_it(reverse):
    source = reverse.source_tokenizer.encode("2 7 1 8 2 8")
    (tokens,), reports = watched(greedy_search, reverse.model, torch.tensor([source]))
    assert [report[0].tokens for report in reports][-1][:-1] == tokens  # the last step chose the end
    assert [len(report[0].tokens) for report in reports] == list(range(1, len(tokens) + 2))
    inspected = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, source, tokens)
    for step, (report,) in enumerate(reports):
        assert report.sentence == 0
        assert report.probability == pytest.approx(inspected.token_probs[step], abs=1e-5)
        assert report.top_ids == inspected.top_ids[step]
        assert torch.allclose(report.cross_attention, inspected.cross_attention[:, :, step], atol=1e-5)


def test_watching_a_search_changes_nothing_it_finds(reverse):
    sources = ["5 4 3", "1 1 2 2 3 3 4 4", "8 6"]
    src = pad_batch([reverse.source_tokenizer.encode(s) for s in sources], PAD_ID)
    assert watched(greedy_search, reverse.model, src)[0] == greedy_search(reverse.model, src)
    plain = beam_search(reverse.model, src, beam_size=3)
    seen, reports = watched(beam_search, reverse.model, src, beam_size=3)
    assert [[h.tokens for h in hyps] for hyps in seen] == [[h.tokens for h in hyps] for hyps in plain]
    assert {report.sentence for step in reports for report in step} == {0, 1, 2}


def test_each_sentence_of_a_batch_reports_attention_over_its_own_source(reverse):
    sources = ["5 4 3", "1 1 2 2 3 3 4 4"]
    ids = [reverse.source_tokenizer.encode(s) for s in sources]
    for search in (greedy_search, beam_search):
        _, reports = watched(search, reverse.model, pad_batch(ids, PAD_ID))
        for report in reports[0]:
            layers, heads, length = report.cross_attention.shape
            assert length == len(ids[report.sentence])
            assert torch.allclose(report.cross_attention.sum(dim=-1), torch.ones(layers, heads), atol=1e-5)


def test_beam_search_reports_its_best_hypothesis_so_far_ending_with_the_one_it_returns(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("3 1 4 1 5 9")])
    (hypotheses,), reports = watched(beam_search, reverse.model, src, beam_size=4)
    assert [len(step[0].tokens) for step in reports[:6]] == list(range(1, 7))  # a token a step while none ended
    assert reports[-1][0].tokens == [*hypotheses[0].tokens, EOS_ID]


def test_a_search_ended_early_returns_what_it_has_as_not_ended(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("3 1 4 1 5 9")])
    (tokens,), (ended,) = watched(greedy_search, reverse.model, src, stop_after=2, return_ended=True)[0]
    assert tokens == greedy_search(reverse.model, src)[0][:2] and not ended
    (hypotheses,), reports = watched(beam_search, reverse.model, src, beam_size=4, stop_after=2)
    assert len(reports) == 2
    assert hypotheses[0].tokens == reports[-1][0].tokens and not hypotheses[0].ended


def test_a_beam_search_told_to_stop_as_it_ends_keeps_what_it_found():
    model = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu").model
    src = pad_batch([[5, 6, 7, 8, 2], [9, 4, 2]], PAD_ID)
    plain, reports = watched(beam_search, model, src, beam_size=3)
    stopped, _ = watched(beam_search, model, src, beam_size=3, stop_after=len(reports))
    assert [[h.tokens for h in hyps] for hyps in stopped] == [[h.tokens for h in hyps] for hyps in plain]
    assert all(hyps[0].ended for hyps in stopped), "a sentence done at the last step is not cut short"



def log_probability(model, source: list[int], tokens: list[int]) -> float:
    """log P(tokens | source) under the model, by one teacher-forced pass."""
    with torch.no_grad():
        logits = model(torch.tensor([source]), torch.tensor([[model.config.start_id, *tokens[:-1]]])).logits[0]
    return logits.log_softmax(-1).gather(1, torch.tensor(tokens)[:, None]).sum().item()


@pytest.mark.parametrize("max_length", [None, 3])
def test_each_beam_report_is_the_best_live_beam_as_its_step_saw_it(reverse, max_length):
    """Where beams part ways (an untrained model), a step's report is the live beam of the highest
    log-probability, with that beam's own next-token probabilities; or a better-scoring ended one."""
    model = unsure_model(reverse.model.config.tgt_vocab_size)
    for text in ("1 2 3 4 5", "1 4 2 7 8 7 8 9 0"):  # in the second, the best live beam soon extends beam 1
        source = reverse.source_tokenizer.encode(text)
        ((hypotheses,), (steps,)), reports = watched(beam_search, model, torch.tensor([source]), beam_size=3,
                                                     max_length=max_length, return_steps=True)
        assert len(reports) == len(steps)
        for (report,), step in zip(reports, steps):
            body = report.tokens[:-1] if report.tokens[-1] == EOS_ID else report.tokens  # forced_decode adds eos
            inspected = forced_decode(model, reverse.source_tokenizer, reverse.target_tokenizer, source, body)
            assert report.probability == pytest.approx(inspected.token_probs[len(report.tokens) - 1], abs=1e-5)
            assert report.top_ids == inspected.top_ids[len(report.tokens) - 1]
            assert report.top_probs == pytest.approx(inspected.top_probs[len(report.tokens) - 1], abs=1e-5)
            live = [log_prob for log_prob, token in zip(step.log_probs, step.tokens) if token != EOS_ID]
            if report.tokens[-1] != EOS_ID and live:
                assert log_probability(model, source, report.tokens) == pytest.approx(max(live), abs=1e-4)


def test_a_beam_search_stopped_early_keeps_each_live_beams_own_log_probability(reverse):
    model = unsure_model(reverse.model.config.tgt_vocab_size)
    source = reverse.source_tokenizer.encode("1 2 3 4 5")
    (hypotheses,), _ = watched(beam_search, model, torch.tensor([source]), beam_size=3, stop_after=2)
    unfinished = [h for h in hypotheses if not h.ended]
    assert unfinished, "the search was stopped before every beam ended"
    for hypothesis in unfinished:
        assert hypothesis.log_prob == pytest.approx(log_probability(model, source, hypothesis.tokens), abs=1e-4)
