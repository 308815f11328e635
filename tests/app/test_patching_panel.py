"""The Experiments tab's activation patching: a minimal pair of the sentence last translated, both grids and a
summary that names the strongest components and the two checks, in the page's language."""

import numpy as np
import pytest

from transformer.errors import InputError
from ui.runtime.language import said
from ui.tabs import experiments
from ui.views import translate as translate_views
from ui.views.samples import MINIMAL_PAIRS

CLEAN, CORRUPTED = "The doctor said that she was tired.", "The doctor said that he was tired."


def quiet_progress(*args, **kwargs):
    """Stands in for Gradio's progress tracker outside a request."""


@pytest.fixture(scope="module")
def doctor(app_services):
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), CLEAN, "beam", 5).translation


def test_patching_draws_both_grids_and_names_what_restores_the_most(app_services, doctor):
    views = experiments.on_patch(app_services, "multi30k-en-de", doctor, CORRUPTED, 8, "▁er",
                                 progress=quiet_progress)
    config = app_services.registry.get("multi30k-en-de").model.config
    heads = views["patching_heads"]
    assert [np.asarray(trace.z).shape for trace in heads.data] == [(config.n_encoder_layers, config.n_heads),
                                                                  (config.n_decoder_layers, config.n_heads),
                                                                  (config.n_decoder_layers, config.n_heads)]
    assert "Step 8: ▁sie rather than ▁er" in heads.layout.title.text
    positions = views["patching_positions"]
    assert np.asarray(positions.data[0].z).shape == (config.n_encoder_layers, len(doctor.source_ids))
    summary = views["patching_summary"]
    assert "encoder layer 1 at ▁she" in summary
    assert "patching nothing restores 0%" in summary and "at every position restores 100%" in summary


def test_the_summary_is_written_in_the_pages_language(app_services, doctor):
    views = experiments.on_patch(app_services, "multi30k-en-de", doctor, CORRUPTED, 8, "▁er",
                                 progress=quiet_progress, language="de")
    assert "Schritt 8: „▁sie“ statt „▁er“" in views["patching_summary"]
    assert "Encoder-Schicht 1 bei ▁she" in views["patching_summary"]


def test_a_changed_sentence_is_needed_first(app_services, doctor):
    with pytest.raises(InputError) as raised:
        experiments.on_patch(app_services, "multi30k-en-de", doctor, "  ", 8, "▁er", progress=quiet_progress)
    assert "word or two changed" in said(raised.value.args[0], "en")


def test_a_new_translation_clears_the_grids_and_offers_its_steps_alternatives(doctor):
    views = experiments.after_translation(doctor)
    assert views["patching_heads"] is None and views["patching_summary"] == ""
    runner_up = next(piece for piece in doctor.top_pieces[0] if piece != doctor.predicted_pieces[0])
    assert views["patch_alternative"].value == runner_up and views["patch_step"].maximum == doctor.num_steps


def test_typing_the_changed_sentence_chooses_the_step_it_changes_most_and_its_preferred_token(app_services, doctor):
    views = experiments.on_patch_pair(app_services, "multi30k-en-de", doctor, CORRUPTED)
    assert views["patch_step"] == 8 and views["patch_alternative"].value == "▁er"
    assert experiments.on_patch_pair(app_services, "multi30k-en-de", doctor, "") == {}


def test_an_example_pair_translates_its_first_sentence_and_types_its_second(app_services):
    clean, changed = MINIMAL_PAIRS[1]
    views = experiments.on_pair_example(app_services, "multi30k-en-de", [clean, changed], "beam", 5, 60, "cross",
                                        "one head", 3, 1, False)
    assert views["text"] == clean and views["patch_corrupted"] == changed
    translation = views["translation_state"]
    assert translation.source_text == clean
    chosen = experiments.on_patch_pair(app_services, "multi30k-en-de", translation, changed)
    step = chosen["patch_step"]
    assert translation.predicted_pieces[step - 1] == "▁kleines" and chosen["patch_alternative"].value == "▁kleiner"
