"""A class on every student's phone: the teacher's panel (open a class on the chosen lesson, its code, link and QR
code, answers arriving, Reveal, Next question, End) and the students' page at /class (the question, one answer,
then the model's answer). The classes themselves are ``classroom.Classrooms``; the questions, computed from the
model, are ``views.questions``.
"""

from __future__ import annotations

import html
import re

import gradio as gr
import segno

from ..runtime.chart import Chart
from ..runtime import components
from .classroom import CODE_LENGTH, ClassError, Round, normal_code
from ..runtime.language import ENGLISH, Count, page_path, percent, said, switch_html, text
from ..runtime.limits import visiting_client
from ..runtime.page import Page
from ..services import Services
from ..views import lessons
from ..views.text import markdown_escape

STUDENT_PATH = "class"  # the students' page is a small app of its own, mounted here beside the main page
# A student's page asks every 1.5 s whether the question changed or was revealed: a reveal reaches every phone
# within 2 s, and 250 phones make about 170 small requests a second, each answered without the queue.
POLL_S = 1.5
TEACHER_POLL_S = 1.0
STUDENT_STATUS = "#student-status"  # where a phone reads what its answer or code did (read out as it changes)
CHOICE_SLOTS = 4  # the most choices a question has (views.questions.CHOICES): the answer buttons' values
PAGE_ADDRESS = re.compile(r"^https?://[^\s\"'<>]{1,300}$")
# The teacher's page sends its own address, from which the students' link is made (behind a proxy, as on a Space,
# the server cannot know the address people reach it by).
PAGE_ADDRESS_JS = "(lesson, address) => [lesson, window.location.origin + window.location.pathname]"


def session_of(request: gr.Request | None) -> str:
    """Who asks: the session of their page or client (a student is nothing more)."""
    session = getattr(request, "session_hash", None)
    if not session:
        raise ClassError("no_session")
    return session


def student_link(page_address: str, code: str, language: str = ENGLISH) -> str:
    """The students' page with the code filled in, on the server the teacher's page came from: beside the page in
    English, whatever the teacher's page's language (/de/ is below it); each phone opens it in its own."""
    if not PAGE_ADDRESS.match(page_address or ""):
        raise ClassError("page_address")
    own = page_path("/", language)
    root = page_address[:-len(own) + 1] if language != ENGLISH and page_address.endswith(own) else page_address
    return f"{root.rstrip('/')}/{STUDENT_PATH}/?code={code}"


def qr_svg(link: str, language: str = ENGLISH) -> str:
    """A QR code of ``link`` as inline SVG, drawn here (no service on the network is asked)."""
    return segno.make(link, error="m").svg_inline(scale=6, border=2, title=text(language, "class.teacher.qr_title"))


def join_html(code: str, link: str, language: str = ENGLISH) -> str:
    escaped = html.escape(link)
    anchor = f'<a href="{escaped}" target="_blank" rel="noopener">{escaped}</a>'
    return (f'<div id="class-join"><p style="font-size:2.5em;font-weight:700;letter-spacing:.15em;margin:0">{code}'
            f'</p><p>{text(language, "class.teacher.join", link=anchor)}</p>{qr_svg(link, language)}</div>')


def counts_markdown(question, counts: list[int], revealed: bool, language: str = ENGLISH) -> str:
    """Answers per choice as bars; after the reveal, the model's answer marked."""
    total = sum(counts)
    lines = [f"**{markdown_escape(said(question.text, language))}**", ""]
    for index, (choice, count) in enumerate(zip(question.choices, counts)):
        share = count / total if total else 0.0
        mark = f" {text(language, 'class.teacher.the_model_mark')}" if revealed and index == question.answer else ""
        lines.append(f"- {markdown_escape(said(choice, language))}: {'█' * round(20 * share)} {count} "
                     f"({said(percent(share), language)}){mark}")
    lines.append(f"\n{said(Count(total, 'answer'), language)}")
    return "\n".join(lines)


