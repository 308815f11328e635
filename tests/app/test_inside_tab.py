"""The Inside a head tab: one query of one head, step by step, from the sentence last translated."""

import shutil

import numpy as np
import pandas
import pytest

from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import one_head, tuned_lens
from ui import services
from ui.tabs import experiments
from ui.tabs import explain as explain_tab
from ui.tabs import inside as inside_tab
from ui.views import experiments as experiment_views
from ui.views import inside
from ui.views import layers as layer_views
from ui.views import translate as translate_views

SENTENCE = "A dog runs across the grass."
CROSS = "Cross-attention (decoder → encoder)"


def test_the_table_walks_one_query_through_equation_1_key_by_key(app_services, translation):
    views = inside_tab.on_inside(app_services, "multi30k-en-de", translation, CROSS, 3, 2, 3)
    table = views["inside_table"]
    assert list(table["key"]) == [f"position {j}: {piece}" for j, piece in enumerate(translation.source_pieces)]
    recorded = translation.cross_attention[2, 1, 2].numpy()
    np.testing.assert_allclose(table["softmax weight"].to_numpy(dtype=float), recorded, atol=1e-4)
    np.testing.assert_allclose(table["÷ √d_k"].to_numpy(dtype=float), table["q·k"].to_numpy(dtype=float) / 8,
                               atol=2e-3)
    assert "Query 3 is step 3: it reads **▁Hund** and produced **▁rennt**" in views["inside_summary"] and "√64 = 8.00" in views["inside_summary"]
    assert "computed **once** per sentence" in views["inside_cache"]
    bars = views["inside_contributions"].data
    assert [bar.name for bar in bars] == ["softmax weight", "share of ‖α v W_O‖"]
    assert sum(bars[1].y) == pytest.approx(1.0, abs=1e-6)


def test_masked_keys_of_decoder_self_attention_read_minus_infinity(app_services, translation):
    views = inside_tab.on_inside(app_services, "multi30k-en-de", translation, "Decoder self-attention", 1, 1, 2)
    scaled = list(views["inside_table"]["÷ √d_k"])
    assert scaled[2:] == ["−∞ (masked)"] * (len(scaled) - 2) and all(isinstance(x, float) for x in scaled[:2])
    assert "one row per step" in views["inside_cache"]


def test_a_query_past_the_last_row_is_the_last_row(app_services, translation):
    views = inside_tab.on_inside(app_services, "multi30k-en-de", translation, "Encoder self-attention", 1, 1, 99)
    last = len(translation.source_pieces)
    assert views["inside_query"].value == last and f"(position {last - 1})" in views["inside_summary"]


def test_before_any_translation_the_tab_says_what_to_do(app_services):
    assert inside_tab.on_inside(app_services, "multi30k-en-de", None, CROSS, 1, 1, 1) == {
        "inside_summary": inside_tab.WAITING}
    assert inside_tab.on_lens(app_services, "multi30k-en-de", None, 1, 1.0, 0, 1.0) == {}


def test_the_whole_head_shows_weights_beside_contribution_shares(app_services, translation):
    views = inside_tab.on_inside(app_services, "multi30k-en-de", translation, CROSS, 2, 1, 1)
    weights = views["inside_map_weights"].weights.numpy()
    np.testing.assert_allclose(weights, translation.cross_attention[1, 0].numpy(), atol=1e-4)  # as the page shows
    for name in ("inside_map_head", "inside_map_layer"):
        shares = views[name].weights.numpy()
        assert shares.shape == weights.shape
        np.testing.assert_allclose(shares.sum(1), 1.0, atol=1e-3)


