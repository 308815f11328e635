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


def tables() -> dict[Path, dict[str, str]]:
    """Each file's contents, from the models' codes and Babel's copy of CLDR."""
    from babel import Locale
    from babel.core import get_global

    cldr_aliases = get_global("language_aliases")
    written = sorted({code.split("_")[0] for codes in json.loads(CODES.read_text(encoding="utf-8")).values()
                      for code in codes})
    aliases = {code: cldr_aliases[code] for code in written if cldr_aliases.get(code, code) != code}
    languages = sorted({aliases.get(code, code) for code in written})
    names = {page: Locale(page).languages for page in PAGE_LANGUAGES}
    named = [code for code in languages if all(code in names[page] for page in PAGE_LANGUAGES)]
    files = {ALIASES: aliases}
    for page in PAGE_LANGUAGES:
        files[LOCALES / page / "language_names.json"] = {f"language_name.{code}": names[page][code] for code in named}
    return files


def text(table: dict[str, str]) -> str:
    return json.dumps(table, ensure_ascii=False, indent=2) + "\n"


def main() -> None:
    for path, table in tables().items():
        path.write_text(text(table), encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(table)} entries")


if __name__ == "__main__":
    main()
