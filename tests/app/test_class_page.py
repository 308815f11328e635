"""The class panel's and the students' page's views, called as functions: the link and its QR code, the answers as
bars, the reveal, and a class that ended while a page was open."""

import types

import pytest
import torch

from ui.classes import class_page
from ui.classes.classroom import ClassError, Classrooms
from ui.views.questions import Question
from ui.views.translate import AttentionMap

WHY = AttentionMap.of(torch.tensor([[0.99, 0.01], [0.25, 0.75]]), ["Ball", "</s>"], ["ball", "red"], "Cross-attention",
                      marked_row=0)


def ask(lesson) -> Question:
    return Question("Which <b>word</b>?", ("ball", "red"), 0, "Its weights: 'ball' 99%.", WHY)


@pytest.fixture
def services():
    return types.SimpleNamespace(classes=Classrooms(ask))


def session(name: str):
    return types.SimpleNamespace(session_hash=name, query_params={})


def test_the_students_link_is_made_from_the_teachers_page_and_drawn_as_a_qr_code():
    link = class_page.student_link("https://someone-explorer.hf.space/", "ABCDE")
    assert link == "https://someone-explorer.hf.space/class/?code=ABCDE"
    shown = class_page.join_html("ABCDE", link)
    assert "ABCDE" in shown and f'href="{link}"' in shown and "<svg" in shown and "<title>" in shown
    for address in ("", "javascript:alert(1)", 'https://x/"><script>', "file:///etc/passwd"):
        with pytest.raises(ClassError, match="not one a phone can open"):
            class_page.student_link(address, "ABCDE")


def test_the_teacher_sees_answers_as_bars_and_after_the_reveal_the_models_answer(services):
    code = services.classes.open(1, "T")
    for student, choice in (("s1", 0), ("s2", 1), ("s3", 1)):
        services.classes.answer(code, student, choice)
    ticked = class_page.on_class_tick(services, code)
    assert set(ticked) == {"class_status", "class_counts"}, "each second, only what answers change"
    assert "red: " + "█" * 13 + " 2 (67%)" in ticked["class_counts"] and "3 answers" in ticked["class_counts"]
    assert "&lt;b&gt;word&lt;/b&gt;" in ticked["class_counts"], "the question is text, never HTML"
    revealed = class_page.on_class_reveal(services, code, session("T"))
    assert "ball: " in revealed["class_counts"] and "← the model" in revealed["class_counts"]
    assert revealed["class_why"].startswith("**The model:** ball. Its weights")
    assert revealed["class_reveal"].interactive is False, "revealed once"


def test_a_phone_shows_the_question_then_its_answer_and_the_models(services):
    code = services.classes.open(1, "T")
    joined = class_page.on_student_join(services, code.lower(), session("s1"))
    assert joined["student_code"] == code and joined["student_choice"].interactive
    sent = class_page.on_student_send(services, code, 1, session("s1"))
    assert sent["student_status"] == "Your answer is in. Wait for the reveal." and not sent["student_send"].interactive
    seen = sent["student_seen"]
    assert class_page.on_student_poll(services, code, seen, session("s1")) == {}, "nothing new: nothing sent"
    services.classes.reveal(code, "T")
    assert sent["student_why"] == "", "the map that shows why comes with the answer"
    shown = class_page.on_student_poll(services, code, seen, session("s1"))
    assert shown["student_status"].startswith("**The model's answer: ball.** You chose red.")
    why = shown["student_why"]  # a table coloured as the heatmap: a phone loads no Plotly.js
    assert why.startswith('<figure class="attention-table">') and '<tr class="marked-row"><th scope="row">Ball' in why
    assert why.count("<tr") == 3 and "&lt;/s&gt;" in why and "</s>" not in why
    assert 'class="cell-value">99%</span>' in why, "each weight is text a screen reader reads"


def test_a_page_open_on_a_class_that_ended_stops_asking_and_says_so(services):
    code = services.classes.open(1, "T")
    class_page.on_student_join(services, code, session("s1"))
    services.classes.close(code, "T")
    for ended in (class_page.on_class_tick(services, code),
                  class_page.on_student_poll(services, code, [1, False], session("s1"))):
        timer = ended.get("class_clock", ended.get("student_clock"))
        assert timer.active is False
    assert "No open class has the code" in class_page.on_class_tick(services, code)["class_status"]


def visitor(name: str, address: str):
    """A request of a public server's visitor: through a proxy on a private network, as on a Space."""
    return types.SimpleNamespace(session_hash=name, query_params={}, client=types.SimpleNamespace(host="10.0.0.2"),
                                 headers={"x-forwarded-for": address})


def test_a_teacher_at_an_address_holding_two_classes_reads_when_to_try_again(services):
    page = "https://someone-explorer.hf.space/"
    for teacher in ("T1", "T2"):
        assert class_page.on_class_open(services, "where_each_word_looks", page, visitor(teacher, "203.0.113.7"))
    with pytest.raises(ClassError, match="Your address holds 2 open classes, .* try again in 15 minutes"):
        class_page.on_class_open(services, "where_each_word_looks", page, visitor("T3", "203.0.113.7"))
    assert class_page.on_class_open(services, "1. Where each word looks", page, visitor("T4", "198.51.100.2"))
