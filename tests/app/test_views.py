"""The explorer's logic, as the app uses it: input checks, views of a translation, the model registry."""

import base64
import csv
import dataclasses
import json
import shutil
from urllib.parse import parse_qsl

import numpy as np

import gradio as gr
import pytest
import torch

from transformer import errors
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError, load_checkpoint
from transformer.inside import contributions, interventions, one_head
from transformer.paper.translation import translate
from ui.drawing import figures
from ui import services
from ui.runtime import numbers
from ui.runtime.language import table as words_of
from ui.views import analysis as analysis_views
from ui.views import choices
from ui.views import experiments as experiment_views
from ui.views import exports
from ui.views import model as model_views
from ui.views import positions
from ui.views import share
from ui.views import text
from ui.views import explorer as explorer_views
from ui.views import translate as translate_views
from helpers import panels_drawn

DRAWN_TO = 0.5 * 10 ** -translate_views.WEIGHT_DECIMALS  # weights are drawn rounded

@pytest.fixture(scope="module")
def registry():
    return services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")


@pytest.fixture(scope="module")
def reverse(registry):
    return registry.get("reverse-tiny")


@pytest.fixture(scope="module")
def bundled(registry):
    return registry.get("multi30k-en-de")


@pytest.fixture(scope="module")
def result(reverse):
    return translate_views.run_translation(reverse, "3 1 4 1 5 9", "beam", 4)


@pytest.mark.parametrize("typed", ["", "   ", "\n\t", None])
def test_empty_input_gets_a_clear_message(typed):
    with pytest.raises(errors.InputError, match="empty"):
        text.clean_text(typed)


@pytest.mark.parametrize("typed", ["\u200b", "\ufeff", "\ufffd", " \u200b\u200d \ufffd "])
def test_text_of_only_invisible_characters_is_refused_not_translated(typed):
    with pytest.raises(errors.InputError, match="only invisible"):
        text.clean_text(typed)


def test_a_huge_input_is_cut_before_any_other_work(monkeypatch):
    looked_at = []
    category = text.unicodedata.category
    monkeypatch.setattr(text.unicodedata, "category", lambda ch: looked_at.append(ch) or category(ch))
    cleaned, notes = text.clean_text("a " * 5_000_000)  # 10 MB
    assert len(cleaned) <= text.MAX_INPUT_CHARS
    assert notes == [f"The input was cut to its first {text.MAX_INPUT_CHARS} characters."]
    assert len(looked_at) <= 2 * text.MAX_RAW_CHARS, "only the first few thousand characters are looked at"


def test_control_characters_are_replaced_and_noted():
    cleaned, notes = text.clean_text("3 1\x00 4\x07")
    assert cleaned == "3 1 4" and notes


def test_text_direction_overrides_are_removed_so_the_sentence_shows_in_reading_order():
    cleaned, notes = text.clean_text("A man \u202eedir\u202c a horse \u2067here\u2069.")
    assert cleaned == "A man edir a horse here."
    assert notes == ["Text-direction control characters were removed."]
    assert text.clean_text("A family \U0001F468\u200d\U0001F469 waves.")[1] == [], "joiners in emoji stay"


def test_very_long_input_is_cut_with_a_note():
    cleaned, notes = text.clean_text("a" * 5000)
    assert len(cleaned) == text.MAX_INPUT_CHARS and "cut" in notes[0]


def test_input_far_longer_than_training_sentences_gets_a_note(reverse):
    long = translate_views.run_translation(reverse, " ".join("31415926" * 9), "greedy")
    assert any("Models here learn from far shorter sentences" in note for note in long.notes)
    assert not any("far shorter" in note for note in translate_views.run_translation(reverse, "3 1 4", "greedy").notes)


@pytest.mark.parametrize("text", ["😀 🚀", "مرحبا بالعالم", "<img src=x onerror=alert(1)>", "日本語のテキスト"])
def test_unusual_scripts_get_a_translation_or_a_note(reverse, text):
    outcome = translate_views.run_translation(reverse, text, "greedy")
    assert outcome.translation.num_steps >= 1
    assert all(isinstance(piece, str) for piece in outcome.translation.source_pieces)


