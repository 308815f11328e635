"""How the code is laid out: the library never needs the app, views never need gradio, and no function
grows back into a page-long ``build_app``."""

import ast
import re
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LONGEST_FUNCTION = 80  # lines; the old build_app was about 750
LONGEST_MODULE, LONGEST_CLASS = 450, 200  # lines: a module does one job, a class holds one thing's state
ONE_READING = {"transformer/paper/model.py"}  # the paper's model, read top to bottom in one file
CLASSES_STILL_LONG: dict[str, int] = {}  # a class named here may be this long while it is split


def modules_of(package: str) -> list[str]:
    """Every module of ``package``, those of its sub-packages too (not a ``__main__``: importing it runs it)."""
    found = []
    for info in pkgutil.iter_modules([str(ROOT / package.replace(".", "/"))]):
        if info.name != "__main__":
            found.append(f"{package}.{info.name}")
        if info.ispkg:
            found += modules_of(f"{package}.{info.name}")
    return found


def loaded_after_importing(modules: list[str]) -> set[str]:
    """Top-level packages in ``sys.modules`` after a fresh interpreter imports ``modules``."""
    script = ("import sys\n" + "".join(f"import {m}\n" for m in modules) +
              "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"GRADIO_ANALYTICS_ENABLED": "False", "PATH": ""})
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_library_loads_neither_gradio_nor_plotly():
    modules = modules_of("transformer")
    assert {"transformer.paper.model", "transformer.train.trainer", "transformer.train.cli"} <= set(modules)
    loaded = loaded_after_importing(modules)
    assert "torch" in loaded, "the check itself imported the library"
    assert not {"gradio", "plotly"} & loaded


def test_no_name_the_library_exports_is_also_one_of_its_modules():
    """Importing ``transformer.translate`` (the command line) sets the package's attribute ``translate`` to that
    module: a function exported under a module's name would change into the module behind its user's back."""
    import transformer

    modules = {name.split(".")[1] for name in modules_of("transformer")}
    assert "translate" in modules
    assert not set(transformer.__all__) & modules


def test_views_are_plain_functions_of_plain_values_without_gradio():
    modules = modules_of("ui.views")
    assert "ui.views.translate" in modules
    loaded = loaded_after_importing(modules)
    assert "plotly" in loaded and "gradio" not in loaded


def sources(*folders: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for folder in folders for p in (ROOT / folder).rglob("*.py"))


def imported_packages(source: str) -> set[str]:
    """Top-level packages a source imports anywhere in it, inside functions too; relative imports are its own."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


# The library's parts and the parts each may use: the paper's model at the bottom, then what makes it fast on a
# CPU (and which of its ways is fastest on this machine, speed_choices) and its files, then what looks inside it
# or trains it. The command lines at the top level (translate, evaluate, export, hub, inside_head, attribute,
# contributions, patch, corpus, align) may use them all; the basics beside them (errors, metrics, data) use none
# but errors, the most basic (every part's errors are named alike: errors.Explained). What every command line
# shares (arguments) stands on the model, its files and its speed choices; training's own command line
# (train/cli.py) is built on it like the others.
LIBRARY_PARTS = {
    "paper": {"errors"},
    "cpu": {"paper"},
    "speed_choices": {"paper", "cpu"},
    "files": {"paper", "cpu", "errors"},
    "inside": {"paper", "files", "errors", "metrics"},
    "train": {"paper", "cpu", "files", "data", "metrics", "errors", "arguments"},
    "errors": set(), "metrics": set(), "data": {"errors"},
    "arguments": {"paper", "cpu", "files", "errors", "speed_choices"},
}


def library_parts_used(source: str, path: str) -> set[str]:
    """The parts of the library (``paper``, ``train``, ``data``...) that ``source``, the file at ``path`` in it,
    imports, relatively or by the package's name, inside functions too; not its own part."""
    package = list(Path(path).with_suffix("").parts[:-1])
    used = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            module = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer"):
            module = node.module.split(".")
        elif isinstance(node, ast.Import):
            named = [alias.name.split(".") for alias in node.names if alias.name.startswith("transformer.")]
            used |= {module[1] for module in named}
            continue
        else:
            continue
        used |= {module[1]} if len(module) > 1 else {alias.name for alias in node.names}
    return used - {Path(path).relative_to("transformer").parts[0].removesuffix(".py")}


@pytest.mark.parametrize("path", [p for p in sources("transformer")
                                  if Path(p).relative_to("transformer").parts[0].removesuffix(".py") in LIBRARY_PARTS])
def test_each_part_of_the_library_uses_only_the_parts_below_it(path):
    part = Path(path).relative_to("transformer").parts[0].removesuffix(".py")
    assert library_parts_used((ROOT / path).read_text(), path) <= LIBRARY_PARTS[part]


def test_the_parts_check_sees_relative_and_named_imports_at_any_depth():
    trainer, learner = "transformer/train/trainer.py", "transformer/train/learner.py"
    assert {"files", "data"} <= library_parts_used((ROOT / trainer).read_text(), trainer)
    assert {"paper", "files"} <= library_parts_used((ROOT / learner).read_text(), learner)
    assert "train" not in library_parts_used((ROOT / trainer).read_text(), trainer)
    hidden = ("def load():\n    from transformer.train.loss import token_loss\n    import transformer.inside.analysis\n"
              "    from transformer import data\n    from ..files import checkpoint\n")
    assert library_parts_used(hidden, "transformer/paper/model.py") == {"train", "inside", "data", "files"}


def module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, path: str, known: set[str]) -> set[str]:
    """The project's modules (of ``known``) that ``source``, the file at ``path``, imports anywhere in it, inside
    functions too: ``from . import multilingual`` in transformer/files/hub.py is ``transformer.files.multilingual``,
    ``from .hub import read_json`` is ``transformer.files.hub``."""
    package = list(Path(path).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + (node.module.split(".") if node.module else []))
            for alias in node.names:
                found |= {f"{target}.{alias.name}"} if f"{target}.{alias.name}" in known else {target} & known
    return found - {module_name(path)}


