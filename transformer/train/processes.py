"""The processes of one training run (torchrun starts several; alone, there is one): which this is, its device,
and how they agree, so that they update in lockstep, stop together and end with the same weights."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..files.checkpoint import default_device

log = logging.getLogger(__name__)


@dataclass
class Processes:
    distributed: bool
    rank: int
    world_size: int
    device: torch.device

    @classmethod
    def join(cls, device: str | torch.device | None = None) -> "Processes":
        """This process's place: torchrun's environment (NCCL on GPUs, gloo on CPUs), else a run of one; on
        ``device`` (default: CUDA when PyTorch sees a GPU, each process on its own), its process index added."""
        distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        device = torch.device(device) if device is not None else default_device()
        if distributed and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        if device.type == "cuda" and device.index is None:
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        return cls(distributed, dist.get_rank() if distributed else 0,
                   dist.get_world_size() if distributed else 1, device)

    def agree(self, flag: bool, any_rank: bool) -> bool:
        """A flag agreed across processes (true on any rank / on all ranks), so they stop or fail together."""
        if not self.distributed:
            return flag
        value = torch.tensor([int(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX if any_rank else dist.ReduceOp.MIN)
        return bool(value.item())

    def slowest(self, seconds: float) -> float:
        """The largest of every process's ``seconds``: the clock all of them read."""
        if not self.distributed:
            return seconds
        value = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return float(value.item())

    def from_first(self, objects: list) -> list:
        """Rank 0's ``objects`` on every process (each passes a list of the same length)."""
        if self.distributed:
            dist.broadcast_object_list(objects, src=0)
        return objects

    def identical(self, tensors, step: int) -> bool:
        """Whether every process holds bit-identical ``tensors``, as DDP promises; logs an error if not."""
        digest = hashlib.sha256()
        for tensor in tensors:
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        digests = [None] * self.world_size
        dist.all_gather_object(digests, digest.hexdigest())
        if len(set(digests)) > 1:
            log.error("the weights of the %d processes differ at step %d: %s", self.world_size, step,
                      ", ".join(d[:12] for d in digests))
        return len(set(digests)) == 1

    def leave(self) -> None:
        """Wait for every process, then end the group: a process that tears gloo down while another still
        works (rank 0 saves and prints last) can abort with "terminate called without an active exception"."""
        if self.distributed and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
