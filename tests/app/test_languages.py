"""The page speaks English, German and French: every string in every language with the same placeholders, the
paper's terms in a glossary, numbers and quotation marks as each language writes them, and each visitor's page in
the language they chose, else their browser's."""

import ast
import asyncio
import json
import re
import string
from pathlib import Path

import gradio as gr
import pytest

from ui.classes import class_page
from ui.runtime import components, language, page_code
from ui.runtime.language import (COOKIE, LANGUAGES, LOCALES, Count, LanguageRoutes, Ordinal, message, percent,
                                 placeholders, preferred, said, table)
from ui.runtime.errors import as_user_message
from ui.runtime.page import Page


def test_every_string_exists_in_every_language_with_the_same_placeholders():
    english = table("en")
    parts = sorted(path.name for path in (LOCALES / "en").glob("*.json"))
    # The library's problems and plans: their English is the library's own (transformer/problems.json,
    # transformer/train/plan.json), the rest translate it.
    library = sorted(path.name for path in (LOCALES / "de").glob("library_*.json"))
    for other in LANGUAGES:
        assert sorted(path.name for path in (LOCALES / other).glob("*.json")) == sorted(
            parts + (library if other != "en" else [])), other
        for part in parts:
            keys = [set(json.loads((LOCALES / lang / part).read_text(encoding="utf-8"))) for lang in ("en", other)]
            assert keys[0] == keys[1], f"{other}/{part}: the same keys as en/{part}"
        words = table(other)
        assert set(words) == set(english), f"{other}: keys missing {set(english) - set(words)}, extra {set(words) - set(english)}"
        for key, text in words.items():
            assert text.strip(), (other, key)
            assert placeholders(text) == placeholders(english[key]), (other, key)
            assert number_formats(text) == number_formats(english[key]), f"{other} {key}: numbers written otherwise"


def number_formats(words: str) -> set[tuple[str, str]]:
    """The placeholders given a format spec (``{tokens:,}``), with it: every language writes those numbers alike."""
    return {(name, spec) for _, name, spec, _ in string.Formatter().parse(words) if name and spec}


def test_french_keeps_its_spaces_before_double_punctuation_and_inside_guillemets_unbroken():
    for key, text in table("fr").items():
        assert not re.search(r" [:;?!»%]|« ", text), f"fr {key}: a breaking space in {text!r}"


def test_the_glossary_names_each_term_in_every_language():
    glossary = json.loads((LOCALES / "glossary.json").read_text(encoding="utf-8"))
    terms = {term: words for term, words in glossary.items() if not term.startswith("_")}
    assert {"query", "key", "value", "head", "layer", "self-attention", "cross-attention"} <= set(terms)
    for term, words in terms.items():
        assert set(words) == set(LANGUAGES) and all(words.values()), term
    assert (terms["query"]["de"], terms["query"]["fr"]) == ("Anfrage (Query)", "requête")


def test_numbers_quotes_counts_and_ordinals_are_written_as_each_language_writes_them():
    assert [said(percent(0.62), lang) for lang in ("en", "de", "fr")] == ["62%", "62\u00a0%", "62\u202f%"]
    assert said(language.Number(0.25, ".2f"), "de") == "0,25"
    assert [said(message("q.quoted", word="ball"), lang) for lang in ("en", "de", "fr")] == \
        ["'ball'", "„ball“", "«\u00a0ball\u00a0»"]
    assert [said(Count(n, "minute"), "de") for n in (1, 2)] == ["1 Minute", "2 Minuten"]
    assert [said(Ordinal(n), lang) for n, lang in ((1, "en"), (2, "en"), (11, "en"), (1, "de"), (1, "fr"), (2, "fr"))] \
        == ["1st", "2nd", "11th", "1.", "1er", "2e"]


def test_a_message_is_written_in_its_readers_language_with_its_values_and_english_where_nothing_says():
    shares = [message("q.share", word=message("q.quoted", word="ball"), share=percent(0.99))]
    said_it = message("q.weights_at_step", step=9, shares=shares)
    assert said(said_it, "de") == "Seine Gewichte in Schritt 9: „ball“ 99\u00a0%."
    assert str(said_it) == "Its weights at step 9: 'ball' 99%."
    with pytest.raises(KeyError):
        message("no.such.key")


