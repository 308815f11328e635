"""Training: one loop, used by the command line, torchrun and the app's Train tab alike.

    python -m transformer.train --data reverse --preset tiny --steps 600
    python -m transformer.train --data multi30k --data-dir ../shared/data/multi30k --preset small --steps 5000
    torchrun --nproc_per_node 2 -m transformer.train --data multi30k ...

A run directory holds ``last/`` (resumable), ``best/`` (best validation score),
``step-NNNNNN/`` (the last few, for averaging), ``log.jsonl`` (metrics) and
``probes.jsonl`` (attention of fixed probe sentences at every evaluation).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import shlex
import signal
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from . import data as datasets
from .checkpoint import (CheckpointError, load_checkpoint, load_weights, parse_records, read_config, read_log_text,
                         resolve, save_checkpoint, unique_state_dict)
from .budget import STEPS_CAP, plan_here
from .config import PRESETS, preset
from .decoding import forced_decode, pad_batch, translate_batch
from .metrics import corpus_scores
from .model import Transformer
from .tokenizer import BOS_ID, PAD_ID, Tokenizer

log = logging.getLogger(__name__)

STATE_TENSORS = "trainer_state.safetensors"
STATE_JSON = "trainer_state.json"


@dataclass
class TrainConfig:
    """Everything a run needs; written into each checkpoint's config.json so the run can be repeated."""

    data: str = "reverse"                 # copy | reverse | sort | multi30k | a .tsv file
    data_dir: str | None = None           # Multi30K directory (else $MULTI30K_DIR, else download)
    src_lang: str = "en"
    tgt_lang: str = "de"
    preset: str = "tiny"                  # a size of config.PRESETS, or "auto": planned for max_minutes (budget.py)
    model: dict = field(default_factory=dict)   # overrides of the preset, e.g. {"d_model": 128}
    plan: str | None = None               # "auto" once sizes and schedule were planned for max_minutes
    vocab_size: int = 8000                # sentencepiece pieces (per language without a joint vocabulary)
    joint_vocabulary: bool = True         # one tokenizer for both languages; else one each, separate embeddings
    max_tokens: int = 2000                # padded tokens per batch (per process)
    steps: int = 500                      # optimizer updates
    max_minutes: float | None = None      # wall-clock budget (updates and evaluations): the run stops there, and a
                                          # decaying schedule ends there when it comes before `steps`
    lr: float = 3e-3                      # peak learning rate
    warmup_steps: int = 100
    schedule: str = "cosine"               # noam | cosine | linear | plateau | constant
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    accumulate: int = 1                   # micro-batches per update
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 100
    eval_every_minutes: float | None = None   # also evaluate this often by the clock (runs a time limit cuts short)
    eval_sentences: int | None = None     # cap on validation sentences decoded for BLEU
    out_dir: str = "runs/reverse-tiny"
    precision: str = "auto"               # auto | bf16 | fp32
    keep_checkpoints: int = 5             # step-NNNNNN/ directories kept for averaging
    average_last: int = 0                 # at the end, average this many step checkpoints into averaged/
    synthetic_size: int = 20000           # fresh synthetic examples per epoch
    probe_sentences: list[str] = field(default_factory=list)
    threads: int | None = None

    def validate(self) -> None:
        if self.preset not in (*PRESETS, AUTO_PRESET):
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)} or {AUTO_PRESET}")
        if self.preset == AUTO_PRESET and not (self.max_minutes or 0) > 0:
            raise ValueError(f"preset {AUTO_PRESET} plans the run for its time limit: give it a time limit "
                             "(--max-minutes)")
        if self.schedule not in ("noam", "cosine", "linear", "plateau", "constant"):
            raise ValueError(f"unknown schedule {self.schedule!r}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError(f"unknown precision {self.precision!r}")
        if self.steps < 1 or self.max_tokens < 8 or self.accumulate < 1 or self.eval_every < 1:
            raise ValueError("steps, accumulate and eval_every must be positive, max_tokens at least 8")
        if self.lr <= 0 or not 0 <= self.label_smoothing < 1:
            raise ValueError("lr must be positive and label_smoothing in [0, 1)")
        if self.eval_sentences is not None and self.eval_sentences < 1:
            raise ValueError("eval_sentences must be at least 1")
        if self.eval_every_minutes is not None and self.eval_every_minutes <= 0:
            raise ValueError("eval_every_minutes must be positive")


AUTO_PRESET = "auto"
# What a plan for a time budget chooses, where the config leaves them at their defaults.
PLANNED_FIELDS = ("vocab_size", "max_tokens", "steps", "lr", "warmup_steps", "schedule", "eval_every",
                  "eval_every_minutes")


def plan_config(config: TrainConfig, pairs: int | None = None) -> TrainConfig:
    """``config`` (preset "auto") with the model, vocabulary, batch and schedule that ``budget.plan_here`` chooses
    for its time limit, where ``config`` leaves them at TrainConfig's defaults: what was set by hand stays, as do
    the model sizes ``config.model`` sets. ``pairs``: the training pairs of an uploaded corpus, which bound its
    vocabulary. The run then ends by the clock."""
    config.validate()
    if config.preset != AUTO_PRESET:
        return config
    plan = plan_here(config.max_minutes, config.data in datasets.SYNTHETIC_TASKS, pairs)
    chosen = dict(vocab_size=plan.vocab_size or config.vocab_size, max_tokens=plan.max_tokens, steps=STEPS_CAP,
                  lr=plan.lr, warmup_steps=plan.warmup_steps, schedule=plan.schedule, eval_every=STEPS_CAP,
                  eval_every_minutes=config.max_minutes / plan.evaluations)
    defaults = TrainConfig()
    return dataclasses.replace(config, preset=plan.base, plan=AUTO_PRESET, model={**plan.model, **config.model},
                               **{name: value for name, value in chosen.items()
                                  if getattr(config, name) == getattr(defaults, name)})


# --- schedule ------------------------------------------------------------------------------------

def decay_progress(config: TrainConfig, step: int, elapsed_s: float | None = None,
                   warmup_end_s: float | None = None) -> float:
    """How far a decaying schedule is past its warm-up, 0 to 1, by whichever budget runs out first.

    By updates: of the ``steps - warmup`` that follow warm-up. By the clock, when the run has a time limit: of the
    seconds between the end of warm-up (``warmup_end_s``) and the limit. A schedule planned over updates that the
    clock never allows would otherwise be cut off at a high learning rate; this way it ends when the time does.
    Neither reaches 1 at the last update, which would be wasted at learning rate 0.
    """
    warmup = max(1, config.warmup_steps)
    progress = (step - warmup) / (max(0, config.steps - warmup) + 1)
    if config.max_minutes is not None and elapsed_s is not None:
        start = warmup_end_s if warmup_end_s is not None else elapsed_s
        budget = 60 * config.max_minutes - start
        if budget > 0:
            progress = max(progress, (elapsed_s - start) / budget)
    return min(1.0, max(0.0, progress))


def learning_rate(config: TrainConfig, step: int, elapsed_s: float | None = None,
                  warmup_end_s: float | None = None) -> float:
    """Learning rate for update ``step`` (1-based), ``elapsed_s`` into the run, before any plateau reduction."""
    warmup = max(1, config.warmup_steps)
    if step <= warmup:
        return config.lr * step / warmup
    if config.schedule == "noam":  # section 5.3: decays with the inverse square root of the step
        return config.lr * math.sqrt(warmup / step)
    if config.schedule == "cosine":
        return config.lr * 0.5 * (1 + math.cos(math.pi * decay_progress(config, step, elapsed_s, warmup_end_s)))
    if config.schedule == "linear":
        return config.lr * (1 - decay_progress(config, step, elapsed_s, warmup_end_s))
    return config.lr  # constant, or plateau (reduced at evaluations)


def use_bf16(config: TrainConfig, device: torch.device) -> bool:
    if config.precision != "auto":
        return config.precision == "bf16"
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:  # on CPUs with native bf16 arithmetic, autocast roughly doubles throughput
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


# --- data ----------------------------------------------------------------------------------------

@dataclass
class Datasets:
    train: datasets.ParallelCorpus | None   # None for synthetic tasks: generated fresh each epoch
    val: datasets.ParallelCorpus
    description: str
    files: dict[str, str] = field(default_factory=dict)   # name -> sha256


def load_datasets(config: TrainConfig) -> Datasets:
    if config.data in datasets.SYNTHETIC_TASKS:
        val = datasets.synthetic_corpus(config.data, 200, seed=10_000 + config.seed)
        return Datasets(None, val, f"synthetic {config.data} task (digits, length 3-10)")
    if config.data == "multi30k":
        train = datasets.load_multi30k("train", config.src_lang, config.tgt_lang, config.data_dir)
        val = datasets.load_multi30k("val", config.src_lang, config.tgt_lang, config.data_dir)
        directory = datasets.multi30k_dir(config.data_dir)
        files = {}
        for lang in (config.src_lang, config.tgt_lang):
            for split in ("train", "val"):
                path = datasets._split_file(directory, split, lang)
                files[path.name] = datasets.sha256_of(path)
        return Datasets(train, val, f"Multi30K task 1, {config.src_lang}->{config.tgt_lang}", files)
    path = Path(config.data)
    if not path.is_file():
        raise datasets.DataError(f"--data must be copy, reverse, sort, multi30k or an existing .tsv file; "
                                 f"{config.data!r} is none of these")
    corpus = datasets.load_training_tsv(path)
    if corpus.skipped:
        log.warning("skipped %d malformed rows of %s: %s", corpus.skipped, path.name, "; ".join(corpus.problems[:3]))
    rng = random.Random(config.seed)
    order = list(range(len(corpus)))
    rng.shuffle(order)
    n_val = max(10, min(1000, len(corpus) // 20))
    pick = lambda idx: datasets.ParallelCorpus([corpus.sources[i] for i in idx], [corpus.targets[i] for i in idx])  # noqa: E731
    train, val = pick(order[n_val:]), pick(order[:n_val])
    train.skipped, train.problems = corpus.skipped, corpus.problems
    return Datasets(train, val, f"{path.name} ({len(corpus)} pairs, {corpus.skipped} malformed rows skipped)",
                    {path.name: datasets.sha256_of(path)})


def encode_corpus(corpus: datasets.ParallelCorpus, source_tokenizer: Tokenizer,
                  target_tokenizer: Tokenizer) -> list[datasets.Example]:
    """(source ids + eos, target ids + eos) pairs; bos is added when batching."""
    return list(zip(source_tokenizer.encode_batch(corpus.sources), target_tokenizer.encode_batch(corpus.targets)))


def collate(examples: list[datasets.Example], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source (B, S), decoder input (bos + target) and the labels it must predict (target + eos)."""
    src = pad_batch([s for s, _ in examples], PAD_ID, device)
    tgt_in = pad_batch([[BOS_ID] + t[:-1] for _, t in examples], PAD_ID, device)
    tgt_out = pad_batch([t for _, t in examples], PAD_ID, device)
    return src, tgt_in, tgt_out


class SmoothedCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy against label-smoothed targets (section 5.4), with its gradient in one pass.

    Smoothing ε over V pieces puts 1 - ε + ε/V on the label and ε/V on every piece, so for logits z

        loss = logsumexp(z) - (1 - ε) z_label - (ε / V) Σ_v z_v,    ∂loss/∂z = softmax(z) - (1 - ε) onehot - ε / V.

    This is ``F.cross_entropy(label_smoothing=ε)``'s value and gradient (a test holds them equal), but where
    PyTorch's backward runs through log_softmax and adds the gradients of its two terms, passing over the
    (tokens × vocabulary) logits six or seven times, this one passes three: on a CPU the loss of a small model
    costs a fifth of its training step, most of it here.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, smoothing: float, ignore_index: int):
        kept = (labels != ignore_index).to(logits.dtype)
        normaliser = torch.logsumexp(logits, dim=-1)
        label_logit = logits.gather(1, labels.unsqueeze(1)).squeeze(1)
        losses = normaliser - (1 - smoothing) * label_logit - (smoothing / logits.size(1)) * logits.sum(dim=1)
        ctx.save_for_backward(logits, labels, normaliser, kept)
        ctx.smoothing = smoothing
        return (losses * kept).sum()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        logits, labels, normaliser, kept = ctx.saved_tensors
        smoothing, scale = ctx.smoothing, (kept * grad_output).unsqueeze(1)
        grad = torch.exp(logits - normaliser.unsqueeze(1)).sub_(smoothing / logits.size(1)).mul_(scale)
        grad.scatter_add_(1, labels.unsqueeze(1), -(1 - smoothing) * scale)
        return grad, None, None, None


def token_loss(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Summed cross-entropy over non-pad labels, with label smoothing (section 5.4), computed in float32.

    Flattening to (tokens, vocab) keeps the softmax over contiguous memory,
    several times faster than the (B, V, T) layout on a CPU.
    """
    return SmoothedCrossEntropy.apply(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1),
                                      label_smoothing, PAD_ID)


# --- evaluation ----------------------------------------------------------------------------------

@torch.no_grad()
def validation_loss(model: Transformer, examples: list[datasets.Example], max_tokens: int,
                    device: torch.device, bf16: bool) -> float:
    """Mean token cross-entropy (no label smoothing) under teacher forcing."""
    model.eval()
    total, count = 0.0, 0
    for batch in datasets.token_batches(examples, max_tokens, shuffle=False):
        src, tgt_in, tgt_out = collate([examples[i] for i in batch], device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in).logits
        total += token_loss(logits, tgt_out, 0.0).item()
        count += int((tgt_out != PAD_ID).sum())
    return total / max(1, count)


def evaluate_translation(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                         corpus: datasets.ParallelCorpus, limit: int | None, bf16: bool) -> dict:
    """Real greedy decoding of the validation sources, scored against references (never teacher-forced)."""
    sources, references = corpus.sources[:limit], corpus.targets[:limit]
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
        hypotheses = translate_batch(model, source_tokenizer, target_tokenizer, sources, beam_size=1)
    scores = corpus_scores(hypotheses, references)
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(1, len(references))
    return {"bleu": scores["bleu"], "chrf": scores["chrf"], "exact_match": exact,
            "sample": {"source": sources[0], "reference": references[0], "hypothesis": hypotheses[0]}}


# --- resumable state (no pickle: tensors in safetensors, the rest in JSON) -------------------------

def drop_records_after(path: Path, step: int) -> int:
    """Rewrite a run log without its records of updates after ``step``; returns how many lines went.

    A run resumes from its last save, so the updates a crash or kill cut off
    after it are done again, and their records would appear twice. Lines that
    are no record, such as one cut off mid-write, go too, and the log ends with
    a newline again: the next record would otherwise be appended to such a line.
    """
    text = read_log_text(path)
    lines = [line for line in text.split("\n") if line.strip()]
    kept = [record for record in parse_records(text)
            if not (isinstance(record.get("step"), (int, float)) and record["step"] > step)]
    if len(kept) < len(lines) or (text and not text.endswith("\n")):
        rewritten = path.with_name(path.name + ".tmp")
        with open(rewritten, "w") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(rewritten, path)  # all or nothing: a crash now leaves the old log whole
    return len(lines) - len(kept)


def _flatten(value, prefix: str, tensors: dict):
    if isinstance(value, torch.Tensor):
        tensors[prefix] = value.detach().cpu().contiguous()
        return {"__tensor__": prefix}
    if isinstance(value, dict):
        return {"__dict__": [[_flatten(k, f"{prefix}.k{i}", tensors), _flatten(v, f"{prefix}.{i}", tensors)]
                             for i, (k, v) in enumerate(value.items())]}
    if isinstance(value, (list, tuple)):
        return {"__list__": [_flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(value)]}
    return value


def _unflatten(value, tensors: dict):
    if isinstance(value, dict):
        if "__tensor__" in value:
            return tensors[value["__tensor__"]]
        if "__dict__" in value:
            return {_unflatten(k, tensors): _unflatten(v, tensors) for k, v in value["__dict__"]}
        if "__list__" in value:
            return [_unflatten(v, tensors) for v in value["__list__"]]
    return value


def encode_state(state: dict) -> dict[str, bytes]:
    tensors: dict = {}
    structure = _flatten(state, "s", tensors)
    return {STATE_JSON: json.dumps(structure).encode(), STATE_TENSORS: save_tensors(tensors)}


def decode_state(directory: Path) -> dict:
    tensors = load_tensors((directory / STATE_TENSORS).read_bytes())
    return _unflatten(json.loads((directory / STATE_JSON).read_text()), tensors)


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
        self.distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        if self.distributed and not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.rank = dist.get_rank() if self.distributed else 0
        self.world_size = dist.get_world_size() if self.distributed else 1
        if torch.cuda.is_available():
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")
        if config.threads:
            torch.set_num_threads(config.threads)
        self.data = load_datasets(config)
        if config.preset == AUTO_PRESET:  # planned now that the corpus is known: an upload bounds the vocabulary
            uploaded = self.data.train is not None and config.data != "multi30k"
            config = plan_config(config, pairs=len(self.data.train) if uploaded else None)
        self.config = config
        self.bf16 = use_bf16(config, self.device)
        self.out_dir = Path(config.out_dir)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        # The run's clock, which its time limit and a schedule planned by the clock read: seconds of earlier
        # segments of a resumed run, plus this one's since run() began; and when warm-up ended on it.
        self.clock_before_s, self._clock_started = 0.0, None
        self.warmup_end_s: float | None = None
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
            self.source_tokenizer, self.target_tokenizer = self._shared_tokenizers()
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
    def _shared_tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """Rank 0 trains the tokenizers and the others receive them: sentencepiece is not bit-reproducible."""
        if not self.distributed:
            return self._train_tokenizers()
        protos = [t.model_proto for t in self._train_tokenizers()] if self.rank == 0 else [None, None]
        dist.broadcast_object_list(protos, src=0)
        source = Tokenizer(protos[0])
        return source, source if protos[1] == protos[0] else Tokenizer(protos[1])

    def _all_ranks(self, flag: bool, any_rank: bool) -> bool:
        """Agree on a flag across processes (any rank / all ranks), so they stop or fail together."""
        if not self.distributed:
            return flag
        value = torch.tensor([int(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX if any_rank else dist.ReduceOp.MIN)
        return bool(value.item())

    def _train_tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """(source, target) tokenizers: one joint model twice, or one per language."""
        if self.data.train is None:  # synthetic: one piece per digit
            sample = datasets.synthetic_corpus(self.config.data, 2000, seed=self.config.seed)
            sources, targets, options = sample.sources, sample.targets, dict(vocab_size=64, model_type="word")
        else:
            sources, targets = self.data.train.sources, self.data.train.targets
            options = dict(vocab_size=self.config.vocab_size)
        if self.config.joint_vocabulary:
            joint = Tokenizer.train(sources + targets, **options)
            return joint, joint
        return Tokenizer.train(sources, **options), Tokenizer.train(targets, **options)

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
        if torch.cuda.is_available():
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
        self.clock_before_s, self.warmup_end_s = state.get("elapsed_s", 0.0), state.get("warmup_end_s")
        if self.warmup_end_s is None and self.step >= self.config.warmup_steps:
            self.warmup_end_s = self.clock_before_s
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state(state["cuda_rng"])

    def elapsed_s(self) -> float:
        """Seconds on the run's clock: updates and evaluations, not the set-up before the first update."""
        running = 0.0 if self._clock_started is None else time.monotonic() - self._clock_started
        return self.clock_before_s + running

    def _agreed_elapsed_s(self) -> float | None:
        """The clock a schedule reads, the same on every process (the slowest one's), or the processes would
        update with different learning rates and drift apart. None without a time limit: updates plan alone."""
        if self.config.max_minutes is None:
            return None
        if not self.distributed:
            return self.elapsed_s()
        value = torch.tensor([self.elapsed_s()], dtype=torch.float64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return float(value.item())

    def info(self) -> dict:
        """What config.json records about this run besides the model config."""
        return {"training": dataclasses.asdict(self.config), "data": self.data.description,
                "data_files_sha256": self.data.files, "step": self.step,
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
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                    logits = self.train_model(src, tgt_in).logits
                loss = token_loss(logits, tgt_out, self.config.label_smoothing)
                (loss / max(1, total_tokens)).backward()
            total_loss += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm or float("inf"))
        loss_value = total_loss / max(1, total_tokens)
        if not self._all_ranks(math.isfinite(loss_value), any_rank=False):
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

    def _ranks_identical(self) -> bool:
        """Whether every process ends with bit-identical weights, as DDP promises; logs an error if not."""
        digest = hashlib.sha256()
        for tensor in unique_state_dict(self.model).values():
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        digests = [None] * self.world_size
        dist.all_gather_object(digests, digest.hexdigest())
        if len(set(digests)) > 1:
            log.error("the weights of the %d processes differ at step %d: %s", self.world_size, self.step,
                      ", ".join(d[:12] for d in digests))
        return len(set(digests)) == 1

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
        window_tokens, window_start = 0, time.monotonic()
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
                window_tokens += metrics["tokens"]
                elapsed = time.monotonic() - window_start
                metrics["tokens_per_s"] = window_tokens * self.world_size / elapsed if elapsed > 0 else 0.0
                metrics["elapsed_s"] = self.elapsed_s()
                if elapsed > 10:
                    window_tokens, window_start = 0, time.monotonic()
                progress.update(1)
                progress.set_postfix(loss=f"{metrics['loss']:.3f}", lr=f"{metrics['lr']:.2e}",
                                     tok_s=f"{metrics['tokens_per_s']:.0f}")
                if self.step % 50 == 0 or self.step == 1:
                    self._log({"event": "step", **metrics})
                if self.on_step:
                    self.on_step(metrics)
                if self._all_ranks(self.cancel.is_set() or out_of_time(), any_rank=True):
                    stopped_by = "cancel" if self.cancel.is_set() else "time"
                    break
                eval_due = self.step % config.eval_every == 0
                if config.eval_every_minutes is not None:  # the ranks agree, as their clocks may not
                    clock_due = metrics["elapsed_s"] - last_eval_s >= 60 * config.eval_every_minutes
                    eval_due = self._all_ranks(eval_due or clock_due, any_rank=True)
                if eval_due and self.step < config.steps:
                    evaluated = self.evaluate()
                    self._after_eval(evaluated)
                    last_eval_s = self.elapsed_s()
                    # An evaluation that used up the time ends the run: one more update would be made at the
                    # schedule's end, learning rate 0, and evaluated again for nothing.
                    if self._all_ranks(out_of_time(), any_rank=True):
                        stopped_by = "time"
                        break
                    evaluated = None
            if stopped_by != "steps":
                break
            if self.step < config.steps:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        progress.close()
        if evaluated is not None:
            final = {**evaluated, "stopped_by": stopped_by}
        else:
            final = self.evaluate()
            final["stopped_by"] = stopped_by
            self._after_eval(final)
        if self.distributed:
            final["ranks_identical"] = self._ranks_identical()
        if config.average_last > 1 and self.rank == 0:
            paths = sorted(self.out_dir.glob("step-*[0-9]"))[-config.average_last:]
            if len(paths) > 1:
                average_checkpoints(paths, self.out_dir / "averaged")
        return final


def average_checkpoints(paths: list[Path], output: Path) -> Path:
    """Average the weights of several checkpoints of one run (Vaswani et al., section 6.1)."""
    first = load_checkpoint(paths[0], device="cpu")
    total = {k: v.detach().clone().double() for k, v in unique_state_dict(first.model).items()}
    for path in paths[1:]:
        other = load_checkpoint(path, device="cpu")
        for name, tensor in unique_state_dict(other.model).items():
            total[name] += tensor.double()
    load_weights(first.model, {k: (v / len(paths)).float() for k, v in total.items()}, output)
    info = {k: v for k, v in read_config(paths[-1]).items()  # the run as of its last averaged step
            if k not in ("model", "source_tokenizer", "target_tokenizer")}
    info["averaged_from"] = [p.name for p in paths]
    return save_checkpoint(output, first.model, first.source_tokenizer, first.target_tokenizer, info=info)


# --- command line --------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m transformer.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TrainConfig()
    add = parser.add_argument
    add("--data", default=defaults.data, help="copy, reverse, sort, multi30k, or a source<TAB>target .tsv file")
    add("--data-dir", help="directory with Multi30K's {split}.{lang}.gz (default: $MULTI30K_DIR, else download)")
    add("--src-lang", default="en")
    add("--tgt-lang", default="de")
    add("--preset", default=defaults.preset, choices=[*sorted(PRESETS), AUTO_PRESET],
        help=f"model size (default {defaults.preset}); {AUTO_PRESET}: size, vocabulary, batch, learning rate and "
             "warm-up planned for --max-minutes, with a schedule that ends when the time does")
    for name, kind in (("d_model", int), ("n_heads", int), ("n_encoder_layers", int), ("n_decoder_layers", int),
                       ("d_ff", int), ("dropout", float), ("attention_dropout", float), ("max_len", int)):
        add("--" + name.replace("_", "-"), type=kind, help=f"override the preset's {name}")
    add("--norm-first", action="store_true", default=None, help="pre-norm instead of the paper's post-norm")
    add("--separate-embeddings", action="store_true", help="do not share source/target/output embeddings")
    add("--separate-vocabularies", action="store_true",
        help="one sentencepiece model per language, each of --vocab-size pieces (implies --separate-embeddings); "
             "the digit tasks have the same symbols on both sides, so theirs come out identical")
    # Left unset, these take TrainConfig's defaults, or what --preset auto plans.
    add("--vocab-size", type=int, help=f"sentencepiece pieces (default {defaults.vocab_size})")
    add("--max-tokens", type=int, help=f"padded tokens per batch (default {defaults.max_tokens})")
    add("--steps", type=int, help=f"optimizer updates (default {defaults.steps}); on --resume, the new total")
    add("--max-minutes", type=float,
        help="time limit of updates and evaluations: the run stops there and a decaying schedule ends there when "
             "it comes before --steps; on --resume, the new total")
    add("--lr", type=float, help=f"peak learning rate (default {defaults.lr})")
    add("--warmup-steps", type=int, help=f"default {defaults.warmup_steps}")
    add("--schedule", choices=["noam", "cosine", "linear", "plateau", "constant"],
        help=f"default {defaults.schedule}")
    add("--label-smoothing", type=float, default=defaults.label_smoothing)
    add("--clip-norm", type=float, default=defaults.clip_norm)
    add("--accumulate", type=int, default=defaults.accumulate)
    add("--weight-decay", type=float, default=defaults.weight_decay)
    add("--seed", type=int, default=defaults.seed)
    add("--eval-every", type=int, help=f"evaluate every this many updates (default {defaults.eval_every})")
    add("--eval-every-minutes", type=float, help="also evaluate this often by the clock")
    add("--eval-sentences", type=int)
    add("--out", default=None, help="run directory (default runs/<data>-<preset>)")
    add("--resume", metavar="RUN_DIR", help="continue the run saved in RUN_DIR/last")
    add("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    add("--keep-checkpoints", type=int, default=defaults.keep_checkpoints)
    add("--average-last", type=int, default=0)
    add("--probe", action="append", default=[], help="sentence whose attention is saved at every evaluation")
    add("--threads", type=int)
    add("--no-progress", action="store_true")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    model = {name: getattr(args, name) for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers",
                                                     "d_ff", "dropout", "attention_dropout", "max_len", "norm_first")
             if getattr(args, name) is not None}
    if args.separate_embeddings:
        model.update(share_embeddings=False, tie_output_projection=True)
    data_name = Path(args.data).stem if args.data.endswith(".tsv") else args.data
    given = {name: getattr(args, name) for name in PLANNED_FIELDS if getattr(args, name) is not None}
    config = TrainConfig(
        data=args.data, data_dir=args.data_dir, src_lang=args.src_lang, tgt_lang=args.tgt_lang, preset=args.preset,
        model=model, joint_vocabulary=not args.separate_vocabularies, max_minutes=args.max_minutes,
        label_smoothing=args.label_smoothing, clip_norm=args.clip_norm, accumulate=args.accumulate,
        weight_decay=args.weight_decay, seed=args.seed, eval_sentences=args.eval_sentences,
        out_dir=args.out or f"runs/{data_name}-{args.preset}", precision=args.precision,
        keep_checkpoints=args.keep_checkpoints, average_last=args.average_last, probe_sentences=args.probe,
        threads=args.threads, **given)
    return config  # a preset "auto" is planned by the Trainer, around what was given here


@contextlib.contextmanager
def stop_on_first_interrupt(cancel: threading.Event):
    """While in effect, Ctrl-C asks the run to stop after its current update, evaluate and save ``last/``
    (resumable); a second Ctrl-C stops at once."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread receives signals
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum, frame):
        signal.signal(signal.SIGINT, previous)
        log.warning("stopping after this update and saving the run; press Ctrl-C again to stop at once")
        cancel.set()

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.resume:
            saved = read_config(resolve(Path(args.resume) / "last"))
            config = TrainConfig(**saved["training"])
            config.out_dir = args.resume  # the run continues where it lies now, even if moved
            if args.steps is not None:
                if args.steps != config.steps and config.schedule in ("cosine", "linear"):
                    log.warning("the %s schedule decays over all the updates: changing them from %d to %d reshapes "
                                "it, so the learning rate jumps where the run resumes", config.schedule,
                                config.steps, args.steps)
                config.steps = args.steps
            if args.max_minutes is not None:  # the clock goes on from where the run stopped: this is its new total
                if args.max_minutes != config.max_minutes and config.schedule in ("cosine", "linear"):
                    log.warning("the %s schedule ends with the run's time limit: changing it to %g minutes "
                                "reshapes it, so the learning rate jumps where the run resumes", config.schedule,
                                args.max_minutes)
                config.max_minutes = args.max_minutes
            ignored = [f"--{name.replace('_', '-')}" for name, value in vars(args).items()
                       if name not in ("resume", "steps", "max_minutes", "no_progress")
                       and value != parser.get_default(name)]
            if ignored:
                log.warning("--resume continues with the run's saved settings; ignored: %s", ", ".join(ignored))
        else:
            config = config_from_args(args)
        trainer = Trainer(config, resume=args.resume, show_progress=not args.no_progress)
        if trainer.rank == 0:
            trainer.out_dir.mkdir(parents=True, exist_ok=True)
            command = "python -m transformer.train " + shlex.join(argv if argv is not None else sys.argv[1:])
            with open(trainer.out_dir / "command.txt", "a") as handle:
                handle.write(command + "\n")
        with stop_on_first_interrupt(trainer.cancel):
            final = trainer.run()
    except (datasets.DataError, CheckpointError, ValueError, FloatingPointError) as error:
        logging.error("%s", error)
        return 2
    except KeyboardInterrupt:
        logging.error("stopped at once: what was trained since the last evaluation was not saved")
        return 130
    if trainer.rank == 0:
        print(json.dumps({k: v for k, v in final.items() if k != "probe"}))
    if trainer.distributed:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
