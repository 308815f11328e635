"""What opening translator after translator costs a server: the Hub cache's size on disk and the loaded models'
size in memory stay under their caps.

A Marian model of opus-mt-en-de's shapes (``opus_shaped.write_marian``, random weights, about 300 MB) is written
once and offered under ``--models`` names, as directories in the Hugging Face layout; each is opened in turn as the
app opens one (``HubModels.open``: converted into the cache, room made by removing the least recently used model),
loaded (``ModelRegistry.get``) and asked for one translation. A visitor is taken to move on to the next model, so
only the one being opened is in use. The cache's size and the process's resident memory are sampled every 0.1 s
while this runs.

    python benchmarks/hub_cache.py --json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import machine, report
from opus_shaped import write_marian
from ui.hub_models import MB, HubModels
from ui.runtime.settings import SETTINGS
from ui.services import ModelRegistry

SENTENCE = "The meeting was postponed until next Tuesday."
SAMPLE_EVERY_S = 0.1


def offered(source: Path, folder: Path, count: int) -> list[Path]:
    """``count`` directories that are ``source`` under other names (their files linked, not copied)."""
    directories = []
    for number in range(count):
        directory = folder / f"opus-mt-en-x{number:02d}"
        directory.mkdir(parents=True)
        for file in source.iterdir():
            (directory / file.name).symlink_to(file)
        directories.append(directory)
    return directories


def resident_bytes() -> int:
    """This process's resident memory (Linux): the loaded models' weights and all else they keep."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(count: int, cache_cap_mb: float, models_mb: float, work: Path) -> dict:
    sources = offered(write_marian(work / "written"), work / "offered", count)
    hub_models = HubModels(work / "hub", cache_cap_mb=cache_cap_mb)
    registry = ModelRegistry([hub_models.directory], device="cpu", max_mb=models_mb)
    cache_max, loaded_max, resident_max, errors, opened, conversions = 0, 0, 0, [], 0, []
    done = threading.Event()

    def sample() -> None:
        nonlocal cache_max, resident_max
        while not done.wait(SAMPLE_EVERY_S):
            cache_max = max(cache_max, hub_models.cache_bytes())
            resident_max = max(resident_max, resident_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    for source in sources:
        try:
            converting = time.perf_counter()
            name = hub_models.open(str(source), None, in_use=lambda other: other == source.name,
                                   last_used=registry.last_used, directories=True)
            conversions.append(time.perf_counter() - converting)
            registry.get(name).translate(SENTENCE, beam_size=1, max_length=20)
            opened += 1
        except Exception as error:  # noqa: BLE001 (every failure is counted and reported)
            errors.append(f"{source.name}: {error}")
        cache_max = max(cache_max, hub_models.cache_bytes())
        loaded_max = max(loaded_max, registry.loaded_bytes())
    done.set()
    sampler.join()
    return {"opened": opened, "cache_mb_max": round(cache_max / MB), "cache_cap_mb": round(hub_models.cache_cap / MB),
            "loaded_mb_max": round(loaded_max / MB), "loaded_cap_mb": round(registry.max_bytes / MB),
            "resident_mb_max": round(resident_max / MB),
            "convert_s_median": round(statistics.median(conversions), 2) if conversions else None, "errors": errors, "seconds": round(time.perf_counter() - started, 1), "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=12, help="how many models to open in turn (default 12)")
    parser.add_argument("--cache-cap-mb", type=float, default=SETTINGS["EXPLORER_HUB_CACHE_MB"].default)
    parser.add_argument("--models-mb", type=float, default=SETTINGS["EXPLORER_MODELS_MB"].default)
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        result = measure(args.models, args.cache_cap_mb, args.models_mb, Path(work))
    report(result, args.json)


if __name__ == "__main__":
    main()
