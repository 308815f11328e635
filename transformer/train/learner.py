"""What a run learns with: its tokenizers, its model, and the optimizer and plateau schedule that update it, made
new from the run's data or as a resumed run left them (§5.3: Adam with β1 0.9, β2 0.98, ε 1e-9)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..cpu import speed_up
from ..files.checkpoint import Checkpoint
from ..files.weights import load_weights, unique_state_dict
from ..paper.config import preset
from ..paper.model import Transformer
from ..paper.tokenizer import Tokenizer
from .corpus import Datasets, train_tokenizers
from .processes import Processes
from .settings import TrainConfig


class Learner(NamedTuple):
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    model: Transformer
    optimizer: torch.optim.Optimizer
    plateau: torch.optim.lr_scheduler.ReduceLROnPlateau


def new_learner(config: TrainConfig, data: Datasets, processes: Processes, device: torch.device,
                resumed: Checkpoint | None = None) -> Learner:
    """Tokenizers trained on ``data`` and a model of ``config``'s size, or a ``resumed`` run's tokenizers and model
    shape; the weights, optimizer and schedule new (``restore`` puts back a resumed run's)."""
    if resumed is not None:
        source_tokenizer, target_tokenizer = resumed.source_tokenizer, resumed.target_tokenizer
        model_config = resumed.model.config
    else:
        torch.manual_seed(config.seed)
        source_tokenizer, target_tokenizer = train_tokenizers(config, data, processes)
        overrides = dict(config.model) if config.joint_vocabulary else {**config.model, "share_embeddings": False}
        model_config = preset(config.preset, source_tokenizer.vocab_size, target_tokenizer.vocab_size, **overrides)
    torch.manual_seed(config.seed)
    model = speed_up(Transformer(model_config)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=config.weight_decay)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
    return Learner(source_tokenizer, target_tokenizer, model, optimizer, plateau)


def restore(learner: Learner, loaded: Checkpoint, state: dict) -> None:
    """A resumed run's weights, optimizer moments and schedule, as its ``last/`` kept them."""
    load_weights(learner.model, dict(unique_state_dict(loaded.model)), loaded.path)
    optimizer_state = state["optimizer"]
    optimizer_state["state"] = {int(k): v for k, v in optimizer_state["state"].items()}
    learner.optimizer.load_state_dict(optimizer_state)
    learner.plateau.load_state_dict(state["plateau"])
