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
from ..cpu import speed_up
from ..files.checkpoint import Checkpoint
from ..files.weights import load_weights, unique_state_dict
from ..paper.config import preset
from ..paper.sentences import translate_batch
from ..paper.translation import forced_decode
from ..paper.model import Transformer
from .clock import RunClock, Throughput
from .corpus import collate, encode_corpus, load_datasets, train_tokenizers
from .evaluation import evaluate_translation, validation_loss
from .loss import batch_loss
from .planning import data_kind, planned_config
from .processes import Processes
from .run_directory import RunDirectory, random_state, restore_random_state, step_name
from .settings import TrainConfig, learning_rate, use_bf16

log = logging.getLogger(__name__)

StepCallback = Callable[[dict], None]
EPOCH_SEED_STRIDE = 7919  # a prime: each seed's synthetic epochs are drawn apart from another seed's


class Trainer:
    """Owns one run: data, tokenizer, model, optimizer, schedule; ``run()`` trains until done or cancelled.

    ``on_step(metrics)`` is called after every update and ``on_eval(metrics)``
    after every evaluation (metrics include ``probe``, the attention of the
    first probe sentence); setting ``cancel`` (a threading.Event) stops the run
    cleanly after the current update, with ``last/`` saved.
    """

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
        self.val_examples = self._filter(encode_corpus(self.data.val, self.source_tokenizer, self.target_tokenizer))
        self.train_examples = (None if self.data.train is None else self._filter(
            encode_corpus(self.data.train, self.source_tokenizer, self.target_tokenizer)))
        self.probes = self.config.probe_sentences or [self.data.val.sources[0]]

    # -- setup --
    def _build(self, resumed: tuple[Checkpoint, dict] | None) -> None:
        """Tokenizers, model, optimizer and plateau schedule: new, or as ``resumed`` (checkpoint, state) left them."""
        config = self.config
        if resumed is not None:
            loaded, _ = resumed
            self.source_tokenizer, self.target_tokenizer = loaded.source_tokenizer, loaded.target_tokenizer
            model_config = loaded.model.config
        else:
            torch.manual_seed(config.seed)
            self.source_tokenizer, self.target_tokenizer = train_tokenizers(config, self.data, self.processes)
            overrides = dict(config.model) if config.joint_vocabulary else {**config.model, "share_embeddings": False}
            model_config = preset(config.preset, self.source_tokenizer.vocab_size, self.target_tokenizer.vocab_size,
                                  **overrides)
        torch.manual_seed(config.seed)
        self.model = speed_up(Transformer(model_config)).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9,
                                           weight_decay=config.weight_decay)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(self.optimizer, factor=0.5, patience=2)
        if resumed is not None:
            self._restore(*resumed)
        self.train_model = (DistributedDataParallel(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
                            if self.distributed else self.model)

    def _filter(self, examples: list[datasets.Example]) -> list[datasets.Example]:
        kept, dropped = datasets.filter_by_length(examples, self.model.config.max_len)
        if dropped:
            log.info("dropped %d pairs longer than %d tokens", dropped, self.model.config.max_len)
        return kept

    def _epoch_batches(self, epoch: int) -> tuple[list[datasets.Example], list[list[int]]]:
        """The examples of ``epoch`` (the corpus, or fresh digit sequences) and this process's batches of them."""
        examples = self.train_examples
        if examples is None:
            corpus = datasets.synthetic_corpus(self.config.data, self.config.synthetic_size,
                                               seed=self.config.seed * EPOCH_SEED_STRIDE + epoch + 1)
            examples = encode_corpus(corpus, self.source_tokenizer, self.target_tokenizer)
        batches = datasets.token_batches(examples, self.config.max_tokens, self.config.seed, epoch)
        if self.distributed:  # every rank gets the same number of batches, so updates stay in lockstep
            per_rank = len(batches) // self.world_size
            batches = batches[self.rank * per_rank:(self.rank + 1) * per_rank]
        if len(batches) < self.config.accumulate:
            raise datasets.DataError(f"an epoch holds {len(batches)} batches, fewer than the {self.config.accumulate} "
                                     "micro-batches of one update: add data, or lower --accumulate or the "
                                     "number of processes")
        return examples, batches

    # -- state --
    def _state(self) -> dict:
        """What ``last/`` keeps besides the weights, for a resumed run to go on exactly as this one would."""
        randomness = random_state(self.device)
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "best_score": self.best_score, "optimizer": self.optimizer.state_dict(),
                "plateau": self.plateau.state_dict(), "torch_rng": randomness.pop("torch_rng"),
                "history": self.history, **self.clock.state(), **randomness}

    def _restore(self, loaded: Checkpoint, state: dict) -> None:
        load_weights(self.model, dict(unique_state_dict(loaded.model)), loaded.path)
        optimizer_state = state["optimizer"]
        optimizer_state["state"] = {int(k): v for k, v in optimizer_state["state"].items()}
        self.optimizer.load_state_dict(optimizer_state)
        self.plateau.load_state_dict(state["plateau"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.best_score, self.history = state["best_score"], state["history"]
        self.clock.resume(state, warmed_up=self.step >= self.config.warmup_steps)
        self.resumed_plan = loaded.info.get("budget_plan")
        restore_random_state(state, self.device)

    def elapsed_s(self) -> float:
        """Seconds on the run's clock (``clock.RunClock``)."""
        return self.clock.elapsed_s()

    def info(self) -> dict:
        """What config.json records about this run besides the model config."""
        languages = ((self.config.src_lang, self.config.tgt_lang) if data_kind(self.config.data) != "synthetic"
                     else ("digits", "digits"))
        return {"training": dataclasses.asdict(self.config), "data": self.data.description,
                "data_files_sha256": self.data.files, "step": self.step,
                "budget_plan": dataclasses.asdict(self.budget_plan) if self.budget_plan else self.resumed_plan,
                "source_lang": languages[0], "target_lang": languages[1]}

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
        last_eval_s = self.elapsed_s()
        evaluated = None  # the last evaluation, if the run stops right after it

        def out_of_time() -> bool:  # updates left, and no time for them
            return self.step < config.steps and self.clock.out_of_time()
        while self.step < config.steps and stopped_by == "steps":
            examples, batches = self._epoch_batches(self.epoch)
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
                    last_eval_s = self.elapsed_s()
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
        lr = self._set_lr()
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
            raise FloatingPointError(f"loss became {loss_value} at step {self.step + 1}; lower the learning rate")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.clock.after_update(self.step, self.config.warmup_steps)
        return {"step": self.step, "loss": loss_value, "lr": lr, "grad_norm": float(grad_norm),
                "tokens": total_tokens}

    def _set_lr(self) -> float:
        if self.config.schedule == "plateau" and self.step > self.config.warmup_steps:
            return self.optimizer.param_groups[0]["lr"]  # as the plateau schedule last reduced it
        lr = learning_rate(self.config, self.step + 1, self.clock.agreed_elapsed_s(), self.clock.warmup_end_s)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _report(self, metrics: dict, progress: tqdm, throughput: Throughput) -> None:
        """An update's throughput and clock, on the progress bar, in the log now and then, and to ``on_step``."""
        metrics["tokens_per_s"] = throughput.add(metrics["tokens"])
        metrics["elapsed_s"] = self.elapsed_s()
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
        probe = forced_decode(self.model, self.source_tokenizer, self.target_tokenizer, self.probes[0],
                              translate_batch(self.model, self.source_tokenizer, self.target_tokenizer,
                                              [self.probes[0]])[0])
        metrics["probe"] = {"step": self.step, "source_tokens": probe.source_pieces,
                            "target_tokens": probe.predicted_pieces, "translation": probe.text,
                            "cross": torch.round(probe.cross_attention, decimals=4).tolist()}
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
        if self.best_score is None or metrics["bleu"] > self.best_score:
            self.best_score = metrics["bleu"]
            self.save("best")
        self.save(step_name(self.step))
        self.directory.prune_step_checkpoints()
        self.save("last", with_state=True)
        if self.on_eval:
            self.on_eval({**metrics, "probe": probe})

    def _finish(self, evaluated: dict | None, stopped_by: str) -> dict:
        """The final metrics (the last evaluation, if the run stopped right after it), checked across processes;
        the last step checkpoints averaged if asked."""
        if evaluated is not None:
            final = {**evaluated, "stopped_by": stopped_by}
        else:
            final = self.evaluate()
            final["stopped_by"] = stopped_by
            self._after_eval(final)
        if self.distributed:
            final["ranks_identical"] = self.processes.identical(unique_state_dict(self.model).values(), self.step)
        self.directory.average_last(self.config.average_last)
        return final
