"""Fixtures the app's tests share: the bundled models, and one translation by the German model to look into."""

import pytest

from transformer.checkpoint import REPOSITORY_CHECKPOINTS
from ui import services
from ui.views import translate as translate_views

SENTENCE = "A dog runs across the grass."


@pytest.fixture(scope="module")
def app_services():
    return services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"))


@pytest.fixture(scope="module")
def translation(app_services):
    """'Ein Hund rennt über das Gras.', beam 5."""
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), SENTENCE, "beam",
                                           5).translation
