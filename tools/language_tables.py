"""Write the language tables taken from Unicode CLDR (through Babel): which language each multilingual model's
code writes, and every such language's name in each language of the page.

    pip install babel && python tools/language_tables.py

- ``transformer/files/language_aliases.json``: the codes of ``languages.json`` that CLDR writes otherwise
  ("deu" is "de", "arb" is "ar", "zsm" is "ms"), so that "deu_Latn", "de_DE" and "de" are one language;
- ``ui/locales/<language>/language_names.json``: ``language_name.<code>`` for each of those languages that CLDR
  names in every language of the page ("Deutsch", "German", "allemand").

CLDR is the Unicode Consortium's (Unicode License v3); ``tests/app/test_language_tables.py`` holds the files to
what this script writes.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODES = ROOT / "transformer" / "files" / "languages.json"
ALIASES = ROOT / "transformer" / "files" / "language_aliases.json"
LOCALES = ROOT / "ui" / "locales"
PAGE_LANGUAGES = ("en", "de", "fr")
# Where CLDR's alias is not what the models mean: NLLB's Norwegian Bokmål is M2M100's Norwegian ("no"), Twi is a
# language of its own ("tw") beside Akan, which NLLB lists apart, and M2M100 writes Northern Sotho "ns".
MODELS_MEAN = {"nob": "no", "twi": "tw", "ns": "nso"}


def tables() -> dict[Path, dict[str, str]]:
    """Each file's contents, from the models' codes and Babel's copy of CLDR."""
    from babel import Locale
    from babel.core import get_global

    families = json.loads(CODES.read_text(encoding="utf-8"))
    cldr_aliases = get_global("language_aliases")
    # A language of a region stays a language of its own, named as CLDR names it there: Dari, "fa_AF", which NLLB
    # lists apart from Persian.
    regional = {code: alias for code, alias in cldr_aliases.items() if "_" in alias}
    cldr = {**{code: alias for code, alias in cldr_aliases.items() if code not in regional}, **MODELS_MEAN}
    written = sorted({code.split("_")[0] for codes in families.values() for code in codes})
    aliases = {code: cldr[code] for code in written
               if cldr.get(code, code) != code and not merges(code, cldr, families)}
    languages = sorted({aliases.get(code, code) for code in written})
    names = {page: Locale(page).languages for page in PAGE_LANGUAGES}

    def name(page: str, code: str) -> str | None:
        return names[page].get(code) or names[page].get(regional.get(code, ""))
    named = [code for code in languages if all(name(page, code) for page in PAGE_LANGUAGES)]
    files = {ALIASES: aliases}
    for page in PAGE_LANGUAGES:
        files[LOCALES / page / "language_names.json"] = {f"language_name.{code}": name(page, code) for code in named}
    return files


def merges(code: str, aliases: dict[str, str], families: dict[str, list[str]]) -> bool:
    """Whether the alias of ``code`` would make it one language with another code a family lists beside it (NLLB's
    South Levantine Arabic, ajp, which CLDR writes as the North Levantine apc NLLB also lists): kept apart."""
    target = aliases[code]
    for codes in families.values():
        firsts = {listed.split("_")[0] for listed in codes}
        if code in firsts and any(other != code and aliases.get(other, other) == target for other in firsts):
            return True
    return False


def text(table: dict[str, str]) -> str:
    return json.dumps(table, ensure_ascii=False, indent=2) + "\n"


def main() -> None:
    for path, table in tables().items():
        path.write_text(text(table), encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(table)} entries")


if __name__ == "__main__":
    main()
