"""Mutation testing of the formula packages: would a wrong formula fail a test? (docs/test-suite.md)

    pip install mutmut==3.8.1
    python tools/mutation.py inside      # transformer/inside/ against the tests of the measures
    python tools/mutation.py paper       # transformer/paper/ against the tests of the model and decoding
    python tools/mutation.py inside --modules decoder_lens tuned_lens   # some of a package's modules only

Each mutant is the package with one small change (an operator, a number, an argument left out); mutmut runs, of
the package's tests below, those that reach the function it changed, and a failure kills it. The tests are chosen
per package because a mutant that survives runs every test that reaches its function: the model's own functions
are reached by every test of the library.

mutmut reads its settings from ``setup.cfg`` where it runs, so each package is mutated in a working copy of its own,
``.mutation/<package>/``; afterwards ``mutmut results`` and ``mutmut show NAME`` run there read the run. The script
ends with each module's score.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("transformer", "tests", "ui", "checkpoints", "assets", "benchmarks", "app.py", "pytest.ini", "README.md")
LIBRARY_TESTS = "tests/library/"
PACKAGES = {
    "inside": ["test_references", "test_json_contracts", "test_inside_inputs", "test_causes", "test_inside_head",
               "test_attribute", "test_analysis", "test_interventions", "test_lenses"],
    "paper": ["test_model", "test_config", "test_decoding", "test_sampling", "test_search_progress",
              "test_references", "test_tokenizer_checkpoint", "test_vocabularies", "test_analysis",
              "test_interventions", "test_bundled_model", "test_bundled_outputs"],
}
KILLED = ("killed", "timeout")  # a mutant that makes a test run past its limit is caught too


def settings(package: str, modules: list[str] | None = None) -> str:
    """setup.cfg's [mutmut] section for one package (or ``modules`` of it). ``-n 0``: mutmut forks its own
    workers."""
    mutated = [f"    transformer/{package}/{module}.py" for module in modules] if modules else \
        [f"    transformer/{package}/*"]
    lines = ["[mutmut]", "source_paths =", "    transformer/", "only_mutate =", *mutated, "also_copy ="]
    lines += [f"    {path}" for path in COPIED if path not in ("transformer", "tests")]
    lines += ["pytest_add_cli_args =", "    -n", "    0", "    -p", "    no:cacheprovider",
              "pytest_add_cli_args_test_selection ="]
    lines += [f"    {LIBRARY_TESTS}{name}.py" for name in PACKAGES[package]]
    return "\n".join(lines) + "\n"


def working_copy(package: str, modules: list[str] | None = None) -> Path:
    directory = ROOT / ".mutation" / package
    shutil.rmtree(directory, ignore_errors=True)
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyi")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, directory / name, ignore=ignored)
        else:
            directory.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, directory / name)
    (directory / "setup.cfg").write_text(settings(package, modules))
    return directory


def scores(results: str) -> list[tuple[str, int, int]]:
    """(module, mutants, killed) from ``mutmut results --all true``: lines ``module.x_function__mutmut_N: status``."""
    mutants, killed = Counter(), Counter()
    for line in results.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if "__mutmut_" not in name:
            continue
        module = name.rpartition(".")[0]
        mutants[module] += 1
        killed[module] += status.strip() in KILLED
    return [(module, mutants[module], killed[module]) for module in sorted(mutants)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", choices=sorted(PACKAGES), help="the package of transformer/ to mutate")
    parser.add_argument("--modules", nargs="+", metavar="MODULE",
                        help="mutate only these modules of the package (default: all of them)")
    parser.add_argument("--children", type=int, default=os.cpu_count() or 1,
                        help="mutants run at once (default: this machine's CPUs)")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("mutmut") is None:
        parser.exit(2, f"error: mutmut is not installed beside this Python: {sys.executable} -m pip install "
                       "mutmut==3.8.1\n")
    unknown = [module for module in args.modules or () if not (ROOT / "transformer" / args.package /
                                                                f"{module}.py").is_file()]
    if unknown:
        parser.exit(2, f"error: transformer/{args.package}/ has no module {', '.join(unknown)}\n")
    missing = [name for name in COPIED if not (ROOT / name).exists()]
    if missing:
        parser.exit(2, f"error: the working copy needs {', '.join(missing)}, missing from {ROOT}\n")
    directory = working_copy(args.package, args.modules)
    # Forked after torch has started its OpenMP threads, mutmut's children hang unless torch keeps to one.
    environment = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", GRADIO_ANALYTICS_ENABLED="False",
                       HF_HUB_OFFLINE="1")
    mutmut = [sys.executable, "-m", "mutmut"]
    ran = subprocess.run(mutmut + ["run", "--max-children", str(args.children)], cwd=directory, env=environment)
    if ran.returncode != 0:
        return ran.returncode
    results = subprocess.run(mutmut + ["results", "--all", "true"], cwd=directory, env=environment,
                             capture_output=True, text=True)
    if results.returncode != 0:
        print(results.stderr, file=sys.stderr)
        return results.returncode
    table = scores(results.stdout)
    totals = ("all", sum(count for _, count, _ in table), sum(killed for _, _, killed in table))
    print(f"\n{'module':<40} {'mutants':>8} {'killed':>8} {'score':>7}")
    for module, count, killed in table + [totals]:
        print(f"{module:<40} {count:>8} {killed:>8} {killed / max(count, 1):>7.1%}")
    print(f"\nsurvivors: (cd {directory.relative_to(ROOT)} && mutmut results), then mutmut show NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
