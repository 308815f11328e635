"""The offline pack in Chromium, opened from disk with every request beyond its folder refused: it translates as
``python -m transformer.translate --json`` does (the same tokens, every attention weight within 1e-4), for both
bundled translators, greedy and with their own beam search; and it says in the page what is missing."""

import contextlib
import gzip
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from pack_page import OpenedPack
from transformer import translate as translate_command
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from transformer.pack import make_pack
from ui.views.lessons import LESSONS
from ui.views.pack_lessons import pack_lessons

pytestmark = pytest.mark.slow
MODELS = ("multi30k-en-de", "multi30k-en-fr")
SENTENCES = 50
TOLERANCE = 1e-4
# Text a teacher may paste: spaces to collapse, characters NFKC changes, pieces no model knows, text that looks
# like a special token.
AWKWARD = ["  Two   dogs  play  ", "Ｆｕｌｌ-width ｌｅｔｔｅｒｓ ① and ½ cup", "A café's naïve cre\u0301me brûlée.",
           "<s> is not </s> and <pad> nor <unk>", "emoji 😀🙈 and 中文", "tab\tand\nnew line"]


def multi30k_sentences() -> list[str]:
    directory = os.environ.get("MULTI30K_DIR")
    if not directory:
        pytest.skip("MULTI30K_DIR is not set: Multi30K is not available")
    with gzip.open(Path(directory) / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as lines:
        return [line.strip() for _, line in zip(range(SENTENCES), lines)]


def command_line(model: str, sentences: list[str], beam: int | None) -> list[dict]:
    """What ``python -m transformer.translate --json`` prints for each sentence."""
    printed = io.StringIO()
    arguments = ["--json", "--checkpoint", str(REPOSITORY_CHECKPOINTS / model)] + (["--beam", str(beam)] if beam
                                                                                    else [])
    with contextlib.redirect_stdout(printed):
        assert translate_command.main(arguments + ["--", *sentences]) == 0
    return [json.loads(line) for line in printed.getvalue().splitlines()]


def largest_gap(ours: dict, theirs: dict) -> float:
    def walk(a, b):
        if isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b), "the maps' shapes differ"
            return max((walk(x, y) for x, y in zip(a, b)), default=0.0)
        return abs(a - b)
    return max(walk(ours["attention"][kind], theirs["attention"][kind]) for kind in ("encoder", "decoder", "cross"))


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return make_pack([REPOSITORY_CHECKPOINTS / model for model in MODELS], tmp_path_factory.mktemp("pack") / "pack",
                     lessons=pack_lessons)


@pytest.fixture(scope="module")
def opened(browser, pack):
    page = OpenedPack(browser, pack)
    assert page.settled() == "The multi30k-en-de translator is ready."
    yield page
    page.close()


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("beam", [1, None], ids=["greedy", "beam"])
def test_the_pack_translates_as_the_command_line_does(opened, model, beam):
    sentences = multi30k_sentences()
    expected = command_line(model, sentences, beam)
    for sentence, theirs in zip(sentences, expected):
        ours = opened.translate(sentence, model=model, **({"beam": beam} if beam else {}))
        assert ours["source_tokens"] == theirs["source_tokens"], sentence
        assert ours["target_tokens"] == theirs["target_tokens"], (
            f"{sentence!r}: tokens differ from step {first_difference(ours, theirs)}")
        assert ours["translation"] == theirs["translation"]
        assert ours["source"] == sentence
        assert largest_gap(ours, theirs) <= TOLERANCE, sentence
    assert opened.left == [] and opened.errors == []


def first_difference(ours: dict, theirs: dict) -> int:
    pairs = zip(ours["target_tokens"], theirs["target_tokens"])
    return next((step for step, (a, b) in enumerate(pairs) if a != b), min(map(len, (ours["target_tokens"],
                                                                                     theirs["target_tokens"]))))


def test_text_is_cut_into_the_pieces_sentencepiece_cuts_it_into(opened):
    expected = command_line("multi30k-en-de", AWKWARD + ["", "   "], beam=1)
    for sentence, theirs in zip(AWKWARD + ["", "   "], expected):
        ours = opened.translate(sentence, beam=1)
        assert ours["source_tokens"] == theirs["source_tokens"], repr(sentence)
        assert ours == theirs or largest_gap(ours, theirs) <= TOLERANCE, repr(sentence)