def test_the_logit_lens_ends_on_the_models_own_probabilities_and_temperature_reshapes_them(app_services,
                                                                                         translation):
    views = inside_tab.on_lens(app_services, "multi30k-en-de", translation, 2, 1.0, 0, 1.0)
    lens = np.asarray(views["lens_plot"].data[0].z)
    np.testing.assert_allclose(lens[-1], translation.token_probs, atol=1e-5)
    favourites = [pieces[0].replace("<", "&lt;").replace(">", "&gt;") for pieces in translation.top_pieces]
    assert list(views["lens_plot"].data[0].text[-1]) == favourites, "the last layer's favourite is the top one"
    at_one = views["temperature_plot"].data[0].x[0]
    assert at_one == pytest.approx(translation.top_probs[1][0], abs=1e-5)
    sharp = inside_tab.on_temperature(app_services, "multi30k-en-de", translation, 2, 0.2, 0, 1.0)
    flat = inside_tab.on_temperature(app_services, "multi30k-en-de", translation, 2, 3.0, 0, 1.0)
    assert sharp["temperature_plot"].data[0].x[0] > at_one > flat["temperature_plot"].data[0].x[0]
    cut = inside_tab.on_temperature(app_services, "multi30k-en-de", translation, 2, 3.0, 3, 1.0)["temperature_plot"]
    assert len(cut.data[0].x) == 10 and sum(cut.data[0].x[:3]) == pytest.approx(1.0) and max(cut.data[0].x[3:]) == 0
    assert "3 tokens kept" in cut.layout.title.text


def test_sampling_a_translation_names_its_seed_and_moves_the_seed_on(app_services, translation):
    first = inside_tab.on_sample(app_services, "multi30k-en-de", translation, 1.2, 0, 1.0, 7)
    again = inside_tab.on_sample(app_services, "multi30k-en-de", translation, 1.2, 0, 1.0, 7)
    assert first["sampled"] == again["sampled"] and first["sampled"].startswith("**Drawn with seed 7:**")
    assert first["sample_seed"] == 8, "the next click draws anew"
    greedy = inside_tab.on_sample(app_services, "multi30k-en-de", translation, 1.0, 1, 1.0, 7)["sampled"]
    assert "Ein Hund rennt über das Gras." in greedy.split("  \n")[0], "top-k 1 is greedy"


def test_the_blackboard_computes_equation_1_on_the_numbers_typed():
    steps, figure = inside.blackboard(inside.blackboard_example(), causal=True)
    assert "| **cat** | 0.196 | 0.804 | −∞ |" not in steps, "softmax rows show 0, not −∞"
    assert "| **cat** | 0.000 | 1.414 | −∞ |" in steps, "scaled scores show the mask as −∞"
    np.testing.assert_allclose(np.asarray(figure.data[0].z)[0], [1, 0, 0])


@pytest.mark.parametrize("cell", ["x", float("nan"), None])
def test_the_blackboard_refuses_a_cell_that_is_not_a_number(cell):
    table = inside.blackboard_example().astype(object)
    table.iloc[1, 2] = cell
    with pytest.raises(InputError, match="number"):
        inside.blackboard(table, causal=False)


def test_changing_d_k_keeps_the_numbers_that_fit():
    wider = inside.blackboard_table(3, inside.blackboard_example())
    assert list(wider.columns) == ["token", "q1", "q2", "q3", "k1", "k2", "k3", "v1", "v2", "v3"]
    assert list(wider.iloc[1]) == ["cat", 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0]
    assert inside.blackboard(wider, causal=False)[0].startswith("**1. Scores")
    narrower = inside.blackboard_table(2, wider)
    pandas.testing.assert_frame_equal(narrower, inside.blackboard_example())


def test_with_every_cross_attention_head_off_the_comparison_shows_nothing_added(app_services, translation):
    checkpoint = app_services.registry.get("multi30k-en-de")
    every_head = experiment_views.head_labels(checkpoint)["cross"]
    views = experiments.on_ablate(app_services, "multi30k-en-de", translation, [], [], every_head, CROSS, 3,
                                  "mean of heads", experiment_views.MEASURES[0])
    before = np.asarray(views["experiment_attention_before"].data[0].z)
    after = np.asarray(views["experiment_attention_after"].data[0].z)
    assert before.max() > 0 and (after == 0).all(), "switched-off heads add nothing, whatever their weights"
    weights = experiments.on_comparison_attention(app_services, "multi30k-en-de", views["last_comparison"], CROSS,
                                                  3, "2", experiment_views.MEASURES[1])
    assert np.asarray(weights["experiment_attention_after"].data[0].z).max() > 0.3, \
        "their weights alone still look like attention"


