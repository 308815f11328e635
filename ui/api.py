"""The named endpoints for gradio_client users, kept stable whatever the page's own events become.

The page answers a click with one event that changes many views; these answer with the few values the
README documents, through the same handlers.
"""

from __future__ import annotations

import gradio as gr


from .runtime import batching, components
from .classes.class_page import session_of
from .classes.classroom import CODE_LENGTH, ClassError, Round
from .tabs.header import model_settings
from .runtime.language import ENGLISH, said
from .runtime.limits import visiting_client
from .runtime.page import Page
from .services import Services
from .tabs.model import model_views
from .tabs.translate import step_views, translated
from .views import exports
from .views.choices import require_translation
from .views.lessons import LESSONS
from .views.questions import CHOICES
from .views.text import source_label, text_for_model
from .views.translate import run_translation


def translate(services: Services, model, text, decoding, beam_size, max_length) -> dict:
    """/translate: the translation, its notes, the source pieces, the step slider and the attention download."""
    result = run_translation(services.registry.get(model), text, decoding, beam_size, max_length,
                             source_shares=False)  # the step view's, which this answer does not carry
    return translated(result, step=result.translation.num_steps, model=model)


STEP_VIEWS = ("revealed", "top_k_plot", "step_attention_plot", "step_caption")


def step(translation_state, step, layer, head, average) -> dict:
    """/step: the step view of the session's last translation (the pieces so far, candidates, attention, caption)."""
    return step_views(translation_state, step, layer, head, average)


def attention(translation_state) -> dict:
    """/attention: the raw attention of the client's last translation, as a JSON file (translate's --json)."""
    written = exports.attention_json_file(require_translation(translation_state))
    return {"attention_download": gr.DownloadButton(value=written, visible=True)}


def select_model(services: Services, model, text, layer, head, typed_texts) -> dict:
    """/select_model: the model's status, Model-tab tables and card, sliders sized to it, and the input box."""
    checkpoint = services.registry.get(model)
    text, typed_texts = text_for_model(checkpoint, text, typed_texts)
    return {**model_settings(checkpoint, layer, head), **model_views(checkpoint),
            "text": gr.Textbox(value=text, label=source_label(checkpoint)), "typed_texts": typed_texts}


def models(services: Services) -> dict:
    """/models: the model list, read afresh (models trained since the page opened are in it)."""
    return {"model": gr.Dropdown(choices=services.registry.names())}


def class_round(current: Round, language: str) -> dict:
    """The question and its choices in the language of the page asked (the students' page at /class/de/ answers
    in German); its lesson by number and by key."""
    return {"lesson": current.lesson, "lesson_key": LESSONS[current.lesson - 1].key,
            "question": said(current.question.text, language),
            "choices": [said(choice, language) for choice in current.question.choices], "revealed": current.revealed}


LESSON_NAME_LENGTH = 64  # a lesson's key, or its number


def lesson_number(class_lesson: str | None) -> int:
    """The place (from 1) of the lesson a script names by its key; until the next release, by that number too."""
    keys = [lesson.key for lesson in LESSONS]
    named = (class_lesson or "").strip()
    if named in keys:
        return keys.index(named) + 1
    if named.isdecimal():
        return int(named)  # Classrooms.open says which numbers there are
    raise ClassError("lesson_unknown", lesson=named, keys=", ".join(keys))


def class_open(services: Services, class_lesson, request: gr.Request, language: str = ENGLISH) -> dict:
    """/class_open: a class on the lesson named by its key (``he_or_she``), opened by this client, which alone may
    reveal or close it."""
    code = services.classes.open(lesson_number(class_lesson), teacher=session_of(request),
                                 address=visiting_client(request))
    return {"class_reply": {"code": code, **class_round(services.classes.question(code), language)}}


def class_question(services: Services, class_api_code, request: gr.Request, language: str = ENGLISH) -> dict:
    """/class_question: the class's current question and choices; asking joins the class."""
    return {"class_reply": class_round(services.classes.question(class_api_code, student=session_of(request)),
                                       language)}


def class_answer(services: Services, class_api_code, class_choice, request: gr.Request,
                 language: str = ENGLISH) -> dict:
    """/class_answer: this client's one answer (a choice's index) to the current question."""
    recorded = services.classes.answer(class_api_code, session_of(request), int(class_choice))
    return {"class_reply": {"accepted": True, "message": said(recorded, language)}}


def class_results(services: Services, class_api_code) -> dict:
    """/class_results: answers per choice, and whether the answer was revealed (and then which it is)."""
    results = services.classes.results(class_api_code)
    reply = {"lesson": results.lesson, "lesson_key": LESSONS[results.lesson - 1].key, "counts": results.counts,
             "students": results.students,
             "revealed": results.revealed}
    if results.revealed:
        reply["answer"] = results.question.answer
    return {"class_reply": reply}


def class_reveal(services: Services, class_api_code, request: gr.Request, language: str = ENGLISH) -> dict:
    """/class_reveal: the model's answer, its index and why; only for the client that opened the class."""
    question = services.classes.reveal(class_api_code, session_of(request)).question
    return {"class_reply": {"answer": question.answer, "choice": said(question.choices[question.answer], language),
                            "why": said(question.why, language)}}


def wire(page: Page) -> None:
    # API-only triggers: invisible, so no click on the page ever runs them.
    with gr.Row(visible=False):
        triggers = {name: gr.Button(visible=False) for name in ("translate", "step", "attention", "select_model", "models")}
    page.on(triggers["translate"].click, translate,
            ["translation", "notes", "source_tokens", "step", "attention_download", "translation_state",
             "translation_model"],
            api_name="translate", **batching.CONCURRENCY)
    page.on(triggers["step"].click, step, STEP_VIEWS, api_name="step", queue=False)
    page.on(triggers["attention"].click, attention, ["attention_download"], api_name="attention")
    page.on(triggers["select_model"].click, select_model,
            ["model_status", "model_metrics", "model_config", "model_parameters", "model_card", "layer", "head",
             "text", "typed_texts"], api_name="select_model")
    page.on(triggers["models"].click, models, ["model"], api_name="models")
    wire_class_endpoints(page, tuple(CLASS_ENDPOINTS))


CLASS_ENDPOINTS = {"open": class_open, "question": class_question, "answer": class_answer, "results": class_results,
                   "reveal": class_reveal}
STUDENT_ENDPOINTS = ("question", "answer")  # what the students' page serves to scripts besides the main page


def wire_class_endpoints(page: Page, names: tuple[str, ...]) -> None:
    """The class endpoints named, as /class_<name>, on the page being built (the main page, or the students')."""
    with gr.Row(visible=False):
        triggers = {name: gr.Button(visible=False) for name in names}
        page.add(class_lesson=gr.Textbox(LESSONS[0].key, max_length=LESSON_NAME_LENGTH),
                 class_api_code=gr.Textbox(max_length=2 * CODE_LENGTH),
                 class_choice=components.Number(0, precision=0, minimum=0, maximum=CHOICES - 1),
                 class_reply=gr.JSON())
    for name in names:
        page.on(triggers[name].click, CLASS_ENDPOINTS[name], ["class_reply"], api_name=f"class_{name}",
                **({"costly": True} if name == "open" else {"queue": False}))
