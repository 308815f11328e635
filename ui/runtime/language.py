"""The page's languages: every word a visitor reads, by key, in English, German and French (``ui/locales/``), and
which language a visitor's page is in.

A page is built once per language, each at an address of its own (the English one at the page's path, the others
below it: ``/class/de/``). A visitor who opens the page's path is sent to their language's page: the one they last
chose on the page's switch (a cookie), else the first of their browser's languages (Accept-Language) the page
speaks, else English. Words reach the page as ``Message``s, a key and its values, written out in the page's own
language where it is shown; numbers are written the way each language writes them.
"""

from __future__ import annotations

import functools
import html
import json
import numbers
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pandas
from pandas.io.formats.style import Styler

from transformer.errors import SENTENCES
from transformer.train.budget import PLAN_WORDS

LANGUAGES = {"en": "English", "de": "Deutsch", "fr": "Français"}  # each in its own words, as the switch names it
ENGLISH = "en"
LOCALES = Path(__file__).parents[1] / "locales"  # ui/locales/<language>/<part of the page>.json: key -> words
COOKIE = "explorer_language"  # the language a visitor chose on the switch, remembered for a year
COOKIE_MAX_AGE_S = 365 * 24 * 3600
CHOSEN = "lang"  # ?lang=de on a page's address: the switch's choice
# A non-breaking space before "%" in German (DIN 5008) and a narrow one in French (Imprimerie nationale); none in
# English. German and French write a decimal comma.
PERCENT_SIGN = {"en": "%", "de": "\u00a0%", "fr": "\u202f%"}
DECIMAL_MARK = {"en": ".", "de": ",", "fr": ","}
THOUSANDS_MARK = {"en": ",", "de": ".", "fr": "\u202f"}  # 12,345 / 12.345 / 12 345


@functools.cache
def table(language: str) -> dict[str, str]:
    """Every key's words in ``language``: the files of its folder, one per part of the page, together. The
    library's problems (``library.<code>``) and a training plan's words (``train.plan.*``) say in English what the
    library itself says (transformer/problems.json, transformer/train/plan.json); the other languages' folders
    translate them."""
    words: dict[str, str] = {**{f"library.{code}": sentence for code, sentence in SENTENCES.items()},
                             **{f"train.{key}": sentence for key, sentence in PLAN_WORDS.items()}} \
        if language == ENGLISH else {}
    for part in sorted((LOCALES / language).glob("*.json")):
        more = json.loads(part.read_text(encoding="utf-8"))
        if twice := set(words) & set(more):
            raise KeyError(f"{part} says again what another file of {language} says: {sorted(twice)}")
        words.update(more)
    return words


def placeholders(words: str) -> set[str]:
    """The names a string's ``{placeholders}`` take."""
    return {name for _, name, _, _ in string.Formatter().parse(words) if name}


@dataclass(frozen=True)
class Number:
    """A number as each language writes it, in a format spec of Python's (``".4g"``, ``".0%"``)."""

    value: float
    spec: str = ""

    def in_(self, language: str) -> str:
        written = format(self.value, self.spec)
        percent = written.endswith("%")
        marks = {".": DECIMAL_MARK[language], ",": THOUSANDS_MARK[language]}
        written = "".join(marks.get(character, character) for character in written.rstrip("%"))
        return written + PERCENT_SIGN[language] if percent else written


def percent(value: float) -> Number:
    """A share of 1 as a whole percentage: 0.62 is 62%, 62 %, 62 %."""
    return Number(float(value), ".0%")


def numbers_written(frame: pandas.DataFrame, language: str) -> Styler:
    """A table whose numbers read as ``language`` writes them (0,125 in German and French), for Gradio's Dataframe,
    which shows a pandas Styler's text: the values stay numbers, so the table sorts by them and a script reads them
    as they are. Other cells are shown as they are."""
    return frame.style.format(lambda value: Number(value).in_(language) if is_number(value) else value)


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Ordinal:
    """1st, 2nd in English; 1., 2. in German; 1er, 2e in French."""

    n: int

    def in_(self, language: str) -> str:
        if language == "de":
            return f"{self.n}."
        if language == "fr":
            return "1er" if self.n == 1 else f"{self.n}e"
        suffix = "th" if 10 <= self.n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(self.n % 10, "th")
        return f"{self.n}{suffix}"


