"""Lessons for a class, in order: what to explain, a view to set up, questions to ask, what to look for; the two
runs a lesson compares, side by side; and a glossary of the words the views use."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from transformer.files.checkpoint import Checkpoint

from .choices import ATTENTION_KINDS, VIEWS
from .text import LANGUAGE_NAMES, known_languages, markdown_escape
from .translate import AttentionMap, map_of


@dataclass(frozen=True)
class PairedRun:
    """One of two runs a lesson sets side by side: a model translating a sentence, with or without positions."""

    model: str
    sentence: str
    positions: bool = True
    layer: int | None = None  # its own layer's mean of heads; None: the lesson's layer and head


@dataclass(frozen=True)
class Lesson:
    """One lesson, and exactly what "Show me" sets: model, sentence, decoding (beam 1 is greedy), attention type,
    view, layer, head or the mean of heads, step, the tab it opens on and the view it scrolls to; every other
    control returns to its default. ``action`` names a result the lesson is about, which Show me computes too."""

    title: str
    explanation: str
    questions: tuple[str, ...]
    look_for: str
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
    action: str | None = None  # "positions", "importance" or "attribution": a result Show me computes
    extra: dict = field(default_factory=dict)  # other components the lesson sets, by name
    pair: tuple[PairedRun, PairedRun] | None = None  # two runs it compares, shown side by side in the lessons panel
    real_pair: tuple[PairedRun, PairedRun] | None = None  # the two it compares instead where their models are open

    @property
    def shown_head(self) -> int | None:
        """The head its maps show: None for the mean of heads."""
        return None if self.average else self.head


MEETING = "The meeting was postponed until next Tuesday because of the storm."
# Helsinki-NLP/opus-mt-en-de, under the name the server lists it by once it was opened from the Hub.
REAL_TRANSLATOR = "opus-mt-en-de"
BALL = "A young girl is playing with a red ball in the park."
# The base Transformer's cross-attention aligns words best in its penultimate layer (Garg et al., 2019), and a real
# translator spreads a word over several heads: its pairs show the mean of layer 5's heads.
REAL_TRANSLATOR_LAYER = 5

LESSONS = (
    Lesson("Where each word looks",
           "A translation is made one token at a time. At each step the decoder asks the encoded English sentence "
           "where to look (cross-attention), then picks the next German token. The step slider replays this.",
           ("Which English word does the model look at while writing 'Ball'?",
            "Is it always the word being translated?"),
           "In the step view, the bar chart of the source jumps to 'ball' at the step that writes 'Ball'; in "
           "layer 3 most heads point at the English word being translated.",
           layer=3, head=2, step=9, focus="step-view"),
    Lesson("The decoder cannot see the future",
           "While writing a word, the decoder may only look at the words it has already written. The causal mask "
           "sets every later position to −∞ before the softmax, so its weight is exactly 0 (section 3.2.3).",
           ("Why is everything above the diagonal empty?", "What would go wrong in training without the mask?"),
           "Decoder self-attention is exactly 0 above the diagonal in every head; many heads rest on <s>.",
           kind="decoder", view=VIEWS[1], layer=1),
    Lesson("Heads specialise",
           "Each layer has several heads, each with its own projections. So each can learn a different habit: look "
           "at the previous word, at the word being translated, or at a resting place such as <s> or </s>.",
           ("Find a head that looks at the previous word. Find one that rests on <s>.",
            "Are the heads of layer 1 like those of layer 3?"),
           "In the model view of decoder self-attention several heads put a third to a half of their weight on <s> "
           "(a 'no-op' sink); Analysis → Head statistics ranks them by their share on <s>.",
           kind="decoder", view=VIEWS[2], layer=1),
    Lesson("Attention aligns; it does not copy positions",
           "The reverse-tiny model learned to write a row of digits backwards. Its cross-attention must therefore "
           "look at the last input digit first: attention follows what the task needs, not the positions.",
           ("Where does the first output digit look?", "What shape would a copying model draw?"),
           "In layer 2 every head draws an anti-diagonal from top right to bottom left.",
           model="reverse-tiny", sentence="3 1 4 1 5 9 2 6", beam=1, view=VIEWS[2], layer=2),
    Lesson("Word order differs across languages",
           "German keeps the English order of 'a red ball' ('einem roten Ball'); French puts most adjectives after "
           "the noun ('un ballon rouge'). Cross-attention follows the word being translated, not its position, so "
           "where French reorders, its bright cells cross. Below, the same sentence goes into both languages (by the "
           "real translators opus-mt-en-de and opus-mt-en-fr where this server has them open).",
           ("Which French word looks at 'red'? Does it come before or after the one that looks at 'ball'?",
            "If attention copied positions, where would the bright cells lie?"),
           "In layer 3, head 2, French 'ballon' (step 8) looks at 'ball' and then 'rouge' (step 9) back at 'red': "
           "the bright cells cross. German 'roten' and 'Ball' look at 'red' and 'ball' in English order, on the "
           "diagonal.",
           model="multi30k-en-fr", layer=3, head=2, step=9, focus="lesson-pair",
           pair=(PairedRun("multi30k-en-de", BALL), PairedRun("multi30k-en-fr", BALL)),
           real_pair=(PairedRun(REAL_TRANSLATOR, BALL, layer=REAL_TRANSLATOR_LAYER),
                      PairedRun("opus-mt-en-fr", BALL, layer=REAL_TRANSLATOR_LAYER))),
    Lesson("Positions matter",
           "Attention itself ignores word order: it compares every position with every other. Order enters only "
           "through the positional encoding added to the embeddings (section 3.5). Take it away and see.",
           ("Side by side, 'The dog bites the man.' and 'The man bites the dog.' without positions: can the "
            "model tell who bites whom?",
            "Press 'Remove the positional encoding' in Experiments: which words of the translation change?"),
           "Without positions both sentences get the same translation ('Ein Mann beißt in die Luft.': a man "
           "bites into the air) and the same attention word for word (only the columns of 'dog' and 'man' trade "
           "places): the model reads a bag of words.",
           sentence="The dog bites the man.", tab="experiments", focus="lesson-pair", action="positions",
           pair=(PairedRun("multi30k-en-de", "The dog bites the man.", positions=False),
                 PairedRun("multi30k-en-de", "The man bites the dog.", positions=False))),
    Lesson("Few heads matter",
           "Not every head is needed. Switching one head off and measuring how much less likely the translation "
           "becomes ranks the heads (Michel et al., 2019; Voita et al., 2019).",
           ("Press 'Rank every head'. How many heads barely matter?",
            "Switch the two most important cross-attention heads off: does the translation survive?"),
           "Most heads change the translation's log-probability by little; a few carry it.",
           tab="experiments", focus="importance-plot", action="importance"),
    Lesson("How one weight is computed",
           "A weight is softmax(q·k / √d_k): the query of the word being written meets the key of every source "
           "word in a dot product, scaled and normalised. Here is that arithmetic with the model's own numbers.",
           ("Which key has the largest q·k? Is it the largest weight after the softmax?",
            "On the blackboard, work the three-token example out by hand, then tick the causal mask."),
           "At step 3 ('rennt'), head 2 of layer 3 gives 'runs' a score of about 34 (4.3 after ÷ √64), which the "
           "softmax turns into about 79% of the weight.",
           sentence="A dog runs across the grass.", layer=3, head=2, step=3, tab="inside", query=3,
           focus="inside-arithmetic"),
    Lesson("Does attention explain the word?",
           "A bright cell says where a head looked, not why the model wrote its word. Gradients measure how the "
           "word's probability depends on each source word; compare them with attention.",
           ("Press 'Attribute the last translation'. Which heads agree best with the attribution?",
            "Where do attention and attribution disagree?"),
           "Integrated gradients point 'Hund' at 'dog' and 'Gras' at 'grass'; some heads of layers 1 and 2 "
           "agree poorly.", sentence="A dog runs across the grass.", tab="explain", focus="explain-agreement",
           action="attribution"),
    Lesson("A real translator",
           "The bundled models learned from 29,000 image captions, so a sentence unlike a caption gets words made "
           "up. opus-mt-en-de (Helsinki-NLP) is the paper's base Transformer, 6+6 layers of 8 heads, trained on "
           "millions of sentences of every kind. Where this server has it open (a Space opens it when it starts; "
           "anyone may open it from the Hub, above the tabs), the same views show both models at work.",
           ("Which translation of the meeting sentence would a German speaker accept?",
            "Does each model's cross-attention look at the English word it is translating?"),
           "The caption model's German has words that are not in the sentence; opus-mt's reads as German. Both "
           "maps are drawn by the same code from the same kind of attention, mean of the heads of layer 3.",
           sentence=MEETING, layer=3, average=True, focus="lesson-pair",
           pair=(PairedRun("multi30k-en-de", MEETING), PairedRun(REAL_TRANSLATOR, MEETING))),
    Lesson("Attention forms while a model trains",
           "Before training, attention is a blur; training shapes it. Train the reverse task and watch the probe "
           "sentence's cross-attention turn into an anti-diagonal as the loss falls.",
           ("Press Start. After how many updates does the anti-diagonal appear?",
            "Does the loss fall before or after the attention sharpens?"),
           "Within about a minute the loss falls and the replay slider shows the probe attention sharpen.",
           model="reverse-tiny", sentence="3 1 4 1 5 9 2 6", beam=1, layer=2, tab="train", focus="start-training",
           extra={"train_data": "reverse", "train_preset": "tiny"}),
)

GLOSSARY = """**Token, piece**: what the model reads and writes: a word or part of one, from a sentencepiece vocabulary.
**▁** starts a new word ("▁play" "ing" is one word). **&lt;s&gt;** starts the decoder's input; **&lt;/s&gt;** ends a
sentence; **&lt;unk&gt;** is a piece the vocabulary lacks. **Step**: one decoding step writes one token.
**Query, key, value**: each position's vector projected three ways; a query is compared with every key (q·k), and the
softmax of the scores weights the values. **Head**: one set of those projections; a layer has several, side by side.
**Layer**: one block of attention and feed-forward network; the encoder and decoder stack several.
**Self-attention**: positions of one sentence attend to each other; **cross-attention**: the decoder attends to the
encoded source. **Mask**: positions a query may not see get −∞ before the softmax, so weight 0."""


def run_caption(checkpoint: Checkpoint, run: PairedRun, translation: str) -> str:
    """"**English → French** · multi30k-en-fr", noting a run without positions, then a paragraph "sentence →
    *translation*"."""
    name = markdown_escape(checkpoint.name)
    languages = known_languages(checkpoint)
    direction = (" → ".join(LANGUAGE_NAMES.get(code, code or "?") for code in languages)
                 if languages else name)
    without = ", **without the positional encoding**" if not run.positions else ""
    shown = f" · mean of the heads of layer {run.layer}" if run.layer else ""
    return (f"**{direction}** · {name}{without}{shown}\n\n{markdown_escape(run.sentence)} → "
            f"*{markdown_escape(translation)}*")


