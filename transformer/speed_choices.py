"""The fastest way for a model to decode on this CPU, timed where it runs, and kept for the next start.

``cpu.speed_up`` can read each weight in one of three layouts (``cpu.LAYOUTS``: as stored, a contiguous transpose,
prepacked for oneDNN) and can take attention's formula or PyTorch's fused kernel. Which is fastest depends on the
machine: on the project's AMD EPYC a decoding step streams opus-mt's weights from memory and prepacking them gains
1.4-2.2x, while on an Intel Xeon with AMX the same step's weights sit in cache and the layout gains 0.98-1.31x
(issue 86). A profile of a decoding step at opus-mt's shapes on the EPYC gives the matrix products 89% of greedy
decoding and 75% of beam search, attention 3-4% (docs/benchmarks.md), so those are the choices timed here.

``choose_speed(model)`` times, on the model's own shapes, each layout for every group of same-shaped weights that
one decoding step multiplies (in the step's order, at 1 row and at 5: greedy and the beams of the app's default
search), and both ways of attention at a decoding step's shapes. It keeps the fastest (``fastest``: medians of
alternating rounds), applies them to the model, and writes them to a cache keyed by the CPU model and flags, the
thread count, the torch version and the model's shapes, so a restart on the same machine reads them instead.
Choices only change how the same numbers are multiplied: outputs agree to float rounding (tests/library/
test_speed_choices.py). A model on a GPU or kept in bfloat16 has nothing here to choose.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from . import cpu
from .paper import model as paper

log = logging.getLogger(__name__)

DECODING_ROWS = (1, 5)  # greedy's one row, and the beams of a step at the app's default beam of 5
SOURCE_PIECES, TARGET_PIECES = 24, 12  # keys of cross- and self-attention at a typical decoding step
ROUNDS = 5  # of each candidate at least, alternating; the first warms up and is not counted
TIMED_S, MOST_ROUNDS = 0.004, 40  # more rounds, up to the most, while a candidate's counted time is under TIMED_S
TIMED_ELEMENTS = 2**25  # a larger weight is timed on its first rows: 128 MB stream from memory as the whole does
KEPT = 64  # choices a cache keeps, the most recently made
CACHE_FILE = ".speed-choices.json"
TIMED_AS = 1  # how the candidates are timed: a change to it times every model again


@dataclass
class SpeedChoices:
    """What ``choose_speed`` chose for one model on one machine."""

    layouts: dict[str, str]  # "rows x columns" of a weight -> one of cpu.LAYOUTS
    attention: str  # "fused" or "formula"
    timed_s: float = 0.0  # what timing them took, where they were timed
    from_cache: bool = field(default=False, compare=False)

    def describe(self) -> str:
        """One line: the machine, each shape's layout, attention, and where the choices came from."""
        shapes = ", ".join(f"{shape} {layout}" for shape, layout in self.layouts.items())
        origin = "read from the cache" if self.from_cache else f"timed in {self.timed_s:.2f} s"
        return (f"on {machine()['cpu']} with {torch.get_num_threads()} threads, weights {shapes}; attention "
                f"{self.attention}; {origin}")


