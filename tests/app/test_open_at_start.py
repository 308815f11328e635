"""Where the app is hosted, real translators are opened when the server starts, and what they cost is bounded:
the Hub cache by size (the least recently used model goes, never one in use), the models in memory by size, and
each public visitor by the new models it may open in an hour."""

import logging
import shutil
import time
from types import SimpleNamespace

import pytest
import torch

from marian_models import build_marian
from transformer import speed_choices
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError
from ui.tabs import header
from ui import services
from ui.classes.classroom import Classrooms
from ui.hub_models import MB, HubModels, OpeningAtStart, bytes_under
from ui.services import ModelRegistry, Services
from ui.views import lessons
from ui.views.model import status_line

OPENED_WITHIN_S = 120  # converting a tiny model takes about a second; a stuck opening fails the test, not the suite
VISITOR = "203.0.113.7"
PAGE = ("A dog runs across the grass.", "beam", 4, 40, "cross", "one head", 1, 1, False)  # on_open's other inputs


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    return build_marian(tmp_path_factory.mktemp("marian"))


def services_with_hub(tmp_path, **hub_settings) -> Services:
    hub_models = HubModels(tmp_path / "hub", **hub_settings)
    return Services(ModelRegistry([REPOSITORY_CHECKPOINTS, hub_models.directory], device="cpu"), hub=hub_models)


def opened(services: Services, sources: list[str]) -> Services:
    services.open_at_start(sources)
    assert services.opening.wait(OPENED_WITHIN_S), "the models opened at start were still opening"
    return services


def page_opened(services: Services, query: dict | None = None) -> dict:
    return header.on_open(services, "multi30k-en-de", *PAGE, SimpleNamespace(query_params=query or {}))


