"""Make the explorer's offline pack: a folder that is the explorer as a static page, for a class with no server.

    python -m transformer.pack --out pack
    python -m transformer.pack --checkpoint checkpoints/multi30k-en-de --out pack-de --zip
    python -m transformer.pack --checkpoint runs/my-model/averaged --out pack --app-url https://example.org/explorer

Open ``index.html`` from the folder (a double click: no server, no network), or put the folder on any static host
(it carries the ``README.md`` of a static Hugging Face Space). Each student's browser runs the models itself, with
onnxruntime-web, from the same weights and the same SentencePiece model as the app; ``window.explorerPack``
translates as ``python -m transformer.translate --json`` does (docs/offline-pack.md).

Without ``--checkpoint``, the pack holds both bundled translators. Any model of the paper's architecture works,
the bundled ones and those the Train tab trains; one whose pack would pass ``MAX_PACK_BYTES`` is refused. Every
file is a script (a page opened from disk may load scripts, not fetch files) and none passes the 10 MB a static
Space takes without Git LFS.
"""

from __future__ import annotations

import base64
import datetime
import importlib.metadata
import importlib.util
import json
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from . import arguments
from .errors import InputError
from .files.checkpoint import Checkpoint, load_checkpoint
from .files.weights import DEFAULT_MAX_SHARD_BYTES, unique_state_dict
from .files.onnx_graphs import WEIGHTS_FILE, export_graphs, held_by_float16
from .files.tokenizer_json import read_spec, segmenting, tokenizer_json

log = logging.getLogger(__name__)

REPOSITORY = Path(__file__).resolve().parents[1]
VENDORED = REPOSITORY / "assets" / "vendor"
STATIC = REPOSITORY / "ui" / "static"
PAGE = STATIC / "pack"
LOCALES = REPOSITORY / "ui" / "locales"
LANGUAGES = ("en", "de", "fr")
WORDS = ("figures.", "map.", "translate.", "positions.", "pack.", "lessons.safe_colours", "lessons.large_text")  # the locale keys the pack's page says
BUNDLED = ("multi30k-en-de", "multi30k-en-fr")
PART_CHARS = DEFAULT_MAX_SHARD_BYTES  # each file's text stays under the 10 MB a Space takes without Git LFS
MAX_PACK_BYTES = 45 * 1000 * 1000  # one model's pack, as the issue that asked for packs set it (docs/offline-pack.md)
BASE64_GROWTH = 4 / 3
# The app's own page scripts the pack draws with (ui/static), and the pack's (ui/static/pack).
APP_SCRIPTS = ("figures.js", "charts.js", "chart_text.js", "display.js", "explorer.js", "sight.js")
PAGE_SCRIPTS = ("config.js", "engine.js", "search.js", "frames.js", "numbers.js", "positions.js", "lessons.js",
                "page.js", "pack.css")
NO_LESSONS = {"lessons": [], "words": {}, "outlineMs": 0}
MARKER = "contents.js"  # what makes a folder a pack (one that may be replaced by a new one)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    parser = arguments.CommandLine("pack", __doc__)
    parser.add_argument("--checkpoint", action="append", default=None, metavar="DIR",
                        help="a model to put in the pack, again for more (default: both bundled translators)")
    parser.add_argument("--out", required=True, help="the folder to write (a pack already there is replaced)")
    parser.add_argument("--zip", action="store_true", help="also write OUT.zip, the folder in one file")
    parser.add_argument("--app-url", default="", help="the hosted app the pack links to for what it lacks")
    return arguments.run(parser, packed, argv)


def packed(args) -> int:
    # The one place the library reaches into the app: the pack is the app as a static page, and its lessons are
    # the app's (their words, their questions). Importing the library loads none of it (tests/test_code_layout.py).
    from ui.views.pack_lessons import pack_lessons

    checkpoints = args.checkpoint or [str(REPOSITORY / "checkpoints" / name) for name in BUNDLED]
    out = make_pack([Path(c) for c in checkpoints], Path(args.out), app_url=args.app_url, zipped=args.zip,
                    lessons=pack_lessons)
    print(out)
    return 0


def archive_of(folder: Path) -> Path:
    """Where ``--zip`` writes a pack's folder as one file: beside it, its name and ``.zip``."""
    return folder.parent / f"{folder.name}.zip"