def listed_as(model: str, names: list[str]) -> str | None:
    """The name the model list gives ``model``: itself, or a Hub model's "Owner--model"."""
    return model if model in names else next((name for name in names if name.endswith("--" + model)), None)


def lesson_models(lesson: Lesson) -> set[str]:
    """Every model a lesson sets or compares."""
    return {lesson.model, *(run.model for run in (*(lesson.pair or ()), *(lesson.real_pair or ())))}


def side_by_side(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint], names: list[str],
                 max_length: int | None = None) -> list[tuple[str, AttentionMap | None]]:
    """(caption, cross-attention map) of each of the lesson's two runs (its real translators' where this server
    has them open), at its layer and head (None: the mean of heads), decoded as the lesson decodes. A run whose
    model this server does not list says how to open it."""
    real = lesson.real_pair and all(listed_as(run.model, names) for run in lesson.real_pair)
    shown = []
    for run in (lesson.real_pair if real else lesson.pair) or ():
        name = listed_as(run.model, names)
        if name is None:
            how = (f" Open {markdown_escape('Helsinki-NLP/' + run.model)} under *Open a model from the Hub* (above "
                   "the tabs), then press Show me again." if run.model.startswith("opus-mt-") else "")
            shown.append((f"**{markdown_escape(run.model)}** is not open on this server.{how}", None))
            continue
        checkpoint = checkpoint_named(name)
        translation = checkpoint.translate(run.sentence, lesson.beam, max_length, positions=run.positions)
        layer, head = (run.layer, None) if run.layer else (lesson.layer, lesson.shown_head)
        shown.append((run_caption(checkpoint, run, translation.text), map_of(translation, "cross", layer, head)))
    return shown


