"""Every event of the page is a public API (any client can join the queue with its index): each takes any value a
hostile client sends and answers with a sentence, never a traceback. The events come from the page's own
dependency list, so a new one is covered without editing this test."""

import logging
import math
import warnings

import gradio as gr
import pandas
import pytest

from helpers import QuickTrainer
from page_driver import PageDriver
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui.training import jobs
from ui import services
from ui.build import build_app
from ui.runtime.errors import UNEXPECTED, as_html
from ui.views.choices import NO_TRANSLATION

HOSTILE = {
    gr.Slider: [None, math.nan, math.inf, -1e308, "3; drop table"],
    gr.Number: [None, math.nan, -math.inf, "seven"],
    gr.Checkbox: [None, "yes", 1],
    gr.CheckboxGroup: [None, "L1H1", [["L1H1"]], [f"L1H{i}" for i in range(2000)]],
    gr.Radio: [None, "no such choice", 7],
    gr.Dropdown: [["a", "list"], "x" * 10_000, {"a": 1}],
    gr.Textbox: [12345, ["a"], "x" * 1_000_000],
    gr.Dataframe: [pandas.DataFrame([["t"] + [1.0] * 6] * 2000), pandas.DataFrame([["t"] + [1.0] * 400] * 3)],
}


def received(component, value):
    """What the handler gets: the value through the component's own check, as the server passes it (tables are
    sent here as the DataFrames a check would make)."""
    if isinstance(component, gr.Dataframe):
        return value
    return component.preprocess(value)


def hostile_values(component):
    for kind, values in HOSTILE.items():
        if isinstance(component, kind):
            return values
    return []  # State lives on the server; files have their own limits


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    manager = jobs.JobManager(tmp_path_factory.mktemp("runs"), trainer=QuickTrainer)
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS, manager.published_dir], device="cpu")
    driver = PageDriver(build_app(services.Services(registry, manager), "reverse-tiny"))
    driver.run(driver.event("on_open", "ui.tabs.header"))
    driver.run(driver.event("on_translate_click"))
    yield driver
    manager.stop()
    manager.wait(60)


def answer_every_hostile_value(page, caplog) -> int:
    """Each event of the page, called with each hostile value in turn: a sentence at most, no traceback logged.
    How many calls were made."""
    tried = 0
    for event in page.events():
        for position, component in enumerate(event.inputs):
            for value in hostile_values(component):
                inputs = [page.values.get(c._id) for c in event.inputs]
                with caplog.at_level(logging.ERROR):
                    try:
                        inputs[position] = received(component, value)
                        page.run(event, inputs)
                    except gr.Error as error:
                        assert error.message != str(UNEXPECTED), (event.name, component.label, value)
                tried += 1
                tracebacks = [r for r in caplog.records if r.levelno >= logging.ERROR]
                assert not tracebacks, (event.name, component.label, str(value)[:60], tracebacks[0].getMessage())
    return tried


def test_every_event_answers_every_hostile_value_with_a_sentence_and_logs_no_traceback(page, caplog):
    assert answer_every_hostile_value(page, caplog) > 300
    page.demo.named_components  # the page stays whole


def test_every_event_of_a_class_s_students_page_answers_hostile_values_too(page, caplog):
    students = PageDriver(page.demo.later_pages["/class/"].build())
    assert answer_every_hostile_value(students, caplog) > 10


def test_every_event_that_looks_at_a_translation_asks_for_one_in_the_same_words(page, caplog):
    state = page.demo.named_components["translation_state"]
    asked = set()
    for event in page.events():
        if state not in event.inputs:
            continue
        inputs = [None if c is state else page.values.get(c._id) for c in event.inputs]
        with caplog.at_level(logging.ERROR), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                page.run(event, inputs)
                said = [str(w.message) for w in warned]  # the page's own buttons warn and keep their views
            except gr.Error as error:
                said = [error.message]
        asking = [message for message in said if "ranslate" in message and "first" in message]
        if asking:
            assert asking == [as_html(NO_TRANSLATION)], (event.name, asking)
            asked.add(event.name)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], event.name
    assert {"on_tree", "on_override", "on_sample", "on_attribute", "on_prepare_attention", "attention"} <= asked, asked