@dataclass(frozen=True)
class Count:
    """``n`` of a unit, singular or plural as the language has it (French counts 0 as singular)."""

    n: int
    unit: str  # count.<unit>.one and count.<unit>.other in the tables

    def in_(self, language: str) -> str:
        one = self.n in (0, 1) if language == "fr" else self.n == 1
        return table(language)[f"count.{self.unit}.{'one' if one else 'other'}"].format(n=self.n)


@dataclass(frozen=True)
class Message:
    """Words to show in the reader's language: a key of the tables and the values of its placeholders (text,
    numbers, or other messages, each written in the same language)."""

    key: str
    values: tuple[tuple[str, object], ...] = ()

    def in_(self, language: str) -> str:
        words = table(language)[self.key]
        if not has_format_specs(words):  # most words: str.format, a tenth of string.Formatter's time
            return words.format(**{name: said(value, language) for name, value in self.values})
        return InLanguage(language).format(words, **dict(self.values))

    def __str__(self) -> str:
        return self.in_(ENGLISH)


@functools.cache
def has_format_specs(words: str) -> bool:
    return any(spec for _, name, spec, _ in string.Formatter().parse(words) if name)


class InLanguage(string.Formatter):
    """Words' ``{placeholders}`` filled in ``language``: each value as ``said`` writes it, a number with a format
    spec (``{tokens:,}``, ``{lr:g}``) in that spec as the language writes numbers (``Number``)."""

    def __init__(self, language: str):
        self.language = language

    def format_field(self, value, format_spec: str) -> str:
        if format_spec and is_number(value):
            return Number(value, format_spec).in_(self.language)
        return format(said(value, self.language), format_spec)


def message(key: str, /, **values) -> Message:
    """A message; a key no table has is a bug, found where the message is made."""
    if key not in table(ENGLISH):
        raise KeyError(f"no words for {key!r} in {LOCALES / ENGLISH}")
    return Message(key, tuple(values.items()))


WRITTEN_PER_LANGUAGE = (Message, Number, Ordinal, Count)


def said(thing, language: str) -> str:
    """Anything shown to a reader, in ``language``: a message, a number, a list of them (with commas), an error
    raised with a message, or text that is no one's words (a sentence's pieces, a code)."""
    if isinstance(thing, WRITTEN_PER_LANGUAGE):
        return thing.in_(language)
    if isinstance(thing, (list, tuple)):
        return ", ".join(said(item, language) for item in thing)
    if isinstance(thing, BaseException) and len(thing.args) == 1 and isinstance(thing.args[0], WRITTEN_PER_LANGUAGE):
        return thing.args[0].in_(language)
    code = getattr(thing, "code", None)  # the library's error, named (transformer.errors.Explained)
    if isinstance(thing, BaseException) and code and f"library.{code}" in table(language):
        # Its numbers are sizes and counts: grouped in thousands, as the language groups them (1,200 / 1.200 MB).
        return text(language, f"library.{code}", **{name: Number(value, ",") if is_number(value) else value
                                                    for name, value in thing.values.items()})
    return str(thing)


def text(language: str, key: str, /, **values) -> str:
    return message(key, **values).in_(language)


def from_browser(accept_language: str) -> str | None:
    """The first of a browser's languages (``Accept-Language: de-CH,de;q=0.9,en;q=0.8``) the page speaks."""
    ranked = []
    for position, part in enumerate(accept_language.split(",")):
        tag, _, parameters = part.strip().partition(";")
        weight = re.search(r"q=([0-9.]+)", parameters)
        try:
            quality = float(weight.group(1)) if weight else 1.0
        except ValueError:
            continue
        ranked.append((-quality, position, tag.strip().lower().split("-")[0]))
    return next((tag for quality, _, tag in sorted(ranked) if quality < 0 and tag in LANGUAGES), None)


def preferred(chosen: str | None, remembered: str | None, accept_language: str) -> str:
    """The language a visitor's page opens in: just chosen, else chosen before, else the browser's."""
    for language in (chosen, remembered):
        if language in LANGUAGES:
            return language
    return from_browser(accept_language) or ENGLISH