def test_without_positions_the_contributions_are_measured_as_that_run_ran(app_services, translation):
    views = experiments.on_positions(app_services, "multi30k-en-de", translation, "Encoder self-attention", 1, "1",
                                     experiment_views.MEASURES[0])
    comparison = views["last_comparison"]
    assert comparison.positions is False
    maps = one_head.contribution_maps(app_services.registry.get("multi30k-en-de").model, comparison.after,
                                             "encoder", positions=False)
    shown = np.asarray(views["experiment_attention_after"].data[0].z)
    np.testing.assert_allclose(shown, maps.heads[0, 0].numpy(), atol=1e-5)


def test_looking_inside_a_step_opens_this_tab_on_that_steps_cross_attention(app_services, translation):
    views = inside_tab.on_look_inside(app_services, "multi30k-en-de", translation, [], 3, 2, 4, False, 1, 1.0, 0,
                                      1.0)
    assert views["tabs"].selected == "inside" and views["inside_kind"] == CROSS
    assert views["inside_query"].value == 3 and views["lens_step"].value == 3
    assert "layer 2, head 4.** Query 3 is step 3: it reads **▁Hund** and produced **▁rennt**" in views["inside_summary"]
    averaged = inside_tab.on_look_inside(app_services, "multi30k-en-de", translation, ["inside", "analysis"], 3, 2,
                                         4, True, 1, 1.0, 0, 1.0)
    assert averaged["inside_head"].value == 1, "with the heads averaged, the first head"
    assert averaged["tabs_waiting"] == ["analysis"] and averaged["inside_query"].value == 3, \
        "a translation made while the tab was hidden resets it first; the step's query is then chosen"


def test_the_sampling_view_never_offers_tokens_decoding_never_generates(app_services):
    digits = translate_views.run_translation(app_services.registry.get("reverse-tiny"), "3 1 4", "greedy").translation
    figure = inside_tab.on_temperature(app_services, "reverse-tiny", digits, 1, 3.0, 0, 1.0)["temperature_plot"]
    shown = {str(piece) for piece in figure.data[0].customdata}  # escaped for Plotly's HTML
    assert len(shown) == 10 and not {"&lt;pad&gt;", "&lt;s&gt;"} & shown


def test_rollout_is_not_scored_against_itself(app_services, translation):
    views = explain_tab.on_attribute(app_services, "multi30k-en-de", translation, "attention rollout", 32, 1, "1")
    assert "rollout" not in set(views["explain_agreement"]["attention"])


# --- what each layer knows ----------------------------------------------------------------------------------

RAINY_BUS = "Several people are waiting for the bus in the rain."


@pytest.fixture(scope="module")
def rainy_bus(app_services):
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), RAINY_BUS, "beam",
                                           5).translation


def test_the_decoder_translates_from_every_encoder_layer_marking_what_differs_from_the_final(app_services,
                                                                                           rainy_bus):
    views = inside_tab.on_layers(app_services, "multi30k-en-de", rainy_bus, 1)
    by_layer = views["layers_state"]
    assert [translation.text for translation in by_layer] == [
        "Mehrere Menschen warten auf den Bus im Regen.", "Mehrere Personen warten im Regen auf den Bus.",
        "Mehrere Personen warten im Regen auf den Bus."]
    assert by_layer[-1].predicted_ids == rainy_bus.predicted_ids, "the last layer's is the translation shown"
    rows = views["decoderlens_table"].split("\n")[2:5]
    assert rows[0] == "| 1 | Mehrere **Menschen** warten auf den **Bus** **im** **Regen\\.** | 64.4 |"
    assert rows[2] == "| 3 | Mehrere Personen warten im Regen auf den Bus\\. | 100.0 |"
    assert "From layer 2 on it writes the final translation" in str(views["decoderlens_summary"])
    assert views["layers_open"] and views["decoderlens_layer"].maximum == 3


