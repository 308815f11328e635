"""Weights on disk: safetensors files (sharded under a size), written into a directory that replaces the old one
whole, read back without unpickling anything, their names and shapes checked against a config before a model is
built."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from ..errors import Explained, detail
from ..paper.config import ModelConfig
from ..paper.model import Transformer

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
# Hugging Face Spaces refuse files over 10 MB without Git LFS.
DEFAULT_MAX_SHARD_BYTES = 9 * 1024 * 1024


class CheckpointError(Explained):
    """A checkpoint is missing, corrupt, or does not fit its own config."""


def unique_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict without aliases (a shared embedding is stored once). Aliases are the same parameter object,
    which also holds for a model built on the meta device, where every tensor has the same (null) address."""
    state, seen, unique = model.state_dict(), set(), {}
    for name, variable in model.state_dict(keep_vars=True).items():
        if id(variable) not in seen:
            seen.add(id(variable))
            unique[name] = state[name]
    return unique


def _write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    # Written by Python rather than safetensors.save_file, which creates files readable by their owner only.
    path.write_bytes(safetensors_bytes(tensors, metadata={"format": "pt"}))


def write_weights(directory: Path, tensors: dict[str, torch.Tensor], max_shard_bytes: int) -> None:
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    if total <= max_shard_bytes:
        _write_safetensors(directory / WEIGHTS, tensors)
        return
    shards, current, size = [], {}, 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if current and size + nbytes > max_shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensor
        size += nbytes
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards, start=1):
        filename = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        _write_safetensors(directory / filename, shard)
        weight_map.update({name: filename for name in shard})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / WEIGHTS_INDEX).write_text(json.dumps(index, indent=2) + "\n")


def refuse_pickle(directory: Path) -> None:
    """Explain, rather than report a missing file, when a directory holds pickle weights instead."""
    if any(directory.glob("*.pt")) or any(directory.glob("*.bin")) or any(directory.glob("*.pth")):
        raise CheckpointError(code="checkpoint.pickle_weights", directory=str(directory))


LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint (one, or the shards its index names)."""
    index_path = directory / WEIGHTS_INDEX
    if index_path.is_file():
        try:
            weight_map = json.loads(index_path.read_text())["weight_map"]
            return [directory / Path(name).name for name in sorted(set(weight_map.values()))]
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
            raise CheckpointError(code="checkpoint.bad_shard_index", path=str(index_path),
                                  error=detail(error)) from None
    if not (directory / WEIGHTS).is_file():
        refuse_pickle(directory)
        raise CheckpointError(code="checkpoint.no_weights", weights=WEIGHTS,
                              directory=str(directory))
    return [directory / WEIGHTS]


def stored_shapes(directory: Path) -> dict[str, tuple[int, ...]]:
    """The name and shape of every stored tensor, read from the safetensors headers alone (nothing allocated)."""
    shapes = {}
    for path in weight_files(directory):
        try:
            with path.open("rb") as file:
                if file.read(len(LFS_POINTER)) == LFS_POINTER:
                    raise CheckpointError(code="checkpoint.lfs_pointer",
                                          file=path.name, directory=str(directory))
            with safe_open(str(path), "pt") as stored:
                shapes.update({name: tuple(stored.get_slice(name).get_shape()) for name in stored.keys()})
        except CheckpointError:
            raise
        except (SafetensorError, OSError, ValueError) as error:
            raise CheckpointError(code="checkpoint.unreadable_weights", directory=str(directory),
                                  error=detail(error)) from None
    return shapes


def check_shapes(model_config: ModelConfig, shapes: dict[str, tuple[int, ...]], origin: Path | str) -> None:
    """Refuse weights that do not fit the config before the model is built: a config.json that claims huge
    sizes would otherwise allocate them first."""
    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in unique_state_dict(Transformer(model_config)).items()}
    _compare(expected, shapes, origin)


def _compare(expected: dict[str, tuple[int, ...]], stored: dict[str, tuple[int, ...]], origin) -> None:
    missing, unexpected = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
    if missing or unexpected:
        raise CheckpointError(code="checkpoint.names_mismatch", origin=str(origin),
                              missing=str(missing[:5]), unexpected=str(unexpected[:5]))
    for name, shape in expected.items():
        if tuple(stored[name]) != shape:
            raise CheckpointError(code="checkpoint.shape_mismatch",
                                  origin=str(origin), name=name, shape=str(tuple(stored[name])),
                                  expected=str(shape))


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    tensors = {}
    try:
        for path in weight_files(directory):
            tensors.update(load_file(str(path)))
    except (SafetensorError, OSError, ValueError, KeyError) as error:
        raise CheckpointError(code="checkpoint.unreadable_weights", directory=str(directory),
                              error=detail(error)) from None
    return tensors


def write_directory_atomically(destination: Path, write) -> None:
    """Call ``write(tmp_dir)`` then move tmp_dir to ``destination``, replacing it in two renames."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(destination.name + ".tmp")
    old = destination.with_name(destination.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write(tmp)
    for path in tmp.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    _fsync_directory(tmp)
    if destination.exists():
        shutil.rmtree(old, ignore_errors=True)
        destination.rename(old)
    tmp.rename(destination)
    _fsync_directory(destination.parent)  # the renames themselves survive a power cut only once this is done
    shutil.rmtree(old, ignore_errors=True)


def _fsync_directory(path: Path) -> None:
    """Flush a directory's entries (new names, renames) to disk; skipped where directories cannot be opened."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:  # Windows
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def resolve(path: str | Path) -> Path:
    """The directory to read: ``path``, or its ``.old`` twin if a save was cut off between its two renames."""
    path = Path(path)
    old = path.with_name(path.name + ".old")
    if not path.exists() and old.is_dir():
        log.warning("recovering %s from %s (an earlier save was interrupted)", path, old)
        return old
    return path


def load_weights(model: Transformer, tensors: dict[str, torch.Tensor], origin: Path | str = "weights") -> None:
    """Copy stored tensors into ``model``, refusing anything that does not fit it exactly."""
    expected = unique_state_dict(model)
    stored = {name: tuple(tensor.shape) for name, tensor in tensors.items()
              if name in expected or name not in model.state_dict()}  # a tied weight's alias is no surprise
    _compare({name: tuple(tensor.shape) for name, tensor in expected.items()}, stored, origin)
    with torch.no_grad():
        for name, tensor in expected.items():
            tensor.copy_(tensors[name])
