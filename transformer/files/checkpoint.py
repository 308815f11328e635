"""Checkpoints as directories of plain files: config.json, safetensors weights, sentencepiece models.

Nothing is ever unpickled, so a downloaded checkpoint cannot run code. A
directory is written next to its destination and renamed into place, so a
process killed while saving leaves the previous checkpoint whole.

Layout of a checkpoint directory::

    config.json                 {"model": ModelConfig, "source_tokenizer": ..., "target_tokenizer": ..., ...}
    model.safetensors           weights (or model-0000i-of-0000n.safetensors + model.safetensors.index.json)
    tokenizer.model             joint sentencepiece model (or one file per side)
    vocab.json                  a converted model's piece -> id vocabulary ("source_vocabulary", "target_vocabulary")
    README.md, metrics.json     model card, when there is one

A converted model's config.json also has "search": the beam size, length penalty and ``SearchRules`` it was
published with.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..cpu import speed_up
from ..errors import InputError, detail
from ..paper.config import ModelConfig
from ..paper.decoding import SearchRules, greedy_search, pad_batch
from ..paper.sentences import encode_source
from ..paper.translation import Translation, inspect_together, translate_together
from ..paper.model import Transformer
from ..paper.tokenizer import Languages, Tokenizer
from .weights import (DEFAULT_MAX_SHARD_BYTES, CheckpointError, check_shapes, load_weights, read_weights,
                      refuse_pickle, resolve, stored_shapes, unique_state_dict, write_directory_atomically,
                      write_weights)

log = logging.getLogger(__name__)

CONFIG = "config.json"


@dataclass
class Checkpoint:
    """A model ready to translate, with its tokenizers and what its directory says about it."""

    model: Transformer
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    path: Path | None = None
    info: dict = field(default_factory=dict)
    card: str = ""
    metrics: dict = field(default_factory=dict)
    pair: tuple[str, str] | None = None  # a multilingual model's (source, target) languages, once chosen

    @property
    def name(self) -> str:
        return self.path.name if self.path else "unsaved"

    @property
    def length_penalty(self) -> float:
        """The beam search length penalty its scores were made with (export chooses one on val for a Multi30K
        model), else the one it was published with, else 1.0."""
        return float(self.metrics.get("length_penalty", self.search.get("length_penalty", 1.0)))

    @property
    def search(self) -> dict:
        """How a converted model was published to search: beam_size, length_penalty, early_stopping, renormalize."""
        search = self.info.get("search")
        return search if isinstance(search, dict) else {}

    @property
    def rules(self) -> SearchRules:
        return SearchRules.from_dict(self.search)

    @property
    def direction(self) -> tuple[str, str | None]:
        """The (source, target) language codes it translates between: a multilingual model's chosen pair, else its
        config's (English when it says none; a target it may not say)."""
        source, target = self.pair or (None, None)
        return source or self.info.get("source_lang", "en"), target or self.info.get("target_lang")

    @property
    def languages(self) -> Languages | None:
        """A multilingual model's languages (None for a model of one language pair)."""
        values = self.info.get("languages")
        return Languages.from_dict(values) if isinstance(values, dict) else None

    def in_languages(self, source: str | None = None, target: str | None = None) -> "Checkpoint":
        """This checkpoint set to translate ``source`` into ``target`` (codes as its family writes them; a
        multilingual model's defaults where not given). A model of one pair takes no languages."""
        languages = self.languages
        if languages is None:
            if source or target:
                raise InputError(code="checkpoint.one_pair", name=self.name)
            return self
        source, target = source or languages.source, target or languages.target
        source_tokenizer, target_tokenizer = languages.tokenizers(self.source_tokenizer, self.target_tokenizer,
                                                                  source, target)
        return dataclasses.replace(self, source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
                                   pair=(source, target))

    def translate_into(self, text: str, targets: list[str], max_length: int | None = None) -> list[Translation]:
        """One sentence translated into each of ``targets`` (a multilingual model's languages) in one greedy batch:
        each row starts from its own language's token, and gets the translation it gets alone."""
        if not targets:
            return []
        settings = [self.in_languages(self.pair[0] if self.pair else None, target) for target in targets]
        sources = [encode_source(self.model, each.source_tokenizer, text) for each in settings]
        forced = [each.target_tokenizer.prefix_ids for each in settings]
        src = pad_batch([ids for ids, _ in sources], self.model.config.pad_id, self.model.device)
        prefix = torch.tensor(forced, device=self.model.device) if forced[0] else None  # SMaLL-100 forces none
        rows, ended = greedy_search(self.model, src, max_length, prefix=prefix, return_ended=True)
        translations = inspect_together(self.model, settings[0].source_tokenizer, settings[0].target_tokenizer,
                                        [ids for ids, _ in sources], rows, ended)
        for translation, (_, cut), prefix_ids in zip(translations, sources, forced):
            translation.source_text, translation.truncated = text, cut
            translation.forced_steps = len(prefix_ids)
        return translations

    def translate(self, text: str, beam_size: int = 1, max_length: int | None = None,
                  length_penalty: float | None = None, **options) -> Translation:
        """``translation.translate`` with this checkpoint's tokenizers, search rules and, unless given, its length
        penalty (as the app decodes)."""
        return self.translate_together([text], beam_size, max_length, length_penalty, **options)[0]

    def translate_together(self, texts: list[str], beam_size: int = 1, max_length: int | None = None,
                           length_penalty: float | None = None, **options) -> list[Translation]:
        """``translation.translate_together``, as ``translate`` decodes: several sentences in one batched search."""
        return translate_together(self.model, self.source_tokenizer, self.target_tokenizer, texts,
                                  beam_size=beam_size, max_length=max_length, rules=self.rules,
                                  length_penalty=self.length_penalty if length_penalty is None else length_penalty,
                                  **options)


