"""A Translate click is seen as it happens: each step reaches the page the moment the search decides it, then every
view of the finished translation; the page's Stop ends a search where it is."""

import contextlib
import contextvars
import threading
from types import SimpleNamespace

import pytest
import torch

from ui.drawing import figures
from ui.runtime import batching
from ui.runtime.live import SHOWN_EVERY_S, SHOWN_PER_S, Done, Stops, Watched, as_it_happens
from ui.tabs import translate
from ui.views import translate as translate_views
from ui.views.live import UNDER_WAY
from ui.views.choices import VIEWS

CROSS = "cross"
SENTENCE = "A man in a blue shirt is standing on a ladder."


def click(services, decoding="greedy", page="a-page", sentence=SENTENCE, max_length=40):
    return translate.on_translate_click(services, "multi30k-en-de", sentence, decoding, 5, max_length, CROSS,
                                        VIEWS[0], 2, 1, False, SimpleNamespace(session_hash=page))


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_a_click_sends_each_step_as_it_is_decided_then_every_view_of_the_translation(app_services, decoding):
    *steps, finished = list(click(app_services, decoding))
    assert steps, "at least the first step comes before the translation is done"
    assert set(steps[0]) == set(translate.LIVE_OUTPUTS), "the first also clears the last translation's notes"
    assert all(set(values) == {"translation", "live_step"} for values in steps[1:])
    assert steps[0]["notes"] == "" and steps[0]["source_tokens"] == finished["source_tokens"]
    shown = [values["live_step"]["produced"] for values in steps]
    assert all(a != b for a, b in zip(shown, shown[1:])), "each value shows something new"
    if decoding == "greedy":
        numbers = [values["live_step"]["step"] for values in steps]
        assert numbers == sorted(set(numbers)), "steps only go forward (a slow page skips some)"
    assert len({values["live_step"]["sent"] for values in steps} | {finished["page_numbers"]["sent"]}) == 1
    translation = finished["translation_state"]
    assert set(translate.TRANSLATION_OUTPUTS) <= set(finished)
    assert all(values["translation"].endswith(UNDER_WAY) for values in steps), \
        "a translation under way never reads as the finished one, which only the last answer brings with its numbers"
    if decoding == "greedy":
        assert all(finished["translation"].startswith(values["translation"].removesuffix(UNDER_WAY))
                   for values in steps)
        last = steps[-1]["live_step"]
        assert last["produced"] == translation.predicted_pieces[:last["step"]]


def test_each_step_holds_what_the_page_draws_of_it(app_services):
    *steps, _ = click(app_services, max_length=60, sentence=SENTENCE + " " + SENTENCE)
    first = steps[0]["live_step"]  # the first the page takes (a busy one may skip some)
    step = first["step"]
    candidates = first["candidates"]
    assert len(first["produced"]) == step and len(candidates["probabilities"]) == len(candidates["pieces"]) == 5
    chosen = candidates["pieces"][candidates["colors"].index("#d62728")]
    assert chosen == figures.escape(first["produced"][-1]), "the chosen marked (as Plotly shows text: </s> escaped)"
    source = translate_views.attention_axes(translate_views.run_translation(
        app_services.registry.get("multi30k-en-de"), SENTENCE + " " + SENTENCE, max_length=1).translation, CROSS)[1]
    assert len(first["attention"]) == len(source) and source[-1] == "</s>"
    assert all(values["live_step"]["sourcesFrame"] == first["sourcesFrame"] for values in steps), \
        "each step brings the frames its charts fill (a page that skips a step still draws the next)"
    assert sum(first["attention"]) == pytest.approx(1, abs=1e-3)
    assert (first["layer"], first["head"]) == (2, 1)
    assert first["caption"].startswith(f"Step {step}, decoding: the model chose")