def test_a_word_model_is_cut_into_words_as_sentencepiece_cuts_it(browser, tmp_path):
    folder = make_pack([REPOSITORY_CHECKPOINTS / "reverse-tiny"], tmp_path / "pack")
    page = OpenedPack(browser, folder)
    try:
        assert page.settled() == "The reverse-tiny translator is ready."
        sentences = ["3 1 4 1 5", "9 x 2 yy zz 6", "  7   8 "]
        for sentence, theirs in zip(sentences, command_line("reverse-tiny", sentences, beam=1)):
            ours = page.translate(sentence, beam=1)
            assert ours["source_tokens"] == theirs["source_tokens"] and ours["target_tokens"] == theirs["target_tokens"]
        assert page.page.is_hidden("#lessons"), "a pack made without the app's lessons shows no lessons panel"
        lessons = (folder / "scripts" / "pack-lessons.js").read_text(encoding="utf-8")
        assert lessons == 'window.explorerPackLessons = {"lessons": [], "words": {}, "outlineMs": 0};\n'
    finally:
        page.close()


def test_the_page_translates_the_sentence_typed(opened):
    page = opened.page
    page.fill("#source", "Two dogs play in the snow.")
    page.check("input[value=beam]")
    page.click("#translate")
    page.wait_for_function("document.getElementById('target-tokens').children.length > 0")
    expected = command_line("multi30k-en-de", ["Two dogs play in the snow."], beam=None)[0]
    assert page.text_content("#translation") == expected["translation"]
    assert [item.text_content() for item in page.query_selector_all("#target-tokens li")] == expected["target_tokens"]


def test_a_file_the_pack_lacks_is_named_in_the_page(browser, pack, tmp_path):
    broken = tmp_path / "pack"
    shutil.copytree(pack, broken)
    (broken / "models" / "multi30k-en-de" / "weights-2.js").unlink()
    page = OpenedPack(browser, broken)
    try:
        assert page.settled() == "This pack lacks the file models/multi30k-en-de/weights-2.js: copy the whole folder again."
    finally:
        page.close()


def test_a_browser_without_webassembly_is_told_so_in_one_line(browser, pack):
    page = OpenedPack(browser, pack, before_load="delete window.WebAssembly;")
    try:
        assert page.settled().startswith("This browser cannot run WebAssembly, which the pack needs")
    finally:
        page.close()


# --- the views, drawn by the app's own scripts from numbers and frames made in the page ---------------------------

VIEW_SENTENCE = "A man in a blue shirt is standing on a ladder and cleaning the windows of a tall building."


def as_record(translation) -> dict:
    """A translation as engine.js inspects one (ui/static/pack/numbers.js reads it)."""
    maps = {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
            "cross": translation.cross_attention}
    return {"source_pieces": translation.source_pieces, "target_pieces": translation.target_pieces,
            "predicted_pieces": translation.predicted_pieces, "token_probs": translation.token_probs,
            "top_pieces": translation.top_pieces, "top_probs": translation.top_probs,
            "attention": {kind: [layer.flatten().tolist() for layer in weights] for kind, weights in maps.items()}}