def no_checkpoint_named(name: str, names: Iterable[str]) -> CheckpointError:
    names = list(names)
    if not names:
        return CheckpointError(code="checkpoint.unknown_name_none",
                               name=repr(name))
    return CheckpointError(code="checkpoint.unknown_name", name=repr(name), names=", ".join(names))


def default_device() -> torch.device:
    """CUDA when PyTorch sees a GPU, else the CPU: where a model goes unless its caller says (the app decides for
    itself: ``ui.runtime.gpu.models_device``)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def save_checkpoint(directory: str | Path, model: Transformer, source_tokenizer: Tokenizer,
                    target_tokenizer: Tokenizer, info: dict | None = None, dtype: torch.dtype | None = None,
                    card: str | None = None, metrics: dict | None = None,
                    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
                    extra_files: dict[str, bytes] | None = None) -> Path:
    """Write a complete checkpoint directory atomically; ``dtype`` (e.g. float16) shrinks stored weights."""
    tensors = {name: t.detach().to("cpu", dtype=dtype if dtype and t.is_floating_point() else t.dtype).contiguous()
               for name, t in unique_state_dict(model).items()}
    joint = source_tokenizer.model_proto == target_tokenizer.model_proto
    config = {"model": model.config.to_dict(),
              "source_tokenizer": "tokenizer.model" if joint else "source.model",
              "target_tokenizer": "tokenizer.model" if joint else "target.model",
              **_vocabulary_names(source_tokenizer, target_tokenizer),
              **(info or {})}

    def write(tmp: Path) -> None:
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        write_weights(tmp, tensors, max_shard_bytes)
        for side, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
            tokenizer.save(tmp / config[f"{side}_tokenizer"])
            if tokenizer.vocabulary is not None:
                (tmp / config[f"{side}_vocabulary"]).write_text(json.dumps(tokenizer.vocabulary, ensure_ascii=False))
        if card is not None:
            (tmp / "README.md").write_text(card)
        if metrics is not None:
            (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        for name, data in (extra_files or {}).items():
            (tmp / name).write_bytes(data)

    write_directory_atomically(Path(directory), write)
    return Path(directory)


def _vocabulary_names(source_tokenizer: Tokenizer, target_tokenizer: Tokenizer) -> dict[str, str]:
    """config.json's names for the vocabularies of tokenizers that number pieces by one (one file when shared)."""
    if source_tokenizer.vocabulary is None and target_tokenizer.vocabulary is None:
        return {}
    if None in (source_tokenizer.vocabulary, target_tokenizer.vocabulary):
        raise ValueError("either both tokenizers or neither number their pieces by a vocabulary of their own")
    if source_tokenizer.vocabulary == target_tokenizer.vocabulary:
        return {"source_vocabulary": "vocab.json", "target_vocabulary": "vocab.json"}
    return {"source_vocabulary": "source_vocab.json", "target_vocabulary": "target_vocab.json"}


def _read_vocabulary(directory: Path, config: dict, side: str) -> dict[str, int] | None:
    name = config.get(f"{side}_vocabulary")
    if name is None:
        return None
    vocabulary = json.loads((directory / Path(name).name).read_text(encoding="utf-8"))
    if not isinstance(vocabulary, dict):
        raise InputError(code="checkpoint.vocabulary_not_object", name=name)
    return vocabulary