def fastest(candidates: dict[str, Callable[[], object]], clock: Callable[[], float] = time.perf_counter,
            rounds: int = ROUNDS) -> str:
    """The name of the candidate with the lowest median time over its rounds, the first round not counted.

    Each round runs every candidate once, in turn, so that noise on the machine falls on all of them alike. Rounds
    go on past ``rounds`` while a candidate's counted time is under ``TIMED_S`` (a small product's few
    microseconds are noisy), up to ``MOST_ROUNDS``. A tie goes to the candidate named first."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for round_ in range(MOST_ROUNDS):
        if round_ >= rounds and all(sum(taken) >= TIMED_S for taken in times.values()):
            break
        for name, run in candidates.items():
            started = clock()
            run()
            if round_:
                times[name].append(clock() - started)
    return min(candidates, key=lambda name: statistics.median(times[name]) if times[name] else 0.0)


def step_products(model: nn.Module) -> list[tuple[cpu.DecodingWeight, Tensor, Tensor | None, slice]]:
    """(DecodingWeight, W, b, rows) of every matrix product one decoding step makes, in the order it makes them."""
    d = model.config.d_model
    products = []
    for layer in model.decoder.layers:
        for linear, rows in ((layer.self_attn.in_proj, slice(None)), (layer.self_attn.out_proj, slice(None)),
                             (layer.cross_attn.in_proj, slice(0, d)), (layer.cross_attn.out_proj, slice(None)),
                             (layer.feed_forward.linear1, slice(None)), (layer.feed_forward.linear2, slice(None))):
            products.append((linear.decoding_weight, linear.weight, linear.bias, rows))
    if model.output_proj is None:
        return products + [(model.tied_output, model.tgt_embed.weight, model.output_bias, slice(None))]
    return products + [(model.output_proj.decoding_weight, model.output_proj.weight, None, slice(None))]


def choosable(model: nn.Module) -> bool:
    """Whether ``model`` decodes through ``cpu.speed_up``'s choices: sped up, float32, on a CPU."""
    return (isinstance(model, cpu.Transformer) and model.device.type == "cpu" and model.dtype == torch.float32
            and all(isinstance(linear, cpu.Linear) for linear in model.modules() if isinstance(linear, nn.Linear)))


def weight_groups(model: nn.Module) -> dict[str, list[tuple[Tensor, Tensor | None]]]:
    """A step's weights (their rows it multiplies) and biases, by shape, in the step's order."""
    groups: dict[str, list[tuple[Tensor, Tensor | None]]] = {}
    for _, weight, bias, rows in step_products(model):
        weight, bias = weight.detach()[rows], None if bias is None else bias.detach()[rows]
        groups.setdefault(cpu.shape_name(weight), []).append((weight, bias))
    return groups


