"""The Model tab's "Download for offline use": the model shown as an offline pack's zip, made once for the same
weights and then handed out again at once; a model that cannot be packed is refused in one sentence."""

import tempfile
import zipfile
from pathlib import Path

import pytest

from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui import services
from ui.tabs import model as model_tab
from ui.views import offline_pack


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"),
                             hub=services.HubModels(tmp_path_factory.mktemp("hub")))


def test_the_packs_are_kept_where_gradio_serves_files_from():
    assert offline_pack.PACKS.is_relative_to(Path(tempfile.gettempdir()))


def test_the_model_shown_comes_as_a_zip_of_its_pack_made_once(shared, monkeypatch, tmp_path):
    monkeypatch.setattr(offline_pack, "PACKS", tmp_path / "packs")
    (tmp_path / "packs" / f"{offline_pack.MAKING}stopped").mkdir(parents=True)  # a pack stopped half-way
    archive = model_tab.on_offline_pack(shared, "reverse-tiny")["offline_file"]
    assert not list((tmp_path / "packs").glob(f"{offline_pack.MAKING}*"))
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        lessons = zipped.read("reverse-tiny-offline/scripts/pack-lessons.js").decode("utf-8")
    assert '"key": "attention_aligns"' in lessons, "the pack carries the lessons of the model shown"
    assert {"reverse-tiny-offline/index.html", "reverse-tiny-offline/contents.js",
            "reverse-tiny-offline/models/reverse-tiny/manifest.js"} <= names
    monkeypatch.setattr(offline_pack, "make_pack", lambda *args, **kwargs: pytest.fail("packed again"))
    assert model_tab.on_offline_pack(shared, "reverse-tiny")["offline_file"] == archive


def test_only_the_last_packs_asked_for_are_kept(shared, tmp_path, monkeypatch):
    folder = tmp_path / "packs"
    for number in range(offline_pack.PACKS_KEPT + 2):
        (folder / f"old-{number}").mkdir(parents=True)
        (folder / f"old-{number}" / "a-offline.zip").write_bytes(b"")
    monkeypatch.setattr(offline_pack, "pack_key", lambda checkpoint: "new")
    offline_pack.offline_archive(shared.registry.get("reverse-tiny"), folder)
    assert len(list(folder.glob("*/*.zip"))) == offline_pack.PACKS_KEPT and (folder / "new").is_dir()


def test_a_model_not_saved_in_a_folder_is_refused_in_one_sentence(shared):
    checkpoint = shared.registry.get("reverse-tiny")
    unsaved = type(checkpoint)(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer)
    with pytest.raises(InputError, match="not saved in a folder"):
        offline_pack.offline_archive(unsaved, shared.hub.directory / "packs")
