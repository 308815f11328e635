import os
import sys
from pathlib import Path

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