def test_each_encoder_layers_map_is_the_cross_attention_of_its_own_translation(app_services, rainy_bus):
    by_layer = inside_tab.on_layers(app_services, "multi30k-en-de", rainy_bus, 1)["layers_state"]
    for layer in (1, 3):
        views = inside_tab.on_layer_shown(by_layer, layer)
        shown = views["decoderlens_map"]
        np.testing.assert_allclose(shown.weights.numpy(), by_layer[layer - 1].cross_attention[-1].mean(0).numpy(),
                                   atol=1e-4)
        assert shown.rows == tuple(by_layer[layer - 1].predicted_pieces) and views["decoderlens_layer"].value == layer
    assert inside_tab.on_layer_shown(None, 2) == {}


def test_the_tuned_lens_stands_beside_the_logit_lens_with_each_layers_kl(app_services, rainy_bus):
    views = inside_tab.on_lens(app_services, "multi30k-en-de", rainy_bus, 1, 1.0, 0, 1.0)
    tuned, logit = np.asarray(views["tuned_plot"].data[0].z), np.asarray(views["lens_plot"].data[0].z)
    np.testing.assert_allclose(tuned[-1], logit[-1], atol=1e-6)  # the last layer has no map
    assert not np.allclose(tuned[0], logit[0], atol=1e-2)
    assert "trained on 2,000 Multi30K training sentences" in views["tuned_text"]
    expected_logit = one_head.logit_lens(app_services.registry.get("multi30k-en-de").model, rainy_bus).kl
    first = views["tuned_text"].split("\n")[-3]
    assert first.startswith(f"| 1 | {float(expected_logit[0]):.3f} | ")
    assert not views["tuned_train"].visible


def test_a_model_without_a_tuned_lens_trains_one_on_request_and_keeps_it_beside_its_weights(tmp_path,
                                                                                             monkeypatch):
    monkeypatch.setattr(layer_views, "APP_TRAINING", tuned_lens.LensTraining(sentences=40, steps=20))
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / "models" / "reverse-tiny")
    served = services.Services(services.ModelRegistry([tmp_path / "models"], device="cpu"),
                               lenses=layer_views.KeptLenses(tmp_path / "lenses"))
    digits = translate_views.run_translation(served.registry.get("reverse-tiny"), "3 1 4 1 5", "greedy",
                                             1).translation
    before = inside_tab.on_lens(served, "reverse-tiny", digits, 1, 1.0, 0, 1.0)
    assert before["tuned_plot"] is None and before["tuned_train"].visible and "no tuned lens yet" in \
        before["tuned_text"]
    heard = []
    after = inside_tab.on_train_lens(served, "reverse-tiny", digits, progress=lambda share, desc: heard.append(desc))
    assert after["tuned_plot"] is not None and not after["tuned_train"].visible
    assert "the app's 40 sample sentences" in after["tuned_text"]
    assert heard[0].startswith("Translating the lens's sentences") and heard[-1] == \
        "Training the tuned lens: step 20 of 20"
    assert (tmp_path / "models" / "reverse-tiny" / tuned_lens.LENS_FILE).is_file(), "kept beside the model"
    later = layer_views.KeptLenses(tmp_path / "lenses")  # a server started again
    assert later.get(served.registry.get("reverse-tiny")).trained_on["sentences"] == 40


def test_a_lens_file_that_cannot_be_read_is_passed_over_as_if_there_were_none(tmp_path, caplog):
    shutil.copytree(REPOSITORY_CHECKPOINTS / "reverse-tiny", tmp_path / "reverse-tiny")
    (tmp_path / "reverse-tiny" / tuned_lens.LENS_FILE).write_bytes(b"cut short")
    checkpoint = load_checkpoint(tmp_path / "reverse-tiny", device="cpu")
    kept = layer_views.KeptLenses(tmp_path / "lenses")
    assert kept.get(checkpoint) is None and kept.get(checkpoint) is None
    assert [record.message.count("is not a tuned lens") for record in caplog.records] == [1], "said once"


def test_a_new_translation_puts_away_the_layers_read_for_the_last(rainy_bus):
    reset = inside_tab.after_translation(rainy_bus)
    assert reset["layers_state"] is None and reset["decoderlens_map"] is None and reset["tuned_plot"] is None
    assert reset["decoderlens_summary"] == inside_tab.WAITING_LAYERS
