"""The class endpoints a script (or the load benchmark) uses: open, question, answer, results, reveal; each client is
one person, and only the one that opened a class may reveal its answer. Students' clients may use the students' page
at /class/, which answers /class_question and /class_answer too."""

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from ui.views.questions import word


@pytest.fixture(scope="module")
def opened(app_url):
    url, _ = app_url
    teacher = Client(url, verbose=False)
    return url, teacher, teacher.predict("where_each_word_looks", api_name="/class_open")


def test_a_teacher_opens_a_class_and_students_answer_once_each(opened):
    url, teacher, reply = opened
    assert len(reply["code"]) == 5 and (reply["lesson"], reply["lesson_key"]) == (1, "where_each_word_looks")
    assert not reply["revealed"]
    assert reply["question"].startswith("At step 9 the model writes") and len(reply["choices"]) == 4
    students = [Client(f"{url}class/", verbose=False) for _ in range(3)]  # the students' own page
    for number, student in enumerate(students):
        assert student.predict(reply["code"].lower(), api_name="/class_question")["choices"] == reply["choices"]
        said = student.predict(reply["code"], number % 2, api_name="/class_answer")
        assert said == {"accepted": True, "message": "Your answer is in. Wait for the reveal."}
    with pytest.raises(AppError, match="You have answered this question already"):
        students[0].predict(reply["code"], 1, api_name="/class_answer")
    results = teacher.predict(reply["code"], api_name="/class_results")
    assert results["counts"][:2] == [2, 1] and results["students"] == 3 and not results["revealed"]
    with pytest.raises(AppError, match="Only the page that opened this class can do that"):
        Client(url, verbose=False).predict(reply["code"], api_name="/class_reveal")
    revealed = teacher.predict(reply["code"], api_name="/class_reveal")
    assert revealed["choice"] == reply["choices"][revealed["answer"]] == word("▁ball"), "the model's own answer"
    assert teacher.predict(reply["code"], api_name="/class_results")["answer"] == revealed["answer"]


def test_a_wrong_code_or_a_choice_out_of_range_gets_a_sentence(opened):
    url, _, reply = opened
    student = Client(url, verbose=False)
    with pytest.raises(AppError, match="No open class has the code you typed: check it with your teacher"):
        student.predict("<b>no</b>", api_name="/class_question")
    with pytest.raises(AppError, match="takes a number from 0 to 3|between 0 and 3|maximum"):
        student.predict(reply["code"], 7, api_name="/class_answer")


def test_a_script_names_a_lesson_by_its_key_and_until_the_next_release_by_its_number(opened):
    url, _, _ = opened
    teacher = Client(url, verbose=False)
    by_number = teacher.predict(2, api_name="/class_open")
    assert (by_number["lesson"], by_number["lesson_key"]) == (2, "no_future")
    with pytest.raises(AppError, match="There is no lesson “heads”; name one by its key: where_each_word_looks, "):
        teacher.predict("heads", api_name="/class_open")
