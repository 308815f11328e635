"""The explorer's logic, as the app uses it: input checks, views of a translation, the model registry."""

import dataclasses
import json
import shutil

import gradio as gr
import pytest
import torch

from transformer import explorer, figures
from transformer.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError


@pytest.fixture(scope="module")
def registry():
    return explorer.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")


@pytest.fixture(scope="module")
def reverse(registry):
    return registry.get("reverse-tiny")


@pytest.fixture(scope="module")
def result(reverse):
    return explorer.run_translation(reverse, "3 1 4 1 5 9", "beam", 4)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None])
def test_empty_input_gets_a_clear_message(text):
    with pytest.raises(explorer.InputError, match="empty"):
        explorer.clean_text(text)


def test_control_characters_are_replaced_and_noted():
    cleaned, notes = explorer.clean_text("3 1\x00 4\x07")
    assert cleaned == "3 1 4" and notes


def test_text_direction_overrides_are_removed_so_the_sentence_shows_in_reading_order():
    cleaned, notes = explorer.clean_text("A man \u202eedir\u202c a horse \u2067here\u2069.")
    assert cleaned == "A man edir a horse here."
    assert notes == ["Text-direction control characters were removed."]
    assert explorer.clean_text("A family \U0001F468\u200d\U0001F469 waves.")[1] == [], "joiners in emoji stay"


def test_very_long_input_is_cut_with_a_note():
    cleaned, notes = explorer.clean_text("a" * 5000)
    assert len(cleaned) == explorer.MAX_INPUT_CHARS and "cut" in notes[0]


def test_input_far_longer_than_training_sentences_gets_a_note(reverse):
    long = explorer.run_translation(reverse, " ".join("31415926" * 9), "greedy")
    assert any("Models here learn from far shorter sentences" in note for note in long.notes)
    assert not any("far shorter" in note for note in explorer.run_translation(reverse, "3 1 4", "greedy").notes)


@pytest.mark.parametrize("text", ["😀 🚀", "مرحبا بالعالم", "<img src=x onerror=alert(1)>", "日本語のテキスト"])
def test_unusual_scripts_get_a_translation_or_a_note(reverse, text):
    outcome = explorer.run_translation(reverse, text, "greedy")
    assert outcome.translation.num_steps >= 1
    assert all(isinstance(piece, str) for piece in outcome.translation.source_pieces)


@pytest.mark.parametrize("text, note", [
    ("😀 🚀", "None of the sentence"), ("1 😀 🚀", "Little of the sentence"),
    ("1 2 3 😀", "1 source piece(s) are unknown"), ("1 2 3", None)])
def test_a_sentence_the_model_cannot_read_is_said_to_be_so(reverse, text, note):
    notes = [n for n in explorer.run_translation(reverse, text, "greedy").notes if "vocabulary" in n]
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
    notes = [n for n in explorer.run_translation(bundled, text, "greedy").notes if "looks like" in n]
    if language is None:
        assert notes == []
    else:
        assert notes == [f"This looks like {language}. The model reads English (it learned English→German), so its "
                         "translation of other languages is mostly made up."]


def test_an_empty_translation_is_said_to_be_so(reverse):
    words = explorer.run_translation(reverse, "The dog runs.", "greedy")  # a digits model, given words
    assert words.translation.text == ""
    assert "The translation is empty: the model ended the sentence without producing a word." in words.notes
    assert not any("empty" in note for note in explorer.run_translation(reverse, "3 1 4", "greedy").notes)


def test_no_language_note_where_the_model_does_not_say_which_languages_it_reads(reverse):
    uploaded = dataclasses.replace(reverse, info={**reverse.info, "source_lang": "en", "target_lang": "de",
                                                  "training": {"data": "pairs.tsv"}})
    assert explorer.language_note(uploaded, "Ein Mann fährt auf der Straße.") is None


