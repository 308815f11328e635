"""Fixtures the app's tests share: the bundled models, one translation by the German model to look into, and the
app served on loopback (Chromium to open it in: tests/conftest.py)."""

import pytest

from helpers import serve_on_loopback, with_corpus_runs
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui.training import jobs
from ui import services
from ui.build import build_app, close_app, launch_options
from ui.views import corpus as corpus_views
from ui.views import translate as translate_views


SENTENCE = "A dog runs across the grass."


@pytest.fixture(scope="module")
def app_services(tmp_path_factory, corpus_runs):
    """The bundled models; runs (a lesson's corpus) kept out of the repository, the Corpus tab's shared."""
    return services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"),
                             with_corpus_runs(jobs.JobManager(tmp_path_factory.mktemp("runs")), corpus_runs))


@pytest.fixture(scope="module")
def translation(app_services):
    """'Ein Hund rennt über das Gras.', beam 5."""
    return translate_views.run_translation(app_services.registry.get("multi30k-en-de"), SENTENCE, "beam",
                                           5).translation


@pytest.fixture(scope="session")
def corpus_runs(test_run_folder):
    """The Corpus tab's runs of every app this test run serves, on either worker: the bundled model's corpus is run
    once, not by each module's app (each a run of about ten seconds)."""
    folder = test_run_folder / corpus_views.FOLDER
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, corpus_runs):
    """The app as ``python app.py`` serves it (the bundled models, real training), and its default model; its Corpus
    tab's runs shared with the other apps of this test run (``corpus_runs``)."""
    manager = with_corpus_runs(jobs.JobManager(tmp_path_factory.mktemp("runs")), corpus_runs)
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS, manager.published_dir])
    demo = build_app(services.Services(registry, manager))
    serve_on_loopback(demo, **launch_options())
    yield demo.local_url, registry.default_name()
    close_app(demo)
    manager.stop()
    manager.wait(60)