def page_path(page: str, language: str) -> str:
    """Where a page (``/class/``) is in ``language``."""
    return page if language == ENGLISH else f"{page}{language}/"


def switch_address(page: str, language: str, **query) -> str:
    """The address the switch's link to ``language`` opens: the page's own, which remembers the choice and sends
    the visitor on to that language's page with ``query`` kept."""
    return f"{page}?{urlencode({CHOSEN: language, **query})}"


def switch_html(language: str, **kept) -> str:
    """The switch to a page's other languages: a link to each, through the page's own address (which remembers the
    choice, ``LanguageRoutes``), keeping ``kept`` (a class's code) in the address."""
    up = "./" if language == ENGLISH else "../"  # from a page to the page's own address: /class/de/ to /class/
    links = " · ".join(
        f'<a href="{html.escape(switch_address(up, other, **kept))}" lang="{other}" hreflang="{other}">{name}</a>'
        if other != language else f'<span aria-current="true">{name}</span>'
        for other, name in LANGUAGES.items())
    return (f'<nav class="language-switch" aria-label="{html.escape(text(language, "page.languages"))}">{links}'
            "</nav>")


class LanguageRoutes:
    """ASGI middleware for the pages built in several languages, ``pages``: each page's path (``/class/``) and the
    languages it is built in, the first its own (at that path; the others below it, ``page_path``).

    A browser opening a page's path is sent to its language's page (``preferred``), and a ``?lang=`` choice is
    remembered in a cookie. Every page's HTML gets ``announcing(language)`` first in its head (page_code.py: the
    script that tells the browser the page's language before Gradio starts). Anything else (scripts' requests,
    assets, events) passes as it is."""

    def __init__(self, app, pages: dict[str, tuple[str, ...]], announcing: Callable[[str], bytes]):
        self.app, self.pages, self.announcing = app, pages, announcing
        self.languages_at = {page_path(page, language): (page, language)
                             for page, languages in pages.items() for language in languages}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.languages_at:
            return await self.app(scope, receive, send)
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if "text/html" not in headers.get("accept", ""):
            return await self.app(scope, receive, send)
        page, language = self.languages_at[scope["path"]]
        if language == ENGLISH:
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            wanted = self.wanted(dict(query).get(CHOSEN), headers, self.pages[page])
            if wanted != language or dict(query).get(CHOSEN) is not None:
                return await self.send_on(send, query, wanted)
        return await self.app(scope, receive, self.announce(send, language))

    @staticmethod
    def wanted(chosen: str | None, headers: dict[str, str], offered: tuple[str, ...]) -> str:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header is no choice
            cookie = SimpleCookie()
        language = preferred(chosen, cookie[COOKIE].value if COOKIE in cookie else None,
                             headers.get("accept-language", ""))
        return language if language in offered else ENGLISH

    @staticmethod
    async def send_on(send, query: list[tuple[str, str]], language: str) -> None:
        """To ``language``'s page, the query kept; a choice made on the switch remembered."""
        chosen = dict(query).get(CHOSEN)
        remember = ([(b"set-cookie", f"{COOKIE}={chosen}; Max-Age={COOKIE_MAX_AGE_S}; Path=/; SameSite=Lax"
                      .encode())] if chosen in LANGUAGES else [])
        kept = urlencode([(name, value) for name, value in query if name != CHOSEN])
        # Relative, so that it holds behind a proxy that serves the app under a path of its own.
        target = ("./" if language == ENGLISH else f"{language}/") + (f"?{kept}" if kept else "")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", target.encode()), (b"content-length", b"0"), *remember]})
        await send({"type": "http.response.body", "body": b""})

    def announce(self, send, language: str):
        """``send`` with ``announcing(language)`` put first in an HTML page's head."""
        start: dict = {}
        body = bytearray()

        async def announcing_send(message):
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if not content_type.startswith(b"text/html"):
                    start["passing"] = True
                    return await send(message)
                start.update(message)
                return None
            if start.get("passing") or message["type"] != "http.response.body":
                return await send(message)
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return None
            page = bytes(body).replace(b"<head>", b"<head>" + self.announcing(language), 1)
            headers = [(name, value) for name, value in start.get("headers", []) if name != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(page)).encode())]})
            await send({"type": "http.response.body", "body": page})
        return announcing_send
