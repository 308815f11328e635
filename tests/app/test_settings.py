"""The app's settings, ``EXPLORER_*``: each read one way, from one table; a value the app cannot use stops its start
with one line naming the variable, the value and what the variable takes."""

import gc
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import app
from transformer import cpu
from ui.classes.classroom import Classrooms
from ui.hub_models import HubModels
from ui.training.published_models import PublishedModels
from ui.runtime import costly, settings
from ui.runtime.settings import SETTINGS, SettingError

ROOT = Path(__file__).resolve().parents[2]

# Each setting that takes something other than text: a value it cannot use, one it can, and that value as read.
VALUES = [
    ("EXPLORER_DISABLE_TRAINING", "maybe", "on", True),
    ("EXPLORER_HUB_MODEL_MB", "lots", "2500", 2500.0),
    ("EXPLORER_HUB_CACHE_MB", "-1", "100", 100.0),
    ("EXPLORER_MODELS_MB", "inf", "512.5", 512.5),
    ("EXPLORER_KEPT_MODELS", "0", "3", 3),
    ("EXPLORER_CORPUS_SENTENCES", "all", "50", 50),
    ("EXPLORER_MAX_CLASSES", "abc", "5", 5),
    ("EXPLORER_MAX_STUDENTS", "2.5", "30", 30),
    ("EXPLORER_CLASSES_PER_ADDRESS", "-2", "1", 1),
    ("EXPLORER_COSTLY_CPU_SECONDS", "nan", "45", 45.0),
    ("EXPLORER_COSTLY_WINDOW_S", "0", "60", 60.0),
    ("EXPLORER_TRUSTED_PROXIES", "two", "2", 2),
    ("EXPLORER_DEVICE", "gpu", "cuda:1", torch.device("cuda:1")),
    ("EXPLORER_THREADS", "0", "3", 3),
]


@pytest.mark.parametrize("name, bad, good, read", VALUES)
def test_each_setting_reads_what_it_takes_and_names_what_it_does_not(monkeypatch, name, bad, good, read):
    monkeypatch.setenv(name, good)
    assert settings.value(name) == read
    monkeypatch.setenv(name, bad)
    with pytest.raises(SettingError) as refused:
        settings.value(name)
    assert str(refused.value) == f"{name}={bad!r} cannot be used: it takes {SETTINGS[name].accepts}"
    monkeypatch.setenv(name, " ")
    assert settings.value(name) == SETTINGS[name].default, "blank is the default"
    monkeypatch.delenv(name)
    assert settings.value(name) == SETTINGS[name].default


def test_every_setting_but_those_that_take_text_is_tried_with_a_value_it_cannot_use():
    assert {name for name, *_ in VALUES} == {name for name, setting in SETTINGS.items() if not setting.text}


def test_a_setting_that_takes_text_takes_blank_as_none(monkeypatch):
    monkeypatch.setenv("EXPLORER_HUB_MODELS", "")
    assert HubModels(directory="unused").patterns == [], "an empty allow-list opens nothing"
    monkeypatch.delenv("EXPLORER_HUB_MODELS")
    assert HubModels(directory="unused").patterns == [pattern.strip()
                                                      for pattern in HubModels.DEFAULT_PATTERNS.split(",")]


def test_limits_not_given_come_from_their_settings_and_limits_given_win(monkeypatch, tmp_path):
    for name, written in (("EXPLORER_MAX_CLASSES", "3"), ("EXPLORER_MAX_STUDENTS", "7"),
                          ("EXPLORER_CLASSES_PER_ADDRESS", "1"), ("EXPLORER_KEPT_MODELS", "4")):
        monkeypatch.setenv(name, written)
    rooms = Classrooms(ask=lambda lesson: None)
    assert (rooms.max_classes, rooms.max_students, rooms.per_address) == (3, 7, 1)
    assert Classrooms(ask=lambda lesson: None, max_classes=0).max_classes == 0
    assert PublishedModels(tmp_path).kept == 4 and PublishedModels(tmp_path, kept=2).kept == 2


