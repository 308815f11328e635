"""Predict-then-reveal questions for a class, one per lesson, whose right answer the model computes when the
question opens: never written by hand, so the reveal is what the model does, not what a teacher expected.

Each question names the choices a student picks from, the index of the model's answer, a sentence on why (the
numbers behind it), and the view that shows it (an attention map with the row in question outlined), or None
where the sentence is the view (two translations side by side). Texts are messages (ui/runtime/language.py),
written out in each reader's language where they are shown; a sentence's own words stay as the model wrote them.
A page escapes them as it shows them, and scripts read them as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint, CheckpointError
from transformer.inside import alignment, patching
from transformer.inside.analysis import words_from_pieces
from transformer.inside.attribution import attribute
from transformer.inside.contributions import contributions
from transformer.inside.decoder_lens import translations_by_layer
from transformer.inside.interventions import ablate_heads, head_label
from transformer.inside.one_head import head_arithmetic
from transformer.paper.sentences import encode_source
from transformer.paper.translation import forced_decode
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import WORD_START

from ..runtime.language import Message, Number, Ordinal, message, percent
from .analysis import read_alignment_scores
from .lessons import LESSONS, Lesson, multilingual_pair
from .samples import sample_sentences
from .translate import AttentionMap, map_of, one_map

CHOICES = 4  # at most, so a phone shows them without scrolling


@dataclass(frozen=True)
class Question:
    """A question to predict, its choices, the model's answer (an index into ``choices``), why, and the view that
    shows it."""

    text: Message
    choices: tuple[Message | str, ...]  # a piece of the sentence stays as it is; "before", "after" are messages
    answer: int
    why: Message | str
    view: AttentionMap | None = None  # drawn beside the answer: on the teacher's page, and on phones as a table


def word(piece: str) -> str:
    """A piece as a student reads it: "▁ball" is "ball"; a piece that is only the mark stays as it is."""
    return piece.replace(WORD_START, "") or piece


def quoted(piece: str) -> Message:
    """A piece in the quotation marks of the reader's language: 'ball', „ball“, « ball »."""
    return message("q.quoted", word=word(piece))


def strongest(pieces: Sequence[str], scores: Sequence[float], count: int = CHOICES) -> tuple[list[int], int]:
    """The highest-scoring piece and the next highest with different words (so a student's choice names one
    piece), as indices in sentence order; and the place of the highest among them."""
    picked, seen = [], set()
    for i in sorted(range(len(pieces)), key=lambda i: -float(scores[i])):
        if word(pieces[i]) not in seen:
            seen.add(word(pieces[i]))
            picked.append(i)
        if len(picked) == count:
            break
    in_order = sorted(picked)
    return in_order, in_order.index(picked[0])


def strongest_words(pieces: Sequence[str], scores: Sequence[float]) -> tuple[tuple[str, ...], int]:
    """``strongest`` as the choices a student reads: the words."""
    picked, answer = strongest(pieces, scores)
    return tuple(word(pieces[i]) for i in picked), answer


def shares(pieces: Sequence[str], weights: Sequence[float], shown: int = 3) -> list[Message]:
    """"'ball' 62%, 'red' 21%, 'a' 5%": the largest weights of a row."""
    top = sorted(range(len(pieces)), key=lambda i: -float(weights[i]))[:shown]
    return [message("q.share", word=quoted(pieces[i]), share=percent(weights[i])) for i in top]


def step_of(predicted: Sequence[str], wanted: str, fallback: int) -> int:
    """The 1-based step that wrote the word ``wanted``, or ``fallback``."""
    return next((i + 1 for i, piece in enumerate(predicted) if word(piece) == wanted), fallback)