def layout_candidates(group: list[tuple[Tensor, Tensor | None]]) -> dict[str, Callable[[], None]]:
    """For each layout this torch offers, one run of the group's products at every ``DECODING_ROWS``."""
    timed = []
    for weight, bias in group:
        rows = max(1, min(weight.size(0), TIMED_ELEMENTS // weight.size(1)))
        timed.append((weight[:rows], None if bias is None else bias[:rows]))
    inputs = [torch.randn(rows, timed[0][0].size(1)) for rows in DECODING_ROWS]
    layouts = [layout for layout in cpu.LAYOUTS if layout != "prepacked" or cpu.PACKING]

    def run(layout: str, copies: list[tuple[Tensor, Tensor | None]]) -> Callable[[], None]:
        def products() -> None:
            for x in inputs:
                for copy, bias in copies:
                    cpu.multiply(x, copy, bias, layout)
        return products

    return {layout: run(layout, [(cpu.laid_out(weight, layout), bias) for weight, bias in timed])
            for layout in layouts}


def attention_candidates(model: nn.Module) -> dict[str, Callable[[], None]]:
    """Attention's two ways at a decoding step's shapes: every decoder layer's self- and cross-attention of one
    new position, at every ``DECODING_ROWS``."""
    config = model.config
    heads, width = config.n_heads, config.d_model // config.n_heads
    attention = paper.ScaledDotProductAttention()
    shapes = []
    for rows in DECODING_ROWS:
        query = torch.randn(rows, heads, 1, width)
        own = torch.randn(rows, heads, TARGET_PIECES, width)
        source = torch.randn(rows, heads, SOURCE_PIECES, width)
        shapes.append((query, own, source, torch.ones(rows, 1, 1, SOURCE_PIECES, dtype=torch.bool)))

    def run(formula: bool) -> Callable[[], None]:
        def step() -> None:
            for query, own, source, mask in shapes:
                for _ in model.decoder.layers:
                    attention(query, own, own, None, need_weights=formula)
                    attention(query, source, source, mask, need_weights=formula)
        return step

    return {"fused": run(False), "formula": run(True)}


def time_choices(model: nn.Module, clock: Callable[[], float] = time.perf_counter) -> SpeedChoices:
    """Time every candidate on ``model``'s shapes, here and now."""
    started = time.perf_counter()
    with torch.no_grad():
        layouts = {shape: fastest(layout_candidates(group), clock) for shape, group in weight_groups(model).items()}
        attention = fastest(attention_candidates(model), clock)
    return SpeedChoices(layouts, attention, round(time.perf_counter() - started, 3))


def apply_choices(model: nn.Module, choices: SpeedChoices) -> None:
    """Make ``model`` decode as ``choices`` say; copies made in another layout are dropped."""
    for module in model.modules():
        holders = [getattr(module, "decoding_weight", None), getattr(module, "tied_output", None)]
        for holder in holders:
            if isinstance(holder, cpu.DecodingWeight):
                holder.layouts = dict(choices.layouts)
                holder.clear()
        if isinstance(module, cpu.ScaledDotProductAttention):
            module.formula_chosen = choices.attention == "formula"


def machine() -> dict:
    """What decides which way is fastest, besides the model: the CPU and its instruction sets, the threads, torch."""
    found: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                key, _, value = line.partition(":")
                found.setdefault(key.strip(), value.strip())
    except OSError:  # not Linux: the processor's name and the vector width torch uses say it
        pass
    name = found.get("model name") or platform.processor() or platform.machine()
    flags = found.get("flags", "")
    return {"cpu": name, "flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
            "capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "torch": torch.__version__}


def key_of(model: nn.Module) -> str:
    """The cache's key for ``model`` on this machine: a hash of ``machine()`` and the model's shapes."""
    config = model.config
    shapes = {"weights": sorted(weight_groups(model)), "heads": config.n_heads, "d_model": config.d_model,
              "decoder_layers": config.n_decoder_layers, "packing": cpu.PACKING, "timed_as": TIMED_AS}
    described = json.dumps({"machine": machine(), "model": shapes}, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()[:24]


def read_cache(path: Path) -> dict:
    """The cache's choices by key; an unreadable cache is as an empty one (it is timed again and rewritten)."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        return {key: value for key, value in kept.items()
                if isinstance(value, dict) and isinstance(value.get("layouts"), dict)
                and value.get("attention") in ("fused", "formula")
                and all(layout in cpu.LAYOUTS for layout in value["layouts"].values())}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError) as error:
        log.warning("the speed choices in %s could not be read (%s); they are timed again", path, error)
        return {}


def write_cache(path: Path, key: str, choices: SpeedChoices) -> None:
    """Add ``choices`` under ``key``, keeping the ``KEPT`` newest; written whole (a temporary file renamed), so a
    reader in another process never sees half of it. A cache that cannot be written is left as it was."""
    kept = read_cache(path)
    kept.pop(key, None)
    kept[key] = {**asdict(choices), "made": time.strftime("%Y-%m-%dT%H:%M:%S")}
    kept = dict(list(kept.items())[-KEPT:])
    for entry in kept.values():
        entry.pop("from_cache", None)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         prefix=path.name, suffix=".tmp") as temporary:
            json.dump(kept, temporary, indent=1)
        os.replace(temporary.name, path)
    except OSError as error:
        log.warning("the speed choices could not be kept in %s (%s); the next start times them again", path, error)
        if temporary is not None:
            Path(temporary.name).unlink(missing_ok=True)


def choose_speed(model: nn.Module, cache: Path | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> SpeedChoices | None:
    """Choose and apply the fastest ways for ``model`` to decode here; None where none apply.

    ``cache``: the file keeping choices across starts (read first; written after timing); None times every time.
    A choice kept there is never timed again on the same machine: delete the file to time every model anew (a
    model timed while the machine was busy with other work, say).
    """
    if not choosable(model):
        return None
    key = key_of(model)
    kept = read_cache(cache).get(key) if cache is not None else None
    if kept is not None:
        choices = SpeedChoices(kept["layouts"], kept["attention"], kept.get("timed_s", 0.0), from_cache=True)
    else:
        choices = time_choices(model, clock)
        if cache is not None:
            write_cache(cache, key, choices)
    apply_choices(model, choices)
    return choices


def default_cache() -> Path:
    """The cache of the command-line tools: beside the downloaded Multi30K, under ``XDG_CACHE_HOME``."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transformer-explorer" / CACHE_FILE
