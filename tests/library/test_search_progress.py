"""A search can be watched step by step (what a page draws while it decodes) and ended early (its Stop button)."""

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.paper.decoding import beam_search, greedy_search, pad_batch
from transformer.paper.tokenizer import EOS_ID, PAD_ID
from transformer.paper.translation import forced_decode


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

