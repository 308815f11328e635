"""What the pack runs in the browser is the registry's own files, at the versions assets/vendor/README.md names."""

import gzip
import hashlib
import re
from pathlib import Path

VENDORED = Path(__file__).resolve().parents[2] / "assets" / "vendor"
FOLDERS = {"ort.wasm.min.js": "onnxruntime-web", "ort-wasm-simd-threaded.mjs": "onnxruntime-web",
           "ort-wasm-simd-threaded.wasm": "onnxruntime-web", "tokenizers.min.mjs": "tokenizers-js"}


def test_each_vendored_file_is_the_one_its_package_ships():
    recorded = dict(re.findall(r"\| `([\w.-]+)` \| `([0-9a-f]{64})` \|", (VENDORED / "README.md").read_text()))
    assert set(recorded) == set(FOLDERS)
    for name, digest in recorded.items():
        path = VENDORED / FOLDERS[name] / name
        data = path.read_bytes() if path.exists() else gzip.decompress(path.with_suffix(".wasm.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == digest, name


def test_each_vendored_package_carries_its_licence():
    for folder in set(FOLDERS.values()):
        assert (VENDORED / folder / "LICENSE").read_text().strip()