def answers_views(results, language: str = ENGLISH) -> dict:
    """What changes as students join and answer: who joined, the score so far, the answers per choice."""
    right, answered = results.score
    score = f" · {text(language, 'class.teacher.so_far', right=right, answered=answered)}" if answered else ""
    title = lessons.LESSONS[results.lesson - 1].words(language).title
    status = text(language, "class.teacher.status", lesson=results.lesson, title=markdown_escape(title),
                  students=results.students)
    return {"class_status": f"{status}{score}",
            "class_counts": counts_markdown(results.question, results.counts, results.revealed, language)}


def teacher_views(services: Services, code: str, language: str = ENGLISH) -> dict:
    """The answers, the buttons the question's state allows, and after the reveal the model's answer and view."""
    results = services.classes.results(code)
    views = {**answers_views(results, language),
             "class_reveal": gr.Button(interactive=not results.revealed),
             "class_next": gr.Button(interactive=results.revealed and results.lesson < len(lessons.LESSONS))}
    if results.revealed:
        question = results.question
        model = text(language, "class.teacher.the_model",
                     choice=markdown_escape(said(question.choices[question.answer], language)))
        views.update(class_why=f"{model} {markdown_escape(said(question.why, language))}",
                     class_why_plot=Chart(value=results.question.view, visible=results.question.view is not None))
    else:
        views.update(class_why="", class_why_plot=Chart(value=None, visible=False))
    return views


def on_class_open(services: Services, lesson_choice, page_address, request: gr.Request,
                  language: str = ENGLISH) -> dict:
    """Open a class on the chosen lesson: its code, the students' link and QR code, and the first question."""
    lesson = lessons.LESSONS.index(lessons.lesson_by_choice(lesson_choice)) + 1
    student_link(page_address, "")  # the address checked before the question is computed
    code = services.classes.open(lesson, teacher=session_of(request), address=visiting_client(request))
    return {"class_code": code, "class_join": join_html(code, student_link(page_address, code, language), language),
            "class_clock": gr.Timer(active=True),
            "class_close": gr.Button(interactive=True), **teacher_views(services, code, language)}


def on_class_tick(services: Services, class_code, language: str = ENGLISH) -> dict:
    """The answers so far (only those: the chart of a reveal is not sent again every second); a class that ended
    meanwhile (unused for half an hour) stops the clock and says so."""
    if not class_code:
        return {}
    try:
        return answers_views(services.classes.results(class_code), language)
    except ClassError as ended:
        return {"class_clock": gr.Timer(active=False), "class_status": markdown_escape(said(ended, language))}


def on_class_reveal(services: Services, class_code, request: gr.Request, language: str = ENGLISH) -> dict:
    services.classes.reveal(class_code, session_of(request))
    return teacher_views(services, class_code, language)


def on_class_next(services: Services, class_code, request: gr.Request, language: str = ENGLISH) -> dict:
    services.classes.next(class_code, session_of(request))
    return teacher_views(services, class_code, language)


def on_class_close(services: Services, class_code, request: gr.Request, language: str = ENGLISH) -> dict:
    right, answered = services.classes.close(class_code, session_of(request))
    score = (text(language, "class.teacher.right_at_end", right=right, answered=answered) if answered else
             text(language, "class.teacher.none_revealed"))
    return {"class_code": "", "class_clock": gr.Timer(active=False), "class_join": "",
            "class_status": f"{text(language, 'class.teacher.ended')} {score}", "class_counts": "", "class_why": "",
            "class_why_plot": Chart(value=None, visible=False), "class_reveal": gr.Button(interactive=False),
            "class_next": gr.Button(interactive=False), "class_close": gr.Button(interactive=False)}


def round_key(current: Round) -> list:
    """What a student's page has shown: the question's lesson and whether it was revealed."""
    return [current.lesson, current.revealed]


