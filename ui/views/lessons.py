"""Lessons for a class, in order: what to explain, a view to set up, questions to ask, what to look for; the two
runs a lesson compares, side by side; and a glossary of the words the views use."""

from __future__ import annotations

import html
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from transformer.files.checkpoint import Checkpoint, CheckpointError
from transformer.files.multilingual import code_for

from ..runtime.language import ENGLISH, said, table, text
from ..runtime.model_names import checkpoint_name, in_language
from .choices import ATTENTION_KINDS, VIEWS
from .samples import MINIMAL_PAIRS
from .text import known_languages, language_name, markdown_escape
from .translate import AttentionMap, map_of


@dataclass(frozen=True)
class PairedRun:
    """One of two runs a lesson sets side by side: a model translating a sentence, with or without positions."""

    model: str
    sentence: str
    positions: bool = True
    layer: int | None = None  # its own layer's mean of heads; None: the lesson's layer and head


@dataclass(frozen=True)
class LessonWords:
    """What a lesson says, in one language."""

    title: str
    explanation: str
    questions: tuple[str, ...]
    look_for: str


@dataclass(frozen=True)
class Lesson:
    """One lesson, and exactly what "Show me" sets: model, sentence, decoding (beam 1 is greedy), attention type,
    view, layer, head or the mean of heads, step, the tab it opens on and the view it scrolls to; every other
    control returns to its default. ``action`` names a result the lesson is about, which Show me computes too.
    Its words are ``lessons.<key>.title``, ``.explanation``, ``.ask.1``, ``.ask.2``... and ``.look_for`` in
    ui/locales/<language>/lessons.json (``words``); ``title`` and the others are its English words. Its ``key``
    names it everywhere: the lesson list's values, its question (views.questions.PREDICT), the class API."""

    key: str
    model: str = "multi30k-en-de"
    sentence: str = "A young girl is playing with a red ball in the park."
    beam: int = 5
    kind: str = "cross"
    view: str = VIEWS[0]
    layer: int = 3
    head: int = 1
    average: bool = False  # the mean of the layer's heads instead of one head
    step: int = 1
    tab: str = "translate"
    focus: str = "attention-plot"  # the element id of the view the lesson is about
    query: int | None = None  # the Inside a head tab's query, where the lesson opens that tab
    action: str | None = None  # "positions", "importance", "attribution", "patching" or "layers": a result Show me
    # computes
    extra: dict = field(default_factory=dict)  # other components the lesson sets, by name
    pair: tuple[PairedRun, PairedRun] | None = None  # two runs it compares, shown side by side in the lessons panel
    real_pair: tuple[PairedRun, PairedRun] | None = None  # the two it compares instead where their models are open
    # Where a multilingual model is open, its pair is that one model into these two languages (ISO 639-1 codes).
    languages_pair: tuple[str, str] | None = None
    needs_source_share: bool = False  # read from the step captions' ALTI+ source share, which only a server computes

    @property
    def shown_head(self) -> int | None:
        """The head its maps show: None for the mean of heads."""
        return None if self.average else self.head

    def words(self, language: str = ENGLISH) -> LessonWords:
        """Its title, explanation, questions and what to look for, in ``language``."""
        name, words = f"lessons.{self.key}", table(language)
        asked = itertools.takewhile(lambda key: key in table(ENGLISH),
                                    (f"{name}.ask.{n}" for n in itertools.count(1)))
        return LessonWords(words[f"{name}.title"], words[f"{name}.explanation"], tuple(words[key] for key in asked),
                           words[f"{name}.look_for"])

    @property
    def title(self) -> str:
        return self.words().title

    @property
    def explanation(self) -> str:
        return self.words().explanation

    @property
    def questions(self) -> tuple[str, ...]:
        return self.words().questions

    @property
    def look_for(self) -> str:
        return self.words().look_for


MEETING = "The meeting was postponed until next Tuesday because of the storm."
DOCTOR, DOCTOR_HE = MINIMAL_PAIRS[0]
# Helsinki-NLP/opus-mt-en-de, under the name the server lists it by once it was opened from the Hub.
REAL_TRANSLATOR = "opus-mt-en-de"
BALL = "A young girl is playing with a red ball in the park."
RAINY_BUS = "Several people are waiting for the bus in the rain."
# The base Transformer's cross-attention aligns words best in its penultimate layer (Garg et al., 2019), and a real
# translator spreads a word over several heads: its pairs show the mean of layer 5's heads.
REAL_TRANSLATOR_LAYER = 5

