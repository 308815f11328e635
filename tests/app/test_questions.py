"""Every lesson has a question to predict whose answer the model computes: for each lesson, the revealed answer is
what the model does, recomputed here from the model directly."""

import re

import pytest
import torch

from transformer.inside.attribution import attribute
from transformer.inside.corpus_run import Decoding, run_corpus
from transformer.inside.head_roles import head_roles
from transformer.inside.interventions import ablate_heads
from transformer.inside.one_head import head_arithmetic
from ui.runtime.language import LANGUAGES, said
from ui.views import questions
from ui.views.lessons import LESSONS
from ui.views.questions import ATTRIBUTION_STEPS, predict_question, word
from ui.views.samples import sample_sentences


@pytest.fixture(scope="module")
def models(app_services):
    return app_services.registry.get


@pytest.fixture(scope="module")
def asked(models):
    """Each lesson's question, by lesson number."""
    return {number: predict_question(lesson, models) for number, lesson in enumerate(LESSONS, start=1)}


def revealed(question) -> str:
    return said(question.choices[question.answer], "en")


def test_every_lesson_asks_a_question_a_phone_shows_whole_in_every_language(asked):
    assert set(questions.PREDICT) == {lesson.key for lesson in LESSONS}
    for number, question in asked.items():
        assert 2 <= len(question.choices) <= questions.CHOICES and 0 <= question.answer < len(question.choices)
        for language in LANGUAGES:
            assert said(question.text, language).endswith("?") and said(question.why, language), (number, language)
            choices = {said(choice, language) for choice in question.choices}
            assert len(choices) == len(question.choices), f"lesson {number}: choices that read alike in {language}"


def test_a_question_speaks_the_readers_language_and_keeps_the_sentences_words(asked):
    assert said(asked[1].text, "de").startswith("In Schritt ") and "„" in said(asked[1].text, "de")
    assert said(asked[1].text, "fr").startswith("À l'étape ") and "«\u00a0" in said(asked[1].text, "fr")
    assert said(asked[2].choices[1], "de") == "unter 10\u00a0%" and said(asked[2].choices[1], "fr") == "moins de 10\u202f%"
    assert re.fullmatch(r"die \d+\. Ziffer der Eingabe \(\d\)", said(asked[4].choices[0], "de"))
    assert re.fullmatch(r"le \d+(er|e) chiffre de l'entrée \(\d\)", said(asked[4].choices[0], "fr"))
    for language in LANGUAGES:  # the sentence's own words stay as the model wrote them
        assert [said(choice, language) for choice in asked[1].choices] == list(asked[1].choices)


def test_1_the_word_a_heads_row_looks_at_most(asked, models):
    lesson = LESSONS[0]
    translation = models(lesson.model).translate(lesson.sentence, lesson.beam)
    row = translation.cross_attention[lesson.layer - 1, lesson.head - 1, lesson.step - 1]
    assert revealed(asked[1]) == word(translation.source_pieces[int(row.argmax())]) == "ball"
    assert asked[1].view is not None and asked[1].view.marked_row == LESSONS[0].step - 1


def test_2_a_later_token_gets_exactly_nothing(asked, models):
    lesson = LESSONS[1]
    weights = models(lesson.model).translate(lesson.sentence, lesson.beam).decoder_attention[lesson.layer - 1,
                                                                                             lesson.head - 1]
    assert torch.equal(weights.triu(diagonal=1), torch.zeros_like(weights)), "the model's own weights above"
    assert revealed(asked[2]) == "exactly 0"
    translation = models(lesson.model).translate(lesson.sentence, lesson.beam)
    written = re.search(r"the token written at step (\d+) \('(.+?)'\)", said(asked[2].text, "en"))
    assert questions.word(translation.predicted_pieces[int(written[1]) - 1]) == written[2], "as the step view says"


def test_3_the_head_that_rests_on_the_start_token_is_the_corpus_maps(asked, models, tmp_path):
    """The answer is the head the Corpus tab's map gives the largest share on <s>, over the same sentences."""
    lesson = LESSONS[2]
    checkpoint = models(lesson.model)
    run = run_corpus(checkpoint, sample_sentences(checkpoint), None, tmp_path / "run", Decoding.default(checkpoint))
    on_start = {role.head: role.special for role in head_roles(run.heads, run.unlike)
                if (role.kind, role.layer) == ("decoder", lesson.layer)}
    assert revealed(asked[3]) == f"head {max(on_start, key=on_start.get)}"
    assert f"{len(run.sentences)} sample sentences" in said(asked[3].text, "en")