def student_views(current: Round, answered: int | None, language: str = ENGLISH) -> dict:
    """The question, its choices while it is open, and after the reveal the model's answer and the student's, in
    the page's language."""
    question = current.question

    def shown(words) -> str:
        return markdown_escape(said(words, language))
    views = {"student_question": f"### {shown(question.text)}",
             "student_choice": gr.Radio(choices=[(said(choice, language), index)
                                                 for index, choice in enumerate(question.choices)],
                                        value=None, interactive=not current.revealed and answered is None),
             "student_send": gr.Button(interactive=not current.revealed and answered is None),
             "student_seen": round_key(current)}
    if current.revealed:
        yours = ("" if answered is None else
                 text(language, "class.you_were_right") if answered == question.answer else
                 text(language, "class.you_chose", choice=shown(question.choices[answered])))
        model = text(language, "class.model_answer", choice=shown(question.choices[question.answer]))
        views["student_status"] = " ".join(part for part in (f"**{model}**", yours, shown(question.why)) if part)
        views["student_why"] = question.view.table_html(language) if question.view is not None else ""
    else:
        views["student_why"] = ""
        views["student_status"] = text(language, "class.answer_in" if answered is not None else
                                       "class.choose_and_send")
    return views


def languages_html(language: str, code: str = "") -> str:
    """The switch to the students' page in each other language, keeping the class's code."""
    return switch_html(language, **({"code": code} if code else {}))


def said_on_the_page(problem: ClassError, language: str) -> dict:
    """A wrong code or an answer not chosen, in the status line under the buttons, the page left as it was. (An
    error would put a badge over every part of a phone's screen, and this page's events are not queued, so Gradio
    shows no warning for them.)"""
    return {"student_status": f"**{markdown_escape(said(problem, language))}**"}


def on_student_join(services: Services, student_code, request: gr.Request, language: str = ENGLISH) -> dict:
    code = normal_code(student_code)
    try:
        current = services.classes.question(code, student=session_of(request))
    except ClassError as problem:
        return said_on_the_page(problem, language)
    return {"student_code": code, "student_clock": gr.Timer(active=True),
            "student_languages": languages_html(language, code),
            **student_views(current, current.answers.get(session_of(request)), language)}


def on_student_poll(services: Services, student_code, student_seen, request: gr.Request,
                    language: str = ENGLISH) -> dict:
    """Nothing, unless the teacher revealed the answer or moved on since the page last looked."""
    if not student_code:
        return {}
    try:
        current = services.classes.question(student_code)
    except ClassError as ended:
        return {"student_clock": gr.Timer(active=False), "student_status": markdown_escape(said(ended, language)),
                "student_send": gr.Button(interactive=False)}
    if round_key(current) == student_seen:
        return {}
    return student_views(current, current.answers.get(session_of(request)), language)


def on_student_send(services: Services, student_code, student_choice, request: gr.Request,
                    language: str = ENGLISH) -> dict:
    try:
        if student_choice is None:
            raise ClassError("choose_first")
        services.classes.answer(student_code, session_of(request), int(student_choice))
    except ClassError as problem:
        return said_on_the_page(problem, language)
    current = services.classes.question(student_code)
    return student_views(current, int(student_choice), language)


def teacher_layout(page: Page) -> None:
    """Inside the lessons panel: a class on the lesson chosen there, in the page's language."""
    with gr.Accordion(page.words("class.teacher.panel"), open=False, elem_id="class-panel"):
        with gr.Row():
            open_button = gr.Button(page.words("class.teacher.open"), variant="primary", elem_id="class-open")
            reveal = gr.Button(page.words("class.teacher.reveal"), interactive=False, elem_id="class-reveal")
            next_question = gr.Button(page.words("class.teacher.next"), interactive=False, elem_id="class-next")
            close = gr.Button(page.words("class.teacher.close"), interactive=False, elem_id="class-close")
        join = gr.HTML(elem_id="class-join-panel")
        status = gr.Markdown(elem_id="class-status")
        with gr.Row():
            counts = gr.Markdown(elem_id="class-counts")
            with gr.Column():
                why = gr.Markdown(elem_id="class-why")
                why_plot = Chart(visible=False, show_label=False)
        page.add(class_open=open_button, class_reveal=reveal, class_next=next_question, class_close=close,
                 class_join=join, class_status=status, class_counts=counts, class_why=why, class_why_plot=why_plot,
                 class_code=gr.State(""), class_clock=gr.Timer(TEACHER_POLL_S, active=False),
                 page_address=gr.Textbox(visible=False, max_length=400))