def import_circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, directly or round a longer circle (Tarjan's strongly
    connected components of more than one module)."""
    order, lowest, stack, circles = {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = lowest[module] = len(order)
        stack.append(module)
        for other in sorted(imports.get(module, ())):
            if other not in order:
                visit(other)
                lowest[module] = min(lowest[module], lowest[other])
            elif other in stack:
                lowest[module] = min(lowest[module], order[other])
        if lowest[module] == order[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return circles


def test_no_modules_import_one_another_even_round_a_circle_or_inside_a_function():
    """A circle makes the order of imports matter, and hides which module is the foundation of which."""
    paths = sources("transformer", "ui") + ["app.py"]
    known = {module_name(path) for path in paths}
    imports = {module_name(path): imported_modules((ROOT / path).read_text(), path, known) for path in paths}
    assert "transformer.files.transformers_format" in imports["transformer.files.multilingual"]
    assert import_circles(imports) == []


def test_the_circle_check_sees_circles_round_several_modules_and_imports_inside_functions():
    known = {"transformer.files.hub", "transformer.files.multilingual", "transformer.paper.model"}
    lazy = "def convert():\n    from . import multilingual\n    from ..paper.model import Transformer\n"
    assert imported_modules(lazy, "transformer/files/hub.py", known) == {"transformer.files.multilingual",
                                                                           "transformer.paper.model"}
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


# The one door from the library to the app: the offline pack is the app as a static page, and the command that makes
# it puts in the app's lessons (their words and questions), in its command-line function alone.
THE_APP_AS_A_PAGE = {"transformer/pack.py": "ui.views.pack_lessons"}


@pytest.mark.parametrize("path", sources("transformer"))
def test_no_file_of_the_library_imports_the_app_even_inside_a_function(path):
    source = (ROOT / path).read_text()
    if path in THE_APP_AS_A_PAGE:  # the door, and nothing else of the file imports the app
        tree = ast.parse(source)
        command = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "packed")
        assert imported_packages(ast.unparse(command)) == {"ui"} and THE_APP_AS_A_PAGE[path] in ast.unparse(command)
        tree.body.remove(command)
        source = ast.unparse(tree)
    assert not {"ui", "app", "gradio", "plotly"} & imported_packages(source)


def test_the_import_check_sees_imports_inside_functions_and_not_relative_ones():
    lazy = "def draw():\n    from ui.drawing.figures import training_curves\n    from .data import x\n    import plotly.io\n"
    assert imported_packages(lazy) == {"ui", "plotly"}


@pytest.mark.parametrize("path", ["app.py", *sources("ui", "transformer")])
def test_no_function_is_longer_than_a_screenful(path):
    tree = ast.parse((ROOT / path).read_text())
    too_long = {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION}
    assert not too_long, f"split these (lines): {too_long}"


@pytest.mark.parametrize("path", ["app.py", *sources("ui", "transformer")])
def test_no_module_is_longer_than_one_job_needs_nor_any_class(path):
    text = (ROOT / path).read_text()
    if path not in ONE_READING:
        assert len(text.splitlines()) <= LONGEST_MODULE, f"{path}: split it by what its parts do"
    classes = {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(ast.parse(text))
               if isinstance(node, ast.ClassDef)}
    assert not {name: lines for name, lines in classes.items()
                if lines > CLASSES_STILL_LONG.get(name, LONGEST_CLASS)}, f"{path}: split these classes"


# The app's rooms, from the bottom: the package itself (which says, before PyTorch starts, whether it runs on
# ZeroGPU); what every feature stands on (runtime/, knowing none of them); the drawing and
# the training slot, on it alone; what each tab shows (views/); the classes; the services every tab shares; the
# parts of the page (tabs/, the header and lessons among them, and the class's panel and students' page); the
# named endpoints; and the page built from them all. A room uses only the rooms below it, and itself.
UI_ROOMS = {"ui": -1, "ui.runtime": 0, "ui.drawing": 1, "ui.training": 1, "ui.hub_models": 1, "ui.views": 2,
            "ui.classes.classroom": 3, "ui.services": 4, "ui.tabs": 5, "ui.classes.class_page": 5, "ui.api": 6,
            "ui.build": 7}


def ui_room(module: str) -> str:
    """The room a module of ui/ is in: the longest name of UI_ROOMS it is or lies in."""
    return max((room for room in UI_ROOMS if module == room or module.startswith(room + ".")), key=len)


def test_each_room_of_the_app_uses_only_the_rooms_below_it():
    modules = {module_name(path): path for path in sources("ui")}
    assert set(map(ui_room, modules)) == set(UI_ROOMS), "every room has a module"
    upward = sorted((module, other) for module, path in modules.items()
                    for other in imported_modules((ROOT / path).read_text(encoding="utf-8"), path, set(modules))
                    if ui_room(other) != ui_room(module) and UI_ROOMS[ui_room(other)] >= UI_ROOMS[ui_room(module)])
    assert upward == []


@pytest.mark.parametrize("path", sources("ui/tabs"))
def test_no_part_of_the_page_defines_a_component_class(path):
    """Gradio writes a type stub (.pyi) copying the whole module beside any module that subclasses one of its
    components, and "go to definition" then lands in the copy: components live in ui/runtime/components.py."""
    assert [node.name for node in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(node, ast.ClassDef)] \
        == []


def test_the_room_check_sees_an_import_up_and_one_between_rooms_of_a_floor():
    assert ui_room("ui.runtime.page") == "ui.runtime" and ui_room("ui.classes.class_page") == "ui.classes.class_page"
    assert UI_ROOMS[ui_room("ui.tabs.header")] > UI_ROOMS[ui_room("ui.services")] > UI_ROOMS[ui_room("ui.views.text")]
    assert UI_ROOMS[ui_room("ui.training.jobs")] == UI_ROOMS[ui_room("ui.drawing.figures")]


@pytest.mark.parametrize("path", [p for p in sources("ui") if p != "ui/runtime/page_code.py"])
def test_the_pages_scripts_and_styles_live_in_files_of_their_own_not_in_python_strings(path):
    """ui/static/ holds the page's JavaScript and CSS (page_code.py puts them in its head); Python hands an event
    at most a one-line call into them."""
    tree = ast.parse((ROOT / path).read_text())
    texts = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    assert not [text for text in texts if "<script" in text or "<style" in text or "{ display:" in text]
    calls = [keyword.value for node in ast.walk(tree) if isinstance(node, ast.Call) for keyword in node.keywords
             if keyword.arg == "js" and isinstance(keyword.value, (ast.Constant, ast.JoinedStr))]
    for call in calls:
        text = ast.unparse(call)
        assert "\n" not in text and len(text) <= 100, f"{text[:80]}...: a function of ui/static/ is called instead"


def test_every_setting_the_app_reads_from_the_environment_is_in_the_readmes_table():
    named = {name for path in ["app.py", *sources("ui", "transformer")]
             for name in re.findall(r"EXPLORER_[A-Z_]+", (ROOT / path).read_text(encoding="utf-8"))}
    table = {line.split("|")[1] for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
             if line.startswith("| `")}
    assert "EXPLORER_MODELS_MB" in named
    assert sorted(name for name in named if not any(f"`{name}`" in row for row in table)) == []
