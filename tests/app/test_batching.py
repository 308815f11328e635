"""Translations asked for while another is being decoded wait, and are then decoded together in one batch, each
the translation it would have been alone."""

import threading
import time

import pytest

from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside.contributions import source_shares_together
from ui.runtime import batching
from ui.runtime.batching import Batches

SENTENCES = ["5 4 3", "1 1 2 2 3 3", "8", "9 0 7 7", "6 6 1"]


@pytest.fixture
def checkpoint():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


class HeldFirstBatch:
    """The checkpoint's own batched decoding, recording each batch's sentences; the first batch waits until
    ``release`` is set, so that the others' requests arrive while it is being decoded."""

    def __init__(self, checkpoint):
        self.decode_together = checkpoint.translate_together
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        checkpoint.translate_together = self

    def __call__(self, texts, *args, **options):
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            assert self.release.wait(30)
        return self.decode_together(texts, *args, **options)


def ask_together(batches: Batches, checkpoint, texts, beam_size=3, max_length=None, held=None,
                 source_shares=()) -> list:
    """Each text from a thread of its own, as Gradio's workers ask; the first is asked first and held (if
    ``held``) until every other one waits. The texts numbered in ``source_shares`` ask for them."""
    answers: list = [None] * len(texts)

    def ask(number):
        try:
            answers[number] = batches.translate(checkpoint, texts[number], beam_size, max_length,
                                                source_shares=number in source_shares, top_k=3)
        except Exception as error:  # noqa: BLE001 - each thread's outcome is checked by the test
            answers[number] = error
    threads = [threading.Thread(target=ask, args=(number,)) for number in range(len(texts))]
    threads[0].start()
    while held is not None and not held.batches:
        time.sleep(0.01)
    for thread in threads[1:]:
        thread.start()
    while held is not None and len(batches.waiting) < len(texts) - 1:
        time.sleep(0.01)
    if held is not None:
        held.release.set()
    for thread in threads:
        thread.join(60)
    return answers


def test_translations_asked_for_meanwhile_are_decoded_together_as_each_would_be_alone(checkpoint):
    held = HeldFirstBatch(checkpoint)
    answers = ask_together(Batches(most=8), checkpoint, SENTENCES, held=held)
    assert held.batches == [SENTENCES[:1], SENTENCES[1:]]
    for text, answer in zip(SENTENCES, answers):
        alone = checkpoint.translate(text, 3, None, top_k=3)
        made = answer.translation
        assert (made.text, made.predicted_ids, made.top_ids) == (alone.text, alone.predicted_ids, alone.top_ids)
        assert answer.source_share is None


def test_source_shares_are_measured_together_for_those_who_ask_each_its_own(checkpoint):
    held = HeldFirstBatch(checkpoint)
    answers = ask_together(Batches(most=8), checkpoint, SENTENCES, held=held, source_shares={0, 1, 3})
    for number, answer in enumerate(answers):
        if number in {0, 1, 3}:
            alone = source_shares_together(checkpoint.model, [answer.translation])[0].tolist()
            assert answer.source_share == pytest.approx(alone, abs=1e-5)
            assert len(answer.source_share) == answer.translation.num_steps
        else:
            assert answer.source_share is None


def test_a_translation_that_asks_no_shares_is_answered_while_its_batchs_shares_are_measured(checkpoint,
                                                                                          monkeypatch):
    measured, measuring, release = batching.source_shares_together, threading.Event(), threading.Event()

    def held_measuring(*args):
        measuring.set()
        assert release.wait(30)
        return measured(*args)
    monkeypatch.setattr(batching, "source_shares_together", held_measuring)
    batches, answers = Batches(), []
    batches.decoding = True  # another thread decodes: this request waits for its batch
    asker = threading.Thread(target=lambda: answers.append(batches.translate(checkpoint, SENTENCES[2], 3, None)))
    asker.start()
    while not batches.waiting:
        time.sleep(0.01)
    measured_one = batching.Request(checkpoint, SENTENCES[1], batches.waiting[0].settings, source_shares=True)
    decoder = threading.Thread(target=batches.decode, args=([measured_one, batches.waiting.pop()],))
    decoder.start()  # as that other thread would, with this request in its batch
    assert measuring.wait(30)
    asker.join(30)
    assert answers and answers[0].source_share is None, "answered while the other's shares are measured"
    release.set()
    decoder.join(30)
    assert measured_one.done.is_set() and len(measured_one.source_share) == measured_one.translation.num_steps


def test_a_batch_holds_at_most_its_limit_and_only_requests_decoded_alike(checkpoint):
    held = HeldFirstBatch(checkpoint)
    batches = Batches(most=2)
    texts = SENTENCES[:4]
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(batches.translate(checkpoint, texts[0], 3, None)))]
    threads[0].start()
    while not held.batches:
        time.sleep(0.01)
    for text, max_length in zip(texts[1:], (None, 2, None)):  # the second asks for another length limit
        threads.append(threading.Thread(target=lambda t=text, m=max_length: answers.append(
            batches.translate(checkpoint, t, 3, m))))
        threads[-1].start()
        while len(batches.waiting) < len(threads) - 1:
            time.sleep(0.01)
    held.release.set()
    for thread in threads:
        thread.join(60)
    assert held.batches == [[texts[0]], [texts[1], texts[3]], [texts[2]]]
    assert len(answers) == 4


def test_a_sentence_that_fails_fails_alone(checkpoint, monkeypatch):
    decode_together = checkpoint.translate_together

    def refusing(texts, *args, **options):
        if "refused" in texts:
            raise InputError("this sentence is refused")
        return decode_together(texts, *args, **options)
    monkeypatch.setattr(checkpoint, "translate_together", refusing)
    answers = ask_together(Batches(), checkpoint, ["5 4 3", "refused", "8 6"])
    assert isinstance(answers[1], InputError)
    assert [answers[0].translation.text, answers[2].translation.text] == ["3 4 5", "6 8"]
