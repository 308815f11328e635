"""Argument types of the command-line tools: a mistake becomes argparse's one-line usage error (exit code 2)."""

from __future__ import annotations

import argparse

import torch


def positive_int(value: str) -> int:
    if not value.isdecimal() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def device(name: str) -> torch.device:
    """A device this machine has."""
    try:
        chosen = torch.device(name)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {name!r}; use cpu or cuda") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("this machine has no CUDA GPU that PyTorch can use; use --device cpu")
    return chosen