@pytest.mark.parametrize("text, note", [
    ("😀 🚀", "None of the sentence"), ("1 😀 🚀", "Little of the sentence"),
    ("1 2 3 😀", "1 source piece(s) are unknown"), ("1 2 3", None)])
def test_a_sentence_the_model_cannot_read_is_said_to_be_so(reverse, text, note):
    notes = [n for n in translate_views.run_translation(reverse, text, "greedy").notes if "vocabulary" in n]
    if note is None:
        assert notes == []
    else:
        assert len(notes) == 1 and note in notes[0]


@pytest.mark.parametrize("text, language", [
    ("Ein Mann fährt Fahrrad auf der Straße.", "German"), ("Der Hund schläft.", "German"),
    ("Un homme fait du vélo dans la rue.", "French"), ("Dvě děti si hrají v parku.", "Czech"),
    ("Der Hund schla\u0308ft.", "German"),  # ä as a plus a combining mark, as some pastes bring it
    ("A man rides his bike on the street.", None), ("Die Hard is the film of the year.", None),
    ("A naïve tourist takes a photo of the façade.", None), ("Kindergarten", None)])
def test_a_sentence_in_another_language_than_the_model_reads_gets_a_note(registry, text, language):
    bundled = registry.get("multi30k-en-de")
    notes = [n for n in translate_views.run_translation(bundled, text, "greedy").notes if "looks like" in n]
    if language is None:
        assert notes == []
    else:
        assert notes == [f"This looks like {language}. The model reads English (it learned English→German), so its "
                         "translation of other languages is mostly made up."]


def test_each_kind_of_model_offers_examples_of_its_own(registry, reverse):
    assert text.examples_for(registry.get("multi30k-en-de")) == text.EXAMPLES
    assert text.examples_for(registry.get("multi30k-en-fr")) == text.FRENCH_EXAMPLES
    assert text.examples_for(reverse) == text.REVERSE_EXAMPLES
    french = registry.get("multi30k-en-fr")
    assert translate_views.run_translation(french, "Un chien noir court dans le parc.", "greedy").notes == [
        "This looks like French. The model reads English (it learned English→French), so its translation of other "
        "languages is mostly made up."]


def test_an_empty_translation_is_said_to_be_so(reverse):
    words = translate_views.run_translation(reverse, "The dog runs.", "greedy")  # a digits model, given words
    assert words.translation.text == ""
    assert "The translation is empty: the model ended the sentence without producing a word." in words.notes
    assert not any("empty" in note for note in translate_views.run_translation(reverse, "3 1 4", "greedy").notes)


def test_no_language_note_where_the_model_does_not_say_which_languages_it_reads(reverse):
    uploaded = dataclasses.replace(reverse, info={**reverse.info, "source_lang": "en", "target_lang": "de",
                                                  "training": {"data": "pairs.tsv"}})
    assert text.language_note(uploaded, "Ein Mann fährt auf der Straße.") is None


def test_heatmap_hover_names_decoding_steps_as_the_step_slider_does(result):
    tr = result.translation
    for view in choices.VIEWS:
        cross = explorer_views.attention_figure(tr, "cross", view).data[0].text
        encoder = explorer_views.attention_figure(tr, "encoder", view).data[0].text
        # a grid's cells name their panel first
        assert cross[0][0].split("<br>")[-1].startswith(f"step 1: {tr.predicted_pieces[0]} → position 0: "), view
        assert encoder[0][0].split("<br>")[-1].startswith(f"position 0: {tr.source_pieces[0]} → position 0: "), view


def test_attention_views_cover_every_kind_and_view(result):
    tr = result.translation
    layers, heads, steps, sources = tr.cross_attention.shape
    one, all_heads, model_view = choices.VIEWS
    panels = {(one, False): 1, (one, True): 1, (all_heads, False): heads, (all_heads, True): 1,
              (model_view, False): layers * heads, (model_view, True): layers}
    for key, kind in choices.ATTENTION_KINDS.items():
        weights = translate_views.attention_tensor(tr, key)
        for (view, average), count in panels.items():
            (trace,) = explorer_views.attention_figure(tr, kind, view, layer=2, head=3, average_heads=average).data
            assert panels_drawn(trace) == count, (kind, view, average)
            grid = trace.meta.get(figures.GRID_META) if isinstance(trace.meta, dict) else None
            shape = (grid["queries"], grid["keys"]) if grid else np.asarray(trace.z).shape
            assert shape == weights.shape[2:], (kind, view)
    single = explorer_views.attention_figure(tr, "cross", one, layer=2, head=3)
    np.testing.assert_allclose(np.asarray(single.data[0].z), tr.cross_attention[1, 2].numpy(), atol=DRAWN_TO)