def make_pack(checkpoints: list[Path], out: Path, app_url: str = "", zipped: bool = False,
              lessons: Callable[[dict[str, Checkpoint]], dict] | None = None) -> Path:
    """Write the pack of ``checkpoints`` to ``out`` (and ``archive_of(out)``); returns the folder. Nothing but an
    earlier pack (or its zip) is ever written over. ``lessons`` gives the lessons part for the models by their
    names in the pack (the app's ``pack_lessons``); without it the page has none."""
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise InputError(code="pack.out_taken", path=str(out))
    if zipped and archive_of(out).exists() and not _is_pack_archive(archive_of(out)):
        raise InputError(code="pack.out_taken", path=str(archive_of(out)))
    runtime_bytes = _runtime_bytes()
    opened = []
    for directory in checkpoints:
        checkpoint = load_checkpoint(directory, device="cpu")
        _check_packable(checkpoint, directory, runtime_bytes)
        opened.append((_unique_name(directory, [name for name, _ in opened]), checkpoint))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as building:
        folder = Path(building) / "pack"
        writer = PackWriter(folder)
        runtime = writer.runtime()
        models = {name: writer.model(name, checkpoint) for name, checkpoint in opened}
        writer.page(runtime, models, app_url, lessons(dict(opened)) if lessons else NO_LESSONS)
        if out.exists():
            shutil.rmtree(out)
        folder.rename(out)
    if zipped:
        _zip(out)
    return out