LESSONS = (
    Lesson("where_each_word_looks", layer=3, head=2, step=9, focus="step-view"),
    Lesson("no_future", kind="decoder", view=VIEWS[1], layer=1),
    # The Corpus tab's map: every head's habit over many sentences, beside the one sentence's model view.
    Lesson("heads_specialise", kind="decoder", view=VIEWS[2], layer=1, tab="corpus", focus="corpus-heads"),
    Lesson("attention_aligns", model="reverse-tiny", sentence="3 1 4 1 5 9 2 6", beam=1, view=VIEWS[2], layer=2),
    Lesson("word_order", model="multi30k-en-fr", layer=3, head=2, step=9, focus="lesson-pair",
           pair=(PairedRun("multi30k-en-de", BALL), PairedRun("multi30k-en-fr", BALL)),
           real_pair=(PairedRun(REAL_TRANSLATOR, BALL, layer=REAL_TRANSLATOR_LAYER),
                      PairedRun("opus-mt-en-fr", BALL, layer=REAL_TRANSLATOR_LAYER)),
           languages_pair=("de", "fr")),
    Lesson("positions_matter", sentence="The dog bites the man.", tab="experiments", focus="lesson-pair",
           action="positions",
           pair=(PairedRun("multi30k-en-de", "The dog bites the man.", positions=False),
                 PairedRun("multi30k-en-de", "The man bites the dog.", positions=False))),
    Lesson("few_heads", tab="experiments", focus="importance-plot", action="importance"),
    Lesson("one_weight", sentence="A dog runs across the grass.", layer=3, head=2, step=3, tab="inside", query=3,
           focus="inside-arithmetic"),
    Lesson("explain", sentence="A dog runs across the grass.", tab="explain", focus="explain-agreement",
           action="attribution"),
    Lesson("real_translator", sentence=MEETING, layer=3, average=True, focus="lesson-pair",
           pair=(PairedRun("multi30k-en-de", MEETING), PairedRun(REAL_TRANSLATOR, MEETING))),
    Lesson("training", model="reverse-tiny", sentence="3 1 4 1 5 9 2 6", beam=1, layer=2, tab="train",
           focus="start-training", extra={"train_data": "reverse", "train_preset": "tiny"}),
    # The bundled model invents "soeben" ("just now") here: its "eben" draws least on the English.
    Lesson("source_or_prefix", sentence=DOCTOR, layer=3, average=True, step=5, focus="step-view",
           needs_source_share=True),
    Lesson("he_or_she", sentence=DOCTOR, layer=3, average=True, step=8, tab="experiments", focus="patching-heads",
           action="patching", extra={"patch_corrupted": DOCTOR_HE}),
    # The English→French model carries its alignment error rates against the Hansards gold (alignment.json).
    Lesson("is_alignment", model="multi30k-en-fr", sentence=BALL, layer=3, average=True, tab="analysis",
           focus="alignment-scores"),
    # DecoderLens: the first encoder layer keeps the English word order ("auf den Bus im Regen"), the second
    # already reorders it as the model finally does ("im Regen auf den Bus").
    Lesson("each_layer_knows", sentence=RAINY_BUS, layer=3, average=True, tab="inside", focus="layers-section",
           action="layers"),
)


# After Show me, the view the lesson is about is held in sight (ui/static/page.js, the pack's lessons.js) and
# outlined this long.
OUTLINE_MS = 3000


def run_direction(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """"English → French", or the model's name where its languages are not known."""
    languages = known_languages(checkpoint)
    return " → ".join(language_name(code, language) or code or "?" for code in languages) if languages \
        else checkpoint.name


def run_layer_note(run: PairedRun, language: str = ENGLISH) -> str:
    """" · mean of the heads of layer 5" for a run shown at its own layer; nothing for one at the lesson's."""
    return f" · {text(language, 'lessons.caption.mean_of_layer', layer=run.layer)}" if run.layer else ""


def run_caption(checkpoint: Checkpoint, run: PairedRun, translation: str, language: str = ENGLISH) -> str:
    """"**English → French** · multi30k-en-fr", noting a run without positions, then a paragraph "sentence →
    *translation*"."""
    name, direction = markdown_escape(checkpoint.name), markdown_escape(run_direction(checkpoint, language))
    without = f", **{text(language, 'lessons.caption.without_positions')}**" if not run.positions else ""
    return (f"**{direction}** · {name}{without}{run_layer_note(run, language)}\n\n"
            f"{markdown_escape(run.sentence)} → *{markdown_escape(translation)}*")


def listed_as(model: str, names: list[str]) -> str | None:
    """The name the model list gives ``model``: itself (a multilingual model's with its language), or a Hub model's
    "Owner--model"."""
    if checkpoint_name(model) in names:
        return model
    return next((name for name in names if name.endswith("--" + model)), None)


def lesson_models(lesson: Lesson) -> set[str]:
    """Every model a lesson sets or compares."""
    return {lesson.model, *(run.model for run in (*(lesson.pair or ()), *(lesson.real_pair or ())))}


def multilingual_pair(lesson: Lesson, multilingual: dict[str, list[str]]) -> tuple[PairedRun, PairedRun] | None:
    """The lesson's pair as one multilingual model (of ``multilingual``: listed name -> its language codes) into
    the lesson's two languages, where one of them writes both; else None."""
    if not lesson.languages_pair or not lesson.pair:
        return None
    for name, codes in multilingual.items():
        wanted, english = [code_for(codes, iso) for iso in lesson.languages_pair], code_for(codes, "en")
        if all(wanted) and english:  # the lessons' sentences are English
            left, right = (PairedRun(in_language(name, code, english), lesson.pair[0].sentence,
                                     layer=REAL_TRANSLATOR_LAYER) for code in wanted)
            return left, right
    return None


def side_by_side(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint], names: list[str],
                 max_length: int | None = None, language: str = ENGLISH,
                 multilingual: dict[str, list[str]] | None = None) -> list[tuple[str, AttentionMap | None]]:
    """(caption, cross-attention map) of each of the lesson's two runs (one multilingual model into its two
    languages, or its real translators, where this server has them open), at its layer and head (None: the mean
    of heads), decoded as the lesson decodes. A run whose model this server does not list says how to open it."""
    one_model = multilingual_pair(lesson, multilingual or {})
    if one_model:
        try:
            return [drawn(lesson, run, checkpoint_named(run.model), max_length, language) for run in one_model]
        except CheckpointError:  # listed but not loadable here (too big for EXPLORER_MODELS_MB): the usual pair
            pass
    real = lesson.real_pair and all(listed_as(run.model, names) for run in lesson.real_pair)
    shown = []
    for run in (lesson.real_pair if real else lesson.pair) or ():
        name = listed_as(run.model, names)
        shown.append(drawn(lesson, run, checkpoint_named(name), max_length, language) if name
                     else (not_open(run.model, language), None))
    return shown