def alike(ours, theirs, where="figure") -> list[str]:
    """Where two figures differ: numbers by more than the 4 decimals the page shows, anything else at all."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or set(ours) != set(theirs):
            return [f"{where}: keys {sorted(ours) if isinstance(ours, dict) else ours} != {sorted(theirs)}"]
        return [found for key in theirs for found in alike(ours[key], theirs[key], f"{where}.{key}")]
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return [f"{where}: {ours!r:.80} != {theirs!r:.80}"]
        return [found for i, (a, b) in enumerate(zip(ours, theirs)) for found in alike(a, b, f"{where}[{i}]")]
    if isinstance(theirs, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
        return [] if abs(ours - theirs) <= 1.01e-4 else [f"{where}: {ours} != {theirs}"]
    return [] if ours == theirs else [f"{where}: {ours!r:.80} != {theirs!r:.80}"]


@pytest.fixture(scope="module")
def view_translation():
    from transformer.files.checkpoint import load_checkpoint
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu").translate(VIEW_SENTENCE, 5)


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_page_has_the_apps_config_for_its_views(browser, pack, language):
    from ui.build import page_config
    page = OpenedPack(browser, pack, query=f"?lang={language}")
    try:
        config = page.page.evaluate("window.explorerPage.config")
        expected = page_config(language)
        assert config["explorer"] == expected["explorer"] and config["figures"] == expected["figures"]
    finally:
        page.close()


def app_numbers(translation, language: str) -> dict:
    """The app's numbers of a translation with the frame of each kind's figure, by "kind figure"."""
    from ui.views.choices import ATTENTION_KINDS
    from ui.views.explorer import FIGURES, page_numbers
    return {f"{kind} {figure}": page_numbers(translation, kind, language=language, figure=figure)
            for kind in ATTENTION_KINDS for figure in FIGURES}


@pytest.mark.parametrize("language", ["en", "de"])
def test_every_view_is_drawn_from_the_packs_numbers_as_the_app_draws_it(browser, pack, view_translation, language):
    from ui.views.choices import ATTENTION_KINDS, VIEWS
    steps = view_translation.num_steps
    selections = [{"kind": kind, "view": view, "layer": layer, "head": head, "average": average, "step": step}
                  for kind in ATTENTION_KINDS for view in VIEWS for layer, head, average, step in
                  ((1, 1, False, 1), (2, 3, False, steps // 2), (3, 4, True, steps))]
    page = OpenedPack(browser, pack, query=f"?lang={language}")
    try:
        drawn = page.answer("""([record, app, selections]) => {
            const ours = explorerPackNumbers.pageNumbers(record);
            return selections.map((chosen) => {
              // The app sends a view's frame as it is first shown (explorer.js asks for it): here, all at once.
              const name = window.explorerPage.config.explorer.viewFigures[chosen.view][chosen.average ? "mean" : "heads"];
              return [explorer.figures(ours, chosen), explorer.figures(app[`${chosen.kind} ${name}`], chosen)];
            });
        }""", [as_record(view_translation), app_numbers(view_translation, language), selections])
    finally:
        page.close()
    for chosen, (ours, theirs) in zip(selections, drawn):
        assert theirs["heatmap"] is not None
        assert alike(ours, theirs) == [], chosen


@pytest.mark.parametrize("language", ["en", "fr"])
def test_axe_finds_nothing_serious_on_the_pack_translated_and_drawn(browser, pack, language):
    pytest.importorskip("axe_playwright_python.sync_playwright")
    from accessibility import serious_violations
    page = OpenedPack(browser, pack, query=f"?lang={language}")
    try:
        page.settled()
        page.page.click("#translate")
        page.page.wait_for_function("document.querySelector('#attention-plot .js-plotly-plot') && "
                                    "window.explorerCharts.pending() === 0", timeout=60_000)
        found = {"translated": serious_violations(page.page)}
        page.page.check("input[name=view][value='model view: every layer and head']")
        page.page.check("#large-text")
        page.page.check("#safe-colours")
        page.page.wait_for_function("window.explorerCharts.pending() === 0")
        found["model view, large text, safe colours"] = serious_violations(page.page)
        page.page.locator("#positions").scroll_into_view_if_needed()
        page.page.wait_for_function("document.querySelectorAll('#positions .js-plotly-plot').length === 3 && "
                                    "window.explorerCharts.pending() === 0", timeout=60_000)
        found["positional encoding"] = serious_violations(page.page)
        page.page.click("#lessons summary")
        page.page.click("#glossary summary")
        page.page.select_option("#lesson", "word_order")
        page.page.click("#show-me")
        page.page.wait_for_function("document.querySelectorAll('#lesson-pair .js-plotly-plot').length === 2 && "
                                    "window.explorerCharts.pending() === 0", timeout=60_000)
        page.page.click("#reveal")
        found["a lesson shown, its answer revealed, the glossary"] = serious_violations(page.page)
    finally:
        page.close()
    assert found == {"translated": [], "model view, large text, safe colours": [], "positional encoding": [],
                     "a lesson shown, its answer revealed, the glossary": []}


def test_forced_decoding_is_drawn_from_the_packs_numbers_as_the_app_draws_it(opened, view_translation):
    from transformer.files.checkpoint import load_checkpoint
    from transformer.paper.translation import forced_decode
    from ui.views.translate import forced_figures
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    own = "Ein Mann in einem blauen Hemd steht auf einer Leiter."
    translation = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                                VIEW_SENTENCE, own)
    for layer, head in ((None, None), (1, 2)):
        record = {**as_record(translation), "log_prob": translation.log_prob}
        ours = opened.answer("([record, layer, head]) => explorerPackNumbers.forcedFigures(record, layer, head)",
                             [record, layer, head])
        theirs = [json.loads(figure.to_json()) for figure in forced_figures(translation, layer, head)]
        assert alike(ours, theirs) == [], (layer, head)
    # The pack's own forced decoding gives the command line's tokens for the same texts.
    scored = opened.answer("([source, own]) => explorerPack.forced(source, own)", [VIEW_SENTENCE, own])
    assert scored["target_pieces"] == translation.target_pieces and scored["predicted_pieces"] == translation.predicted_pieces
    assert abs(scored["log_prob"] - translation.log_prob) < 1e-3


def test_a_lessons_pair_is_drawn_as_the_app_draws_it(opened, view_translation):
    """A run of a lesson's pair is `ui/views/lessons.py:drawn`'s map: the cross-attention at a head or the mean."""
    from ui.views.translate import map_figure
    for layer, head in ((3, 2), (3, None)):
        ours = opened.answer("([record, layer, head]) => explorerPackNumbers.crossMap(record, layer, head)",
                             [as_record(view_translation), layer, head])
        theirs = json.loads(map_figure(view_translation, "cross", layer, head).to_json())
        assert alike(ours, theirs) == [], (layer, head)


@pytest.mark.parametrize("beam", [1, None], ids=["greedy", "beam"])
def test_each_step_drawn_while_decoding_is_the_app_s_live_step(opened, beam):
    """The pack's live steps (explorer.js's `live`, from numbers.js) equal the app's for the same search: the
    library's watched search, drawn by ui/views/live.py, of the same sentence."""
    from transformer.files.checkpoint import load_checkpoint
    from transformer.paper.sentences import encode_source
    from transformer.paper.translation import translate_together
    from ui.views.live import live_numbers
    checkpoint = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    beams = beam or int(checkpoint.search.get("beam_size", 5))
    reports = []
    translate_together(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, [VIEW_SENTENCE],
                       beams, checkpoint.length_penalty, rules=checkpoint.rules,
                       watch=lambda progress: reports.extend(progress) or True)
    ids, _ = encode_source(checkpoint.model, checkpoint.source_tokenizer, VIEW_SENTENCE)
    source = checkpoint.source_tokenizer.pieces(ids)
    theirs = [live_numbers(checkpoint, report, source, 3, None, beams, 1) for report in reports]
    ours = opened.answer("""async ([text, beam, theirs]) => {
        const steps = [];
        await explorerPack.translation(text, {beam, watch: (report) => {
          steps.push(explorerPackNumbers.liveNumbers(report, 3, 0, 1));
        }});
        return steps.map((step, i) => ({step, drawn: explorer.liveFigures(step),
                                         theirs: theirs[i] && explorer.liveFigures(theirs[i])}));
    }""", [VIEW_SENTENCE, beam or 0, theirs])
    assert len(ours) == len(theirs)
    for step, (drawn, b) in enumerate(zip(ours, theirs), start=1):
        a = drawn["step"]
        assert alike(drawn["drawn"], drawn["theirs"]) == [], step
        frames = ("candidatesFrame", "sourcesFrame")  # drawn above; the app's shares its repeated parts (frames.py)
        assert alike({k: v for k, v in a.items() if k not in frames}, {k: v for k, v in b.items() if k not in frames}) \
            == [], step


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_positional_encodings_views_are_drawn_as_the_app_draws_them(browser, pack, language):
    from ui.views.positions import positional_views
    asked = [(128, 64, "0, 1, 10, 11, 60"), (9, 8, "0; 3, x, 99"), (16, 12, ""),
             (64, 20, ", ".join(str(d) for d in range(14)) + ", 2")]
    page = OpenedPack(browser, pack, query=f"?lang={language}")
    try:
        drawn = page.answer("(asked) => asked.map((one) => explorerPackPositions.views(...one).slice(0, 3))", asked)
    finally:
        page.close()
    for one, ours in zip(asked, drawn):
        theirs = [json.loads(figure.to_json()) for figure in positional_views(*one, language)]
        assert alike(ours, theirs) == [], one