def hf_cache_holding(marian_dir, cache, repo_id: str) -> None:
    """huggingface_hub's cache as a download of ``repo_id`` leaves it."""
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(marian_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_a_directory_opened_at_start_becomes_the_model_new_pages_open_on(marian_dir, tmp_path):
    services = services_with_hub(tmp_path)
    assert page_opened(services)["model"] == "multi30k-en-de" and not services.opening.status()
    opened(services, [str(marian_dir)])
    assert services.registry.default_name() == marian_dir.name
    page = page_opened(services)
    assert page["model"] == marian_dir.name
    assert f"`{marian_dir.name}` is open, in the model list." in page["opening_status"].value and page["opening_timer"].active is False
    linked = page_opened(services, {"model": "multi30k-en-fr"})
    assert linked["model"] == "multi30k-en-fr", "a model the visitor's link names is kept"
    assert "multi30k-en-de" in services.registry.names(), "the caption models stay in the list"


def test_a_model_opened_at_start_is_loaded_then_and_its_speed_choices_stated_in_one_line(marian_dir, tmp_path,
                                                                                         caplog):
    """Timing the ways it decodes fastest here happens as it is opened, off any visitor's request; a restart on
    the same machine reads them from beside the Hub cache instead of timing them again."""
    hub_models = HubModels(tmp_path / "hub")
    assert Services.default(hub_models=hub_models).registry.speed_cache == hub_models.directory / ".speed-choices.json"
    def started() -> Services:
        return Services(ModelRegistry([hub_models.directory], device="cpu",
                                      speed_cache=hub_models.directory / ".speed-choices.json"), hub=hub_models)

    with caplog.at_level(logging.INFO, logger="ui.services"):
        services = opened(started(), [str(marian_dir)])
    assert services.registry.loaded() == [marian_dir.name]
    lines = [record.getMessage() for record in caplog.records if record.name == "ui.services"]
    assert len(lines) == 1 and lines[0].startswith(f"{marian_dir.name} decodes on ") and "timed in" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ui.services"):
        started().registry.get(marian_dir.name)
    assert [record.getMessage().endswith("read from the cache") for record in caplog.records
            if record.name == "ui.services"] == [True]


def test_a_model_opened_at_start_that_will_not_load_is_logged_and_the_next_is_opened(tmp_path, monkeypatch, caplog):
    services = services_with_hub(tmp_path)

    def fails(name):
        raise RuntimeError("the weights' file is cut short")
    monkeypatch.setattr(services.registry, "get", fails)
    with caplog.at_level(logging.WARNING, logger="ui.services"):
        services.ready_at_start("multi30k-en-fr")  # the opening thread goes on to the next model
    assert services.registry.default_name() == "multi30k-en-fr"
    assert "multi30k-en-fr was opened at start but could not be loaded" in caplog.text
    assert "the weights' file is cut short" in caplog.text


def test_a_hub_id_opened_at_start_offline_comes_from_huggingface_hubs_cache(marian_dir, tmp_path, monkeypatch):
    hf_cache_holding(marian_dir, tmp_path / "hf-cache", "Helsinki-NLP/opus-mt-en-xx")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    services = opened(services_with_hub(tmp_path), ["Helsinki-NLP/opus-mt-en-xx"])
    assert services.registry.default_name() == "Helsinki-NLP--opus-mt-en-xx"
    assert "cc-by-4.0" in services.registry.get("Helsinki-NLP--opus-mt-en-xx").card
    says = page_opened(services)["model_status"]
    assert "A real translator: Helsinki-NLP trained it on millions of sentence pairs" in says
    assert "image captions" in header.on_model(services, "multi30k-en-de", PAGE[0], {}, *PAGE[1:])["model_status"], \
        "what the page says the model learned from follows the model shown"
    assert (tmp_path / "hf-cache" / "models--Helsinki-NLP--opus-mt-en-xx").is_dir(), "the visitor's own cache is kept"


def test_while_models_open_the_page_says_how_far_along_and_keeps_asking(tmp_path):
    services = services_with_hub(tmp_path)
    services.opening = services.opening_of(["Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-en-fr"])
    services.opening.openings[0].state = "opening"
    services.hub.progress["Helsinki-NLP/opus-mt-en-de"] = (tmp_path / "download", 298 * 10**6)
    (tmp_path / "download").mkdir()
    (tmp_path / "download" / "model.safetensors.incomplete").write_bytes(b"0" * 3 * 10**6)
    status = header.opening_views(services)
    assert status["opening_timer"].active is True
    assert status["opening_status"].value.splitlines() == [
        "- Opening `Helsinki-NLP/opus-mt-en-de` for this server: 3 MB of 298 MB downloaded…",
        "- `Helsinki-NLP/opus-mt-en-fr` will be opened next."]
    assert header.on_opening_tick(services)["model"].choices


@pytest.mark.parametrize("source, says", [
    ("Helsinki-NLP/opus-mt-en-zz", "the Hub cannot be reached from this server, and Helsinki-NLP/opus-mt-en-zz was "
                                   "never downloaded here."),
    ("not a model", "“not a model” is not a Hub model id; ids look like Helsinki-NLP/opus-mt-en-de."),
    ("{not_marian}", "not_marian has no config.json, so it is not a transformers model."),
])
def test_a_model_that_cannot_be_opened_at_start_is_one_sentence_and_the_app_serves_on(tmp_path, monkeypatch,
                                                                                      caplog, source, says):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    (tmp_path / "not_marian").mkdir()
    source = source.format(not_marian=tmp_path / "not_marian")
    with caplog.at_level(logging.WARNING, logger="ui.hub_models"):
        services = opened(services_with_hub(tmp_path), [source])
    assert services.opening.status().endswith(f"could not be opened: {says}")
    assert says in caplog.text
    assert page_opened(services)["model"] == "multi30k-en-de"


def test_the_hub_cache_makes_room_by_removing_the_least_recently_used_model_never_one_in_use(marian_dir, tmp_path):
    one_model = bytes_under(marian_dir)
    hub_models = HubModels(tmp_path / "hub", cache_cap_mb=2.5 * one_model / 1e6)
    copies = []
    for name in ("first", "second", "third"):
        copies.append(tmp_path / name)
        shutil.copytree(marian_dir, copies[-1])
    soon = time.time() + 1000  # later than any file's time: used after both were opened, first after second
    last_used = {"first": soon + 100, "second": soon}.get
    hub_models.open(str(copies[0]), directories=True)
    hub_models.open(str(copies[1]), directories=True)
    hub_models.open(str(copies[2]), in_use=lambda name: name == "second",
                    last_used=lambda name: last_used(name, 0.0), directories=True)
    assert sorted(hub_models.converted()) == ["second", "third"], "second was used longer ago, but is in use"
    assert hub_models.cache_bytes() <= hub_models.cache_cap
    assert not hub_models.downloads.exists()
    shutil.copytree(marian_dir, tmp_path / "fourth")
    with pytest.raises(hub.HubError, match=r"Hub cache \(\d+ MB\) is full of models in use"):
        hub_models.open(str(tmp_path / "fourth"), in_use=lambda name: True, directories=True)
    assert sorted(hub_models.converted()) == ["second", "third"]


@pytest.fixture
def every_weight_copied(monkeypatch):
    """Every weight read through a transposed copy, whatever this machine would time fastest: the memory a model
    takes depends on its layouts (a weight read as stored has no copy), and these tests count it."""
    def choose_speed(model, cache=None):
        shapes = speed_choices.weight_groups(model)
        chosen = speed_choices.SpeedChoices({shape: "transposed" for shape in shapes}, "fused")
        speed_choices.apply_choices(model, chosen)
        return chosen
    monkeypatch.setattr(services, "choose_speed", choose_speed)


def needed_mb(name: str) -> str:
    """The megabytes a model needs, as the refusal writes them."""
    return f"{services.model_bytes(ModelRegistry([REPOSITORY_CHECKPOINTS], device='cpu').get(name)) / MB:,.0f}"


def test_models_in_memory_stay_within_their_megabytes_the_least_recently_used_let_go(every_weight_copied, monkeypatch):
    # A caption model takes 55 MB: 31 of weights and 24 of the copies decoding on a CPU reads.
    registry = ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu", max_mb=70)
    registry.get("multi30k-en-de")
    registry.get("reverse-tiny")
    registry.get("multi30k-en-fr")
    assert registry.loaded() == ["reverse-tiny", "multi30k-en-fr"] and registry.loaded_bytes() <= 70e6
    small = ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu", max_mb=10)
    monkeypatch.setattr(services, "computes_bf16_natively", lambda: False)  # else kept in bfloat16: below
    with pytest.raises(CheckpointError, match=f"multi30k-en-de needs {needed_mb('multi30k-en-de')} MB of memory, "
                                              r"more than the 10 MB this server keeps for models "
                                              r"\(EXPLORER_MODELS_MB\)"):
        small.get("multi30k-en-de")
    assert small.get("reverse-tiny").name == "reverse-tiny"


def test_a_model_too_big_in_float32_is_kept_in_bfloat16_where_the_cpu_computes_in_it_natively(every_weight_copied,
                                                                                               monkeypatch, caplog):
    monkeypatch.setattr(services, "computes_bf16_natively", lambda: True)
    registry = ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu", max_mb=30)
    with caplog.at_level(logging.INFO, logger="ui.services"):
        checkpoint = registry.get("multi30k-en-de")  # 55 MB in float32: 31 of weights, 24 of decoding copies
    assert checkpoint.model.dtype == torch.bfloat16 and 15e6 < registry.loaded_bytes() < 16e6
    assert not caplog.records, "no speed choices apply to a model in bfloat16, and none are timed for it"
    assert checkpoint.translate("A dog runs across the grass.", 1).text == "Ein Hund rennt über das Gras."
    assert "Kept in bfloat16 to fit this server's memory" in status_line(checkpoint)
    assert registry.on_disk()("multi30k-en-de").model.dtype == torch.bfloat16, "the worker computes as the server"
    assert registry.get("reverse-tiny").model.dtype == torch.float32, "a model that fits stays as it is"


def test_a_model_too_big_in_float32_is_refused_where_the_cpu_has_no_bfloat16_arithmetic(every_weight_copied,
                                                                                         monkeypatch):
    monkeypatch.setattr(services, "computes_bf16_natively", lambda: False)  # emulated, it decodes several times slower
    registry = ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu", max_mb=30)
    with pytest.raises(CheckpointError, match=f"multi30k-en-de needs {needed_mb('multi30k-en-de')} MB of memory"):
        registry.get("multi30k-en-de")
    assert registry.loaded() == []


def test_a_public_visitor_opens_at_most_three_new_models_an_hour_and_those_opened_before_freely(marian_dir, tmp_path,
                                                                                              monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    hub_models = HubModels(tmp_path / "hub")
    hub.convert(marian_dir, hub_models.directory / "Helsinki-NLP--opus-mt-en-de")
    for language in ("fr", "es", "it"):
        with pytest.raises(hub.HubError, match="cannot be reached"):
            hub_models.open(f"Helsinki-NLP/opus-mt-en-{language}", VISITOR)
    with pytest.raises(hub.HubError, match="You have opened 3 new models from the Hub in the last hour, .* try "
                                           "again in 60 minutes"):
        hub_models.open("Helsinki-NLP/opus-mt-en-nl", VISITOR)
    assert hub_models.open("Helsinki-NLP/opus-mt-en-de", VISITOR) == "Helsinki-NLP--opus-mt-en-de"
    with pytest.raises(hub.HubError, match="cannot be reached"):  # another address, and this machine's own user
        hub_models.open("Helsinki-NLP/opus-mt-en-nl", "198.51.100.2")
    with pytest.raises(hub.HubError, match="cannot be reached"):
        hub_models.open("Helsinki-NLP/opus-mt-en-nl", None)


def test_a_space_opens_both_opus_mt_translators_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("EXPLORER_OPEN_AT_START", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert OpeningAtStart.sources_from_environment() == []
    monkeypatch.setenv("SPACE_ID", "someone/attention-explorer")
    assert OpeningAtStart.sources_from_environment() == ["Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-en-fr"]
    monkeypatch.setenv("EXPLORER_OPEN_AT_START", " /models/opus-mt-en-de , ")
    assert OpeningAtStart.sources_from_environment() == ["/models/opus-mt-en-de"]
    monkeypatch.setenv("EXPLORER_OPEN_AT_START", "")
    assert OpeningAtStart.sources_from_environment() == []


def test_the_lessons_that_compare_translators_use_the_real_ones_where_they_are_open(tmp_path):
    """Opened at start under opus-mt's names, two translators of opus-mt's depth (tiny stand-ins here) take the
    word-order lesson's pair; the real-translator lesson sets the caption model beside the German one."""
    stand_in = build_marian(tmp_path / "stand-in", encoder_layers=6, decoder_layers=6)
    for name in ("opus-mt-en-de", "opus-mt-en-fr"):
        shutil.copytree(stand_in, tmp_path / name)
    services = opened(services_with_hub(tmp_path), [str(tmp_path / "opus-mt-en-de"), str(tmp_path / "opus-mt-en-fr")])
    names = services.registry.names()
    by_title = {lesson.title: lesson for lesson in lessons.LESSONS}
    (left, left_map), (right, right_map) = lessons.side_by_side(by_title["Word order differs across languages"],
                                                               services.registry.get, names, 20)
    assert "· opus\\-mt\\-en\\-de · mean of the heads of layer 5" in left and "opus\\-mt\\-en\\-fr" in right
    assert left_map is not None and right_map is not None
    (caption_model, _), (real, _) = lessons.side_by_side(by_title["A real translator"], services.registry.get, names,
                                                         20)
    assert "multi30k\\-en\\-de" in caption_model and "opus\\-mt\\-en\\-de" in real
    without_french = [name for name in names if name != "opus-mt-en-fr"]
    (caption_german, _), _ = lessons.side_by_side(by_title["Word order differs across languages"],
                                                  services.registry.get, without_french, 20)
    assert "multi30k\\-en\\-de" in caption_german, "one real translator alone: the caption models' pair"


def test_a_model_an_open_class_is_on_stays_in_use_however_long_ago_it_was_used(tmp_path):
    services = services_with_hub(tmp_path)
    services.classes = Classrooms(ask=lambda lesson: None)  # the class's question is not what this is about
    opus = "Helsinki-NLP--opus-mt-en-de"
    assert not services.in_use(opus)
    real_translator = 1 + [lesson.title for lesson in lessons.LESSONS].index("A real translator")
    services.classes.open(real_translator, teacher="a teacher's page")
    assert services.in_use(opus) and services.in_use("multi30k-en-de")
    assert not services.in_use("Helsinki-NLP--opus-mt-en-fr")
