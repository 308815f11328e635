"""Text from a user: cleaned for the model, and notes on what it is (its language, its kind, what was changed).

Everything here runs before any model sees the text, so it is where limits and
refusals of input live.
"""

from __future__ import annotations

import re
import unicodedata

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.files.multilingual import iso_code

from ..runtime.language import ENGLISH, message, table
from ..runtime.language import text as words_in

MAX_INPUT_CHARS = 1000
# Text past this is dropped before any other work: normalising 100 MB of text costs a worker half a minute.
MAX_RAW_CHARS = 4 * MAX_INPUT_CHARS
# Characters that show nothing: zero-width spaces and joiners, byte-order marks, word joiners; and U+FFFD, which
# stands for a character that was lost. Text of nothing but these has nothing to translate.
INVISIBLE = dict.fromkeys([0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD])
DIRECTION_CONTROLS = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])  # LRE..RLO, LRI..PDI


def clean_text(text: str | None, limit: int = MAX_INPUT_CHARS,
               language: str = ENGLISH) -> tuple[str, list[str]]:
    """Text fit to translate, and notes about what was changed (in ``language``). Raises InputError for nothing to
    translate."""
    notes = []
    text = text if isinstance(text, str) else ""
    cut = len(text) > MAX_RAW_CHARS
    if cut:
        text = text[:MAX_RAW_CHARS]
        notes.append(words_in(language, "translate.note.cut", limit=limit))
    # Unpaired surrogates (JSON allows "\ud800") are not text: UTF-8 cannot encode them, and the tokenizer fails.
    if any(unicodedata.category(ch) == "Cs" for ch in text):
        text = "".join("\ufffd" if unicodedata.category(ch) == "Cs" else ch for ch in text)
        notes.append(words_in(language, "translate.note.surrogates"))
    # Control characters (other than whitespace) have no meaning to the tokenizer and would display badly.
    cleaned = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    cleaned = " ".join(cleaned.split())
    if cleaned != " ".join(text.split()):
        notes.append(words_in(language, "translate.note.controls"))
    # Text-direction overrides and isolates would make the sentence display in an order it is not read in.
    without_overrides = cleaned.translate(DIRECTION_CONTROLS)
    if without_overrides != cleaned:
        cleaned = " ".join(without_overrides.split())
        notes.append(words_in(language, "translate.note.direction"))
    if not cleaned:
        raise InputError(message("translate.empty"))
    if not cleaned.translate(INVISIBLE).replace("\ufffd", "").strip():
        raise InputError(message("translate.note.invisible"))
    if len(cleaned) > limit:
        cleaned = cleaned[:limit]
        if not cut:
            notes.append(words_in(language, "translate.note.cut", limit=limit))
    return cleaned, notes