def test_cross_attention_rows_are_labelled_by_the_token_being_produced(result):
    tr = result.translation
    fig = explorer_views.attention_figure(tr, "cross", choices.VIEWS[0], 1, 1)
    assert list(fig.layout.yaxis.ticktext) == [figures.escape(p) for p in tr.predicted_pieces]
    assert list(fig.layout.xaxis.ticktext) == [figures.escape(p) for p in tr.source_pieces]


def test_layer_and_head_selectors_are_clamped_to_the_model(result):
    fig = explorer_views.attention_figure(result.translation, "encoder", choices.VIEWS[0], layer=99, head=-3)
    assert "<br><sup>layer 2, head 1 ·" in fig.layout.title.text, "on a line of its own, where no screen cuts it"
    heads = explorer_views.attention_figure(result.translation, "encoder", choices.VIEWS[1], layer=99)
    assert "<br><sup>layer 2, all heads · rows:" in heads.layout.title.text
    averaged = explorer_views.attention_figure(result.translation, "encoder", choices.VIEWS[2], average_heads=True)
    assert "<br><sup>every layer, mean of heads · rows:" in averaged.layout.title.text


def test_reverse_model_attends_anti_diagonally(result):
    """The textbook picture: producing the i-th output, the model looks at the i-th source token from the end."""
    tr = result.translation
    cross = tr.cross_attention.mean(dim=(0, 1))  # mean over layers and heads: (target, source)
    source_length = len(tr.source_pieces) - 1  # without </s>
    hits = sum(int(cross[i, :source_length].argmax()) == source_length - 1 - i for i in range(source_length))
    assert hits >= source_length - 1


def test_step_view_reveals_tokens_up_to_the_step(result):
    tr = result.translation
    view = translate_views.step_view(tr, 2)
    assert [piece.strip() for piece, _ in view.revealed[:2]] == tr.predicted_pieces[:2]
    assert view.revealed[1][1] == "current" and view.revealed[-1][0] == "…"
    assert list(view.candidates.data[0].y) == list(range(len(tr.top_pieces[1])))
    assert list(view.source_attention.data[0].y) == pytest.approx(tr.cross_attention[-1, :, 1].mean(0).tolist(),
                                                                  abs=DRAWN_TO)
    assert view.caption.startswith(f"Step 2 of {tr.num_steps}: the model produced")
    moved = translate_views.step_view(tr, 3)
    assert list(moved.candidates.layout.yaxis.ticktext) == [f"{figures.escape(piece)}  {p:.1%}"
                                                            for piece, p in zip(tr.top_pieces[2], tr.top_probs[2])]


def test_step_view_clamps_out_of_range_steps(result):
    tr = result.translation
    for asked, shown in ((999, tr.num_steps), (0, 1), (-5, 1)):
        view = translate_views.step_view(tr, asked)
        assert view.step == shown and view.caption.startswith(f"Step {shown} of {tr.num_steps}")
    assert translate_views.step_view(tr, 999).revealed[-1][0] != "…"


def decoded(block: str, heads: int, rows: int, columns: int) -> torch.Tensor:
    """A map block as the page reads it (ui/static/explorer.js): little-endian 16-bit 1/10^4s, heads then mean."""
    values = torch.frombuffer(bytearray(base64.b64decode(block)), dtype=torch.int16).to(torch.int32) & 0xFFFF
    return values.double().reshape(heads + 1, rows, columns) / 10 ** translate_views.WEIGHT_DECIMALS