@pytest.mark.parametrize("chosen, remembered, browser, expected", [
    (None, None, "de-CH,de;q=0.9,en;q=0.8", "de"),
    (None, None, "es-ES, fr;q=0.5", "fr"),
    (None, None, "es-ES", "en"),
    (None, None, "", "en"),
    (None, "fr", "de-DE", "fr"),
    ("en", "fr", "de-DE", "en"),
    ("xx", None, "fr", "fr"),
    (None, None, "en;q=0, de;q=0.1", "de"),
])
def test_a_page_opens_in_the_language_just_chosen_else_remembered_else_the_browsers(chosen, remembered, browser,
                                                                                   expected):
    assert preferred(chosen, remembered, browser) == expected


def asked(path: str, headers: dict[str, str], query: str = "") -> tuple[int, dict[bytes, bytes], bytes, list]:
    """A GET through LanguageRoutes to an app that answers every request with a small HTML page."""
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"26")]})
        await send({"type": "http.response.body", "body": b"<html><head></head></html>"})

    sent = []

    async def send(message):
        sent.append(message)

    routes = LanguageRoutes(app, {"/": ("en",), "/class/": tuple(LANGUAGES)}, page_code.announcing)
    scope = {"type": "http", "method": "GET", "path": path, "query_string": query.encode(),
             "headers": [(name.encode(), value.encode()) for name, value in headers.items()]}
    asyncio.run(routes(scope, None, send))
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body, reached


BROWSER = {"accept": "text/html,application/xhtml+xml"}


def test_a_phone_opening_the_class_link_lands_on_its_browsers_language_with_its_code():
    status, headers, _, reached = asked("/class/", {**BROWSER, "accept-language": "de-DE,de;q=0.9"}, "code=AB2CD")
    assert status == 303 and headers[b"location"] == b"de/?code=AB2CD" and not reached
    status, _, body, reached = asked("/class/", {**BROWSER, "accept-language": "en-GB"}, "code=AB2CD")
    assert status == 200 and reached == ["/class/"] and b'data-language="en"' in body


def test_the_switch_is_remembered_and_wins_over_the_browser():
    status, headers, _, _ = asked("/class/", {**BROWSER, "accept-language": "de"}, "lang=fr&code=AB2CD")
    assert status == 303 and headers[b"location"] == b"fr/?code=AB2CD"
    assert headers[b"set-cookie"].startswith(f"{COOKIE}=fr;".encode())
    status, headers, _, _ = asked("/class/", {**BROWSER, "accept-language": "de", "cookie": f"{COOKIE}=fr"})
    assert status == 303 and headers[b"location"] == b"fr/"
    status, headers, _, reached = asked("/class/", {**BROWSER, "cookie": f"{COOKIE}=de"}, "lang=en")
    assert status == 303 and headers[b"location"] == b"./" and headers[b"set-cookie"].startswith(f"{COOKIE}=en;".encode())


def test_each_page_tells_the_browser_its_language_before_gradio_starts_and_scripts_pass_untouched():
    status, headers, body, _ = asked("/class/fr/", BROWSER)
    assert status == 200 and body.startswith(b'<html><head><script data-language="fr">')
    assert int(headers[b"content-length"]) == len(body)
    _, _, body, _ = asked("/", {**BROWSER, "accept-language": "de"})  # the main page is English only, for now
    assert b'data-language="en"' in body
    status, _, body, reached = asked("/class/", {"accept": "application/json", "accept-language": "de"})
    assert status == 200 and body == b"<html><head></head></html>" and reached == ["/class/"]


