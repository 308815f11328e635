"""The page speaks English, German and French: every string in every language with the same placeholders, the
paper's terms in a glossary, numbers and quotation marks as each language writes them, and each visitor's page in
the language they chose, else their browser's."""

import asyncio
import json
import re

import gradio as gr
import pytest

from ui import class_page
from ui.runtime import components, language, page_code
from ui.runtime.language import (COOKIE, LANGUAGES, LOCALES, Count, LanguageRoutes, Ordinal, message, percent,
                                 placeholders, preferred, said, table)
from ui.runtime.errors import as_user_message
from ui.runtime.page import Page


def test_every_string_exists_in_every_language_with_the_same_placeholders():
    english = table("en")
    for other in LANGUAGES:
        words = table(other)
        assert set(words) == set(english), f"{other}: keys missing {set(english) - set(words)}, extra {set(words) - set(english)}"
        for key, text in words.items():
            assert text.strip(), (other, key)
            assert placeholders(text) == placeholders(english[key]), (other, key)


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