def read_config(directory: str | Path) -> dict:
    directory = resolve(directory)
    config_path = directory / CONFIG
    if not config_path.is_file():
        refuse_pickle(directory)
        raise CheckpointError(code="checkpoint.no_config",
                              directory=str(directory), config=CONFIG)
    try:
        config = json.loads(config_path.read_text())
        ModelConfig.from_dict(config["model"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise CheckpointError(code="checkpoint.bad_config",
                              path=str(config_path), error=detail(error)) from None
    return config


def load_checkpoint(directory: str | Path, device: str | torch.device | None = None,
                    dtype: torch.dtype | None = None) -> Checkpoint:
    """Load a checkpoint directory for inference (eval mode) onto ``device`` (CUDA when available), its weights in
    ``dtype`` (float32 unless given: stored half-precision weights are widened)."""
    directory = resolve(directory)
    if directory.is_file():
        if directory.suffix in (".pt", ".pth", ".bin", ".ckpt"):
            raise CheckpointError(code="checkpoint.pickle_file", path=str(directory))
        raise CheckpointError(code="checkpoint.is_file", path=str(directory))
    if not directory.is_dir():
        raise CheckpointError(code="checkpoint.not_found",
                              directory=str(directory))
    config = read_config(directory)
    model_config = ModelConfig.from_dict(config["model"])
    try:
        source_tokenizer, target_tokenizer = (
            Tokenizer.load(directory / Path(config.get(f"{side}_tokenizer", "tokenizer.model")).name,
                           _read_vocabulary(directory, config, side))
            for side in ("source", "target"))
    except (OSError, ValueError, TypeError) as error:  # TypeError: a config naming it by a non-string
        raise CheckpointError(code="checkpoint.bad_tokenizer", directory=str(directory), error=detail(error)) from None
    for side, tokenizer, size in (("source", source_tokenizer, model_config.src_vocab_size),
                                  ("target", target_tokenizer, model_config.tgt_vocab_size)):
        if tokenizer.vocab_size != size:
            if side == "source":
                raise CheckpointError(code="checkpoint.source_vocabulary_mismatch", directory=str(directory),
                                      pieces=tokenizer.vocab_size, expected=size)
            raise CheckpointError(code="checkpoint.target_vocabulary_mismatch", directory=str(directory),
                                  pieces=tokenizer.vocab_size, expected=size)
        if (tokenizer.pad_id, tokenizer.eos_id) != (model_config.pad_id, model_config.eos_id):
            # Ids, not amounts: passed as text, so a page never groups them in thousands.
            pad, eos, model_pad, model_eos = map(str, (tokenizer.pad_id, tokenizer.eos_id, model_config.pad_id,
                                                       model_config.eos_id))
            if side == "source":
                raise CheckpointError(code="checkpoint.source_special_ids_mismatch", directory=str(directory),
                                      pad=pad, eos=eos, model_pad=model_pad, model_eos=model_eos)
            raise CheckpointError(code="checkpoint.target_special_ids_mismatch", directory=str(directory),
                                  pad=pad, eos=eos, model_pad=model_pad, model_eos=model_eos)
    check_shapes(model_config, stored_shapes(directory), directory)
    model = speed_up(Transformer(model_config))
    load_weights(model, read_weights(directory), directory)
    model.to(device or default_device(), dtype).eval()
    card_path = directory / "README.md"
    card = card_path.read_text(encoding="utf-8", errors="replace") if card_path.is_file() else ""
    info = {k: v for k, v in config.items() if k not in ("model", "source_tokenizer", "target_tokenizer",
                                                          "source_vocabulary", "target_vocabulary")}
    if not isinstance(info.get("training", {}), dict):
        log.warning("%s: config.json's \"training\" is not an object; ignored", directory.name)
        info["training"] = {}
    checkpoint = Checkpoint(model, source_tokenizer, target_tokenizer, directory, info, card,
                            read_metrics(directory / "metrics.json"))
    try:
        return checkpoint.in_languages()  # a multilingual model's default pair
    except (TypeError, ValueError) as error:  # InputError is a ValueError
        raise CheckpointError(code="checkpoint.bad_languages", directory=str(directory), error=detail(error)) from None


def read_metrics(path: Path) -> dict:
    """metrics.json as a dict, its length penalty a finite number; anything else is ignored with a warning (the
    scores are shown, never needed to translate)."""
    try:
        metrics = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        metrics = None
    if not isinstance(metrics, dict):
        log.warning("%s is not a JSON object of scores; ignored", path)
        return {}
    if "length_penalty" in metrics:
        try:
            penalty = float(metrics["length_penalty"])
        except (TypeError, ValueError):
            penalty = math.nan
        if not math.isfinite(penalty):
            log.warning("%s: length_penalty %r is not a number; 1.0 is used", path, metrics["length_penalty"])
            metrics = {k: v for k, v in metrics.items() if k != "length_penalty"}
    return metrics


def list_checkpoints(*roots: str | Path) -> list[Path]:
    """Checkpoint directories (those with a config.json) directly under each root, sorted by name.

    A save cut off between its two renames leaves only ``NAME.old``; it is listed as ``NAME`` (which
    ``resolve`` reads from the twin), so the checkpoint does not vanish from the app's list.
    """
    found = []
    for root in roots:
        root = Path(root)
        if root.is_dir():
            paths = set()
            for p in root.iterdir():
                if not p.is_dir() or p.name.endswith(".tmp") or not (p / CONFIG).is_file():
                    continue
                if p.name.endswith(".old"):
                    if p.name == ".old":
                        continue
                    p = p.with_name(p.name[: -len(".old")])
                    if p.exists():
                        continue
                paths.add(p)
            found += sorted(paths)
    return found


REPOSITORY_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
DEFAULT_CHECKPOINT = REPOSITORY_CHECKPOINTS / "multi30k-en-de"
