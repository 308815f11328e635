import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]  # the repository's packages, and the tests' own helpers

if os.environ.get("PYTEST_XDIST_WORKER"):  # one torch thread per worker: workers share the cores between them
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    """The modules with the most long tests first (those that open the app in Chromium, or are marked slow), then
    the others by their number of tests, as pytest-xdist would order them (pytest.ini turns its own order off): a
    long module picked up last kept one worker busy while the other waited (docs/test-suite.md)."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)

    def long_tests_then_tests(tests: list) -> tuple[int, int]:
        return sum({"browser", "app_url"} <= set(test.fixturenames) or test.get_closest_marker("slow") is not None
                   for test in tests), len(tests)

    items[:] = [test for tests in sorted(modules.values(), key=long_tests_then_tests, reverse=True) for test in tests]


# The Corpus tab's first corpus, where Multi30K is given: 48 test sentences (3 s), not a host's 200 (12 s).
CORPUS_SENTENCES = 48


@pytest.fixture(scope="session", autouse=True)
def test_run_folder(tmp_path_factory):
    """A folder for this test run, shared by its workers: the app's runs folder wherever a test does not give one
    (``EXPLORER_RUNS_DIR``), so no test writes into the repository, and the Corpus tab's runs are made once for
    every app the run serves (each chunk is written whole, and the same sentences give the same chunk); the Hub
    cache and the user's cache folder (``EXPLORER_HUB_CACHE``, ``XDG_CACHE_HOME``), where the app and the command
    lines keep each model's speed choices, so no test writes into the home folder; and the Corpus tab's first
    corpus at ``CORPUS_SENTENCES``."""
    base = tmp_path_factory.getbasetemp()
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    folder = base.parent / f"test-run-{run_id}" if run_id else base / "test-run"
    folder.mkdir(exist_ok=True)
    given = {"EXPLORER_RUNS_DIR": str(folder), "EXPLORER_CORPUS_SENTENCES": str(CORPUS_SENTENCES),
             "EXPLORER_HUB_CACHE": str(folder / "hub"), "XDG_CACHE_HOME": str(folder / "cache")}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    yield folder
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# Debian's Chromium, as the browser tests (the app's and the offline pack's) drive it.
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()