def test_a_translations_numbers_hold_every_map_the_page_draws_as_the_server_rounds_it(bundled):
    """Every kind's layer, each head and their mean, to the 4 decimals the hover shows, with the labels, the step
    view's candidates and captions: all the page needs to draw every view of the Translate tab."""
    tr = translate_views.run_translation(bundled, "Two dogs play in the snow near a red house.").translation
    numbers = json.loads(json.dumps(explorer_views.page_numbers(tr, sent=7), allow_nan=False))  # as sent
    heads = tr.cross_attention.shape[1]
    assert numbers["sent"] == 7 and numbers["heads"] == heads and numbers["produced"] == tr.predicted_pieces
    assert [step["caption"] for step in numbers["steps"]] == [
        translate_views.step_view(tr, step).caption for step in range(1, tr.num_steps + 1)]
    candidates = figures.candidates(tr.top_pieces[0], tr.top_probs[0], tr.predicted_pieces[0])
    assert numbers["steps"][0] == {**candidates, "caption": numbers["steps"][0]["caption"]}, \
        "the candidates as their chart shows them"
    for kind in choices.ATTENTION_KINDS:
        rows, columns, row_title, column_title = translate_views.attention_axes(tr, kind)
        maps = numbers["maps"][kind]
        assert (maps["rows"], maps["columns"], maps["rowTitle"], maps["columnTitle"]) == (rows, columns, row_title,
                                                                                           column_title)
        assert None not in maps["blocks"], "a short sentence brings every layer at once"
        for layer, block in enumerate(maps["blocks"], start=1):
            weights = decoded(block, heads, len(rows), len(columns))
            for head in [*range(1, heads + 1), None]:
                expected, _ = translate_views.one_map(tr, kind, layer, head)
                assert torch.equal(weights[heads if head is None else head - 1], expected), (kind, layer, head)


def test_a_long_translation_brings_the_maps_shown_first_and_the_others_when_asked(bundled):
    tr = translate_views.run_translation(bundled, "A dog runs.").translation
    numbers = explorer_views.page_numbers(tr, "Decoder self-attention", 2, most=1)
    sent = {kind: [block is not None for block in maps["blocks"]] for kind, maps in numbers["maps"].items()}
    assert sent == {"encoder": [False, False, False], "decoder": [False, True, False], "cross": [False, True, False]}
    every = explorer_views.page_numbers(tr)["maps"]
    assert translate_views.map_block(tr, "encoder", 3) == every["encoder"]["blocks"][2], "asked for, as sent at once"


def test_forced_decoding_says_when_the_translation_holds_pieces_the_model_cannot_read(reverse):
    assert translate_views.run_forced(reverse, "1 2 3", "3 2 1").notes == []
    notes = translate_views.run_forced(reverse, "1 2 3", "3 😀 1 ☃").notes
    assert notes == ["2 piece(s) of your translation are unknown to this model's vocabulary (shown as <unk>): their "
                     "probabilities say little about the words you wrote."]


def test_forced_decoding_scores_a_user_translation(reverse):
    good = translate_views.run_forced(reverse, "1 2 3", "3 2 1").translation
    bad = translate_views.run_forced(reverse, "1 2 3", "1 2 3").translation
    assert good.log_prob > bad.log_prob
    probabilities, attention = translate_views.forced_figures(good)
    assert len(probabilities.data[0].y) == len(good.predicted_pieces)
    assert attention.data[0].text[0][0].startswith("step 1: "), "rows are the steps that read the translation"
    with pytest.raises(errors.InputError, match="own translation"):
        translate_views.run_forced(reverse, "1 2 3", "  ")


def test_attention_download_is_the_json_contract(result, tmp_path):
    path = exports.attention_json_file(result.translation, str(tmp_path))
    payload = json.loads(open(path).read())
    assert {"source", "translation", "source_tokens", "target_tokens", "attention"} <= set(payload)
    assert set(payload["attention"]) == {"encoder", "decoder", "cross"}


def test_registry_lists_bundled_models_and_refuses_other_names(registry):
    assert "reverse-tiny" in registry.names()
    for name in ["../../etc/passwd", "/tmp", "nonexistent"]:
        with pytest.raises(CheckpointError, match="no checkpoint named"):
            registry.get(name)