def test_heatmap_hover_names_decoding_steps_as_the_step_slider_does(result):
    tr = result.translation
    for view in explorer.VIEWS:
        cross = explorer.attention_figure(tr, "cross", view).data[0].text
        encoder = explorer.attention_figure(tr, "encoder", view).data[0].text
        assert cross[0][0].startswith(f"step 1: {tr.predicted_pieces[0]} → position 0: "), view
        assert encoder[0][0].startswith(f"position 0: {tr.source_pieces[0]} → position 0: "), view


def test_attention_views_cover_every_kind_and_view(result):
    tr = result.translation
    for kind in explorer.ATTENTION_KINDS.values():
        for view in explorer.VIEWS:
            for average in (False, True):
                fig = explorer.attention_figure(tr, kind, view, layer=2, head=3, average_heads=average)
                assert fig.data, (kind, view, average)
    model_view = explorer.attention_figure(tr, "cross", explorer.VIEWS[2])
    assert len(model_view.data) == tr.cross_attention.shape[0] * tr.cross_attention.shape[1]


def test_cross_attention_rows_are_labelled_by_the_token_being_produced(result):
    tr = result.translation
    fig = explorer.attention_figure(tr, "cross", explorer.VIEWS[0], 1, 1)
    assert list(fig.layout.yaxis.ticktext) == [figures.escape(p) for p in tr.predicted_pieces]
    assert list(fig.layout.xaxis.ticktext) == [figures.escape(p) for p in tr.source_pieces]


def test_layer_and_head_selectors_are_clamped_to_the_model(result):
    fig = explorer.attention_figure(result.translation, "encoder", explorer.VIEWS[0], layer=99, head=-3)
    assert "<br><sup>layer 2, head 1</sup>" in fig.layout.title.text, "on a line of its own, where no screen cuts it"
    heads = explorer.attention_figure(result.translation, "encoder", explorer.VIEWS[1], layer=99)
    assert "<br><sup>layer 2, all heads · rows:" in heads.layout.title.text
    averaged = explorer.attention_figure(result.translation, "encoder", explorer.VIEWS[2], average_heads=True)
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
    highlighted, top, attention, caption = explorer.step_view(tr, 2)
    assert [piece.strip() for piece, _ in highlighted[:2]] == tr.predicted_pieces[:2]
    assert highlighted[1][1] == "current" and highlighted[-1][0] == "…"
    assert list(top.data[0].y) == list(range(len(tr.top_pieces[1])))
    assert len(attention.data[0].y) == len(tr.source_pieces)
    assert "Step 2 of" in caption
    moved = explorer.step_view(tr, 3)
    assert list(moved[1].layout.yaxis.ticktext) == [figures.escape(p) for p in tr.top_pieces[2]]


def test_step_view_clamps_out_of_range_steps(result):
    tr = result.translation
    highlighted, *_ , caption = explorer.step_view(tr, 999)
    assert f"Step {tr.num_steps} of {tr.num_steps}" in caption
    assert highlighted[-1][0] != "…"


def test_forced_decoding_says_when_the_translation_holds_pieces_the_model_cannot_read(reverse):
    assert explorer.run_forced(reverse, "1 2 3", "3 2 1").notes == []
    notes = explorer.run_forced(reverse, "1 2 3", "3 😀 1 ☃").notes
    assert notes == ["2 piece(s) of your translation are unknown to this model's vocabulary (shown as <unk>): their "
                     "probabilities say little about the words you wrote."]


def test_forced_decoding_scores_a_user_translation(reverse):
    good = explorer.run_forced(reverse, "1 2 3", "3 2 1").translation
    bad = explorer.run_forced(reverse, "1 2 3", "1 2 3").translation
    assert good.log_prob > bad.log_prob
    probabilities, attention = explorer.forced_figures(good)
    assert len(probabilities.data[0].y) == len(good.predicted_pieces)
    assert attention.data[0].text[0][0].startswith("step 1: "), "rows are the steps that read the translation"
    with pytest.raises(explorer.InputError, match="own translation"):
        explorer.run_forced(reverse, "1 2 3", "  ")