def markdown_escape(text: str) -> str:
    """Make a token safe to show inside Markdown (no HTML, no formatting)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\`*_{}[]()#+-.!|~":
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped


# The languages a model's name may say it reads (language_name names them, as others).
KNOWN_LANGUAGES = ("en", "de", "fr", "cs")


def known_languages(checkpoint: Checkpoint) -> tuple[str, str | None] | None:
    """(source, target) language codes of a Multi30K model, an opus-mt one opened from the Hub or a multilingual one
    set for its pair; None for others.

    Only Multi30K and opus-mt's names say which languages a model holds; an
    uploaded TSV records the default codes, and the synthetic tasks read digits.
    """
    if checkpoint.pair is not None:  # a multilingual model, set for its pair
        source, target = (iso_code(code) for code in checkpoint.pair)
        return (source, target) if source in KNOWN_LANGUAGES else None
    source, target = checkpoint.info.get("source_lang"), checkpoint.info.get("target_lang")
    multi30k = checkpoint.info.get("training", {}).get("data") == "multi30k"
    opened = isinstance(checkpoint.info.get("source"), dict)
    return (source, target) if (multi30k or opened) and source in KNOWN_LANGUAGES else None


def source_label(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """What the input box holds for this model: "English sentence", "Digits", or a neutral "Source sentence"."""
    if uses_digits(checkpoint):
        return words_in(language, "translate.source.digits")
    languages = known_languages(checkpoint)
    return words_in(language, f"translate.source.{languages[0]}" if languages else "translate.source.other")


# Clues to the language of a sentence: frequent words of each Multi30K language, picked to be far rarer in the
# other three, and letters that only it of the four uses. Each clue word counts; the letters count once.
LANGUAGE_WORDS = {
    "en": {"the", "and", "is", "are", "of", "with", "his", "her", "their", "while", "from", "this", "into", "at"},
    "de": {"der", "das", "und", "ist", "sind", "ein", "eine", "einem", "einen", "einer", "mit", "auf", "im", "zu",
           "dem", "nicht", "sich", "von", "vor", "bei", "aus", "neben", "ich", "wir", "sie", "es"},
    "fr": {"le", "la", "les", "un", "une", "et", "est", "sont", "du", "avec", "sur", "dans", "au", "aux", "qui",
           "sa", "ses", "il", "elle", "nous", "vous", "ils"},
    "cs": {"v", "z", "se", "si", "jsou", "na", "ve", "ze", "který", "která", "které", "při", "před", "muž", "žena"},
}
LANGUAGE_LETTERS = {"en": "", "de": "äöüß", "fr": "àâçèêëîïôœùû", "cs": "áčďěíňřšťůýž"}


def language_note(checkpoint: Checkpoint, text: str, language: str = ENGLISH) -> str | None:
    """A warning when a sentence looks like another language than the one the model reads (German typed into the
    English→German model reads like gibberish to it, yet gets a confident translation)."""
    languages = known_languages(checkpoint)
    if languages is None:
        return None
    expected, target = languages
    lowered = unicodedata.normalize("NFC", text).lower()  # "ä" pasted as "a" + a combining mark is still "ä"
    words = re.findall(r"\w+", lowered)
    clues = {code: sum(word in LANGUAGE_WORDS[code] for word in words)
                   + any(letter in lowered for letter in LANGUAGE_LETTERS[code])
             for code in LANGUAGE_WORDS}
    seen = max(clues, key=clues.get)  # of tied languages the first; tied with the expected one, no note
    if seen == expected or clues[seen] < 2 or clues[seen] <= clues[expected]:
        return None
    def name(code: str) -> str:
        return language_name(code, language)
    if target in KNOWN_LANGUAGES:
        return words_in(language, "translate.note.language_learned", seen=name(seen), expected=name(expected),
                     target=name(target))
    return words_in(language, "translate.note.language", seen=name(seen), expected=name(expected))


def language_name(code: str | None, language: str = ENGLISH) -> str | None:
    """A language named in ``language`` by its ISO 639-1 code ("de": "German", "Deutsch", "allemand"); None where
    ui/locales/*/language_names.json does not name it."""
    return table(language).get(f"language_name.{code}")


def uses_digits(checkpoint: Checkpoint) -> bool:
    return checkpoint.info.get("source_lang") == "digits"


def text_kind(text: str | None) -> str:
    """"digits" for a digit sequence (the synthetic tasks' input), else "text"."""
    digits_only = all(ch.isdigit() or ch.isspace() for ch in (text or "")) and any(ch.isdigit() for ch in text or "")
    return "digits" if digits_only else "text"


def suits(checkpoint: Checkpoint, text: str) -> bool:
    """Whether ``text`` is for this kind of model: digits for the synthetic tasks, words for the others."""
    return text_kind(text) == ("digits" if uses_digits(checkpoint) else "text")


def suitable_text(checkpoint: Checkpoint, current: str, examples: dict[str, str]) -> str:
    """Keep the user's text unless it is plainly for another kind of model (digits vs. words)."""
    return current if suits(checkpoint, current) else examples["digits" if uses_digits(checkpoint) else "text"]


# Written for this project; not taken from the training data.
EXAMPLES = [
    "A young girl is playing with a red ball in the park.",
    "Two men are sitting on a bench and reading the newspaper.",
    "The dog jumps over the fence to catch the ball.",
    "A woman in a blue dress sings on a small stage.",
    "Three children are building a sandcastle on the beach.",
]
# For French: each holds an adjective that French puts after its noun ('un chien noir', 'un banc en bois'), where
# German keeps the English order, so French cross-attention crosses.
FRENCH_EXAMPLES = [
    "A young girl is playing with a red ball in the park.",
    "A black dog is running after a white cat.",
    "A man in a green shirt is riding a blue bike.",
    "Two little boys are sitting on a wooden bench.",
    "A woman with long hair is drinking a hot coffee.",
]
REVERSE_EXAMPLES = ["3 1 4 1 5 9 2 6", "1 2 3 4 5 6 7", "9 8 7 0 0 1"]


def examples_for(checkpoint: Checkpoint) -> list[str]:
    if uses_digits(checkpoint):
        return REVERSE_EXAMPLES
    languages = known_languages(checkpoint)
    return FRENCH_EXAMPLES if languages and languages[1] == "fr" else EXAMPLES


def text_for_model(checkpoint: Checkpoint, current: str | None, typed: dict | None) -> tuple[str, dict]:
    """The input box's text for this model, and what the user typed for each kind of model (digits, words).

    Text that suits the model is left alone, so whatever the user typed meanwhile is never overwritten.
    Text for the other kind of model is put aside and replaced by what was last typed for this kind, or
    an example: switching to the digits model and back brings the user's sentence back.
    """
    typed = {**(typed or {})}
    if current and current.strip():
        typed[text_kind(current)] = current
    return suitable_text(checkpoint, current, {"digits": REVERSE_EXAMPLES[0], "text": EXAMPLES[0], **typed}), typed