def drawn(lesson: Lesson, run: PairedRun, checkpoint: Checkpoint, max_length: int | None,
          language: str = ENGLISH) -> tuple[str, AttentionMap]:
    """One run's caption and cross-attention map, decoded as the lesson decodes."""
    translation = checkpoint.translate(run.sentence, lesson.beam, max_length, positions=run.positions)
    layer, head = (run.layer, None) if run.layer else (lesson.layer, lesson.shown_head)
    return run_caption(checkpoint, run, translation.text, language), map_of(translation, "cross", layer, head)


def not_open(model: str, language: str = ENGLISH) -> str:
    """A paired run's caption where this server does not list its model: how to open a real translator."""
    said_it = text(language, "lessons.pair.not_open", model=markdown_escape(model))
    if not model.startswith("opus-mt-"):
        return said_it
    return f"{said_it} {text(language, 'lessons.pair.open_from_hub', model=markdown_escape('Helsinki-NLP/' + model))}"


def cannot_show(error: Exception, language: str = ENGLISH) -> str:
    """A pair that could not be drawn: the reason, in ``language`` where it is a message."""
    return text(language, "lessons.pair.cannot_show", error=markdown_escape(said(error, language)))


def lesson_choices() -> list[str]:
    """The lesson list's values: each lesson's key, whatever its title says in any language (handlers, the API and
    scripts read them); ``lesson_choice_labels`` is what the list shows."""
    return [lesson.key for lesson in LESSONS]


def lesson_choice_labels(language: str = ENGLISH) -> list[tuple[str, str]]:
    """The lesson list: (its place and title in ``language``, its key) for each lesson."""
    return [(f"{number}. {lesson.words(language).title}", lesson.key) for number, lesson in enumerate(LESSONS, start=1)]


def lesson_by_choice(choice: str | None) -> Lesson:
    """The lesson a value names: its key ("heads_specialise"), or until the next release the "3. Heads specialise"
    the list's values were before keys; the first lesson for anything else."""
    by_key = {lesson.key: lesson for lesson in LESSONS}
    if choice in by_key:
        return by_key[choice]
    titled = {f"{number}. {lesson.title}": lesson for number, lesson in enumerate(LESSONS, start=1)}
    return titled.get(choice, LESSONS[0])


# The parts of a lesson, in its text and in the panel beside its view after Show me (ui/static/page.js), by the
# name the page's script reads them by: their headings are lessons.part.<key> in the locales.
PARTS = {"ask": "ask", "lookFor": "look_for", "beside": "beside", "hide": "hide"}


def part_titles(language: str = ENGLISH) -> dict[str, str]:
    """The headings of a lesson's parts in ``language``, by the name page.js reads them by."""
    return {part: text(language, f"lessons.part.{key}") for part, key in PARTS.items()}


def glossary(language: str = ENGLISH) -> str:
    """The words the views use, explained (Markdown)."""
    return text(language, "lessons.glossary")


def lesson_markdown(lesson: Lesson, language: str = ENGLISH) -> str:
    """The lesson as Markdown; "<s>" and "</s>" escaped, or the page would read them as HTML tags."""
    def shown(words: str) -> str:
        return html.escape(words, quote=False)
    words, parts = lesson.words(language), part_titles(language)
    questions = "\n".join(f"- {shown(question)}" for question in words.questions)
    return (f"### {shown(words.title)}\n{shown(words.explanation)}\n\n**{parts['ask']}**\n{questions}\n\n"
            f"**{parts['lookFor']}** {shown(words.look_for)}")


def selector_values(lesson: Lesson) -> dict:
    """What the Translate tab's selectors show for the lesson: display values, not keys."""
    return {"kind": ATTENTION_KINDS[lesson.kind], "view": lesson.view, "layer": lesson.layer,
            "head": lesson.head, "average": lesson.average, "decoding": "greedy" if lesson.beam == 1 else "beam"}