def test_4_the_first_reversed_digit_looks_at_the_last_input_digit(asked, models):
    lesson = LESSONS[3]
    translation = models(lesson.model).translate(lesson.sentence, lesson.beam)
    looks = int(translation.cross_attention[lesson.layer - 1, lesson.head - 1, 0].argmax())
    assert revealed(asked[4]).startswith(f"the {looks + 1}") and looks == len(lesson.sentence.split()) - 1


def test_5_french_writes_the_word_for_red_after_the_word_for_ball(asked, models):
    lesson = LESSONS[4]
    translation = models(lesson.model).translate(lesson.sentence, lesson.beam)
    weights = translation.cross_attention[lesson.layer - 1, lesson.head - 1]
    sources = [word(piece) for piece in translation.source_pieces]
    red, ball = (int(weights[:, sources.index(name)].argmax()) for name in ("red", "ball"))
    assert revealed(asked[5]) == ("after" if red > ball else "before") == "after"


def test_6_without_positions_word_order_is_lost(asked, models):
    first, second = (models(run.model).translate(run.sentence, LESSONS[5].beam, positions=run.positions)
                     for run in LESSONS[5].pair)
    assert revealed(asked[6]) == ("yes, the same" if first.text == second.text else "no, different")


def test_7_switching_a_head_off_changes_the_translation_or_not(asked, models):
    lesson = LESSONS[6]
    comparison = ablate_heads(models(lesson.model), lesson.sentence, {"cross": [f"L{lesson.layer}H{lesson.head}"]},
                              lesson.beam)
    assert revealed(asked[7]) == ("yes" if comparison.after.text != comparison.before.text else "no, not a word")
    assert comparison.after.text in said(asked[7].why, "en")


def test_8_the_largest_score_q_dot_k(asked, models):
    lesson = LESSONS[7]
    checkpoint = models(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    scores = head_arithmetic(checkpoint.model, translation, "cross", lesson.layer, lesson.head, lesson.step).scores
    assert revealed(asked[8]) == word(translation.source_pieces[int(scores.argmax())])


def test_9_the_word_integrated_gradients_credit_most(asked, models):
    lesson = LESSONS[8]
    checkpoint = models(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    step = [word(piece) for piece in translation.predicted_pieces].index("Hund")
    scores = attribute(checkpoint.model, translation, "integrated_gradients", ATTRIBUTION_STEPS).scores[step]
    assert revealed(asked[9]) == word(translation.source_pieces[int(scores.argmax())])


def test_10_the_caption_model_is_surer_of_a_caption(asked, models):
    checkpoint = models(LESSONS[0].model)
    sure = [sum(probs) / len(probs) for probs in (checkpoint.translate(sentence, LESSONS[9].beam).token_probs
                                                  for sentence in (LESSONS[0].sentence, LESSONS[9].sentence))]
    assert asked[10].answer == int(sure[1] > sure[0]) == 0


def test_11_attention_that_training_formed(asked, models):
    lesson = LESSONS[10]
    checkpoint = models(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    digits = len(lesson.sentence.split())
    looks = translation.cross_attention[lesson.layer - 1, lesson.head - 1].argmax(dim=1).tolist()
    mirrored = sum(looks[step] == digits - 1 - step for step in range(digits))
    assert f"after training: {mirrored} of {digits}" in said(asked[11].why, "en") and mirrored > digits / 2
    assert revealed(asked[11]) != "all", "random weights do not reverse"


def test_12_the_word_the_model_made_up_draws_least_on_the_source(asked, models):
    from transformer.inside.contributions import contributions

    lesson = LESSONS[11]
    checkpoint = models(lesson.model)
    translation = checkpoint.translate(lesson.sentence, lesson.beam)
    share = dict(zip(translation.predicted_pieces, contributions(checkpoint.model, translation).source_share))
    assert revealed(asked[12]) == "eben", "the 'soeben' the English never says"
    assert all(share["eben"] < share["▁" + choice] for choice in map(str, asked[12].choices) if choice != "eben")
    assert "'eben' 39%" in said(asked[12].why, "en")


def test_13_the_cross_attention_head_that_carries_she_against_he(asked):
    assert said(asked[13].text, "en").endswith("most of 'sie' against 'er'?")
    assert revealed(asked[13]) == "head 1" and "head 4 37%" in said(asked[13].why, "en")