def test_registry_keeps_serving_when_a_listed_checkpoint_is_broken(tmp_path):
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / "good")
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / "broken")
    weights = tmp_path / "broken" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    registry = services.ModelRegistry([tmp_path], device="cpu")
    good = registry.get("good")
    with pytest.raises(CheckpointError, match="unreadable or truncated"):
        registry.get("broken")
    assert registry.get("good") is good


def test_parameter_table_adds_up_and_reads_with_thousands_separators(registry):
    bundled = registry.get("multi30k-en-de")
    table = model_views.parameter_table(bundled)
    rows = table.data.values.tolist()
    assert rows[-1][0] == "total"
    assert sum(row[1] for row in rows[:-1]) == rows[-1][1] == bundled.model.num_parameters()
    assert sum(row[2] for row in rows[:-1]) == pytest.approx(1.0)
    shown = gr.Dataframe(interactive=False).postprocess(table)
    assert shown.data[-1] == ["total", bundled.model.num_parameters(), 1.0], "sorted as numbers"
    assert shown.metadata["display_value"][-1] == ["total", f"{bundled.model.num_parameters():,}", "100.0%"]


def test_positional_lines_draw_each_dimension_once_name_it_and_stay_readable():
    _, single, _ = positions.positional_views(64, 50, "-3, 2")
    assert [trace.name for trace in single.data] == ["dim 2 (sin)"] and single.layout.showlegend
    _, repeated, _ = positions.positional_views(64, 50, ", ".join(["0"] * 200 + ["1"]))
    assert [trace.name for trace in repeated.data] == ["dim 0 (sin)", "dim 1 (cos)"]
    _, many, _ = positions.positional_views(64, 50, ", ".join(map(str, range(40))))
    assert len(many.data) == positions.MAX_PE_LINES and "the first 12 of 40 dimensions" in many.layout.title.text


def test_positional_views_accept_odd_and_out_of_range_values():
    matrix, lines, dots = positions.positional_views(31, 10_000, "0, 3, x, 999")
    assert len(matrix.data[0].z[0]) == 32 and len(matrix.data[0].z) == 512
    assert "d_model 31 rounded up to 32" in matrix.layout.title.text, "the box and the plot never disagree silently"
    assert [trace.name for trace in lines.data] == ["dim 0 (sin)", "dim 3 (cos)"]
    assert "ignored x, 999" in lines.layout.title.text, "the student is told which entries were not plotted"
    _, fallback, _ = positions.positional_views(16, 8, "abc")
    assert len(fallback.data) == 5 and "ignored abc" in fallback.layout.title.text


def test_text_suits_a_model_when_it_is_of_the_kind_the_model_reads(reverse):
    words = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "multi30k"}})
    assert text.suits(reverse, "3 1 4") and not text.suits(reverse, "Ein Hund.")
    assert text.suits(words, "Ein Hund.") and not text.suits(words, "3 1 4")


def test_the_input_box_is_labelled_by_what_the_model_reads(reverse):
    assert text.source_label(reverse) == "Digits"
    multi30k = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "multi30k"}})
    assert text.source_label(multi30k) == "English sentence"
    uploaded = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "runs/x.tsv"}})
    assert text.source_label(uploaded) == "Source sentence", "an upload records default language codes"


def test_head_ranking_summary_separates_heads_that_barely_matter_from_heads_better_left_out():
    importance = {"encoder": torch.tensor([[0.5, -0.01], [0.0, 2.0]]),
                  "cross": torch.tensor([[-0.3, 0.02], [1.0, 0.001]])}
    _, summary = experiment_views.importance_views(importance, "one sentence")
    lines = summary.split("  \n")
    assert lines[0] == "**Most important:** encoder L2H2 (+2.00), cross L2H1 (+1.00), encoder L1H1 (+0.50)."
    assert lines[1] == "**Barely matter:** encoder L2H1 (+0.00), cross L2H2 (+0.00), encoder L1H2 (-0.01)."
    assert lines[2] == "**The translation became more likely without:** cross L1H1 (-0.30), encoder L1H2 (-0.01)."


