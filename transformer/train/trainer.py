"""Training: one loop, used by the command line (``cli.py``), torchrun and the app's Train tab alike.

    python -m transformer.train --data reverse --preset tiny --steps 600

``Trainer.run`` reads top to bottom: batches of an epoch, an update (``train_step``), an evaluation when one is
due, until the updates, the time limit or a cancel end the run. Its settings are a ``TrainConfig``
(``settings.py``, chosen by ``planning.py``), its loss ``loss.py``, its data ``corpus.py``, its clock ``clock.py``;
what it saves and logs, and what resuming reads back, lies in its ``RunDirectory`` (``run_directory.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from .. import data as datasets
from ..errors import Explained
from ..files.checkpoint import Checkpoint
from ..files.weights import unique_state_dict
from .clock import RunClock, Throughput
from .corpus import collate, epoch_batches, examples_of, load_datasets
from .learner import new_learner, restore
from .evaluation import evaluate_translation, probe_attention, validation_loss
from .loss import batch_loss
from .planning import planned_config, run_info
from .processes import Processes
from .run_directory import RunDirectory, random_state, restore_random_state
from .settings import TrainConfig, set_learning_rate, use_bf16

log = logging.getLogger(__name__)

StepCallback = Callable[[dict], None]


class Diverged(Explained, FloatingPointError):
    """The loss stopped being a number: the run cannot go on, and a lower learning rate usually mends it."""


class Trainer:
    """Owns one run: data, tokenizer, model, optimizer, schedule; ``run()`` trains until done or cancelled.

    ``on_step(metrics)`` is called after every update and ``on_eval(metrics)`` after every evaluation (metrics
    include ``probe``, the attention of the first probe sentence); setting ``cancel`` (a threading.Event) stops the
    run cleanly after the current update, with ``last/`` saved."""

    def __init__(self, config: TrainConfig, resume: str | Path | None = None,
                 on_step: StepCallback | None = None, on_eval: StepCallback | None = None,
                 cancel: threading.Event | None = None, show_progress: bool = True):
        config.validate()
        self.on_step, self.on_eval = on_step, on_eval
        self.cancel = cancel or threading.Event()
        self.show_progress = show_progress
        self.processes = Processes.join(config.device)
        self.distributed, self.rank, self.world_size, self.device = (
            self.processes.distributed, self.processes.rank, self.processes.world_size, self.processes.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        self.data = load_datasets(config)
        self.bf16 = use_bf16(config, self.device)
        self.config, self.budget_plan, measuring_s = planned_config(config, self.data.train, self.processes, self.bf16)
        self.clock = RunClock(self.config.max_minutes, self.processes, measuring_s)
        self.directory = RunDirectory(self.config.out_dir, writes=self.rank == 0,
                                      keep=max(self.config.keep_checkpoints, self.config.average_last))
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.best_score: float | None = None
        self.history: list[dict] = []
        self.resumed_plan: dict | None = None  # what a resumed run was planned as, kept on its record
        self._build(self.directory.resumable(resume) if resume else None)
        self.val_examples, self.train_examples = examples_of(self.data, (self.source_tokenizer, self.target_tokenizer),
                                                             self.model.config.max_len)
        self.probes = self.config.probe_sentences or [self.data.val.sources[0]]

    def _build(self, resumed: tuple[Checkpoint, dict] | None) -> None:
        """Tokenizers, model, optimizer and plateau schedule: new, or as ``resumed`` (checkpoint, state) left them."""
        learner = new_learner(self.config, self.data, self.processes, self.device, resumed[0] if resumed else None)
        self.source_tokenizer, self.target_tokenizer, self.model, self.optimizer, self.plateau = learner
        if resumed is not None:
            restore(learner, *resumed)
            self._resume(*resumed)
        self.train_model = self.model
        if self.distributed:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def _state(self) -> dict:
        """What ``last/`` keeps besides the weights, for a resumed run to go on exactly as this one would."""
        randomness = random_state(self.device)
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best_score": self.best_score, "optimizer": self.optimizer.state_dict(),
                "plateau": self.plateau.state_dict(), "torch_rng": randomness.pop("torch_rng"),
                "history": self.history, **self.clock.state(), **randomness}

    def _resume(self, loaded: Checkpoint, state: dict) -> None:
        """Where a resumed run stood: its counters, record, clock and randomness."""
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.best_score, self.history = state["best_score"], state["history"]
        self.clock.resume(state, warmed_up=self.step >= self.config.warmup_steps)
        self.resumed_plan = loaded.info.get("budget_plan")
        restore_random_state(state, self.device)

    def info(self) -> dict:
        """What config.json records about this run besides the model config."""
        return run_info(self.config, self.data.description, self.data.files, self.step,
                        dataclasses.asdict(self.budget_plan) if self.budget_plan else self.resumed_plan)

    def save(self, name: str, with_state: bool = False) -> Path | None:
        return self.directory.save(name, self.model, self.source_tokenizer, self.target_tokenizer, self.info(),
                                   self._state() if with_state else None)

    # --- the loop ---------------------------------------------------------------------------------

    def run(self) -> dict:
        """Train to ``config.steps`` (or the time limit, or cancel); returns the final metrics."""
        config = self.config
        self.directory.open(self.step)
        if self.rank == 0:
            log.info("%s; model %s with %.2fM parameters; %s on %s", self.data.description,
                     f"planned for {config.max_minutes:g} minutes" if config.plan else config.preset,
                     self.model.num_parameters() / 1e6, "bf16 autocast" if self.bf16 else "fp32", self.device)
        self.clock.start()
        progress = tqdm(total=config.steps, initial=self.step, disable=not self.show_progress or self.rank != 0,
                        dynamic_ncols=True, desc="train")
        throughput = Throughput(self.world_size)
        stopped_by = "steps"
        last_eval_s = self.clock.elapsed_s()
        evaluated = None  # the last evaluation, if the run stops right after it

        def out_of_time() -> bool:  # updates left, and no time for them
            return self.step < config.steps and self.clock.out_of_time()
        while self.step < config.steps and stopped_by == "steps":
            examples, batches = epoch_batches(config, self.train_examples,
                                              (self.source_tokenizer, self.target_tokenizer), self.epoch, self.processes)
            while self.batch_in_epoch + config.accumulate <= len(batches) and self.step < config.steps:
                micro = batches[self.batch_in_epoch:self.batch_in_epoch + config.accumulate]
                self.batch_in_epoch += config.accumulate
                metrics = self.train_step(examples, micro)
                self._report(metrics, progress, throughput)
                if self.processes.agree(self.cancel.is_set() or out_of_time(), any_rank=True):
                    stopped_by = "cancel" if self.cancel.is_set() else "time"
                    break
                eval_due = self.step % config.eval_every == 0
                if config.eval_every_minutes is not None:  # the ranks agree, as their clocks may not
                    clock_due = metrics["elapsed_s"] - last_eval_s >= 60 * config.eval_every_minutes
                    eval_due = self.processes.agree(eval_due or clock_due, any_rank=True)
                if eval_due and self.step < config.steps:
                    evaluated = self.evaluate()
                    self._after_eval(evaluated)
                    last_eval_s = self.clock.elapsed_s()
                    # An evaluation that used up the time ends the run: one more update would be made at the
                    # schedule's end, learning rate 0, and evaluated again for nothing.
                    if self.processes.agree(out_of_time(), any_rank=True):
                        stopped_by = "time"
                        break
                    evaluated = None
            if stopped_by == "steps" and self.step < config.steps:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        progress.close()
        return self._finish(evaluated, stopped_by)

    def train_step(self, examples: list[datasets.Example], micro_batches: list[list[int]]) -> dict:
        """One optimizer update over ``micro_batches`` (gradient accumulation); returns its metrics."""
        self.model.train()
        lr = set_learning_rate(self.config, self.optimizer, self.step + 1, self.clock)
        # The update's loss is the mean over all its target tokens, however they are split into micro-batches.
        total_tokens = sum(len(examples[i][1]) for batch in micro_batches for i in batch)
        total_loss = 0.0
        for number, batch in enumerate(micro_batches):
            src, tgt_in, tgt_out = collate([examples[i] for i in batch], self.device)
            last = number == len(micro_batches) - 1
            # Under DDP, gradients are averaged across processes once per update, not per micro-batch.
            sync = contextlib.nullcontext() if last or not self.distributed else self.train_model.no_sync()
            with sync:
                loss = batch_loss(self.train_model, src, tgt_in, tgt_out, self.config.label_smoothing, self.bf16)
                (loss / max(1, total_tokens)).backward()
            total_loss += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm or float("inf"))
        loss_value = total_loss / max(1, total_tokens)
        if not self.processes.agree(math.isfinite(loss_value), any_rank=False):
            raise Diverged(code="train.loss_not_finite", loss=loss_value, step=self.step + 1)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.clock.after_update(self.step, self.config.warmup_steps)
        return {"step": self.step, "loss": loss_value, "lr": lr, "grad_norm": float(grad_norm),
                "tokens": total_tokens}

    def _report(self, metrics: dict, progress: tqdm, throughput: Throughput) -> None:
        """An update's throughput and clock, on the progress bar, in the log now and then, and to ``on_step``."""
        metrics["tokens_per_s"] = throughput.add(metrics["tokens"])
        metrics["elapsed_s"] = self.clock.elapsed_s()
        progress.update(1)
        progress.set_postfix(loss=f"{metrics['loss']:.3f}", lr=f"{metrics['lr']:.2e}",
                             tok_s=f"{metrics['tokens_per_s']:.0f}")
        self.directory.log_update(metrics)
        if self.on_step:
            self.on_step(metrics)

    def evaluate(self) -> dict:
        """Validation loss, the translation scores, and the attention of the first probe sentence (``probe``)."""
        metrics = {"step": self.step, "epoch": self.epoch,
                   "val_loss": validation_loss(self.model, self.val_examples, self.config.max_tokens,
                                               self.device, self.bf16)}
        metrics.update(evaluate_translation(self.model, self.source_tokenizer, self.target_tokenizer,
                                            self.data.val, self.config.eval_sentences, self.bf16))
        metrics["probe"] = probe_attention(self.model, self.source_tokenizer, self.target_tokenizer, self.probes[0],
                                           self.step)
        return metrics

    def _after_eval(self, metrics: dict) -> None:
        """An evaluation recorded, the plateau schedule told, and the run saved: best/ if it is the best so far, a
        step checkpoint, and last/ to resume from."""
        if self.config.schedule == "plateau":
            self.plateau.step(metrics["val_loss"])
        probe = metrics.pop("probe")
        self.directory.add_probe(probe)
        self.history.append({k: v for k, v in metrics.items() if k != "sample"})
        # Logged before the saves: a kill between them leaves a record that resuming drops, never a last/
        # without its record.
        self.directory.log({"event": "eval", **metrics})
        best = self.best_score is None or metrics["bleu"] > self.best_score
        self.best_score = metrics["bleu"] if best else self.best_score
        self.directory.save_evaluated(self.step, best, self.save)
        if self.on_eval:
            self.on_eval({**metrics, "probe": probe})

    def _finish(self, evaluated: dict | None, stopped_by: str) -> dict:
        """The final metrics (the last evaluation, if the run stopped right after it), checked across processes;
        the last step checkpoints averaged if asked."""
        if evaluated is None:
            evaluated = {**self.evaluate(), "stopped_by": stopped_by}
            self._after_eval(evaluated)
        final = {**evaluated, "stopped_by": stopped_by}
        if self.distributed:
            final["ranks_identical"] = self.processes.identical(unique_state_dict(self.model).values(), self.step)
        self.directory.average_last(self.config.average_last)
        return final
