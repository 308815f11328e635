"""A training run's data: its corpora loaded (with their files' checksums for the model card), encoded into
token ids, and batched into the tensors the model reads under teacher forcing."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import data as datasets
from ..paper.decoding import pad_batch
from ..paper.tokenizer import BOS_ID, PAD_ID, Tokenizer
from .processes import Processes
from .settings import TrainConfig

log = logging.getLogger(__name__)


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
                path = datasets.split_file(directory, split, lang)
                files[path.name] = datasets.sha256_of(path)
        return Datasets(train, val, f"Multi30K task 1, {config.src_lang}->{config.tgt_lang}", files)
    path = Path(config.data)
    if not path.is_file():
        raise datasets.DataError(code="data.unknown_source", data=repr(config.data))
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


def new_tokenizers(config: TrainConfig, data: Datasets) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers trained for a new run: one joint model twice, or one per language."""
    if data.train is None:  # synthetic: one piece per digit
        sample = datasets.synthetic_corpus(config.data, 2000, seed=config.seed)
        sources, targets, options = sample.sources, sample.targets, dict(vocab_size=64, model_type="word")
    else:
        sources, targets = data.train.sources, data.train.targets
        options = dict(vocab_size=config.vocab_size)
    if config.joint_vocabulary:
        joint = Tokenizer.train(sources + targets, **options)
        return joint, joint
    return Tokenizer.train(sources, **options), Tokenizer.train(targets, **options)


def train_tokenizers(config: TrainConfig, data: Datasets, processes: Processes) -> tuple[Tokenizer, Tokenizer]:
    """``new_tokenizers``, trained by rank 0 and received by the other processes: sentencepiece is not
    bit-reproducible."""
    if not processes.distributed:
        return new_tokenizers(config, data)
    protos = [t.model_proto for t in new_tokenizers(config, data)] if processes.rank == 0 else [None, None]
    protos = processes.from_first(protos)
    source = Tokenizer(protos[0])
    return source, source if protos[1] == protos[0] else Tokenizer(protos[1])


# A prime: each seed's synthetic epochs are drawn apart from another seed's.
EPOCH_SEED_STRIDE = 7919


def within_length(examples: list[datasets.Example], max_len: int) -> list[datasets.Example]:
    """The pairs a model with ``max_len`` positions reads whole; how many were dropped is logged."""
    kept, dropped = datasets.filter_by_length(examples, max_len)
    if dropped:
        log.info("dropped %d pairs longer than %d tokens", dropped, max_len)
    return kept


def examples_of(data: Datasets, tokenizers: tuple[Tokenizer, Tokenizer],
                max_len: int) -> tuple[list[datasets.Example], list[datasets.Example] | None]:
    """The validation and training pairs encoded, those a model with ``max_len`` positions reads whole (no training
    pairs for a synthetic task: each epoch draws its own)."""
    train = None if data.train is None else within_length(encode_corpus(data.train, *tokenizers), max_len)
    return within_length(encode_corpus(data.val, *tokenizers), max_len), train


def epoch_batches(config: TrainConfig, examples: list[datasets.Example] | None, tokenizers: tuple[Tokenizer, Tokenizer],
                  epoch: int, processes: Processes) -> tuple[list[datasets.Example], list[list[int]]]:
    """The examples of ``epoch`` (the corpus, or fresh digit sequences where ``examples`` is None) and this
    process's batches of them, at least one update's worth."""
    if examples is None:
        corpus = datasets.synthetic_corpus(config.data, config.synthetic_size,
                                           seed=config.seed * EPOCH_SEED_STRIDE + epoch + 1)
        examples = encode_corpus(corpus, *tokenizers)
    batches = datasets.token_batches(examples, config.max_tokens, config.seed, epoch)
    if processes.distributed:  # every rank gets the same number of batches, so updates stay in lockstep
        per_rank = len(batches) // processes.world_size
        batches = batches[processes.rank * per_rank:(processes.rank + 1) * per_rank]
    if len(batches) < config.accumulate:
        raise datasets.DataError(code="data.too_few_batches", batches=len(batches), accumulate=config.accumulate)
    return examples, batches