def test_the_students_page_says_everything_in_its_language_errors_included(app_services):
    code = app_services.classes.open(1, "T")
    phone = gr.Request(session_hash="s1")
    joined = class_page.on_student_join(app_services, code, phone, "de")
    assert joined["student_question"].startswith("### In Schritt ") and 'lang="fr"' in joined["student_languages"]
    assert f"code={code}" in joined["student_languages"], "the switch keeps the class's code"
    sent = class_page.on_student_send(app_services, code, 0, phone, "de")
    assert sent["student_status"] == "Deine Antwort ist angekommen. Warte auf die Auflösung."
    page = Page(app_services, language="fr")
    page.add(student_code=gr.Textbox(), student_choice=components.Radio([("a", 0)], value=None),
             student_status=gr.Markdown())
    unchosen = page.handler(class_page.on_student_send)(code, None, phone)
    assert list(unchosen.values()) == ["**Choisis d'abord une réponse\\.**"], "said under the buttons, the rest as it was"
    wrong = page.handler(class_page.on_student_join)("nope", phone)
    assert list(wrong.values())[0].startswith("**Aucune classe ouverte n'a le code saisi\u00a0:")
    with pytest.raises(gr.Error, match="Un problème est survenu"), as_user_message("a bug", language="fr"):
        raise RuntimeError("in the page's language too")


def said_otherwise(other: str, *parts: str) -> set[str]:
    """The English words of ``parts`` (their keys' first word) that ``other`` says otherwise."""
    english, words = table("en"), table(other)
    return {english[key] for key in english if key.split(".")[0] in parts and words[key] != english[key]}


def shown_words(blocks: gr.Blocks) -> list[str]:
    """Every text a visitor reads in ``blocks``' components: labels, infos, values that are text, choices' labels,
    a table's headers."""
    words = []
    for block in blocks.blocks.values():
        words += [getattr(block, name) for name in ("label", "info") if isinstance(getattr(block, name, None), str)]
        value = getattr(block, "value", None)
        if isinstance(value, str) and not getattr(block, "choices", None):  # a choice's value is not shown
            words.append(value)
        elif isinstance(value, dict) and "headers" in value:
            words += [str(header) for header in value["headers"]]
        words += [str(label) for label, _ in getattr(block, "choices", None) or ()]
    return words


@pytest.mark.parametrize("other", ["de", "fr"])
def test_the_inside_and_positions_tabs_leave_no_english_on_another_languages_page(app_services, translation, other):
    from ui.tabs import inside as inside_tab
    from ui.tabs import positions as positions_tab
    words = table(other)
    untranslated = said_otherwise(other, "inside", "positions", "map")  # d_k, top-k and the like stay
    checkpoint = app_services.registry.get("multi30k-en-de")
    with gr.Blocks() as blocks:
        page = Page(app_services, blocks, language=other)
        inside_tab.layout(page, checkpoint)
        positions_tab.layout(page, checkpoint)
    shown = shown_words(blocks)
    assert len(shown) > 40 and not untranslated & set(shown), untranslated & set(shown)
    assert {value for _, value in page["inside_kind"].choices} == set(choices_kinds()), "the kinds' values stay English"
    views = inside_tab.on_inside(app_services, "multi30k-en-de", translation, "Decoder self-attention", 1, 1, 2,
                                 other)
    assert views["inside_summary"].startswith(f"**{words['map.kind.decoder']}, ")
    assert not untranslated & {views["inside_merge"], *views["inside_table"].columns}
    with pytest.raises(Exception, match=re.escape(words["inside.blackboard.uneven"])):
        page.handler(inside_tab.on_blackboard)([["x", 1.0, 2.0]], False)


def choices_kinds() -> list[str]:
    from ui.views.choices import ATTENTION_KINDS
    return list(ATTENTION_KINDS.values())


