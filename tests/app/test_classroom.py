"""A class explores together: a teacher opens a class, students join by code and answer once each, only the
teacher reveals, moves on or closes, and a server holds only so many classes and students (so many per public
address) for so long."""

import pytest

from ui.classes.classroom import CODE_LENGTH, CODE_LETTERS, ClassError, Classrooms
from ui.views.lessons import LESSONS
from ui.views.questions import Question


def ask(lesson) -> Question:
    """A question per lesson whose answer is its second choice (the model's answers are tested elsewhere)."""
    return Question(f"About {lesson.title}?", ("a", "b", "c"), 1, "because")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_class_has_a_short_code_that_students_type_as_they_like():
    classes = Classrooms(ask)
    code = classes.open(3, teacher="T")
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_LETTERS)
    shown = classes.question(f" {code.lower()[:2]} {code.lower()[2:]} ", student="s1")
    assert shown.lesson == 3 and shown.question.text == f"About {LESSONS[2].title}?"


def test_each_student_answers_each_question_once_and_the_teacher_sees_the_counts():
    classes = Classrooms(ask)
    code = classes.open(1, teacher="T")
    assert str(classes.answer(code, "s1", 1)) == "Your answer is in. Wait for the reveal."
    classes.answer(code, "s2", 0)
    classes.answer(code, "s3", 1)
    with pytest.raises(ClassError, match="You have answered this question already"):
        classes.answer(code, "s1", 2)
    with pytest.raises(ClassError, match="Choose one of the 3 answers"):
        classes.answer(code, "s4", 3)
    results = classes.results(code)
    assert results.counts == [1, 2, 0] and results.students == 4 and not results.revealed


def test_only_the_teacher_reveals_moves_on_and_closes_and_the_score_counts_revealed_answers():
    classes = Classrooms(ask)
    code = classes.open(len(LESSONS) - 1, teacher="T")
    classes.answer(code, "s1", 1)
    classes.answer(code, "s2", 2)
    for step in (classes.reveal, classes.next, classes.close):
        with pytest.raises(ClassError, match="Only the page that opened this class can do that"):
            step(code, "s1")
    with pytest.raises(ClassError, match="Reveal this question's answer first"):
        classes.next(code, "T")
    assert classes.reveal(code, "T").question.answer == 1
    with pytest.raises(ClassError, match="The answer has been revealed"):
        classes.answer(code, "s3", 1)
    assert classes.next(code, "T").lesson == len(LESSONS), "the next lesson's question"
    classes.answer(code, "s1", 1)
    classes.reveal(code, "T")
    with pytest.raises(ClassError, match="the last lesson's question"):
        classes.next(code, "T")
    assert classes.results(code).score == (2, 3)
    assert classes.close(code, "T") == (2, 3)
    with pytest.raises(ClassError, match=f"No open class has the code {code}: check it with your teacher"):
        classes.question(code, "s1")


def test_a_server_holds_only_so_many_classes_and_students():
    clock = Clock()
    classes = Classrooms(ask, max_classes=2, max_students=2, clock=clock)
    code = classes.open(1, "T1")
    clock.now += 5 * 60
    classes.open(1, "T2")
    with pytest.raises(ClassError, match="^This server holds 2 open classes, the most it may: try again in 10 "
                                         "minutes, when one closes unless it is used.$"):
        classes.open(1, "T3")
    classes.question(code, "s1")
    classes.answer(code, "s2", 0)
    classes.question(code, "s1"), classes.question(code, "T1")  # neither counts twice, nor the teacher
    with pytest.raises(ClassError, match="This class is full: it has 2 students"):
        classes.question(code, "s3")


def test_a_class_ends_half_an_hour_after_it_was_last_used():
    clock = Clock()
    classes = Classrooms(ask, clock=clock)
    code = classes.open(1, "T")
    clock.now += 14 * 60
    classes.question(code, "s1")
    clock.now += 30 * 60 - 1
    assert classes.results(code).students == 1, "in use: still open"
    clock.now += 30 * 60
    assert classes.open_count() == 0
    with pytest.raises(ClassError, match="No open class has the code"):
        classes.answer(code, "s1", 0)


def test_a_class_no_student_joined_within_a_quarter_of_an_hour_ends_however_often_its_teacher_looks():
    clock = Clock()
    classes = Classrooms(ask, clock=clock)
    code = classes.open(1, "T")
    for _ in range(15):
        clock.now += 60 - 1e-3
        assert classes.results(code).students == 0  # the teacher's page asks every few seconds
    clock.now += 1
    assert classes.open_count() == 0


def test_one_public_address_holds_two_classes_and_is_told_when_it_may_open_another():
    clock = Clock()
    classes = Classrooms(ask, clock=clock)
    first = classes.open(1, "T1", address="203.0.113.7")
    classes.question(first, "s1")
    clock.now += 10 * 60
    classes.open(2, "T2", address="203.0.113.7")
    clock.now += 60
    with pytest.raises(ClassError, match="^Your address holds 2 open classes, the most one address may: close one, "
                                         "or try again in 14 minutes, when one closes unless it is used.$"):
        classes.open(3, "T3", address="203.0.113.7")
    assert classes.open(3, "T4", address="198.51.100.2"), "another address opens its own"
    for teacher in ("T5", "T6", "T7"):
        classes.open(4, teacher, address=None)  # the app's own machine is not limited
    clock.now += 14 * 60  # the class nobody joined closes
    assert classes.open(3, "T3", address="203.0.113.7")


@pytest.mark.parametrize("lesson", [0, len(LESSONS) + 1, -3])
def test_a_lesson_outside_the_list_is_refused(lesson):
    with pytest.raises(ClassError, match=f"Choose a lesson from 1 to {len(LESSONS)}"):
        Classrooms(ask).open(lesson, "T")


@pytest.mark.parametrize("code", ["", None, "<script>alert(1)</script>", "x" * 10_000])
def test_a_wrong_code_gets_one_sentence_that_repeats_nothing_but_a_well_formed_code(code):
    with pytest.raises(ClassError, match="^No open class has the code you typed: check it with your teacher.$"):
        Classrooms(ask).question(code, "s1")
