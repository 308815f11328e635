"""What makes the model fast on a CPU, measured; model.py uses these in place of nn.Linear and nn.Dropout.

Neither changes what is computed (to float rounding), only how: the tests hold both to PyTorch's own.

- ``Linear`` decodes through a ``DecodingWeight``: a copy of its weight in the layout a CPU multiplies fastest.
  Decoding multiplies one row (greedy) or a few (the beams of a step, a short forced translation) by every weight
  matrix, work bound by how fast the weights stream from memory, and ``nn.Linear``'s layout is not the fastest to
  stream. One decoding step's products (``benchmarks/weight_layout.py``, the project's 2-core AMD EPYC, on one
  row / five rows): the bundled model's 2.96 / 4.70 ms as stored, 1.88 / 3.51 ms with every weight transposed,
  2.44 / 3.12 ms with every weight prepacked for oneDNN; opus-mt-en-de's 34.5 / 61.8 ms as stored, 23.4 / 57.2
  transposed, 21.4 / 25.8 prepacked. So opus-mt's large matrices are prepacked, and a smaller one, at least as
  wide as tall, is read as a contiguous transpose: one copy each.
  Training, autocast, GPUs, other dtypes and weights made under ``torch.inference_mode`` (which carry no version
  to watch) use the weight itself.
- ``dropout`` draws 16 random bits per element instead of a float: ``F.dropout`` draws from PyTorch's serial
  generator, and with dropout 0.1 the small preset trained at half its speed without (benchmarks/train_throughput.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PACKING = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
EVERY_ROW = slice(None)


class DecodingWeight:
    """A weight (or some of its rows) as decoding on a CPU reads it fastest, rebuilt when the weight changes.

    PyTorch tracks the changes that matter: an in-place update (optimizer steps, ``load_state_dict``), new storage
    (``.to()``, ``.data =``), another dtype. Writes through ``W.data`` in place bypass that tracking, as they do for
    autograd; call ``clear()`` after them.
    """

    # Prepacked from 2**19 elements and 512 columns (opus-mt's matrices but its 512 x 512 ones); measured on the
    # two model sizes here, the bundled models' 8,000 x 256 vocabulary projection reads faster transposed.
    LARGE, WIDE = 2**19, 512

    def __init__(self):
        # rows -> (W as seen, W's version then, its copy, whether prepacked); holding W keeps its address from
        # being reused.
        self._copies: dict[tuple[int, int], tuple[Tensor, int, Tensor | None, bool]] = {}

    @classmethod
    def packs(cls, weight: Tensor) -> bool:
        return PACKING and weight.numel() >= cls.LARGE and weight.size(1) >= cls.WIDE

    @classmethod
    def copy_bytes(cls, weight: Tensor) -> int:
        """What the copy of ``weight`` that decoding on a CPU reads takes, made or to be made (a float32 weight
        on the CPU is copied unless it is wider than tall and too small to prepack)."""
        copied = weight.is_cpu and weight.dtype == torch.float32 and (cls.packs(weight) or
                                                                       weight.size(0) >= weight.size(1))
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
            packed = self.packs(seen)
            if packed:
                copy = torch.ops.mkldnn._reorder_linear_weight(seen.contiguous())
            elif seen.size(0) >= seen.size(1):
                copy = seen.t().contiguous().t()
            else:
                copy = None  # as stored: a matrix taller than wide streams as fast as it is
            cached = self._copies[key] = (seen, weight._version, copy, packed)
        _, _, copy, packed = cached
        if packed:
            return torch.ops.mkldnn._linear_pointwise(x, copy, bias, "none", [], "")
        return F.linear(x, weight if copy is None else copy, bias)

    def clear(self) -> None:
        self._copies = {}

    def __getstate__(self) -> dict:
        return {"_copies": {}}  # copies and pickles of a model leave these copies behind


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) that decodes through a ``DecodingWeight``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias)
        self.decoding_weight = DecodingWeight()

    def forward(self, x: Tensor, rows: slice = EVERY_ROW) -> Tensor:
        """x W^T + b; ``rows``: with those output features only (cross-attention's query, or its keys and values)."""
        return self.decoding_weight.linear(x, self.weight, self.bias, rows)

    def _apply(self, fn, recurse=True):
        self.decoding_weight.clear()  # .to(), .half() and friends: the copies belonged to the old tensors
        return super()._apply(fn, recurse)


def decoding_copy_bytes(model: nn.Module) -> int:
    """What the copies of a model's weights that decoding on a CPU reads take: about its weights again."""
    total = 0
    for module in model.modules():
        if isinstance(module, Linear):
            total += DecodingWeight.copy_bytes(module.weight)
        if getattr(module, "tied_output", None) is not None:  # the output projection reads the target embedding
            total += DecodingWeight.copy_bytes(module.tgt_embed.weight)
    return total


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


class Dropout(nn.Module):
    """``nn.Dropout`` with ``dropout``'s draws; nothing happens in evaluation."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def formula_is_faster(q: Tensor, dropout_p: float) -> bool:
    """Whether attention's plain formula beats PyTorch's fused kernel: on a CPU in bf16 the kernel is about 3x
    slower for sentence-length sequences (benchmarks/train_throughput.py), and its dropout draws as slowly as
    ``F.dropout``."""
    return q.device.type == "cpu" and (q.dtype == torch.bfloat16 or dropout_p > 0)