def test_beam_view_lists_hypotheses_best_first(reverse):
    figure, rows, state = analysis_views.beam_view(reverse, "2 7 1 8", beam_size=3)
    assert [row[0] for row in rows] == [1, 2, 3] and rows[0][1] == "8 1 7 2"
    assert [row[4] for row in rows] == sorted((row[4] for row in rows), reverse=True)
    assert analysis_views.hypothesis_attention(reverse, state, 0).data
    steps = max(x for trace in figure.data for x in trace.x if x is not None)
    assert tuple(figure.layout.xaxis.range) == (-0.5, steps + 0.5), "the step axis spans the steps, no empty ones"



def test_alignment_view_links_reversed_positions(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3")
    figure = analysis_views.alignment_view(tr)
    red = [trace for trace in figure.data if getattr(trace.line, "color", None) == "#d62728"]
    assert len(red) == len(tr.predicted_pieces)



@pytest.mark.parametrize("method", ["attention", "shift-att", "norm", "alti"])
def test_each_alignment_method_draws_the_map_the_library_computes_for_it(reverse, method):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "4 8 1 5")
    rows, pieces, _ = analysis_views.alignment_weights(tr, 1, None, method, reverse)
    by_step = {"attention": tr.cross_attention[0].mean(0), "shift-att": tr.cross_attention[0].mean(0)[1:],
               "norm": one_head.contribution_maps(reverse.model, tr, "cross").layers[0],
               "alti": contributions.contributions(reverse.model, tr).source[0]}[method].double()
    if method in ("norm", "alti"):  # shown as each step's shares
        by_step = by_step / by_step.sum(-1, keepdim=True)
    assert torch.allclose(rows, by_step, atol=1e-4)
    assert pieces == (tr.predicted_pieces[:-1] if method == "shift-att" else tr.predicted_pieces)
    drawn = analysis_views.alignment_view(tr, 1, None, "de", method, reverse)
    assert drawn.layout.title.text.startswith(words_of("de")[f"analysis.alignment_title.{method}"].split("(")[0])


def test_a_models_alignment_scores_are_shown_beside_the_map_or_how_to_measure_them(reverse, tmp_path):
    scored = {"gold": "enfr.gold", "sentences": 447, "methods": [
        {"method": "alti", "layer": 3, "aer": 0.623553, "precision": 0.363297, "recall": 0.413076},
        {"method": "shift-att", "layer": None, "aer": 0.74171, "precision": 0.265918, "recall": 0.236751}]}
    (tmp_path / "alignment.json").write_text(json.dumps(scored), encoding="utf-8")
    shown = analysis_views.alignment_scores_text(dataclasses.replace(reverse, path=tmp_path), "fr")
    assert "447" in shown and "enfr.gold" in shown
    assert "| méthode | couche 3 | toutes les couches |" in shown
    assert "| Contributions ALTI+ | 62,4\u202f% |  |" in shown
    assert "| Shift-Att (une étape plus tard) |  | 74,2\u202f% |" in shown
    assert analysis_views.alignment_scores_text(reverse, "en") == words_of("en")["analysis.alignment_not_measured"]
    (tmp_path / "alignment.json").write_text('{"methods": [{"method": "guess", "layer": 1}]}', encoding="utf-8")
    assert analysis_views.alignment_scores_text(dataclasses.replace(reverse, path=tmp_path), "en") == \
        words_of("en")["analysis.alignment_not_measured"]


def test_raw_exports_hold_every_weight(reverse, tmp_path):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "5 6 7")
    with open(exports.attention_csv_file(tr, str(tmp_path))) as handle:
        rows = list(csv.DictReader(handle))
    expected = sum(t.numel() for t in (tr.encoder_attention, tr.decoder_attention, tr.cross_attention))
    assert len(rows) == expected
    archive = np.load(exports.attention_npz_file(tr, str(tmp_path)))
    assert np.allclose(archive["cross"], tr.cross_attention.numpy())
    assert list(archive["source_tokens"]) == tr.source_pieces