def student_layout(page: Page) -> None:
    """The students' page, in the page's language: the switch to the others, a code, the question, the choices,
    one answer."""
    words = page.words
    languages = gr.HTML(languages_html(page.language), elem_id="student-languages")
    gr.Markdown(f"## {words('class.title')}")
    with gr.Row():
        code = gr.Textbox(label=words("class.code"), max_length=2 * CODE_LENGTH, scale=3, elem_id="student-code")
        join = gr.Button(words("class.join"), variant="primary", scale=1, elem_id="student-join")
    question = gr.Markdown(elem_id="student-question")
    choice = components.Radio([(words("class.answer_slot", n=i + 1), i) for i in range(CHOICE_SLOTS)], value=None,
                              label=words("class.your_answer"), interactive=False, elem_id="student-choice")
    send = gr.Button(words("class.send"), variant="primary", interactive=False, elem_id="student-send")
    status = gr.Markdown(elem_id=STUDENT_STATUS.lstrip("#"))
    why = gr.HTML(elem_id="student-why")  # after the reveal, the map that shows why
    page.add(student_code=code, student_join=join, student_question=question, student_choice=choice,
             student_send=send, student_status=status, student_why=why, student_seen=gr.State(None),
             student_clock=gr.Timer(POLL_S, active=False), student_languages=languages)


TEACHER_OUTPUTS = ("class_status", "class_counts", "class_reveal", "class_next", "class_why", "class_why_plot")
STUDENT_OUTPUTS = ("student_question", "student_choice", "student_send", "student_seen", "student_status",
                   "student_why")


def wire_teacher(page: Page) -> None:
    c = page.components
    page.on(c["class_open"].click, on_class_open,
            ["class_code", "class_join", "class_clock", "class_close", *TEACHER_OUTPUTS], js=PAGE_ADDRESS_JS,
            costly=True)
    page.on(c["class_clock"].tick, on_class_tick, ["class_clock", "class_status", "class_counts"],
            show_progress="hidden", queue=False)
    page.on(c["class_reveal"].click, on_class_reveal, TEACHER_OUTPUTS)
    page.on(c["class_next"].click, on_class_next, TEACHER_OUTPUTS, costly=True)
    page.on(c["class_close"].click, on_class_close,
            ["class_code", "class_clock", "class_join", "class_close", *TEACHER_OUTPUTS])


def wire_students(page: Page, student_page: gr.Blocks) -> None:
    """The students' page's events, none of them queued: each is a look-up of a few milliseconds."""
    c = page.components
    joining = ["student_code", "student_clock", "student_languages", *STUDENT_OUTPUTS]
    page.on([c["student_join"].click, c["student_code"].submit], on_student_join, joining, queue=False)
    page.on(student_page.load, on_student_load, joining, queue=False)
    page.on(c["student_clock"].tick, on_student_poll, ["student_clock", *STUDENT_OUTPUTS], show_progress="hidden",
            queue=False)
    page.on(c["student_send"].click, on_student_send, STUDENT_OUTPUTS, queue=False)


def on_student_load(services: Services, request: gr.Request, language: str = ENGLISH) -> dict:
    """A link with ?code= joins at once."""
    code = normal_code(dict(getattr(request, "query_params", None) or {}).get("code", ""))
    if not code:
        return {}
    return {"student_code": code, "student_languages": languages_html(language, code),
            **on_student_join(services, code, request, language)}
