"""``python -m transformer.pack``: what a pack folder holds, where it may be written, and the models it refuses,
each in one sentence with nothing already there lost."""

import json
import re
import shutil
import zipfile

import pytest

from marian_models import build_marian
from transformer import pack as pack_command
from transformer.errors import InputError
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, save_checkpoint
from transformer.pack import MARKER, PART_CHARS, make_pack
from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import Tokenizer

TINY = REPOSITORY_CHECKPOINTS / "reverse-tiny"
SPACE_LIMIT = 10 * 1000 * 1000  # bytes: a static Space refuses a larger file without Git LFS


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory):
    """A pack made by the command, as a teacher makes one."""
    folder = tmp_path_factory.mktemp("made") / "pack"
    assert pack_command.main(["--checkpoint", str(TINY), "--out", str(folder), "--app-url", "https://example.org/app",
                              "--zip"]) == 0
    return folder


def contents(folder) -> dict:
    text = (folder / MARKER).read_text(encoding="utf-8")
    return json.loads(re.fullmatch(r'explorerPackFiles\.arrived\("contents", (.*)\);\n', text, re.S).group(1))


def test_a_pack_is_a_static_space_with_its_models_cards_licences_and_commit(tiny_pack):
    readme = (tiny_pack / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n") and "\nsdk: static\n" in readme and "\napp_file: index.html\n" in readme
    assert (tiny_pack / "models" / "reverse-tiny" / "README.md").read_text(encoding="utf-8").startswith("# ")
    assert {path.name for path in (tiny_pack / "licences").iterdir()} == {"onnxruntime-web.txt", "tokenizers-js.txt",
                                                                     "plotly.txt"}
    made = contents(tiny_pack)
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", made["made"]["commit"])
    assert made["appUrl"] == "https://example.org/app" and list(made["models"]) == ["reverse-tiny"]


def test_every_file_of_a_pack_is_under_the_ten_megabytes_a_static_space_takes(tiny_pack):
    files = [path for path in tiny_pack.rglob("*") if path.is_file()]
    assert max(path.stat().st_size for path in files) < SPACE_LIMIT
    assert PART_CHARS < SPACE_LIMIT


def test_a_pack_asks_for_nothing_outside_its_folder(tiny_pack):
    for path in tiny_pack.rglob("*.html"):
        assert not re.search(r"(src|href)=\"(https?:)?//", path.read_text(encoding="utf-8"))


def test_zip_holds_the_folder(tiny_pack):
    with zipfile.ZipFile(tiny_pack.with_suffix(".zip")) as archive:
        names = set(archive.namelist())
    assert {f"pack/{path.relative_to(tiny_pack).as_posix()}" for path in tiny_pack.rglob("*") if path.is_file()} == names


def test_a_new_pack_replaces_an_old_one(tiny_pack, tmp_path):
    folder = tmp_path / "pack"
    shutil.copytree(tiny_pack, folder)
    (folder / "left-over.js").write_text("old")
    make_pack([TINY], folder)
    assert not (folder / "left-over.js").exists() and (folder / MARKER).is_file()


def test_a_zip_goes_beside_its_folder_and_never_over_a_file_that_is_not_a_pack(tiny_pack, tmp_path):
    folder = tmp_path / "pack-v1.2"
    shutil.copytree(tiny_pack, folder)
    (tmp_path / "pack-v1.2.zip").write_text("a teacher's notes")
    with pytest.raises(InputError) as refused:
        make_pack([TINY], folder, zipped=True)
    assert refused.value.code == "pack.out_taken" and refused.value.values["path"].endswith("pack-v1.2.zip")
    assert (tmp_path / "pack-v1.2.zip").read_text() == "a teacher's notes"


def test_a_folder_that_is_not_a_pack_is_never_written_over(tmp_path):
    (tmp_path / "notes.txt").write_text("a teacher's notes")
    with pytest.raises(InputError) as refused:
        make_pack([TINY], tmp_path)
    assert refused.value.code == "pack.out_taken"
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_a_converted_hub_model_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(InputError) as refused:
        make_pack([hub.convert(build_marian(tmp_path / "marian"), tmp_path / "converted")], tmp_path / "pack")
    assert refused.value.code == "pack.not_trained_here"
    assert not (tmp_path / "pack").exists()


def test_a_model_too_large_for_a_pack_is_refused_naming_its_size(tmp_path):
    tokenizer = Tokenizer.load(REPOSITORY_CHECKPOINTS / "multi30k-en-de" / "tokenizer.model")
    config = ModelConfig(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=256,
                         n_heads=4, n_encoder_layers=4, n_decoder_layers=4, d_ff=2048)
    large = save_checkpoint(tmp_path / "large", Transformer(config), tokenizer, tokenizer)
    with pytest.raises(InputError) as refused:
        make_pack([large], tmp_path / "pack")
    assert refused.value.code == "pack.too_large"
    assert refused.value.values["size"] > refused.value.values["most"] == 45


def test_the_command_says_a_mistake_in_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("kept")
    assert pack_command.main(["--checkpoint", str(TINY), "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error [pack.out_taken]: ") and "\n" not in error
    assert pack_command.main(["--checkpoint", str(tmp_path / "absent"), "--out", str(tmp_path / "pack")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_the_command_puts_in_the_apps_lessons_for_the_models_it_packs(tiny_pack):
    text = (tiny_pack / "scripts" / "pack-lessons.js").read_text(encoding="utf-8")
    lessons = json.loads(re.fullmatch(r"window\.explorerPackLessons = (.*);\n", text, re.S).group(1))
    assert [lesson["key"] for lesson in lessons["lessons"]] == ["attention_aligns"]
    assert lessons["words"]["fr"]["lessons"]["attention_aligns"]["question"]["text"].endswith("\u202f?")
    assert "Lessons for a class" in (tiny_pack / "README.md").read_text(encoding="utf-8")
