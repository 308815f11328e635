"""The language tables taken from Unicode CLDR are what tools/language_tables.py writes from Babel's copy of it:
every language a multilingual model writes is one language whatever its code, named in each language of the page
where CLDR names it there."""

import importlib.util
from pathlib import Path

from transformer.files.multilingual import CODES, iso_code
from ui.views.text import language_name

TOOL = Path(__file__).resolve().parents[2] / "tools" / "language_tables.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("language_tables", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_tables_in_the_repository_are_what_the_tool_writes_from_cldr():
    tool = load_tool()
    for path, table in tool.tables().items():
        assert path.read_text(encoding="utf-8") == tool.text(table), f"{path}: run python tools/language_tables.py"


def test_a_language_written_three_ways_is_one_language():
    assert {iso_code(code) for code in ("deu_Latn", "de_DE", "de")} == {"de"}
    assert iso_code("zsm_Latn") == iso_code("ms_MY") == "ms"
    assert iso_code("nob_Latn") == iso_code("no") == "no", "NLLB's Bokmål is M2M100's Norwegian"


def test_languages_a_model_lists_apart_stay_apart_where_cldr_would_merge_them():
    for one, other in (("ajp_Arab", "apc_Arab"), ("twi_Latn", "aka_Latn"), ("prs_Arab", "pes_Arab")):
        assert iso_code(one) != iso_code(other), (one, other)
    assert (language_name(iso_code("prs_Arab")), language_name(iso_code("twi_Latn"))) == ("Dari", "Twi")


def test_nearly_every_language_of_nllb_is_named_in_each_language_of_the_page():
    languages = {iso_code(code) for code in CODES["nllb"]}
    for page in ("en", "de", "fr"):
        unnamed = {code for code in languages if language_name(code, page) is None}
        assert len(unnamed) <= 15, (page, sorted(unnamed))  # CLDR names all but about a dozen, in all three
    assert (language_name("ace", "en"), language_name("ace", "de")) == ("Acehnese", "Aceh")