def test_a_shared_link_reopens_the_same_view():
    query = share.share_query("reverse-tiny", "3 1 4", "cross", choices.VIEWS[1], 2, 3, beam=1, max_tokens=40)
    values = share.parse_share_query(dict(parse_qsl(query)), ["reverse-tiny"])
    assert values == {"model": "reverse-tiny", "text": "3 1 4", "kind": choices.ATTENTION_KINDS["cross"],
                      "view": choices.VIEWS[1], "layer": 2, "head": 3, "beam": 1, "max": 40}
    hostile = share.parse_share_query({"model": "../etc", "kind": "x", "layer": "-1", "text": "a\x00b",
                                          "head": "²", "beam": "500", "max": "100000"}, ["m"])
    assert hostile == {"text": "a b", "beam": translate_views.MAX_BEAM, "max": translate_views.TARGET_TOKENS[1]}
    huge = {key: "9" * 5000 for key in ("view", "layer", "head", "beam", "max")}  # past int()'s 4,300 digits
    assert share.parse_share_query({"model": "reverse-tiny", **huge}, ["reverse-tiny"]) == {"model": "reverse-tiny"}



def test_a_shared_link_beyond_the_model_opens_its_last_layer_and_head():
    tiny = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")  # 2 layers, 4 heads
    assert share.fit_share_values({"layer": 99, "head": 12, "text": "1 2"}, tiny) == {"layer": 2, "head": 4,
                                                                                       "text": "1 2"}
    assert share.fit_share_values({"layer": 0}, tiny) == {"layer": 1}



def test_a_shared_link_that_cannot_be_followed_says_why():
    tiny = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")
    names = ["reverse-tiny", "multi30k-en-de"]
    assert share.share_link_problems({"model": "reverse-tiny", "text": "3 1 4"}, names, tiny) == []
    missing, = share.share_link_problems({"model": "gone-model", "text": "3 1 4"}, names, tiny)
    assert "'gone-model' is not on this server; reverse-tiny is open instead" in missing
    words, = share.share_link_problems({"model": "reverse-tiny", "text": "The dog"}, names, tiny)
    assert "not for reverse-tiny, which reads digits" in words
    cut, = share.share_link_problems({"model": "reverse-tiny", "text": "1 " * 600}, names, tiny)
    assert cut == "The link's sentence was changed: The input was cut to its first 1000 characters."
    for nothing in ("\u202e", "\x01"):
        link = {"model": "multi30k-en-de", "text": nothing, "layer": "2"}
        assert share.parse_share_query(link, names) == {"model": "multi30k-en-de", "layer": 2}
        bundled = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
        for model in (bundled, tiny):  # a digits model too: nothing to translate is for no model
            assert share.share_link_problems(link, names, model) == [
                "The link's sentence has nothing to translate in it; an example is shown instead."]



def test_forcing_the_token_the_model_chose_changes_nothing_even_after_beam_search(bundled):
    sentence = "Two dogs play in the snow near a tree."
    beam = translate_views.run_translation(bundled, sentence, "beam", 5).translation
    greedy = bundled.translate(sentence)
    assert beam.text != greedy.text, "a sentence where beam search and greedy decoding part ways"
    for step in (1, 3):
        same = interventions.override_token(bundled, beam, step, beam.predicted_ids[step - 1])
        assert same.after.text == same.before.text
        assert same.before.predicted_ids[:step] == beam.predicted_ids[:step]



def test_comparison_views_show_the_difference(reverse):
    comparison = interventions.ablate_heads(reverse, "3 1 4 1 5 9", {"cross": ["L1H1", "L1H2", "L1H3", "L1H4",
                                                                              "L2H1", "L2H2", "L2H3", "L2H4"]})
    view = experiment_views.comparison_view(comparison)
    assert view.before == "9 5 1 4 1 3"
    assert view.after != view.before, "without any cross-attention the model cannot read the source"
    assert {label for _, label in view.difference} >= {"removed"}
    assert len(view.probability.data) == 2
    for attention in (view.attention_before, view.attention_after):
        assert attention.data[0].text[0][0].startswith("step 1: ")
        assert "layer 2, mean of 4 heads" in attention.layout.title.text, "the last layer unless one is chosen"
    chosen = experiment_views.comparison_view(comparison, "encoder", layer=1, head=3)
    assert "layer 1, head 3" in chosen.attention_after.layout.title.text
    np.testing.assert_allclose(np.asarray(chosen.attention_before.data[0].z),
                               comparison.before.encoder_attention[0, 2].numpy(), atol=DRAWN_TO)
    assert experiment_views.word_diff("a b c", "a x c") == [("a ", None), ("b ", "removed"), ("x ", "added"), ("c ", None)]