@pytest.mark.parametrize("other", ["de", "fr"])
def test_the_model_and_train_tabs_and_their_messages_leave_no_english_on_another_languages_page(app_services, tmp_path,
                                                                                               other):
    import time

    from ui import hub_models
    from ui.training import jobs, published_models
    from ui.tabs import model as model_tab
    from ui.tabs import train as train_tab
    from ui.views import training as training_views
    words = table(other)
    untranslated = said_otherwise(other, "model", "train")  # BLEU, Multi30K and the like stay
    checkpoint = app_services.registry.get("multi30k-en-de")
    with gr.Blocks() as blocks:
        page = Page(app_services, blocks, language=other)
        model_tab.layout(page, checkpoint)
        train_tab.layout(page, checkpoint)
        page.add(model=gr.Dropdown())
    shown = shown_words(blocks)
    assert len(shown) > 20 and not untranslated & set(shown), untranslated & set(shown)
    assert [value for _, value in page["train_data"].choices] == ["copy", "reverse", "sort", "multi30k", "upload"]
    views = model_tab.model_views(checkpoint, other)
    table_words = {*views["model_parameters"].data.columns, *views["model_parameters"].data.iloc[:, 0]}
    assert not untranslated & table_words and views["model_metrics"].startswith(words["model.scores_header"])
    waiting = training_views.waiting_markdown(2, 400, other)
    assert waiting.startswith(words["train.waiting"].split("{")[0]) and "7" in waiting
    outcome = message("train.ended.stopped", ending=message("train.ending.updates", step=40),
                      summary=message("train.summary.exact_match", share=percent(0.5)),
                      where=message("train.where.held"))
    job = jobs.JobState("j", "stopped", jobs.JobRequest(), time.time(), 400, said=outcome)
    assert said(outcome, other) in training_views.job_status_markdown(job, other)
    assert published_models.kept_where(outcome, message("train.where.kept", name="j")).in_(other).endswith(
        words["train.where.kept"].format(name="j"))
    with pytest.raises(gr.Error, match=re.escape(words["train.error.nothing_to_delete"])):
        page.handler(train_tab.on_delete)("x", gr.Request(session_hash="nobody"))
    opening = hub_models.OpeningAtStart(hub_models.HubModels(tmp_path, patterns=""), ["Helsinki-NLP/opus-mt-en-de"])
    with pytest.raises(Exception) as refused:
        opening.hub_models.open("Helsinki-NLP/opus-mt-en-de", "203.0.113.7")
    assert said(refused.value, other) == words["model.hub.off"]
    assert opening.status(other) == f"- {words['model.hub.next'].format(shown='`Helsinki-NLP/opus-mt-en-de`')}"


def test_the_lessons_and_the_teachers_class_panel_speak_the_pages_language_their_values_english(app_services):
    from ui.tabs import lessons as lessons_panel
    from ui.views import lessons
    from ui.views.questions import Question
    with gr.Blocks() as blocks:
        page = Page(app_services, blocks, language="de")
        lessons_panel.layout(page)
        class_page.teacher_layout(page)
    named = page.components
    assert (named["lesson_choice"].label, named["show_me"].value, named["class_open"].value) == \
        ("Lektion", "Zeig es mir", "Klasse öffnen")
    assert [value for _, value in named["lesson_choice"].choices] == lessons.lesson_choices(), "values are keys"
    assert named["lesson_choice"].choices[0][0] == "1. Wohin jedes Wort schaut"
    assert named["lesson_text"].value.startswith("### Wohin jedes Wort schaut") and "**Frag die Klasse**" in \
        named["lesson_text"].value
    settings = lessons_panel.page_settings("fr")
    assert settings["byChoice"][lessons.lesson_choices()[0]]["title"] == "Où regarde chaque mot"
    assert settings["parts"]["lookFor"] == "À observer\u00a0:"
    assert lessons.LESSONS[0].title == "Where each word looks", "the English title names the lesson"
    asked = Question(message("q.yes"), (message("q.yes"), message("q.no_not_a_word")), 0, "")
    counts = class_page.counts_markdown(asked, [2, 1], True, "fr")
    assert "67\u202f%" in counts and "← le modèle" in counts and counts.endswith("3 réponses")
    assert "Les élèves ouvrent" in class_page.join_html("ABCDE", "https://x.example/class/?code=ABCDE", "fr")


