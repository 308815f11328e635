"""Training: one loop, used by the command line (``cli.py``), torchrun and the app's Train tab alike.

    python -m transformer.train --data reverse --preset tiny --steps 600

``Trainer.run`` reads top to bottom: batches of an epoch, an update (``train_step``), an evaluation when one is
due, until the updates, the time limit or a cancel end the run. Its settings are a ``TrainConfig``
(``settings.py``), its loss ``loss.py``, its data ``corpus.py``; what it saves is an ordinary checkpoint,
plus its resumable state (``checkpoint.encode_state``).

A run directory holds ``last/`` (resumable), ``best/`` (best validation score),
``step-NNNNNN/`` (the last few, for averaging), ``log.jsonl`` (metrics) and
``probes.jsonl`` (attention of fixed probe sentences at every evaluation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from .. import data as datasets
from ..files.checkpoint import (STATE_JSON, average_checkpoints, decode_state, drop_records_after, encode_state,
                         load_checkpoint, load_weights, resolve, save_checkpoint, unique_state_dict)
from ..paper.config import preset
from ..paper.decoding import forced_decode, translate_batch
from .evaluation import evaluate_translation, validation_loss
from ..paper.model import Transformer
from .corpus import collate, encode_corpus, load_datasets, train_tokenizers
from .loss import batch_loss
from .planning import planned_config
from .processes import Processes
from .settings import TrainConfig, learning_rate, use_bf16

log = logging.getLogger(__name__)



# --- the trainer ---------------------------------------------------------------------------------

StepCallback = Callable[[dict], None]


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
        self.config, self.budget_plan, self.measuring_s = planned_config(config, self.data.train, self.processes,
                                                                         self.bf16)
        config = self.config
        self.out_dir = Path(config.out_dir)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        # The run's clock, which its time limit and a schedule planned by the clock read: seconds of earlier
        # segments of a resumed run (or spent measuring this machine's speed for the plan), plus this one's since
        # run() began; and when warm-up ended on it.
        self.clock_before_s, self._clock_started = self.measuring_s, None
        self.warmup_end_s: float | None = None
        self.resumed_plan: dict | None = None
        self.best_score: float | None = None
        self.history: list[dict] = []

        resume_dir = resolve(Path(resume) / "last") if resume else None
        # Continuing in the resumed run's own directory: its logs describe this run up to the saved step.
        self.continues_logs = resume_dir is not None and resume_dir.parent.resolve() == self.out_dir.resolve()
        if resume_dir is not None and not self.continues_logs and (self.out_dir / "log.jsonl").is_file():
            log.warning("%s already holds a run's log; the run resumed from %s adds its records to it",
                        self.out_dir, resume_dir.parent)
        if resume_dir is not None:
            if not (resume_dir / STATE_JSON).is_file():
                raise ValueError(f"{resume_dir} is not a resumable checkpoint (no {STATE_JSON})")
            loaded = load_checkpoint(resume_dir, device="cpu")
            self.source_tokenizer, self.target_tokenizer = loaded.source_tokenizer, loaded.target_tokenizer
            model_config = loaded.model.config
        else:
            torch.manual_seed(config.seed)
            self.source_tokenizer, self.target_tokenizer = train_tokenizers(config, self.data, self.processes)
            overrides = dict(config.model) if config.joint_vocabulary else {**config.model, "share_embeddings": False}
            model_config = preset(config.preset, self.source_tokenizer.vocab_size, self.target_tokenizer.vocab_size,
                                  **overrides)
        torch.manual_seed(config.seed)
        self.model = Transformer(model_config).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9,
                                           weight_decay=config.weight_decay)
        self.plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(self.optimizer, factor=0.5, patience=2)
        if resume_dir is not None:
            self._load_state(resume_dir, loaded)
        self.train_model = (DistributedDataParallel(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
                            if self.distributed else self.model)
        self.val_examples = self._filter(encode_corpus(self.data.val, self.source_tokenizer, self.target_tokenizer))
        self.train_examples = (None if self.data.train is None else
                               self._filter(encode_corpus(self.data.train, self.source_tokenizer, self.target_tokenizer)))
        self.probes = config.probe_sentences or [self.data.val.sources[0]]

    # -- setup helpers --
    def _filter(self, examples: list[datasets.Example]) -> list[datasets.Example]:
        kept, dropped = datasets.filter_by_length(examples, self.model.config.max_len)
        if dropped:
            log.info("dropped %d pairs longer than %d tokens", dropped, self.model.config.max_len)
        return kept

    def _epoch_examples(self, epoch: int) -> list[datasets.Example]:
        if self.train_examples is not None:
            return self.train_examples
        corpus = datasets.synthetic_corpus(self.config.data, self.config.synthetic_size,
                                           seed=self.config.seed * 7919 + epoch + 1)
        return encode_corpus(corpus, self.source_tokenizer, self.target_tokenizer)

    def _epoch_batches(self, epoch: int) -> tuple[list[datasets.Example], list[list[int]]]:
        examples = self._epoch_examples(epoch)
        batches = datasets.token_batches(examples, self.config.max_tokens, self.config.seed, epoch)
        if self.distributed:  # every rank gets the same number of batches, so updates stay in lockstep
            per_rank = len(batches) // self.world_size
            batches = batches[self.rank * per_rank:(self.rank + 1) * per_rank]
        return examples, batches

    # -- state --
    def _state(self) -> dict:
        state = {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                 "best_score": self.best_score, "optimizer": self.optimizer.state_dict(),
                 "plateau": self.plateau.state_dict(), "torch_rng": torch.get_rng_state(),
                 "history": self.history, "elapsed_s": self.elapsed_s(), "warmup_end_s": self.warmup_end_s}
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state()
        return state

    def _load_state(self, directory: Path, loaded) -> None:
        state = decode_state(directory)
        load_weights(self.model, {k: v for k, v in unique_state_dict(loaded.model).items()}, directory)
        optimizer_state = state["optimizer"]
        optimizer_state["state"] = {int(k): v for k, v in optimizer_state["state"].items()}
        self.optimizer.load_state_dict(optimizer_state)
        self.plateau.load_state_dict(state["plateau"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.best_score, self.history = state["best_score"], state["history"]
        # Saved by runs of this version on; an older run's clock starts again at 0, as it did then, and one past
        # its warm-up counts it as ended there.
        self.clock_before_s = state.get("elapsed_s", 0.0) + self.measuring_s
        self.warmup_end_s = state.get("warmup_end_s")
        self.resumed_plan = loaded.info.get("budget_plan")  # what the run was planned as, kept on its record
        if self.warmup_end_s is None and self.step >= self.config.warmup_steps:
            self.warmup_end_s = self.clock_before_s
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"])

    def elapsed_s(self) -> float:
        """Seconds on the run's clock: updates, evaluations and measuring the machine's speed for a plan; not the
        rest of the set-up (data, tokenizers) before the first update."""
        running = 0.0 if self._clock_started is None else time.monotonic() - self._clock_started
        return self.clock_before_s + running

    def _agreed_elapsed_s(self) -> float | None:
        """The clock a schedule reads, the same on every process (the slowest one's), or the processes would
        update with different learning rates and drift apart. None without a time limit: updates plan alone."""
        return None if self.config.max_minutes is None else self.processes.slowest(self.elapsed_s())

    def info(self) -> dict:
        """What config.json records about this run besides the model config."""
        return {"training": dataclasses.asdict(self.config), "data": self.data.description,
                "data_files_sha256": self.data.files, "step": self.step,
                "budget_plan": dataclasses.asdict(self.budget_plan) if self.budget_plan else self.resumed_plan,
                "source_lang": self.config.src_lang if self.config.data not in datasets.SYNTHETIC_TASKS else "digits",
                "target_lang": self.config.tgt_lang if self.config.data not in datasets.SYNTHETIC_TASKS else "digits"}

    def save(self, name: str, with_state: bool = False) -> Path | None:
        if self.rank != 0:
            return None
        extra = encode_state(self._state()) if with_state else None
        return save_checkpoint(self.out_dir / name, self.model, self.source_tokenizer, self.target_tokenizer,
                               info=self.info(), extra_files=extra)

    # -- the loop --
    def _log(self, record: dict) -> None:
        if self.rank == 0:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with open(self.out_dir / "log.jsonl", "a") as handle:
                handle.write(json.dumps(record) + "\n")

    def _set_lr(self) -> float:
        if self.config.schedule == "plateau" and self.step > self.config.warmup_steps:
            return self.optimizer.param_groups[0]["lr"]
        lr = learning_rate(self.config, self.step + 1, self._agreed_elapsed_s(), self.warmup_end_s)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

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
        if self.warmup_end_s is None and self.step >= self.config.warmup_steps:
            agreed = self._agreed_elapsed_s()
            self.warmup_end_s = self.elapsed_s() if agreed is None else agreed
        return {"step": self.step, "loss": loss_value, "lr": lr, "grad_norm": float(grad_norm),
                "tokens": total_tokens}

    def evaluate(self) -> dict:
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
        if self.config.schedule == "plateau":
            self.plateau.step(metrics["val_loss"])
        probe = metrics.pop("probe")
        if self.rank == 0:
            with open(self.out_dir / "probes.jsonl", "a") as handle:
                handle.write(json.dumps(probe) + "\n")
        self.history.append({k: v for k, v in metrics.items() if k != "sample"})
        # Logged before the saves: a kill between them leaves a record that resuming drops, never a last/
        # without its record.
        self._log({"event": "eval", **metrics})
        score = metrics["bleu"]
        if self.best_score is None or score > self.best_score:
            self.best_score = score
            self.save("best")
        self.save(f"step-{self.step:06d}")
        self._prune_step_checkpoints()
        self.save("last", with_state=True)
        if self.on_eval:
            self.on_eval({**metrics, "probe": probe})

    def _prune_step_checkpoints(self) -> None:
        if self.rank != 0:
            return
        steps = sorted(self.out_dir.glob("step-*[0-9]"))
        for old in steps[: max(0, len(steps) - max(self.config.keep_checkpoints, self.config.average_last))]:
            shutil.rmtree(old, ignore_errors=True)

    def _open_run_directory(self) -> None:
        """The output directory, its logs cut back to the resumed step, and one line on what is trained where."""
        config = self.config
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.continues_logs:
            for name in ("log.jsonl", "probes.jsonl"):
                if dropped := drop_records_after(self.out_dir / name, self.step):
                    log.info("%s: dropped %d lines, records from after step %d (the last save, whose updates "
                             "are done again) or cut off", name, dropped, self.step)
        size = f"planned for {config.max_minutes:g} minutes" if config.plan else config.preset
        log.info("%s; model %s with %.2fM parameters; %s on %s", self.data.description, size,
                 self.model.num_parameters() / 1e6, "bf16 autocast" if self.bf16 else "fp32", self.device)

    def run(self) -> dict:
        """Train to ``config.steps`` (or the time budget, or cancel); returns the final metrics."""
        config = self.config
        if self.rank == 0:
            self._open_run_directory()
        self._clock_started = time.monotonic()
        progress = tqdm(total=config.steps, initial=self.step, disable=not self.show_progress or self.rank != 0,
                        dynamic_ncols=True, desc="train")
        stopped_by = "steps"
        window = [0, time.monotonic()]  # target tokens since, and when, the throughput window began
        last_eval_s = self.elapsed_s()
        evaluated = None  # the last evaluation, if the run stops right after it

        def out_of_time() -> bool:
            return (config.max_minutes is not None and self.step < config.steps
                    and self.elapsed_s() > 60 * config.max_minutes)
        while self.step < config.steps:
            examples, batches = self._epoch_batches(self.epoch)
            if len(batches) < config.accumulate:
                raise datasets.DataError(f"an epoch holds {len(batches)} batches, fewer than the {config.accumulate} "
                                         "micro-batches of one update: add data, or lower --accumulate or the "
                                         "number of processes")
            while self.batch_in_epoch + config.accumulate <= len(batches) and self.step < config.steps:
                micro = batches[self.batch_in_epoch:self.batch_in_epoch + config.accumulate]
                self.batch_in_epoch += config.accumulate
                metrics = self.train_step(examples, micro)
                self._report(metrics, progress, window)
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
            if stopped_by != "steps":
                break
            if self.step < config.steps:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        progress.close()
        return self._finish(evaluated, stopped_by)

    def _report(self, metrics: dict, progress: tqdm, window: list) -> None:
        """An update's throughput (over about the last 10 s) and clock, on the progress bar, in the log every 50
        updates, and to ``on_step``."""
        window[0] += metrics["tokens"]
        elapsed = time.monotonic() - window[1]
        metrics["tokens_per_s"] = window[0] * self.world_size / elapsed if elapsed > 0 else 0.0
        metrics["elapsed_s"] = self.elapsed_s()
        if elapsed > 10:
            window[:] = [0, time.monotonic()]
        progress.update(1)
        progress.set_postfix(loss=f"{metrics['loss']:.3f}", lr=f"{metrics['lr']:.2e}",
                             tok_s=f"{metrics['tokens_per_s']:.0f}")
        if self.step % 50 == 0 or self.step == 1:
            self._log({"event": "step", **metrics})
        if self.on_step:
            self.on_step(metrics)

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
        if self.config.average_last > 1 and self.rank == 0:
            paths = sorted(self.out_dir.glob("step-*[0-9]"))[-self.config.average_last:]
            if len(paths) > 1:
                average_checkpoints(paths, self.out_dir / "averaged")
        return final
