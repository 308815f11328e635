"""What makes a model fast on a CPU, measured, applied to a built model by one call: ``speed_up(model)``.

``paper/model.py`` is plain PyTorch, as a reader of the paper expects. ``speed_up`` gives some of its modules a
subclass that computes the same (to float rounding; the tests hold both to each other and to PyTorch's own) in a
faster way, keeping every parameter, buffer and state-dict key. Where a speed-up does not apply (training
through autograd, a GPU, another dtype) each subclass runs what its parent runs. A loaded checkpoint and a
training run get it.

- Linear layers decode through a ``DecodingWeight``: a copy of the weight in the layout a CPU multiplies fastest.
  Decoding multiplies one row (greedy) or a few (the beams of a step, a short forced translation) by every weight
  matrix, work bound by how fast the weights stream from memory, and ``nn.Linear``'s layout is not the fastest to
  stream. One decoding step's products (``benchmarks/weight_layout.py``, the project's 2-core AMD EPYC, on one
  row / five rows): the bundled model's 2.96 / 4.70 ms as stored, 1.88 / 3.51 ms with every weight transposed,
  2.44 / 3.12 ms with every weight prepacked for oneDNN; opus-mt-en-de's 34.5 / 61.8 ms as stored, 23.4 / 57.2
  transposed, 21.4 / 25.8 prepacked. On an Intel Xeon with AMX the same step's weights stay in cache and the
  layouts differ little (issue 86). So each model's layouts are timed on the machine it runs on when it is opened
  (``speed_choices.choose_speed``); a weight whose shape was not timed takes the EPYC's rule: opus-mt's large
  matrices prepacked, a smaller one at least as tall as wide read as a contiguous transpose. Prepacking uses
  PyTorch's private oneDNN operators, on the versions they were checked on (``PACKING_CHECKED_ON``); elsewhere
  the transpose serves.
  Training, autocast, GPUs, other dtypes and weights made under ``torch.inference_mode`` (which carry no version
  to watch) use the weight itself. A copy is checked against its weight's ``_version`` (autograd's counter of
  in-place changes) and address, and dropped in ``_apply`` (what ``.to()`` runs): underscored, but parts of
  PyTorch its own optimizers and modules have long relied on, on every version.
- ``dropout`` draws 16 random bits per element instead of a float: ``F.dropout`` draws from PyTorch's serial
  generator, and with dropout 0.1 the small preset trained at half its speed without (benchmarks/train_throughput.py).
- Threads: a process takes as many as the cores nothing else keeps busy as it starts (``threads_for_machine``).
  torch's default, one per core, computed 1.5-1.8x slower beside a busy core than one thread, on two cores
  (docs/benchmarks.md, "Threads beside a busy core"), and 1.3-1.4x faster alone.
- Attention takes the formula where it beats PyTorch's fused kernel (``formula_is_faster``, or where
  ``choose_speed`` timed it faster for a model's decoding), and a residual
  connection casts a bf16 sublayer's output to the float32 stream before adding (a mixed-dtype add is about 4x
  slower on a CPU).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .paper import model as paper

# torch.ops.mkldnn._reorder_linear_weight and _linear_pointwise are private: used only where they were checked.
PACKING_CHECKED_ON = ("2.13.",)  # torch.__version__ prefixes
PACKING = (torch.__version__.startswith(PACKING_CHECKED_ON) and torch.backends.mkldnn.is_available()
           and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
EVERY_ROW = slice(None)
# Long enough for a busy core to show as ten ticks of the kernel's usual 100 Hz clock, short beside a command's start.
BUSY_SAMPLE_S = 0.1
THREADS_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch's own: where one is set, its count stands
# torch's count as it started: one thread per physical core (a core's second hyperthread gains little), or as set.
TORCH_THREADS_AT_START = torch.get_num_threads()

log = logging.getLogger(__name__)


class DecodingWeight:
    """A weight (or some of its rows) as decoding on a CPU reads it fastest, rebuilt when the weight changes.

    PyTorch tracks the changes that matter: an in-place update (optimizer steps, ``load_state_dict``), new storage
    (``.to()``, ``.data =``), another dtype. Writes through ``W.data`` in place bypass that tracking, as they do for
    autograd; call ``clear()`` after them.

    ``layouts`` ("rows x columns" -> one of ``LAYOUTS``) is what ``speed_choices.choose_speed`` timed fastest on
    this machine for the model's shapes; a shape it does not name takes the rule measured on the project's EPYC
    (``default_layout``).
    """

    # Prepacked from 2**19 elements and 512 columns (opus-mt's matrices but its 512 x 512 ones); measured on the
    # two model sizes here, the bundled models' 8,000 x 256 vocabulary projection reads faster transposed.
    LARGE, WIDE = 2**19, 512

    def __init__(self):
        # rows -> (W as seen, W's version then, its copy, its layout); holding W keeps its address from being reused.
        self._copies: dict[tuple[int, int], tuple[Tensor, int, Tensor, str]] = {}
        self.layouts: dict[str, str] = {}

    @classmethod
    def packs(cls, weight: Tensor) -> bool:
        return PACKING and weight.numel() >= cls.LARGE and weight.size(1) >= cls.WIDE

    @classmethod
    def default_layout(cls, weight: Tensor) -> str:
        if cls.packs(weight):
            return "prepacked"
        # a matrix taller than wide streams as fast as it is
        return "transposed" if weight.size(0) >= weight.size(1) else "stored"

    def layout(self, weight: Tensor) -> str:
        chosen = self.layouts.get(shape_name(weight))
        if chosen is None or (chosen == "prepacked" and not PACKING):
            return self.default_layout(weight)
        return chosen

    def copy_bytes(self, weight: Tensor) -> int:
        """What the copy of ``weight`` that decoding on a CPU reads takes, made or to be made (a float32 weight
        on the CPU read in a layout other than as stored)."""
        copied = weight.is_cpu and weight.dtype == torch.float32 and self.layout(weight) != "stored"
        return weight.numel() * weight.element_size() if copied else 0

    @staticmethod
    def applies(weight: Tensor, x: Tensor) -> bool:
        return (weight.is_cpu and weight.dtype == x.dtype == torch.float32 and not torch.is_grad_enabled()
                and not torch.is_autocast_enabled("cpu") and not weight.is_inference())

    def linear(self, x: Tensor, weight: Tensor, bias: Tensor | None = None, rows: slice = EVERY_ROW) -> Tensor:
        """``F.linear(x, weight[rows], bias[rows])``."""
        if rows != EVERY_ROW:
            weight, bias = weight[rows], None if bias is None else bias[rows]
        if not self.applies(weight, x):
            return F.linear(x, weight, bias)
        key = (rows.start, rows.stop)
        cached = self._copies.get(key)
        if cached is None or cached[1] != weight._version or cached[0].data_ptr() != weight.data_ptr():
            seen = weight.detach()
            layout = self.layout(seen)
            cached = self._copies[key] = (seen, weight._version, laid_out(seen, layout), layout)
        _, _, copy, layout = cached
        return multiply(x, copy, bias, layout)

    def clear(self) -> None:
        self._copies = {}

    def __getstate__(self) -> dict:
        return {"_copies": {}, "layouts": self.layouts}  # copies and pickles of a model leave these copies behind


LAYOUTS = ("stored", "transposed", "prepacked")


def shape_name(weight: Tensor) -> str:
    return f"{weight.size(0)}x{weight.size(1)}"


def laid_out(weight: Tensor, layout: str) -> Tensor:
    """``weight`` (rows x columns, as ``nn.Linear`` keeps it) in ``layout``: as stored; as a contiguous transpose
    (read input-major); prepacked for oneDNN."""
    if layout == "prepacked":
        return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous())
    if layout == "transposed":
        return weight.t().contiguous().t()
    return weight


def multiply(x: Tensor, weight: Tensor, bias: Tensor | None, layout: str) -> Tensor:
    """x W^T + b with W as ``laid_out`` gave it."""
    if layout == "prepacked":
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` that decodes through a ``DecodingWeight``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias)
        self._speed_up()

    def _speed_up(self) -> None:
        self.decoding_weight = DecodingWeight()

    def forward(self, x: Tensor, rows: slice = EVERY_ROW) -> Tensor:
        """x W^T + b; ``rows``: with those output features only."""
        return self.decoding_weight.linear(x, self.weight, self.bias, rows)

    def _apply(self, fn, recurse=True):
        self.decoding_weight.clear()  # .to(), .half() and friends: the copies belonged to the old tensors
        return super()._apply(fn, recurse)


class MultiHeadAttention(paper.MultiHeadAttention):
    """Cross-attention's rows of the projection read through the projection's ``DecodingWeight``."""

    def project_rows(self, x: Tensor, rows: slice) -> Tensor:
        if not isinstance(self.in_proj, Linear):  # replaced by hand after speed_up
            return super().project_rows(x, rows)
        return self.in_proj.decoding_weight.linear(x, self.in_proj.weight, self.in_proj.bias, rows)


class ScaledDotProductAttention(paper.ScaledDotProductAttention):
    """The formula where it is faster than the fused kernel; the probabilities only to those who asked.

    ``formula_chosen``: ``speed_choices.choose_speed`` timed the formula faster for this model's decoding steps on
    this machine: taken for one new position at a time (what was timed), outside autograd (training keeps the
    kernel's fused backward)."""

    formula_chosen = False

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        formula = (need_weights or formula_is_faster(q, self.dropout.p if self.training else 0.0)
                   or (self.formula_chosen and q.size(-2) == 1 and not torch.is_grad_enabled()))
        output, weights = super().forward(q, k, v, mask, need_weights=formula)
        return output, weights if need_weights else None


class AddAndNorm(paper.AddAndNorm):
    """Under autocast a sublayer returns bf16 while the residual stream stays float32: cast before adding."""

    def output(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        # The parent's two lines, with the cast: written out rather than called, a call each residual costs 1-2%
        # of a decoding step of the bundled model (docs/benchmarks.md).
        dropped = self.dropout(sublayer_output)
        y = x + (dropped if dropped.dtype == x.dtype else dropped.to(x.dtype))
        return y if self.norm_first else self.norm(y)


class Transformer(paper.Transformer):
    """The tied output projection (the target embedding's transpose) read through a ``DecodingWeight``."""

    def _speed_up(self) -> None:
        self.tied_output = DecodingWeight() if self.output_proj is None else None

    def project(self, hidden: Tensor) -> Tensor:
        if self.output_proj is None:
            return self.tied_output.linear(hidden, self.tgt_embed.weight, self.output_bias)
        return super().project(hidden)

    def _apply(self, fn, recurse=True):
        if self.tied_output is not None:
            self.tied_output.clear()
        return super()._apply(fn, recurse)


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Dropout (Srivastava et al., 2014; section 5.4): in training, each element is zeroed with probability p and
    the rest scaled by 1 / (1 - p), so the expected output is the input.

    One 64-bit draw serves four elements, 16 bits each; an element is kept when its bits are not among the lowest
    ``round(p * 65536)`` of the 65,536 values, so it is kept with probability 1 - p to within 1/65,536, and the
    scale is the exact inverse of that probability. The draws come from the same generator, so
    ``torch.manual_seed`` and its saved state make them repeat. On a GPU, PyTorch's own fused dropout runs.
    """
    if not training or p == 0:
        return x
    if not x.is_cpu:
        return F.dropout(x, p, training=True)
    dropped = round(p * 65536)
    count = x.numel()
    bits = torch.randint(-2**63, 2**63 - 1, ((count + 3) // 4,), dtype=torch.int64).view(torch.int16)[:count]
    kept = (bits >= dropped - 32768).view(x.shape)
    return torch.where(kept, x * (65536 / (65536 - dropped)), 0)


class Dropout(nn.Dropout):
    """``nn.Dropout`` with ``dropout``'s draws; nothing happens in evaluation.

    Called straight, past ``nn.Module.__call__``'s hook machinery: a decoding step calls a dozen dropouts that do
    nothing, and those few microseconds each were 2% of a step of the bundled model. So hooks put on a sped-up
    dropout do not run (nothing here puts one there), and ``torch.fx`` traces into it.
    """

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p) if self.training else x

    __call__ = forward


FASTER = {nn.Linear: Linear, nn.Dropout: Dropout, paper.MultiHeadAttention: MultiHeadAttention,
          paper.ScaledDotProductAttention: ScaledDotProductAttention, paper.AddAndNorm: AddAndNorm,
          paper.Transformer: Transformer}


def speed_up(model: nn.Module) -> nn.Module:
    """Give each module of ``model`` that has one its faster subclass above, in place; returns the model.

    Only the class changes: parameters, buffers, hooks and the state dict stay as they are, but for hooks on a
    dropout, which a sped-up dropout does not run (``Dropout``).
    """
    for module in model.modules():
        faster = FASTER.get(type(module))
        if faster is not None:
            module.__class__ = faster
            if hasattr(faster, "_speed_up"):
                module._speed_up()
    return model


def decoding_copy_bytes(model: nn.Module) -> int:
    """What the copies of a model's weights that decoding on a CPU reads take: about its weights again.
    Cross-attention's projection is copied as it is read, in two parts: the queries' rows and the keys' and values'
    (``paper.MultiHeadAttention.forward``), each in its own shape's layout."""
    total = 0
    cross = {id(layer.cross_attn.in_proj) for layer in getattr(getattr(model, "decoder", None), "layers", ())}
    for module in model.modules():
        if isinstance(module, Linear) and id(module) in cross:
            d = module.in_features
            total += sum(module.decoding_weight.copy_bytes(module.weight[rows])
                         for rows in (slice(0, d), slice(d, 3 * d)))
        elif isinstance(module, Linear):
            total += module.decoding_weight.copy_bytes(module.weight)
        if isinstance(module, Transformer) and module.tied_output is not None:
            total += module.tied_output.copy_bytes(module.tgt_embed.weight)
    return total


def computes_bf16_natively() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX), so that a model kept in bf16 decodes
    at 0.77 to 1.25 times its float32 speed (measured in ``docs/multilingual.md``) rather than several times
    slower. ``torch.cpu``'s probes are underscored; where one is missing, the answer is no."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def formula_is_faster(q: Tensor, dropout_p: float) -> bool:
    """Whether attention's plain formula beats PyTorch's fused kernel: on a CPU in bf16 the kernel is about 3x
    slower for sentence-length sequences (benchmarks/train_throughput.py), and its dropout draws as slowly as
    ``F.dropout``."""
    return q.device.type == "cpu" and (q.dtype == torch.bfloat16 or dropout_p > 0)


def cores_available() -> int:
    """The cores this process may compute on: those it may run on (its affinity, where the system says), no more
    than torch's own count as it started (which leaves out a core's second hyperthread)."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        allowed = os.cpu_count() or 1
    return max(1, min(allowed, TORCH_THREADS_AT_START))


def cpu_seconds_of_others() -> dict[int, float]:
    """The CPU seconds each process visible here has used, but this one: Linux's /proc, empty elsewhere. In a
    container only its own processes are visible, so a shared host's other tenants do not count."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    used = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:  # after the command's name in brackets: state, then 10 fields, then user and system ticks
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
            except (OSError, IndexError, ValueError):  # gone meanwhile, or not a process's
                continue
    return used


@dataclass(frozen=True)
class OthersUse:
    """The CPU seconds the other processes visible here had spent at a moment (``at``, on ``time.monotonic``)."""
    at: float
    seconds: dict[int, float]


def others_use(read: Callable[[], dict[int, float]] = cpu_seconds_of_others,
               clock: Callable[[], float] = time.monotonic) -> OthersUse:
    return OthersUse(clock(), read())


def busy_cores(since: OthersUse | None = None, sample_s: float = BUSY_SAMPLE_S,
               read: Callable[[], dict[int, float]] = cpu_seconds_of_others,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> float:
    """How many cores the other processes keep busy: their CPU seconds since ``since`` (a reading taken earlier,
    such as before a program's own imports), else over ``sample_s`` of waiting; at least ``sample_s`` in all. A
    process that started or ended meanwhile does not count."""
    start = since or others_use(read, clock)
    left = sample_s - (clock() - start.at)
    if left > 0:
        sleep(left)
    end = others_use(read, clock)
    spent = sum(end.seconds[pid] - start.seconds[pid] for pid in end.seconds.keys() & start.seconds.keys())
    return spent / max(end.at - start.at, 1e-9)


def threads_for_machine(cores: int | None = None, busy: float | None = None) -> int:
    """torch's intra-op threads for a process that starts computing now: the cores nothing else keeps busy, at
    least one. A thread that finishes its share of an operation waits for the others, so one held off its core by
    another process slows every operation down; measured on two cores beside a busy one, one thread was 1.5-1.8x
    faster than two, and alone two were 1.3-1.4x faster than one. ``busy`` is read once, as the process starts: a
    process that starts later beside it is not seen."""
    cores = cores_available() if cores is None else cores
    busy = busy_cores() if busy is None else busy
    return max(1, min(cores, cores - math.floor(busy + 0.5)))  # a half-busy core counts as busy


def threads_to_use(explicit: int | None = None, since: OthersUse | None = None) -> int:
    """``explicit`` where given (a setting, a flag), else torch's count where OMP_ or MKL_NUM_THREADS sets it, else
    ``threads_for_machine``, the other processes' use counted ``since`` a reading where one was taken."""
    if explicit is not None:
        return explicit
    if any(os.environ.get(variable, "").strip() for variable in THREADS_VARIABLES):
        return torch.get_num_threads()
    if cores_available() == 1:
        return 1
    return threads_for_machine(busy=busy_cores(since))


@contextlib.contextmanager
def threads_for_this_run(explicit: int | None = None):
    """torch's threads set by ``threads_to_use`` while a command runs, and as they were after it (a command run
    inside another program, such as the tests, leaves its threads alone); yields the count."""
    before = torch.get_num_threads()
    threads = threads_to_use(explicit)
    if threads != before:
        if explicit is None and threads < cores_available():
            log.info("computing on %d of %d cores: the others are busy", threads, cores_available())
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