def test_experiments_decode_as_the_translation_they_start_from():
    """The "unmodified" side of an experiment is the translation the Translate tab showed: beam or greedy, cut
    at the same maximum length."""
    bundled = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    sentence = "The man and the woman and the child see the dog and the cat and the bird."
    beam = translate_views.run_translation(bundled, sentence, "beam", 5).translation
    greedy = translate_views.run_translation(bundled, sentence, "greedy", 5).translation
    cut = translate_views.run_translation(bundled, sentence, "beam", 5, max_length=5).translation
    assert beam.text != greedy.text, "a sentence on which the two decodings differ"
    assert not cut.ended and cut.text != beam.text
    for shown in (beam, greedy, cut):
        decoding = translate_views.decoding_of(shown)
        for comparison in (interventions.shuffled_source(bundled, shown.source_text, **decoding),
                           interventions.without_positions(bundled, shown.source_text, **decoding),
                           interventions.ablate_heads(bundled, shown.source_text, {"cross": ["L1H1"]}, **decoding)):
            assert comparison.before.text == shown.text



def test_translations_and_experiments_use_the_length_penalty_the_model_was_scored_with():
    bundled = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    assert bundled.length_penalty == bundled.metrics["length_penalty"] == 1.4
    assert dataclasses.replace(bundled, metrics={}).length_penalty == 1.0
    sentence = "A group of people stand in front of an igloo."
    shown = {}
    for alpha in (1.0, 3.0):
        scored = dataclasses.replace(bundled, metrics={"length_penalty": alpha})
        shown[alpha] = translate_views.run_translation(scored, sentence, "beam", 5).translation.text
        assert shown[alpha] == translate(bundled.model, bundled.source_tokenizer, bundled.target_tokenizer, sentence,
                                         beam_size=5, length_penalty=alpha).text
        decoding = {"beam_size": 5, "max_length": None}
        for comparison in (interventions.shuffled_source(scored, sentence, **decoding),
                           interventions.without_positions(scored, sentence, **decoding),
                           interventions.ablate_heads(scored, sentence, {"cross": ["L1H1"]}, **decoding)):
            assert comparison.before.text == shown[alpha]
    assert shown[1.0] != shown[3.0], "a sentence on which the length penalty matters"


@pytest.mark.parametrize("number", [float("nan"), float("inf"), "many"])
def test_a_number_that_is_not_one_gets_a_message_naming_the_field(reverse, number):
    with pytest.raises(errors.InputError, match="beam size must be a"):
        translate_views.run_translation(reverse, "1 2 3", "beam", number)
    with pytest.raises(errors.InputError, match="maximum number of target tokens must be a"):
        translate_views.run_translation(reverse, "1 2 3", "greedy", 4, number)
    with pytest.raises(errors.InputError, match="must be a"):
        numbers.clamp(number, 1, 4)


def test_switching_off_heads_says_whether_the_translation_changed(app_services):
    checkpoint = app_services.registry.get("reverse-tiny")
    unchanged = interventions.ablate_heads(checkpoint, "3 1 4 1 5 9", {"cross": ["L1H1"]}, beam_size=1)
    changed = interventions.ablate_heads(checkpoint, "3 1 4 1 5 9", {"decoder": ["L2H3"]}, beam_size=1)
    assert "The translation does not change." in experiment_views.comparison_view(unchanged).description
    assert "does not change" not in experiment_views.comparison_view(changed).description


def test_a_space_is_given_the_chromium_the_svg_export_draws_with_and_the_export_is_a_real_svg():
    import shutil
    from pathlib import Path
    import plotly.graph_objects as go
    from ui.views.exports import figure_svg_file
    root = Path(__file__).resolve().parents[2]
    assert "chromium" in (root / "packages.txt").read_text(encoding="utf-8").split()
    if shutil.which("chromium") is None:
        pytest.skip("no Chromium on this machine: the export says it is unavailable")
    drawn = Path(figure_svg_file(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])), "check"))
    assert drawn.read_text(encoding="utf-8").lstrip().startswith("<svg")