def test_values_the_app_cannot_use_stop_its_start_with_a_line_each(monkeypatch, capsys):
    monkeypatch.setenv("EXPLORER_MAX_CLASSES", "abc")
    monkeypatch.setenv("EXPLORER_DEVICE", "gpu")
    with pytest.raises(SystemExit) as stopped:
        app.main(["--port", "0"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "app.py: EXPLORER_MAX_CLASSES='abc' cannot be used: it takes a whole number of 1 or more\n"
        "app.py: EXPLORER_DEVICE='gpu' cannot be used: it takes a device PyTorch knows (cpu, cuda, cuda:1)\n")


class Started(Exception):
    """Raised where the app would go on to build its page: what it set up before is checked."""


def started(**options):
    raise Started


@pytest.mark.parametrize("written, threads", [("1", 1), ("", 2)])
def test_the_server_computes_on_the_threads_set_else_on_the_cores_nothing_else_keeps_busy(monkeypatch, written,
                                                                                          threads):
    monkeypatch.setenv("EXPLORER_THREADS", written)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu, "cores_available", lambda: 2)
    monkeypatch.setattr(cpu, "busy_cores", lambda since=None: 0.0)
    monkeypatch.setattr(costly.CORES, "total", costly.CORES.total)
    monkeypatch.setattr(costly.WORKER, "threads", costly.WORKER.threads)
    monkeypatch.setattr(app.Services, "default", started)
    before = torch.get_num_threads()
    try:
        with pytest.raises(Started):
            app.main(["--port", "0"])
        assert (torch.get_num_threads(), costly.CORES.total, costly.WORKER.threads) == (threads, threads, 1)
    finally:
        torch.set_num_threads(before)


def test_started_as_a_program_the_app_collects_garbage_again_once_its_page_is_built(monkeypatch):
    """``python app.py`` starts without garbage collection (app.py's top); main() turns it back on, the objects
    made until then frozen, before it serves."""
    services = SimpleNamespace(open_at_start=lambda sources: None, costly=SimpleNamespace(worker=SimpleNamespace(
        start=lambda: None)))
    monkeypatch.setattr(app.Services, "default", lambda **options: services)
    monkeypatch.setattr(app, "build_app", lambda *arguments: SimpleNamespace(launch=None))
    monkeypatch.setattr(app, "launch_options", started)
    monkeypatch.setattr(costly, "use_threads", lambda threads: None)
    gc.disable()
    try:
        with pytest.raises(Started):
            app.main(["--port", "0"])
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_app_reads_its_settings_only_through_the_table():
    reading_elsewhere, unknown = [], set()
    for path in [ROOT / "app.py", *(ROOT / "ui").rglob("*.py")]:
        source = path.read_text(encoding="utf-8")
        if path.name != "settings.py" and re.search(r"(environ|getenv)\W+[\w.(\[]*[\"']EXPLORER_", source):
            reading_elsewhere.append(path.relative_to(ROOT).as_posix())
        unknown |= set(re.findall(r"settings\.value\([\"'](\w+)", source)) - set(SETTINGS)
    assert reading_elsewhere == [] and unknown == set()


def test_a_visitor_may_open_by_default_only_what_the_default_caps_let_in():
    """Each multilingual translator the README weighs is over the default download cap, so no family is in the
    default allow-list; docs/multilingual.md shows the host the list that adds them all."""
    import fnmatch
    import re
    from pathlib import Path
    from transformer.files.multilingual import FAMILIES
    root = Path(__file__).resolve().parents[2]
    weighed = {model: int(megabytes.replace(",", "")) for model, megabytes in re.findall(
        r"\| `([\w./-]+)` \| [\d.]+M \| ([\d,]+) MB \|", (root / "README.md").read_text(encoding="utf-8"))}
    assert len(weighed) == len(FAMILIES)
    cap = SETTINGS["EXPLORER_HUB_MODEL_MB"].default
    patterns = HubModels(directory="unused").patterns
    for model, megabytes in weighed.items():
        assert megabytes > cap and not any(fnmatch.fnmatchcase(model, pattern) for pattern in patterns), model
    assert any(fnmatch.fnmatchcase("Helsinki-NLP/opus-mt-en-de", pattern) for pattern in patterns)
    guide = (root / "docs" / "multilingual.md").read_text(encoding="utf-8")
    assert all(family.published in guide for family in FAMILIES.values())