def _is_pack_archive(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith(f"/{MARKER}") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _runtime_bytes() -> int:
    """The pack's bytes without its models: the runtime as the pack writes it, and the page."""
    wasm = (VENDORED / "onnxruntime-web" / "ort-wasm-simd-threaded.wasm.gz").stat().st_size * BASE64_GROWTH
    others = sum(path.stat().st_size for folder in VENDORED.iterdir() if folder.is_dir()
                 for path in folder.iterdir() if not path.name.endswith(".gz"))
    return int(wasm + others + _plotly().stat().st_size + sum((PAGE / name).stat().st_size for name in PAGE_SCRIPTS))


def _plotly() -> Path:
    """The Plotly.js the app serves (plotly's own package's), which the pack's page draws with too."""
    spec = importlib.util.find_spec("plotly")  # found, not imported: the library never runs the app's plotting
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


def page_words() -> dict[str, dict[str, str]]:
    """The words of the pack's page in each language: ``WORDS`` of ui/locales (its files are data to the pack)."""
    words = {}
    for language in LANGUAGES:
        table = {}
        for path in sorted((LOCALES / language).glob("*.json")):
            table.update(json.loads(path.read_text(encoding="utf-8")))
        words[language] = {key: value for key, value in table.items() if key.startswith(WORDS)}
    return words


def _check_packable(checkpoint: Checkpoint, directory: Path, runtime_bytes: int) -> None:
    """Refuse a model the pack cannot hold: one too large for a pack (a Hub model, by far), or one the browser
    would segment or search otherwise than the app (a converted model's own vocabulary or language tokens)."""
    weights = sum(tensor.numel() * (2 if held_by_float16(tensor.float().numpy()) else 4)
                  for tensor in unique_state_dict(checkpoint.model).values())
    total = runtime_bytes + int(weights * BASE64_GROWTH)
    if total > MAX_PACK_BYTES:
        raise InputError(code="pack.too_large", path=str(directory), size=round(total / 1e6),
                         most=round(MAX_PACK_BYTES / 1e6))
    source, target = checkpoint.source_tokenizer, checkpoint.target_tokenizer
    if source.vocabulary is not None or target.vocabulary is not None or source.prefix_ids or target.prefix_ids \
            or source.model_proto != target.model_proto:
        raise InputError(code="pack.not_trained_here", path=str(directory))
    segmenting(target.model_proto)  # a kind of SentencePiece model the page cannot cut text as, refused before any work


def _unique_name(directory: Path, taken: list[str]) -> str:
    """A model's folder name in the pack: its checkpoint's, in characters any address takes as they are."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", directory.resolve().name).strip("-.") or "model"
    name, number = base, 2
    while name in taken:
        name, number = f"{base}-{number}", number + 1
    return name


class PackWriter:
    """Writes the files of one pack into ``folder``: each a script that hands its content to the page."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.written: dict[str, int] = {}  # file -> bytes, for the contents and the README's sizes

    def script(self, name: str, content) -> str:
        """``name``.js, which hands ``content`` (text, or JSON) to the page as the file ``name``."""
        path = self.folder / f"{name}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"explorerPackFiles.arrived({json.dumps(name)}, {json.dumps(content, ensure_ascii=False)});\n"
        path.write_text(text, encoding="utf-8")
        self.written[f"{name}.js"] = path.stat().st_size
        return name

    def parts(self, name: str, data: bytes) -> list[str]:
        """``data`` as base64 in scripts ``name``-1, ``name``-2, ... of at most ``PART_CHARS`` characters each."""
        text = base64.b64encode(data).decode("ascii")
        step = PART_CHARS - PART_CHARS % 4  # each part decodes alone
        return [self.script(f"{name}-{number}", text[start:start + step])
                for number, start in enumerate(range(0, len(text), step), start=1)]

    def copy(self, source: Path, name: str) -> None:
        # A source map the pack does not carry would be asked for by a browser's developer tools.
        lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
        self.text(name, "".join(line for line in lines if not line.startswith("//# sourceMappingURL=")))

    def text(self, name: str, text: str) -> None:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.written[name] = path.stat().st_size

    def runtime(self) -> dict:
        ort, tokenizers = VENDORED / "onnxruntime-web", VENDORED / "tokenizers-js"
        self.copy(ort / "ort.wasm.min.js", "runtime/ort.wasm.min.js")
        self.copy(_plotly(), "runtime/plotly.min.js")
        licence = next((file for file in importlib.metadata.distribution("plotly").files or []
                        if file.name.upper().startswith("LICENSE")), None)
        if licence is not None:
            self.copy(Path(licence.locate()), "licences/plotly.txt")
        for folder, name in ((ort, "onnxruntime-web"), (tokenizers, "tokenizers-js")):
            self.copy(folder / "LICENSE", f"licences/{name}.txt")
        return {
            "wasm": self.parts("runtime/ort-wasm", (ort / "ort-wasm-simd-threaded.wasm.gz").read_bytes()),
            "glue": self.script("runtime/ort-glue", (ort / "ort-wasm-simd-threaded.mjs").read_text(encoding="utf-8")),
            "tokenizers": self.script("runtime/tokenizers",
                                      (tokenizers / "tokenizers.min.mjs").read_text(encoding="utf-8")),
        }

    def model(self, name: str, checkpoint: Checkpoint) -> dict:
        log.info("exporting %s", name)
        graphs = export_graphs(checkpoint.model)
        config, tokenizer = checkpoint.model.config, checkpoint.target_tokenizer
        manifest = {
            "config": {key: getattr(config, key) for key in ("pad_id", "start_id", "eos_id", "max_len", "n_heads",
                                                             "n_encoder_layers", "n_decoder_layers")},
            "decoding": {"beam_size": int(checkpoint.search.get("beam_size", 5)),
                         "length_penalty": checkpoint.length_penalty,
                         "rules": {"early_stopping": checkpoint.rules.early_stopping,
                                   "renormalize": checkpoint.rules.renormalize}},
            "languages": {"source": checkpoint.info.get("source_lang", ""),
                          "target": checkpoint.info.get("target_lang", "")},
            "pieces": tokenizer.pieces(range(tokenizer.vocab_size)),
            "specialIds": sorted(tokenizer.special_ids),
            "addsWordStart": read_spec(tokenizer.model_proto).add_dummy_prefix,
            "tokenizer": tokenizer_json(tokenizer.model_proto),
            "segmenting": segmenting(tokenizer.model_proto),
            "weightsFile": WEIGHTS_FILE,
        }
        if checkpoint.card:
            self.text(f"models/{name}/README.md", checkpoint.card)
        return {
            "manifest": self.script(f"models/{name}/manifest", manifest),
            "encoder": self.script(f"models/{name}/encoder", base64.b64encode(graphs.encoder).decode("ascii")),
            "decoder": self.script(f"models/{name}/decoder", base64.b64encode(graphs.decoder).decode("ascii")),
            "weights": self.parts(f"models/{name}/weights", graphs.weights),
            "languages": manifest["languages"],
            "maxLen": config.max_len,
        }

    def page(self, runtime: dict, models: dict, app_url: str, lessons: dict) -> None:
        for name in PAGE_SCRIPTS:
            self.copy(PAGE / name, f"scripts/{name}")
        for name in APP_SCRIPTS:
            self.copy(STATIC / name, f"scripts/{name}")
        self.text("scripts/words.js", f"window.explorerPackWords = {json.dumps(page_words(), ensure_ascii=False)};\n")
        self.text("scripts/pack-lessons.js",
                  f"window.explorerPackLessons = {json.dumps(lessons, ensure_ascii=False)};\n")
        self.copy(PAGE / "index.html", "index.html")
        sizes = {file.removesuffix(".js"): size for file, size in self.written.items() if file.endswith(".js")}
        contents = {"runtime": runtime, "models": models, "defaultModel": next(iter(models)), "appUrl": app_url,
                    "made": {"commit": project_commit(), "date": datetime.date.today().isoformat()}, "sizes": sizes}
        self.script("contents", contents)
        self.text("README.md", _readme(models, self.written, len(lessons["lessons"])))


def project_commit() -> str:
    """The project commit the pack was made from ("unknown" outside a git checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def pack_version() -> str:
    """What makes a pack what it is besides its models: the project commit, or outside a git checkout a digest of
    the code that writes the pack and the files it copies into it."""
    commit = project_commit()
    if commit != "unknown":
        return commit
    digest = hashlib.sha256()
    sources = [Path(__file__), *sorted((REPOSITORY / "transformer" / "files").glob("*.py")),
               *sorted(PAGE.iterdir()), *(STATIC / name for name in APP_SCRIPTS), *sorted(VENDORED.rglob("*")),
               *sorted((REPOSITORY / "ui" / "views").glob("*.py")), *sorted(LOCALES.rglob("*.json"))]  # the lessons
    for path in sources:
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


LESSONS_NOTE = """
For a class, open *Lessons for a class*: Show me sets the page up for a lesson, and each lesson asks a question to
predict before Reveal gives the model's own answer.
"""


def _readme(models: dict, written: dict[str, int], lesson_count: int) -> str:
    total = sum(written.values())
    sizes = "\n".join(f"| `{name}` | {sum(size for file, size in written.items() if file.startswith(f'models/{name}/')) / 1e6:.1f} MB |"
                      for name in models)
    runtime = sum(size for file, size in written.items() if file.startswith("runtime/")) / 1e6
    return f"""---
title: Transformer attention explorer (offline)
emoji: 🔍
colorFrom: blue
colorTo: green
sdk: static
app_file: index.html
license: mit
---

# Transformer attention explorer, offline

Open `index.html` in a browser (a double click): it needs no server and no network, and each browser runs the
translators itself. Type an English sentence and press Translate: the model translates it one piece at a time
(`▁` starts a word; `<s>` and `</s>` start and end a sentence), and the page shows where each head of each layer
looked. Step through the decoding with ◀ and ▶, click a row of a map to go to its step, and score your own
translation below. Any recent Chrome, Edge, Firefox or Safari runs it (it needs WebAssembly). To share it, copy the
whole folder (or its zip), or upload its files to a static host, such as a Hugging Face Space made with the Static
SDK (this file's first lines are its settings).
{LESSONS_NOTE if lesson_count else ""}
| part | size |
|---|---|
{sizes}
| runtime (onnxruntime-web, tokenizers.js, Plotly.js) | {runtime:.1f} MB |
| in all | {total / 1e6:.1f} MB |

Each model's card is in `models/NAME/README.md`; the licences of what runs in the browser are in `licences/`.
"""


def _zip(folder: Path) -> Path:
    """The folder as one zip beside it, written whole or not at all."""
    archive = archive_of(folder)
    with tempfile.NamedTemporaryFile(dir=folder.parent, prefix=f".{archive.name}-", delete=False) as written:
        try:
            with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as zipped:
                for path in sorted(folder.rglob("*")):
                    if path.is_file():
                        zipped.write(path, Path(folder.name) / path.relative_to(folder))
        except BaseException:
            os.unlink(written.name)
            raise
    os.replace(written.name, archive)
    archive.chmod(0o644)
    return archive


if __name__ == "__main__":
    raise SystemExit(main())