def where_it_looks(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 1: which source word one head's cross-attention row looks at most."""
    translation = checkpoint_named(lesson.model).translate(lesson.sentence, lesson.beam)
    step = min(lesson.step, translation.num_steps)
    row = translation.cross_attention[lesson.layer - 1, lesson.head - 1, step - 1]
    choices, answer = strongest_words(translation.source_pieces, row.tolist())
    return Question(message("q.where_it_looks", step=step, writes=quoted(translation.predicted_pieces[step - 1]),
                            head=lesson.head, layer=lesson.layer), choices, answer,
                    message("q.weights_at_step", step=step, shares=shares(translation.source_pieces, row.tolist())),
                    map_of(translation, "cross", lesson.layer, lesson.head, marked_step=step))


FUTURE_BANDS = tuple(message(f"q.band.{name}") for name in ("exactly_0", "under_10", "10_to_50", "over_50"))


def band(weight: float) -> int:
    return 0 if weight == 0 else 1 if weight < 0.1 else 2 if weight <= 0.5 else 3


def no_future(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 2: the weight a decoder row gives a token written later."""
    translation = checkpoint_named(lesson.model).translate(lesson.sentence, lesson.beam)
    query = max(1, min(4, translation.num_steps - 2))
    later = query + 1  # the step after: the decoder's input at position ``later`` (after <s>) is what it wrote
    weight = float(translation.decoder_attention[lesson.layer - 1, lesson.head - 1, query - 1, later])
    return Question(message("q.no_future", step=query, writes=quoted(translation.predicted_pieces[query - 1]),
                            head=lesson.head, layer=lesson.layer, later=later,
                            later_piece=quoted(translation.predicted_pieces[later - 1])), FUTURE_BANDS, band(weight),
                    message("q.no_future.why", weight=Number(weight, ".4g")),
                    map_of(translation, "decoder", lesson.layer, lesson.head, marked_step=query))


def resting_head(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 3: which head of a decoder layer puts the most weight on <s> over the app's sample sentences: the
    Corpus tab's "special" share, each row's weight on <s>, averaged over every row of every sentence."""
    checkpoint = checkpoint_named(lesson.model)
    translations = [checkpoint.translate(sentence, lesson.beam) for sentence in sample_sentences(checkpoint)]
    on_start = sum(t.decoder_attention[lesson.layer - 1, :, :, 0].sum(dim=1) for t in translations) / \
        sum(t.decoder_attention.shape[2] for t in translations)  # (heads,)
    heads = len(on_start)
    chosen = sorted(sorted(range(heads), key=lambda h: -float(on_start[h]))[:CHOICES])
    best = int(on_start.argmax())
    each = [message("q.head_share", n=h + 1, share=percent(on_start[h])) for h in range(heads)]
    return Question(message("q.resting_head", layer=lesson.layer, sentences=len(translations)),
                    tuple(message("q.head", n=h + 1) for h in chosen), chosen.index(best),
                    message("q.resting_head.why", each=each),
                    map_of(translations[0], "decoder", lesson.layer, best + 1))


def reversed_digits(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 4: which input position the first output digit looks at."""
    translation = checkpoint_named(lesson.model).translate(lesson.sentence, lesson.beam)
    row = translation.cross_attention[lesson.layer - 1, lesson.head - 1, 0]
    positions = [(Ordinal(i + 1), word(piece)) for i, piece in enumerate(translation.source_pieces)]
    picked, answer = strongest([f"{i}" for i in range(len(positions))], row.tolist())
    choices = tuple(message("q.input_digit", position=positions[i][0], digit=positions[i][1]) for i in picked)
    return Question(message("q.reversed_digits", writes=quoted(translation.predicted_pieces[0]), head=lesson.head,
                            layer=lesson.layer), choices, answer,
                    message("q.weights_at_step", step=1, shares=shares(translation.source_pieces, row.tolist())),
                    map_of(translation, "cross", lesson.layer, lesson.head, marked_step=1))


def crossing_order(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 5: in French, is the word that looks at 'red' written before or after the one that looks at
    'ball'? (A language token the model was forced to write is no word of the translation.)"""
    translation = checkpoint_named(lesson.model).translate(lesson.sentence, lesson.beam)
    weights = one_map(translation, "cross", lesson.layer, lesson.shown_head)[0].clone()  # (steps, source)
    weights[: translation.forced_steps] = -1
    words, word_of_piece = words_from_pieces(translation.source_pieces)  # a tokenizer may cut "red" into pieces
    red_step, ball_step = (int(weights[:, torch.tensor(word_of_piece) == words.index(name)].sum(1).argmax()) + 1
                           for name in ("red", "ball"))
    asked = (message("q.crossing_order", head=lesson.head, layer=lesson.layer) if lesson.shown_head
             else message("q.crossing_order.average", layer=lesson.layer))
    return Question(asked, (message("q.before"), message("q.after")), int(red_step > ball_step),
                    message("q.crossing_order.why", red_word=quoted(translation.predicted_pieces[red_step - 1]),
                            red_step=red_step, ball_word=quoted(translation.predicted_pieces[ball_step - 1]),
                            ball_step=ball_step),
                    map_of(translation, "cross", lesson.layer, lesson.shown_head, marked_step=red_step))


def same_without_positions(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 6: without the positional encoding, do two sentences that differ only in order translate alike?"""
    first, second = (checkpoint_named(run.model).translate(run.sentence, lesson.beam, positions=run.positions)
                     for run in lesson.pair)
    same = first.text == second.text
    return Question(message("q.same_without_positions", first=quoted(first.source_text),
                            second=quoted(second.source_text)),
                    (message("q.yes_same"), message("q.no_different")), 0 if same else 1,
                    f"{first.source_text} → {first.text} / {second.source_text} → {second.text}")


def switched_off(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 7: does switching one cross-attention head off change the translation?"""
    comparison = ablate_heads(checkpoint_named(lesson.model), lesson.sentence,
                              {"cross": [head_label(lesson.layer - 1, lesson.head - 1)]}, lesson.beam)
    changed = comparison.before.text != comparison.after.text
    return Question(message("q.switched_off", head=lesson.head, layer=lesson.layer, sentence=quoted(lesson.sentence)),
                    (message("q.no_not_a_word"), message("q.yes")), int(changed),
                    message("q.switched_off.why", before=comparison.before.text, after=comparison.after.text))


def largest_score(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 8: which key gets the largest q·k from one query."""
    checkpoint = checkpoint_named(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    step = min(lesson.step, translation.num_steps)
    arithmetic = head_arithmetic(checkpoint.model, translation, "cross", lesson.layer, lesson.head, step)
    choices, answer = strongest_words(translation.source_pieces, arithmetic.scores.tolist())
    best = int(arithmetic.scores.argmax())
    return Question(message("q.largest_score", step=step, writes=quoted(translation.predicted_pieces[step - 1]),
                            head=lesson.head, layer=lesson.layer), choices, answer,
                    message("q.largest_score.why", word=quoted(translation.source_pieces[best]),
                            score=Number(float(arithmetic.scores[best]), ".1f"),
                            scaled=Number(float(arithmetic.scaled[best]), ".2f"), d_k=arithmetic.d_k,
                            weight=percent(arithmetic.weights[best])),
                    map_of(translation, "cross", lesson.layer, lesson.head, marked_step=step))


ATTRIBUTION_STEPS = 32  # integrated gradients' path: enough for the largest attribution, in a second


def attributed_word(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 9: which source word integrated gradients credit most with the word 'Hund'."""
    checkpoint = checkpoint_named(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    step = step_of(translation.predicted_pieces, "Hund", fallback=min(2, translation.num_steps))
    scores = attribute(checkpoint.model, translation, "integrated_gradients", ATTRIBUTION_STEPS).scores[step - 1]
    choices, answer = strongest_words(translation.source_pieces, scores.tolist())
    return Question(message("q.attributed_word", word=quoted(translation.predicted_pieces[step - 1])), choices,
                    answer, message("q.attributed_word.why", step=step,
                                    shares=shares(translation.source_pieces, scores.tolist())))


def mean_probability(checkpoint: Checkpoint, sentence: str, beam: int) -> float:
    probabilities = checkpoint.translate(sentence, beam).token_probs
    return sum(probabilities) / max(1, len(probabilities))


def surer_sentence(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 10: is the caption model surer of its words on a caption or on a sentence unlike its captions?"""
    checkpoint = checkpoint_named(LESSONS[0].model)
    caption, other = LESSONS[0].sentence, lesson.sentence
    sure = [mean_probability(checkpoint, sentence, lesson.beam) for sentence in (caption, other)]
    return Question(message("q.surer_sentence"),
                    (message("q.the_caption", sentence=quoted(caption)), message("q.the_other", sentence=quoted(other))),
                    int(sure[1] > sure[0]),
                    message("q.surer_sentence.why", caption=percent(sure[0]), other=percent(sure[1])))


MIRRORED_BANDS = tuple(message(f"q.band.{name}") for name in ("none", "some", "most", "all"))


def mirrored_steps(model: Transformer, checkpoint: Checkpoint, translation, layer: int, head: int) -> int:
    """The steps at which a head of ``model`` looks most at the input digit that step must write (the mirror)."""
    forced = forced_decode(model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, translation.source_ids,
                           translation.predicted_ids[:-1])
    digits = len(translation.source_ids) - 1  # the source ends with </s>
    looks = forced.cross_attention[layer - 1, head - 1].argmax(dim=1).tolist()
    return sum(looks[step] == digits - 1 - step for step in range(min(digits, len(looks))))


def untrained_attention(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 11: before training, at how many steps does a head already look at the mirrored digit?"""
    checkpoint = checkpoint_named(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    torch.manual_seed(0)
    untrained = Transformer(checkpoint.model.config).eval()
    digits = len(translation.source_ids) - 1
    before, after = (mirrored_steps(model, checkpoint, translation, lesson.layer, lesson.head)
                     for model in (untrained, checkpoint.model))

    def counted(steps: int) -> int:
        return 0 if steps == 0 else 3 if steps == digits else 2 if steps > digits / 2 else 1
    return Question(message("q.untrained", sentence=quoted(lesson.sentence), digits=digits, head=lesson.head,
                            layer=lesson.layer), MIRRORED_BANDS, counted(before),
                    message("q.untrained.why", before=before, after=after, digits=digits))


def invented_word(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 12: which word of the translation draws least on the source (ALTI+): the one the model made up from
    its own sentence, set among the three that draw most on it."""
    checkpoint = checkpoint_named(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    share = contributions(checkpoint.model, translation).source_share.tolist()
    words = [i for i, (piece, token) in enumerate(zip(translation.predicted_pieces, translation.predicted_ids))
             if token != checkpoint.model.config.eos_id and any(c.isalpha() for c in piece)]
    pieces = translation.predicted_pieces
    least = min(words, key=lambda i: share[i])
    others = [i for i in words if word(pieces[i]) != word(pieces[least])]
    most, _ = strongest([pieces[i] for i in others], [share[i] for i in others], CHOICES - 1)
    picked = sorted([others[i] for i in most] + [least])
    return Question(message("q.invented_word", sentence=quoted(translation.text)),
                    tuple(word(pieces[i]) for i in picked), picked.index(least),
                    message("q.invented_word.why", shares=[message("q.share", word=quoted(pieces[i]),
                                                                   share=percent(share[i])) for i in picked]))


def carrying_head(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 13: which cross-attention head of the last layer carries most of she against he (activation
    patching at the step the pair changes most)."""
    checkpoint = checkpoint_named(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    changed, _ = encode_source(checkpoint.model, checkpoint.source_tokenizer, lesson.extra["patch_corrupted"])
    step, preferred = patching.most_affected_step(checkpoint.model, translation, changed)
    result = patching.activation_patching(checkpoint.model, translation, checkpoint.target_tokenizer, changed, step,
                                          preferred)
    last = result.heads["cross"][-1]
    layer, heads = len(result.heads["cross"]), len(last)
    chosen = sorted(sorted(range(heads), key=lambda h: -float(last[h]))[:CHOICES])
    return Question(message("q.carrying_head", layer=layer, target=quoted(result.target),
                            alternative=quoted(result.alternative)),
                    tuple(message("q.head", n=h + 1) for h in chosen), chosen.index(int(last.argmax())),
                    message("q.carrying_head.why", each=[message("q.head_share", n=h + 1, share=percent(last[h]))
                                                         for h in range(heads)]))


def best_alignment(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 14: which reading of the model's attention comes closest to word links drawn by hand: the lowest
    alignment error rate, each reading at its best layer, of the model's measured ``alignment.json``."""
    scored = read_alignment_scores(checkpoint_named(lesson.model))
    if not scored:
        raise InputError(message("q.best_alignment.unmeasured", model=lesson.model))
    best: dict[str, float] = {}
    for row in scored["methods"]:
        best[row["method"]] = min(best.get(row["method"], 1.0), row["aer"])
    methods = [method for method in alignment.METHODS if method in best]
    return Question(message("q.best_alignment", sentences=scored.get("sentences", "?")),
                    tuple(message(f"analysis.method.{method}") for method in methods),
                    min(range(len(methods)), key=lambda i: best[methods[i]]),
                    message("q.best_alignment.why", rates=[message("q.best_alignment.rate",
                                                                   method=message(f"analysis.method.{method}"),
                                                                   aer=percent(best[method])) for method in methods]))


def first_knowing_layer(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint]) -> Question:
    """Lesson 15: from which encoder layer on the decoder, reading that layer (DecoderLens), writes the model's
    final translation."""
    checkpoint = checkpoint_named(lesson.model)
    by_layer = translations_by_layer(checkpoint, lesson.sentence, lesson.beam)
    first = len(by_layer)
    while first > 1 and by_layer[first - 2].predicted_ids == by_layer[-1].predicted_ids:
        first -= 1
    shown = sorted({1, first, len(by_layer), *range(max(1, first - 1), min(len(by_layer), first + 1) + 1)})[:CHOICES]
    return Question(message("q.first_layer", sentence=message("q.quoted", word=lesson.sentence), layers=len(by_layer)),
                    tuple(message("q.encoder_layer", n=n) for n in shown), shown.index(first),
                    message("q.first_layer.why", each=[
                        message("q.layer_wrote", n=n, translation=message("q.quoted", word=translation.text))
                        for n, translation in enumerate(by_layer, start=1)]))


# Each lesson's question, by the lesson's key (a title is only words, free to change in any language).
PREDICT: dict[str, Callable[[Lesson, Callable[[str], Checkpoint]], Question]] = {
    "where_each_word_looks": where_it_looks,
    "no_future": no_future,
    "heads_specialise": resting_head,
    "attention_aligns": reversed_digits,
    "word_order": crossing_order,
    "positions_matter": same_without_positions,
    "few_heads": switched_off,
    "one_weight": largest_score,
    "explain": attributed_word,
    "real_translator": surer_sentence,
    "training": untrained_attention,
    "source_or_prefix": invented_word,
    "he_or_she": carrying_head,
    "is_alignment": best_alignment,
    "each_layer_knows": first_knowing_layer,
}


def predict_question(lesson: Lesson, checkpoint_named: Callable[[str], Checkpoint],
                     multilingual: dict[str, list[str]] | None = None) -> Question:
    """The lesson's question, its answer computed now from the models ``checkpoint_named`` returns: of the
    multilingual model the lesson compares, where one of ``multilingual`` (listed name -> its language codes) is
    open and loads (``lessons.multilingual_pair``), in the language of the lesson's own model."""
    ask = PREDICT[lesson.key]
    one_model = multilingual_pair(lesson, multilingual or {})
    if one_model:
        run = one_model[[paired.model for paired in lesson.pair].index(lesson.model)]
        try:
            layers = checkpoint_named(run.model).model.config.n_decoder_layers
            return ask(replace(lesson, model=run.model, layer=min(run.layer, layers), average=True), checkpoint_named)
        except CheckpointError:  # listed but not loadable here (too big for EXPLORER_MODELS_MB): the lesson's own
            pass
    return ask(lesson, checkpoint_named)