def test_a_search_told_to_stop_ends_where_it_is_and_the_notes_say_the_visitor_stopped_it(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    stop = threading.Event()
    stop.set()  # pressed before the first step: the search ends after it
    for decoding in ("greedy", "beam"):
        result = translate_views.run_translation(checkpoint, SENTENCE, decoding, 5, 40, stop=stop)
        assert result.translation.num_steps == 1 and not result.translation.ended
        assert result.notes[-1].startswith("You stopped the decoding")


def test_the_stop_button_stops_the_translations_its_own_page_runs_and_no_other(app_services):
    stops = Stops()
    with stops.running("mine") as mine, stops.running("mine") as example, stops.running("theirs") as theirs:
        translate.on_stop(SimpleNamespace(stops=stops), SimpleNamespace(session_hash="mine"))
        assert mine.is_set() and example.is_set() and not theirs.is_set()
    assert theirs.is_set(), "work its page no longer waits for (done, or the event closed) ends at its next step"
    translate.on_stop(SimpleNamespace(stops=stops), SimpleNamespace(session_hash="mine"))  # nothing runs: nothing
    with stops.running("mine") as again:
        assert not again.is_set(), "a Stop belongs to the translation it was pressed during"


def test_only_a_search_a_stop_ended_says_the_visitor_stopped_it(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    stop = threading.Event()
    stop.set()
    stopped = translate_views.run_translation(checkpoint, SENTENCE, "greedy", 5, 40, stop=stop).translation
    out_of_length = translate_views.run_translation(checkpoint, SENTENCE, "greedy", 5, 5).translation
    assert translate_views.cut_short(checkpoint, stopped, 40)
    assert not out_of_length.ended and not translate_views.cut_short(checkpoint, out_of_length, 5)


def test_work_seen_as_it_happens_runs_in_the_events_context():
    asker = contextvars.ContextVar("asker")
    asker.set("a visitor")  # as Gradio keeps the request that a ZeroGPU call reads

    def work(on_step):
        return asker.get(None)
    assert list(as_it_happens(work)) == [Done("a visitor")]


def test_a_batch_search_ends_early_only_once_every_sentence_in_it_is_stopped():
    seen, stopped, going_on = [], threading.Event(), threading.Event()
    stopped.set()
    batch = [batching.Request(None, "a", (), seen.append, stopped), batching.Request(None, "b", (), None, going_on)]
    watch = batching.watching(batch)
    reports = [SimpleNamespace(sentence=0), SimpleNamespace(sentence=1)]
    assert watch(reports) is True, "the other sentence goes on"
    assert seen == reports[:1], "each request sees its own sentence's steps"
    going_on.set()
    assert watch(reports) is False
    assert batching.watching([batching.Request(None, "c", ())]) is None, "nobody watches: nothing computed for it"


def test_work_seen_as_it_happens_yields_its_reports_then_what_it_returns_and_raises_its_errors():
    first_seen, second_seen = threading.Event(), threading.Event()

    def work(on_step):
        on_step(1)
        first_seen.wait()
        on_step(2)
        second_seen.wait()
        return "done"
    seen = as_it_happens(work, every_s=0)
    assert next(seen) == 1
    first_seen.set()
    assert next(seen) == 2
    second_seen.set()
    assert list(seen) == [Done("done")]

    first_seen.clear(), second_seen.clear()
    seen = as_it_happens(work, every_s=3600)
    assert next(seen) == 1, "the first report is shown at once"
    first_seen.set(), second_seen.set()
    assert list(seen) == [Done("done")], "one sooner than every_s after it waits, skipped once the work is done"

    def failing(on_step):
        raise ValueError("bad input")
    with pytest.raises(ValueError, match="bad input"):
        list(as_it_happens(failing))


def test_while_many_are_watched_at_once_each_ones_reports_are_shown_further_apart():
    watched = Watched()
    with watched.one():
        assert watched.every_s(SHOWN_EVERY_S) == SHOWN_EVERY_S, "a visitor alone sees four a second"
    with contextlib.ExitStack() as many:
        for _ in range(2 * SHOWN_PER_S):
            many.enter_context(watched.one())
        assert watched.every_s(SHOWN_EVERY_S) == 2.0, "all of them together shown SHOWN_PER_S times a second"
    assert watched.count == 0


def test_a_watched_search_finds_what_an_unwatched_one_does(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    plain = checkpoint.translate(SENTENCE, 5, 40)
    watched = checkpoint.translate(SENTENCE, 5, 40, watch=lambda progress: True)
    assert watched.predicted_ids == plain.predicted_ids
    assert torch.allclose(watched.cross_attention, plain.cross_attention)