def test_another_translator_clears_what_the_last_one_showed_and_a_pasted_emoji_is_noted(opened):
    page = opened.page
    page.fill("#source", "A dog 🐶 runs.")
    page.press("#source", "Enter")
    page.wait_for_function("window.explorer.drawn() && window.explorerCharts.pending() === 0", timeout=60_000)
    assert "unknown to this model's vocabulary" in page.text_content("#notes")
    assert page.evaluate("document.activeElement.id") == "source"
    page.select_option("#model", "multi30k-en-fr")
    page.wait_for_function("!document.getElementById('translate').disabled", timeout=60_000)
    assert page.text_content("#translation") == "" and page.evaluate("window.explorer.drawn()") is None
    page.select_option("#model", "multi30k-en-de")
    page.wait_for_function("!document.getElementById('translate').disabled", timeout=60_000)


LESSONS_PACKED = ("where_each_word_looks", "no_future", "word_order")


def test_show_me_sets_the_page_up_as_the_apps_show_me_and_reveal_gives_the_models_answer(opened):
    page, by_key = opened.page, {lesson.key: lesson for lesson in LESSONS}
    page.set_viewport_size({"width": 1280, "height": 720})
    page.click("#lessons summary")
    assert [option.get_attribute("value") for option in page.query_selector_all("#lesson option")] == \
        list(LESSONS_PACKED)
    for key in LESSONS_PACKED:
        lesson = by_key[key]
        page.select_option("#lesson", key)
        page.click("#show-me")
        page.wait_for_function("!document.getElementById('show-me').disabled && window.explorerCharts.pending() === 0",
                               timeout=60_000)
        expected = command_line(lesson.model, [lesson.sentence], beam=lesson.beam)[0]
        assert page.text_content("#translation") == expected["translation"], key
        assert page.input_value("#model") == lesson.model and page.input_value("#step") == str(lesson.step)
        assert page.is_checked(f"input[name=kind][value={lesson.kind}]")
        assert page.is_checked(f"input[name=view][value='{lesson.view}']")
        assert page.evaluate("window.explorer.drawn().selection.step") == lesson.step, f"{key}: its step drawn"
        assert (page.input_value("#layer"), page.input_value("#head"), page.is_checked("#average")) == \
            (str(lesson.layer), str(lesson.head), lesson.average)
        top = page.evaluate(f"document.getElementById('{lesson.focus}').getBoundingClientRect().top")
        assert -1 < top < 720, f"{key}: the view it is about is in sight (its top, to a pixel)"
        assert page.evaluate("document.activeElement.id") == lesson.focus, f"{key}: the keyboard is where it looks"
        assert page.text_content("#question-answer") == ""
        page.click("#reveal")
        assert page.text_content("#question-answer").startswith("The model's answer: ")
        assert page.locator("#question-choices label.right").count() == 1
    pair = [page.text_content(f"#pair-{side}-caption") for side in ("left", "right")]
    translations = [command_line(model, [by_key["word_order"].sentence], beam=5)[0]["translation"] for model in MODELS]
    assert [caption.split(" → ")[-1] for caption in pair] == translations
    assert page.locator("#lesson-pair .js-plotly-plot").count() == 2
    for side in ("left", "right"):  # at the lesson's layer and head
        assert "layer 3, head 2" in page.text_content(f"#pair-{side}-plot .infolayer")
    page.select_option("#lesson", LESSONS_PACKED[0])
    assert page.is_hidden("#lesson-pair"), "another lesson's pair is put away"
    assert opened.errors == [] and opened.left == []