def views_of_translation_frames(services, language: str) -> dict:
    """Every frame the page fills for a translation of the bundled model, in ``language``."""
    from ui.views import explorer
    from ui.views import translate as translate_views
    tr = translate_views.run_translation(services.registry.get("multi30k-en-de"), "A dog runs.").translation
    numbers = explorer.page_numbers(tr, language=language)
    return {"steps": [numbers["candidatesFrame"], numbers["sourcesFrame"]],
            **{f"{kind} {name}": explorer.view_frame(tr, kind, name, language) for kind in numbers["frames"]
               for name in explorer.FIGURES}}


@pytest.mark.parametrize("other", ["de", "fr"])
def test_the_header_and_the_translate_tab_leave_no_english_on_another_languages_page(app_services, other):
    from ui.tabs import header
    from ui.tabs import translate as translate_tab
    from ui.views import share
    words = table(other)
    untranslated = said_otherwise(other, "header", "translate", "map")  # "Attention" and the like stay
    checkpoint = app_services.registry.get("multi30k-en-de")
    with gr.Blocks() as blocks:
        page = Page(app_services, blocks, language=other)
        header.layout(page, app_services.registry.names(), "multi30k-en-de", {"broken": "why"})
        translate_tab.layout(page, checkpoint)
    shown = shown_words(blocks)
    assert len(shown) > 40 and not untranslated & set(shown), untranslated & set(shown)
    assert [value for _, value in page["kind"].choices] == choices_kinds(), "the kinds' values stay English"
    assert [value for _, value in page["decoding"].choices] == ["greedy", "beam"]
    settings = translate_tab.page_settings(other)
    assert settings["kinds"] == translate_tab.page_settings("en")["kinds"], "the page's script reads English values"
    assert not untranslated & {*settings["which"].values(), *settings["words"]["chartText"].values()}
    frame = json.dumps(views_of_translation_frames(app_services, other), ensure_ascii=False)
    assert not {"Candidates", "weight", "query", "Step", "producing"} & set(re.findall(r"\w+", frame)), \
        "the frames' words are the page's"
    views = translate_tab.on_translate(app_services, "multi30k-en-de", "Der Hund schläft.", "greedy", 4, 40,
                                       choices_kinds()[2], "one head", 1, 1, False, other)
    german, english_language = words["language_name.de"], words["language_name.en"]
    assert views["notes"] == "- " + words["translate.note.language_learned"].format(
        seen=german, expected=english_language, target=german)
    assert views["page_numbers"]["steps"][0]["caption"].startswith(words["translate.step.caption"].split("{")[0])
    assert header.model_settings(checkpoint, 1, 1, other)["beam_size"].info.startswith(
        words["translate.beam.info"].split("{")[0])
    assert share.share_link_problems({"model": "gone"}, ["multi30k-en-de"], checkpoint, other) == [
        words["translate.link.model_missing"].format(model="gone", name="multi30k-en-de")]
    with pytest.raises(gr.Error, match=re.escape(words["translate.empty"])):
        next(page.handler(translate_tab.on_translate_click)("multi30k-en-de", " ", "greedy", 4, 40,
                                                            choices_kinds()[2], "one head", 1, 1, False))


