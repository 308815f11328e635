"""A model as two ONNX graphs a browser runs (the offline pack, ``transformer.pack``): the encoder, and the decoder
over a whole target prefix.

Both are traced from the model's own modules (``torch.onnx.export``), so the browser computes what
``Transformer.encode`` and ``Transformer.decode_states`` compute, with every attention probability as an output
(the formula of equation 1, as the app's inspection pass computes them). The decoder takes the whole prefix at
each step rather than a key/value cache, which keeps the graph one function of its inputs; it projects only the
positions asked for, so a search step pays the vocabulary projection once.

Their weights are written once into one file both graphs read (the embedding the paper shares between encoder,
decoder and output is stored once), each as stored in the checkpoint: a weight that float16 holds exactly (a
bundled checkpoint's half-precision weights, widened as they load) is written in float16 and widened again by
the graph, so the numbers stay float32 and the file half the size.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from ..paper.model import EncoderOutput, Transformer

log = logging.getLogger(__name__)

WEIGHTS_FILE = "weights.bin"  # the name both graphs give their shared weights (ONNX external data)
ENCODER_INPUTS, ENCODER_OUTPUTS = ["source"], ["memory", "encoder_attention"]
DECODER_INPUTS = ["target", "memory", "source", "projected"]
DECODER_OUTPUTS = ["logits", "decoder_attention", "cross_attention"]
SMALLEST_SHARED = 1024  # bytes: a smaller tensor (a shape, a scale) stays in its graph
ALIGNMENT = 64  # each weight starts at a multiple of this in the shared file, as typed arrays over it need
EXPORTER_LOGGERS = ("torch.onnx", "torch._dynamo", "torch.export", "onnxscript", "onnx_ir")


class EncoderGraph(nn.Module):
    """source (1, S) -> memory (1, S, D), encoder self-attention (layers, 1, heads, S, S)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, source: Tensor) -> tuple[Tensor, Tensor]:
        encoded = self.model.encode(source, need_weights=True)
        return encoded.memory, torch.stack(encoded.attentions)


class DecoderGraph(nn.Module):
    """target (B, T), memory (B, S, D), source (B, S), projected (P,) -> logits of the ``projected`` positions
    (B, P, V), decoder self-attention (layers, B, heads, T, T) and cross-attention (layers, B, heads, T, S)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, target: Tensor, memory: Tensor, source: Tensor, projected: Tensor):
        source_mask = (source != self.model.config.pad_id)[:, None, None, :]
        hidden, self_attentions, cross_attentions = self.model.decode_states(
            target, EncoderOutput(memory, source_mask), need_weights=True)
        logits = self.model.project(hidden.index_select(1, projected))
        return logits, torch.stack(self_attentions), torch.stack(cross_attentions)


@dataclass
class Graphs:
    """The two graphs (ONNX bytes) and the weights file they share."""

    encoder: bytes
    decoder: bytes
    weights: bytes


def export_graphs(model: Transformer) -> Graphs:
    """Trace ``model`` (float32, on the CPU) into its two graphs and their shared weights."""
    import onnx  # the pack's export only; the app and the other commands never need it

    model = model.float().cpu().eval()
    config = model.config
    positions = torch.export.Dim("positions", min=1, max=config.max_len)
    keys = torch.export.Dim("keys", min=1, max=config.max_len)
    rows = torch.export.Dim("rows", min=1, max=1024)
    projected = torch.export.Dim("projected", min=1, max=config.max_len)
    source = torch.tensor([[config.eos_id] * 3])
    target = torch.tensor([[config.start_id] * 2])
    with torch.inference_mode():
        memory = model.encode(source).memory
    encoder = _traced(EncoderGraph(model), (source,), ENCODER_INPUTS, ENCODER_OUTPUTS, {"source": {1: keys}})
    decoder = _traced(DecoderGraph(model), (target, memory, source, torch.tensor([1])), DECODER_INPUTS,
                      DECODER_OUTPUTS, {"target": {0: rows, 1: positions}, "memory": {0: rows, 1: keys},
                                        "source": {0: rows, 1: keys}, "projected": {0: projected}})
    weights = SharedWeights()
    for graph in (encoder, decoder):
        weights.take(graph)
    return Graphs(encoder.SerializeToString(), decoder.SerializeToString(), weights.data.getvalue())


def _traced(module: nn.Module, inputs: tuple, input_names: list[str], output_names: list[str],
            dynamic_shapes: dict) -> "onnx.ModelProto":
    with warnings.catch_warnings(), torch.inference_mode(False), _quiet(*EXPORTER_LOGGERS):
        warnings.simplefilter("ignore")  # the exporter's notes on its own internals, nothing about this model
        program = torch.onnx.export(module.eval(), inputs, input_names=input_names, output_names=output_names,
                                    dynamic_shapes=dynamic_shapes, dynamo=True, optimize=True, verbose=False)
    return program.model_proto


@contextlib.contextmanager
def _quiet(*names: str):
    """The exporter's loggers held to errors: each of its passes logs what it did, which says nothing to a user."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def held_by_float16(values: np.ndarray) -> bool:
    """Whether float16 holds these float32 values exactly (a bundled checkpoint's, stored in half precision): then
    the shared file stores them so, and the graph widens them again."""
    return values.dtype == np.float32 and np.array_equal(values.astype(np.float16).astype(np.float32), values)


class SharedWeights:
    """One file of weights for several graphs: each distinct tensor written once, in float16 where that holds it
    exactly, and every graph's initializers pointed at it (ONNX external data)."""

    def __init__(self):
        self.data = io.BytesIO()
        self.placed: dict[bytes, tuple[int, int, int]] = {}  # content digest -> offset, length, ONNX type

    def take(self, graph: "onnx.ModelProto") -> None:
        import onnx
        from onnx import numpy_helper

        widened = []
        for tensor in graph.graph.initializer:
            values = numpy_helper.to_array(tensor)
            if values.dtype.kind != "f" or values.nbytes < SMALLEST_SHARED:  # shapes and constants stay in the
                continue                                                       # graph: its checks read them
            narrow = held_by_float16(values)
            stored = values.astype(np.float16) if narrow else values
            offset, length, data_type = self._place(stored)
            name = tensor.name
            tensor.Clear()
            tensor.name = f"{name}.float16" if narrow else name
            tensor.data_type = data_type
            tensor.dims.extend(stored.shape)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", WEIGHTS_FILE), ("offset", str(offset)), ("length", str(length))):
                tensor.external_data.add(key=key, value=value)
            if narrow:
                widened.append(onnx.helper.make_node("Cast", [tensor.name], [name], to=onnx.TensorProto.FLOAT,
                                                     name=f"widen {name}"))
        for position, node in enumerate(widened):
            graph.graph.node.insert(position, node)

    def _place(self, values: np.ndarray) -> tuple[int, int, int]:
        from onnx import helper

        raw = np.ascontiguousarray(values).tobytes()
        key = hashlib.sha256(raw + str(values.dtype).encode() + str(values.shape).encode()).digest()
        if key not in self.placed:
            padding = -self.data.tell() % ALIGNMENT
            self.data.write(b"\0" * padding)
            self.placed[key] = (self.data.tell(), len(raw), helper.np_dtype_to_tensor_dtype(values.dtype))
            self.data.write(raw)
        return self.placed[key]