def test_the_lessons_panel_speaks_the_pages_language_and_names_the_lessons_that_need_the_app(browser, pack):
    page = OpenedPack(browser, pack, query="?lang=de")
    try:
        page.settled()
        assert page.page.text_content("#lessons summary") == "Lektionen für den Unterricht"
        assert page.page.text_content("#question-text").startswith("In Schritt ")
        needs_app = page.page.locator("#lessons-app-only li").all_text_contents()
        assert len(needs_app) == len(LESSONS) - len(LESSONS_PACKED) and needs_app[0].startswith("3. ")
        assert "<s>" in page.page.text_content("#glossary-lines")
        page.page.focus("#model")  # a keyboard's arrow chooses another translator and stays on the list
        page.page.keyboard.press("ArrowDown")
        page.page.wait_for_function("!document.getElementById('translate').disabled && "
                                    "document.getElementById('status').textContent.includes('multi30k-en-fr')")
        assert page.page.evaluate("document.activeElement.id") == "model"
        page.page.click("#lessons summary")
        page.page.select_option("#lesson", "word_order")
        page.page.fill("#source", "Two dogs play.")
        page.page.check("#large-text")
        with page.page.expect_navigation():
            page.page.select_option("#language", "fr")  # the page comes back in French, as it was left
        page.page.wait_for_function("document.documentElement.lang === 'fr' && "
                                    "document.getElementById('lesson-title').textContent.startsWith('5. ')")
        assert page.page.input_value("#lesson") == "word_order" and page.page.input_value("#source") == "Two dogs play."
        assert page.page.is_checked("#large-text") and page.page.evaluate("document.getElementById('lessons').open")
        assert page.page.input_value("#model") == "multi30k-en-fr"
    finally:
        page.close()