@pytest.mark.parametrize("other", ["de", "fr"])
def test_the_experiments_analysis_and_evidence_tabs_leave_no_english_on_another_languages_page(app_services, other):
    import torch

    from transformer.inside.interventions import Comparison, PruningCurve
    from ui.tabs import analysis as analysis_tab
    from ui.tabs import experiments as experiments_tab
    from ui.tabs import explain as explain_tab
    from ui.views import experiments as experiment_views
    from ui.views import explain as explain_views
    words = table(other)
    untranslated = said_otherwise(other, "experiments", "analysis", "explain")  # log P, Rollout and the like stay
    checkpoint = app_services.registry.get("multi30k-en-de")
    with gr.Blocks() as blocks:
        page = Page(app_services, blocks, language=other)
        for tab in (experiments_tab, explain_tab, analysis_tab):
            with gr.Tab(said(tab.TITLE, other)):
                tab.layout(page, checkpoint)
    shown = shown_words(blocks)
    assert len(shown) > 60 and not untranslated & set(shown), untranslated & set(shown)
    assert [value for _, value in page["experiment_measure"].choices] == list(experiment_views.MEASURES)
    assert [value for _, value in page["explain_method"].choices] == list(explain_views.METHODS)
    assert page["experiment_head"].choices[0] == (words["translate.mean_of_heads"], "mean of heads")
    importance = {"encoder": torch.tensor([[0.5, -0.01]]), "cross": torch.tensor([[-0.3, 1.0]])}
    _, summary = experiment_views.importance_views(importance, "t", other)
    assert summary.startswith(words["experiments.most_important"].split("{")[0]) and "+1,00" in summary
    shuffled = Comparison(None, None, "shuffled", details={"sentence": "b a"})
    assert experiment_views.described(shuffled).in_(other) == words["experiments.did.shuffled"].format(sentence="b a")
    assert experiment_views.described(shuffled).in_("en") == "source words shuffled: “b a”"
    curve = PruningCurve("cross", ["L1H1", "L1H2"], [100.0, 95.0, 40.0])
    summary = explain_views.pruning_summary([curve, curve], other)
    assert summary.startswith(words["explain.pruning_summary"].split("*")[0]) and "40,0" in summary
    table_ = explain_views.agreement_table([{"attention": "L2", "top_1": 0.5,
                                             "correlation": 0.25}], other)
    assert list(table_.columns) == [words["explain.column.attention"], words["explain.column.top_1"],
                                    words["explain.column.correlation"]]
    assert table_.iloc[0, 1] == said(percent(0.5), other)
    assert explain_tab.agreement_row_map(table_.iloc[0, 0], 3, other) == (2, "mean of heads")
    with pytest.raises(gr.Error, match=re.escape(words["experiments.tick_heads"])):
        page.handler(experiments_tab.on_ablate)("multi30k-en-de", None, [], [], [], choices_kinds()[2], 1,
                                               "mean of heads", experiment_views.MEASURES[0])


def test_the_plan_a_job_fits_to_its_time_is_said_in_the_pages_language_and_in_english_as_the_library_says_it():
    from library.test_budget import AMD, EPOCH_TOKENS, faster
    from transformer.train.budget import SYNTHETIC_PLAN, plan_for_work
    from ui.training.training_plans import plan_words

    plans = [plan_for_work(minutes, faster(AMD, factor), EPOCH_TOKENS) for minutes in (1, 15, 120)
             for factor in (0.3, 4)]
    for plan in [*plans, SYNTHETIC_PLAN]:
        assert said(plan_words(plan), "en") == plan.describe()
    german, french = (said(plan_words(plans[-1]), language) for language in ("de", "fr"))
    assert "Schichten" in german and "Ziel-Tokens/s gemessen" in german and "layers" not in german
    assert "Batches von 4.000 Tokens" in german and "Lernrate 0,0015" in german  # numbers as German writes them
    assert "couches" in french and "jetons cibles/s mesurés" in french and "layers" not in french


