"""The Attention vs evidence tab's contrast: why a step's token and not another, over the source and the
translation so far, with completeness said, in the page's language."""

import numpy as np
import pytest

from transformer.errors import InputError
from ui.tabs import explain as explain_tab
from ui.views import translate as translate_views

CLEAN = "The doctor said that she was tired."


@pytest.fixture(scope="module")
def doctor(app_services):
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), CLEAN, "beam", 5).translation


def test_the_contrast_shows_source_and_prefix_evidence_and_names_the_strongest(app_services, doctor):
    views = explain_tab.on_contrast(app_services, "multi30k-en-de", doctor, 8, "▁er", "integrated gradients")
    source, prefix = views["contrast_plot"].data
    assert len(source.y) == len(doctor.source_ids) and len(prefix.y) == 8
    summary = views["contrast_summary"]
    assert "Step 8: “▁sie” rather than “▁er”" in summary
    assert "**For “▁sie”:** ▁she (+3." in summary
    assert "(0.0% off)" in summary


def test_gradient_times_input_says_no_completeness_and_german_is_german(app_services, doctor):
    views = explain_tab.on_contrast(app_services, "multi30k-en-de", doctor, 8, "▁er", "gradient × input",
                                    language="de")
    assert "„▁sie“ statt „▁er“" in views["contrast_summary"] and "Null-Embeddings" not in views["contrast_summary"]
    assert np.isfinite(views["contrast_plot"].data[0].y).all()


def test_comparing_a_token_with_itself_is_refused(app_services, doctor):
    with pytest.raises(InputError):
        explain_tab.on_contrast(app_services, "multi30k-en-de", doctor, 8, "▁sie", "integrated gradients")


def test_a_step_offers_its_other_candidates_runner_up_first(doctor):
    offered = explain_tab.on_contrast_step(doctor, 8)["contrast_alternative"]
    assert offered.value == "▁er"
