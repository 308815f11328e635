import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]  # the repository's packages, and the tests' own helpers

if os.environ.get("PYTEST_XDIST_WORKER"):  # one torch thread per worker: workers share the cores between them
    os.environ.setdefault("OMP_NUM_THREADS", "1")