def library_error_codes() -> dict[str, set[str]]:
    """Every code the library names an error by (``code="..."`` in transformer/), with the values it passes."""
    import ast
    from pathlib import Path

    codes: dict[str, set[str]] = {}
    for path in (Path(__file__).parents[2] / "transformer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                named = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
                if isinstance(named.get("code"), ast.Constant):
                    codes[named["code"].value] = set(named) - {"code"}
    return codes


def test_every_error_the_library_names_is_said_in_every_language_with_its_values():
    codes = library_error_codes()
    assert {"hub", "checkpoint", "data"} <= {code.split(".")[0] for code in codes}
    for each in LANGUAGES:
        words = table(each)
        for code, values in codes.items():
            assert f"library.{code}" in words, (each, code)
            assert placeholders(words[f"library.{code}"]) == values, (each, code)


def test_a_library_error_reaches_the_page_in_its_language_and_scripts_in_english():
    from transformer.data import DataError

    code = next(code for code in library_error_codes() if code.startswith("data."))
    values = {name: "7" for name in placeholders(table("en")[f"library.{code}"])}
    error = DataError(table("en")[f"library.{code}"].format(**values), code=code, **values)
    assert said(error, "en") == str(error)
    assert said(error, "de") == table("de")[f"library.{code}"].format(**values) != str(error)


def test_a_library_errors_sizes_are_grouped_in_thousands_as_the_pages_language_groups_them():
    from transformer.files.hub import HubError

    error = HubError("Helsinki-NLP/opus-mt-en-zh weighs 1,200 MB, more than the 600 MB this server opens.",
                     code="hub.too_big", repo_id="Helsinki-NLP/opus-mt-en-zh", size=1200, limit=600)
    assert said(error, "en") == str(error)
    assert "1.200 MB" in said(error, "de") and "600 MB" in said(error, "de")  # not "1,200": 1.2 in German
    assert "1\u202f200" in said(error, "fr")


@pytest.mark.parametrize("other", ["de", "fr"])
def test_a_tables_numbers_read_with_the_pages_decimal_mark_and_stay_numbers(app_services, translation, other):
    from ui.tabs import analysis as analysis_tab
    checkpoint = app_services.registry.get("multi30k-en-de")
    shown = {}
    for language_ in ("en", other):
        with gr.Blocks() as blocks:
            page = Page(app_services, blocks, language=language_)
            with gr.Tab("analysis"):
                analysis_tab.layout(page, checkpoint)
        table_ = page["statistics_table"]
        answer = page.handler(analysis_tab.on_statistics, outputs=["statistics_table", "statistics_caption"])(
            translation)
        shown[language_] = table_.postprocess(answer[table_])
    english, translated = shown["en"], shown[other]
    numbers = [row[1:] for row in english.data]  # the kind of attention first, in each page's words
    assert [row[1:] for row in translated.data] == numbers  # the same numbers, for sorting and for scripts
    entropy = numbers[0][2]
    assert isinstance(entropy, float) and "." in str(entropy)
    assert translated.metadata["display_value"][0][1:4] == [str(numbers[0][0]), str(numbers[0][1]),
                                                          str(entropy).replace(".", ",")]
    assert not english.metadata  # the English page's tables are shown as they always were


def test_what_each_intervention_did_is_said_from_its_name_and_values_in_every_language(app_services):
    from transformer.inside import interventions
    from ui.views.experiments import described

    checkpoint = app_services.registry.get("multi30k-en-de")
    sentence = "A dog runs across the grass."
    done = [interventions.ablate_heads(checkpoint, sentence, {"cross": ["L1H1"]}),
            interventions.ablate_heads(checkpoint, sentence, {"cross": ["L1H1", "L1H2"]}),
            interventions.override_token(checkpoint, checkpoint.translate(sentence), 2, "Katze"),
            interventions.without_positions(checkpoint, sentence),
            interventions.shuffled_source(checkpoint, sentence)]
    shuffled = done[-1].details["sentence"]
    assert [described(comparison).in_("en") for comparison in done] == [
        "1 head switched off", "2 heads switched off",
        "step 2 forced to ▁Katze; both runs continue greedily from step 2", "positional encoding removed",
        f"source words shuffled: “{shuffled}”"]
    for comparison in done:
        english = described(comparison).in_("en")
        assert all(described(comparison).in_(other) not in ("", english) for other in ("de", "fr"))


ROOT = Path(__file__).resolve().parents[2]
USER_PROBLEMS = {"InputError", "CheckpointError", "DataError", "HubError", "JobError", "ClassError"}


def app_problems_raised_as_english(source: str) -> list[str]:
    """The app's raises of a problem a visitor reads whose words are an English string, not a message (or, for a
    class's problems, a code): such a problem would reach a German or French page in English."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            kind = getattr(node.exc.func, "id", None) or getattr(node.exc.func, "attr", None)
            words = node.exc.args[0]
            code = isinstance(words, ast.Constant) and kind == "ClassError" and str(words.value).isidentifier()
            if kind in USER_PROBLEMS and isinstance(words, (ast.Constant, ast.JoinedStr)) and not code:
                found.append(f"{kind} at line {node.lineno}")
    return found


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "ui").rglob("*.py")))
def test_every_problem_the_app_raises_for_a_visitor_is_a_message_in_every_language(path):
    assert app_problems_raised_as_english((ROOT / path).read_text(encoding="utf-8")) == []


def test_the_check_finds_english_in_a_raise_and_lets_a_message_or_a_class_code_pass():
    english = "raise InputError(f'{x} is wrong')\nraise CheckpointError('too big')\n"
    spoken = "raise InputError(message('a.b'))\nraise ClassError('no_class')\nraise ValueError('a bug')\n"
    assert app_problems_raised_as_english(english) == ["InputError at line 1", "CheckpointError at line 2"]
    assert app_problems_raised_as_english(spoken) == []


def english_words_in_code(source: str, english: dict[str, str]) -> list[tuple[int, str]]:
    """(line, key) of each string in ``source`` that is a sentence or choice of the English locale, written out
    (docstrings aside) instead of read from it."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, english[node.value]) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and node.value in english and re.search(r"[^\W\d_].*\s.*[^\W\d_]", node.value)]


@pytest.mark.parametrize("path", sorted(str(path.relative_to(ROOT)) for path in (ROOT / "ui").rglob("*.py")))
def test_the_apps_sentences_and_english_choices_are_written_once_in_the_locales(path):
    english = {words: key for key, words in language.table("en").items()}
    assert english_words_in_code((ROOT / path).read_text(encoding="utf-8"), english) == []


def test_the_once_check_finds_a_locales_words_in_code_but_not_in_a_docstring_or_a_separator():
    english = {"one head": "translate.view.one_head", ", ": "inside.merge.separator"}
    source = '"""one head"""\nVIEWS = ("one head", "two heads")\nJOIN = ", "\n'
    assert english_words_in_code(source, english) == [(2, "translate.view.one_head")]


def test_each_kind_of_library_error_reaches_a_german_page_in_german_with_what_it_wraps(tmp_path):
    """Raised by the library itself and passed through the app's own way to the page (``as_user_message``; a
    training job's ``failure``): the sentence and the error it wraps, in German, never the English text."""
    import shutil

    from transformer.data import corpus_sentences
    from transformer.files import hub
    from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
    from transformer.paper.config import preset
    from transformer.train.trainer import Diverged
    from ui.training.jobs import failure

    def copied(name: str, change) -> Path:
        directory = shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / name)
        change(directory)
        return directory

    def heads_not_dividing(directory: Path):
        config = json.loads((directory / "config.json").read_text())
        config["model"]["n_heads"] = 3
        (directory / "config.json").write_text(json.dumps(config))

    raising = {"a model config": lambda: load_checkpoint(copied("config", heads_not_dividing)),
               "a missing tokenizer": lambda: load_checkpoint(copied("tokenizer",
                                                                     lambda d: (d / "tokenizer.model").unlink())),
               "data": lambda: corpus_sentences(str(tmp_path / "absent.tsv")),
               "a Hub model": lambda: hub.convert(tmp_path, tmp_path / "converted"),
               "a choice": lambda: preset("huge", 10, 10)}
    for kind, raise_it in raising.items():
        with pytest.raises(Exception) as raised:
            raise_it()
        with pytest.raises(gr.Error) as shown:
            with as_user_message(kind, html=False, language="de"):
                raise raised.value
        error, german = raised.value, shown.value.message
        assert german == said(error, "de") and error.code, kind
        wrapped = error.values.get("error")
        english = [str(error)] + ([str(wrapped)] if getattr(wrapped, "code", None) else [])
        assert all(sentence not in german for sentence in english), (kind, german)
    diverged = failure(Diverged(code="train.loss_not_finite", loss=float("nan"), step=3))
    assert said(diverged, "de") == ("Das Training ist divergiert: der Verlust wurde bei Update 3 zu nan; "
                                    "senken Sie die Lernrate")