def test_attention_download_is_the_json_contract(result, tmp_path):
    path = explorer.attention_json_file(result.translation, str(tmp_path))
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
    registry = explorer.ModelRegistry([tmp_path], device="cpu")
    good = registry.get("good")
    with pytest.raises(CheckpointError, match="unreadable or truncated"):
        registry.get("broken")
    assert registry.get("good") is good


def test_parameter_table_adds_up_and_reads_with_thousands_separators(registry):
    bundled = registry.get("multi30k-en-de")
    table = explorer.parameter_table(bundled)
    rows = table.data.values.tolist()
    assert rows[-1][0] == "total"
    assert sum(row[1] for row in rows[:-1]) == rows[-1][1] == bundled.model.num_parameters()
    assert sum(row[2] for row in rows[:-1]) == pytest.approx(1.0)
    shown = gr.Dataframe(interactive=False).postprocess(table)
    assert shown.data[-1] == ["total", bundled.model.num_parameters(), 1.0], "sorted as numbers"
    assert shown.metadata["display_value"][-1] == ["total", f"{bundled.model.num_parameters():,}", "100.0%"]


def test_positional_lines_draw_each_dimension_once_name_it_and_stay_readable():
    _, single, _ = explorer.positional_views(64, 50, "-3, 2")
    assert [trace.name for trace in single.data] == ["dim 2 (sin)"] and single.layout.showlegend
    _, repeated, _ = explorer.positional_views(64, 50, ", ".join(["0"] * 200 + ["1"]))
    assert [trace.name for trace in repeated.data] == ["dim 0 (sin)", "dim 1 (cos)"]
    _, many, _ = explorer.positional_views(64, 50, ", ".join(map(str, range(40))))
    assert len(many.data) == explorer.MAX_PE_LINES and "the first 12 of 40 dimensions" in many.layout.title.text


def test_positional_views_accept_odd_and_out_of_range_values():
    matrix, lines, dots = explorer.positional_views(31, 10_000, "0, 3, x, 999")
    assert len(matrix.data[0].z[0]) == 32 and len(matrix.data[0].z) == 512
    assert "d_model 31 rounded up to 32" in matrix.layout.title.text, "the box and the plot never disagree silently"
    assert [trace.name for trace in lines.data] == ["dim 0 (sin)", "dim 3 (cos)"]
    assert "ignored x, 999" in lines.layout.title.text, "the student is told which entries were not plotted"
    _, fallback, _ = explorer.positional_views(16, 8, "abc")
    assert len(fallback.data) == 5 and "ignored abc" in fallback.layout.title.text


def test_text_suits_a_model_when_it_is_of_the_kind_the_model_reads(reverse):
    words = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "multi30k"}})
    assert explorer.suits(reverse, "3 1 4") and not explorer.suits(reverse, "Ein Hund.")
    assert explorer.suits(words, "Ein Hund.") and not explorer.suits(words, "3 1 4")


def test_the_input_box_is_labelled_by_what_the_model_reads(reverse):
    assert explorer.source_label(reverse) == "Digits"
    multi30k = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "multi30k"}})
    assert explorer.source_label(multi30k) == "English sentence"
    uploaded = dataclasses.replace(reverse, info={"source_lang": "en", "training": {"data": "runs/x.tsv"}})
    assert explorer.source_label(uploaded) == "Source sentence", "an upload records default language codes"


def test_head_ranking_summary_separates_heads_that_barely_matter_from_heads_better_left_out():
    importance = {"encoder": torch.tensor([[0.5, -0.01], [0.0, 2.0]]),
                  "cross": torch.tensor([[-0.3, 0.02], [1.0, 0.001]])}
    _, summary = explorer.importance_views(importance, "one sentence")
    lines = summary.split("  \n")
    assert lines[0] == "**Most important:** encoder L2H2 (+2.00), cross L2H1 (+1.00), encoder L1H1 (+0.50)."
    assert lines[1] == "**Barely matter:** encoder L2H1 (+0.00), cross L2H2 (+0.00), encoder L1H2 (-0.01)."
    assert lines[2] == "**The translation became more likely without:** cross L1H1 (-0.30), encoder L1H2 (-0.01)."