def lesson_choices() -> list[str]:
    return [f"{number}. {lesson.title}" for number, lesson in enumerate(LESSONS, start=1)]


def lesson_by_choice(choice: str | None) -> Lesson:
    """The lesson a dropdown value names ("3. Heads specialise"); the first for anything else."""
    titles = lesson_choices()
    return LESSONS[titles.index(choice)] if choice in titles else LESSONS[0]


# The headings of a lesson's parts, in its text and in the panel beside its view after Show me (ui/static/page.js).
PART_TITLES = {"ask": "Ask the class", "lookFor": "Look for:", "beside": "The lesson", "hide": "Hide"}


def lesson_markdown(lesson: Lesson) -> str:
    """The lesson as Markdown; "<s>" and "</s>" escaped, or the page would read them as HTML tags."""
    def shown(text: str) -> str:
        return html.escape(text, quote=False)
    questions = "\n".join(f"- {shown(question)}" for question in lesson.questions)
    return (f"### {shown(lesson.title)}\n{shown(lesson.explanation)}\n\n**{PART_TITLES['ask']}**\n{questions}\n\n"
            f"**{PART_TITLES['lookFor']}** {shown(lesson.look_for)}")


def selector_values(lesson: Lesson) -> dict:
    """What the Translate tab's selectors show for the lesson: display values, not keys."""
    return {"kind": ATTENTION_KINDS[lesson.kind], "view": lesson.view, "layer": lesson.layer,
            "head": lesson.head, "average": lesson.average, "decoding": "greedy" if lesson.beam == 1 else "beam"}
