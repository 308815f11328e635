"""Open a Marian translator (the opus-mt models) as a checkpoint of this project, from the Hub or from a directory.

    python -m transformer.hub Helsinki-NLP/opus-mt-en-de --out checkpoints/opus-mt-en-de
    python -m transformer.hub path/to/opus-mt-en-fr --out DIR     (a directory in the Hugging Face layout)

An opus-mt model is the paper's base Transformer (6+6 layers, d_model 512, 8 heads, post-norm) with a few
choices of its own, which ``ModelConfig`` names: SiLU in the feed-forward, the sinusoids laid out in two halves,
a bias on the logits, ``<pad>`` as the decoder's first input, and source and target SentencePiece models that
number their pieces by one shared ``vocab.json``. Conversion renames the weights onto this project's modules (the
query, key and value projections become one ``in_proj``), so every view of the app runs on the same code as the
bundled models; ``tests/library/test_hub.py`` holds the result to ``transformers.MarianMTModel``.

Fetching from the Hub is ``download.py``'s. The directory written is an ordinary checkpoint (config.json, safetensors, tokenizers, a model card naming the
source, its licence and revision, and the search settings it was published with). ``pytorch_model.bin`` is read
with ``torch.load(weights_only=True)``: nothing but tensors is unpickled.
"""

from __future__ import annotations

import logging
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..errors import detail
from ..paper.config import ModelConfig
from ..paper.model import Transformer
from ..paper.tokenizer import Tokenizer
from . import multilingual
from .checkpoint import CheckpointError, save_checkpoint
from .transformers_format import HubError, feed_forward_activation, read_json, shared_embedding, stack_weights
from .weights import load_weights

log = logging.getLogger(__name__)

REQUIRED_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
MULTILINGUAL_TYPES = ("m2m_100", "mbart")  # the model_type of the families multilingual.py converts
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the first one a model has is read
OPTIONAL_FILES = ("generation_config.json", "target_vocab.json", "tokenizer_config.json", "README.md", "vocab.json")
# MarianConfig's defaults, for keys an older config.json leaves out.
MARIAN_DEFAULTS = dict(vocab_size=58101, d_model=1024, encoder_layers=12, decoder_layers=12,
                       encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                       decoder_ffn_dim=4096, activation_function="gelu", dropout=0.1, attention_dropout=0.0,
                       max_position_embeddings=1024, scale_embedding=False, pad_token_id=58100, eos_token_id=0,
                       decoder_start_token_id=58100, share_encoder_decoder_embeddings=True, tie_word_embeddings=True)


@dataclass(frozen=True)
class Source:
    """Where a converted model came from: a Hub id (or a directory), the revision read, and its licence."""

    name: str
    revision: str | None = None
    license: str | None = None

    @property
    def url(self) -> str | None:
        return None if Path(self.name).is_absolute() else f"https://huggingface.co/{self.name}"


def marian_config(values: dict) -> dict:
    """config.json of a transformers model, checked to be a Marian translator, with MarianConfig's defaults."""
    if values.get("model_type") != "marian":
        kind = values.get("model_type")
        if not kind:
            raise HubError(code="hub.not_marian_unknown")
        raise HubError(code="hub.not_marian", kind=str(kind))
    return {**MARIAN_DEFAULTS, **values}


def model_config(marian: dict) -> ModelConfig:
    """Our config for a Marian one; a choice our modules do not have is refused by name."""
    activation = feed_forward_activation(marian)
    shared = bool(marian["share_encoder_decoder_embeddings"])
    source_size = marian["vocab_size"]
    target_size = source_size if shared else (marian.get("decoder_vocab_size") or source_size)
    try:
        return ModelConfig(
            src_vocab_size=source_size, tgt_vocab_size=target_size, d_model=marian["d_model"],
            n_heads=marian["encoder_attention_heads"], n_encoder_layers=marian["encoder_layers"],
            n_decoder_layers=marian["decoder_layers"], d_ff=marian["encoder_ffn_dim"],
            dropout=float(marian["dropout"]), attention_dropout=float(marian["attention_dropout"]),
            max_len=marian["max_position_embeddings"], share_embeddings=shared,
            tie_output_projection=bool(marian["tie_word_embeddings"]), norm_first=False, layer_norm_eps=1e-5,
            pad_id=marian["pad_token_id"], start_id=marian["decoder_start_token_id"], eos_id=marian["eos_token_id"],
            activation=activation, position_layout="halves", scale_embeddings=bool(marian["scale_embedding"]),
            output_bias=True)
    except (ValueError, TypeError) as error:
        raise HubError(code="hub.config_unbuildable", error=detail(error)) from None


def convert_state_dict(marian: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """transformers' MarianMTModel state dict under this project's names (``Transformer(config)``'s)."""
    marian = {name.removeprefix("model."): tensor for name, tensor in marian.items()}
    try:
        weights = {}
        if config.share_embeddings:
            weights["src_embed.weight"] = shared_embedding(marian)
        else:
            weights["src_embed.weight"] = marian["encoder.embed_tokens.weight"]
            weights["tgt_embed.weight"] = marian.get("decoder.embed_tokens.weight", marian.get("lm_head.weight"))
        if not config.tie_output_projection:
            weights["output_proj.weight"] = marian["lm_head.weight"]
        weights["output_bias"] = marian.get("final_logits_bias", torch.zeros(1, config.tgt_vocab_size)).reshape(-1)
        weights.update(stack_weights(marian, config))
    except (KeyError, StopIteration) as error:
        if not str(error):
            raise HubError(code="hub.weights_lack_embeddings") from None
        raise HubError(code="hub.weights_lack",
                       name=str(error)) from None
    return {name: tensor.float().contiguous() for name, tensor in weights.items()}


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The stored tensors: safetensors when there are any, else pytorch_model.bin loaded as tensors only."""
    safetensors, pickled = directory / WEIGHT_FILES[0], directory / WEIGHT_FILES[1]
    try:
        if safetensors.is_file():
            return load_file(str(safetensors))
        if pickled.is_file():
            state = torch.load(pickled, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise HubError(code="hub.bin_not_tensors")
            return state
    except (SafetensorError, OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as error:
        reason = str(error).splitlines()[0] if str(error) else str(error)
        raise HubError(code="hub.weights_unreadable", error=reason) \
            from None
    raise HubError(code="hub.no_weights")


def read_tokenizers(directory: Path, marian: dict) -> tuple[Tokenizer, Tokenizer]:
    """Source and target SentencePiece models over vocab.json (target_vocab.json when the vocabularies differ)."""
    tokenizer_config = directory / "tokenizer_config.json"
    separate = bool(read_json(tokenizer_config).get("separate_vocabs")) if tokenizer_config.is_file() else False
    source_vocabulary = read_json(directory / "vocab.json")
    target_vocabulary = read_json(directory / "target_vocab.json") if separate else source_vocabulary
    try:
        source = Tokenizer.load(directory / "source.spm", source_vocabulary)
        target = Tokenizer.load(directory / "target.spm", target_vocabulary)
    except (OSError, ValueError) as error:
        raise HubError(code="hub.tokenizer_unreadable",
                       error=detail(error)) from None
    if (target.pad_id, target.eos_id) != (marian["pad_token_id"], marian["eos_token_id"]):
        raise HubError(code="hub.special_ids")
    return source, target


def search_settings(directory: Path, marian: dict) -> tuple[dict, list[str]]:
    """How the model was published to search (generation_config.json, else config.json), as SearchRules and
    checkpoint read it, and the settings this project does not apply."""
    path = directory / "generation_config.json"
    generation = read_json(path) if path.is_file() else marian
    early_stopping = generation.get("early_stopping", False)
    search = {"beam_size": int(generation.get("num_beams") or 1),
              "length_penalty": float(generation.get("length_penalty", 1.0)),
              "early_stopping": early_stopping is True, "renormalize": bool(generation.get("renormalize_logits"))}
    ignored = []
    if early_stopping == "never":
        ignored.append('early_stopping "never" (searched as false)')
    never = {marian["pad_token_id"], marian["decoder_start_token_id"]}
    banned = generation.get("bad_words_ids") or []
    if any(words != [word] or word not in never for words in banned for word in words[:1]):
        ignored.append(f"bad_words_ids {banned} (only <pad> is never generated)")
    for name, neutral in (("no_repeat_ngram_size", 0), ("repetition_penalty", 1.0), ("min_length", 0),
                          ("encoder_no_repeat_ngram_size", 0), ("do_sample", False)):
        if generation.get(name, neutral) not in (neutral, None):
            ignored.append(f"{name} {generation[name]}")
    return search, ignored


def licence_of(directory: Path) -> str | None:
    """The licence a model card's front matter names."""
    card = directory / "README.md"
    text = card.read_text(encoding="utf-8", errors="replace") if card.is_file() else ""
    front = re.match(r"^---\s*\n(.*?)\n---", text, re.S)
    found = re.search(r"^license:\s*(\S+)", front.group(1), re.M) if front else None
    return found.group(1).strip("'\"") if found else None


def languages_of(name: str) -> dict[str, str]:
    """The languages an opus-mt name gives ("opus-mt-en-de": English to German), as a trained model records them."""
    found = re.fullmatch(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})", Path(name).name)
    return {"source_lang": found.group(1), "target_lang": found.group(2)} if found else {}


def marian_architecture(config: ModelConfig) -> str:
    """The model card's line on what was built from a Marian model."""
    return (
        f"Marian: {config.n_encoder_layers}+{config.n_decoder_layers} layers, d_model "
        f"{config.d_model}, {config.n_heads} heads, feed-forward {config.d_ff} with {config.activation.upper()}, "
        f"a vocabulary of {config.tgt_vocab_size:,} pieces "
        f"{'shared by source and target' if config.share_embeddings else 'per side'}, sinusoids in two halves, "
        "a bias on the logits, `<pad>` as the decoder's first input.")


def model_card(source: Source, architecture: str, search: dict, ignored: list[str], upstream: str) -> str:
    """The checkpoint's README.md: where it came from, under what licence, what was (not) measured."""
    origin = f"[{source.name}]({source.url})" if source.url else f"`{source.name}`"
    revision = f" at revision `{source.revision}`" if source.revision else ""
    settings = (f"beam {search['beam_size']}, length penalty {search['length_penalty']:g}, "
                f"early stopping {str(search['early_stopping']).lower()}, "
                f"renormalised scores {str(search['renormalize']).lower()}")
    lines = [
        f"# {Path(source.name).name} (converted)", "",
        f"Converted from {origin}{revision} by `python -m transformer.hub`: the same weights, renamed onto this "
        "project's modules.", "",
        f"- **Licence:** {source.license or 'not stated by its publisher; see the original card'}"
        + {"cc-by-4.0": " (the opus-mt models are CC-BY 4.0: name Helsinki-NLP / OPUS-MT when you use them)",
           "cc-by-nc-4.0": " (non-commercial: it may not be used to earn money)"}.get((source.license or "").lower(), ""),
        f"- **Architecture:** {architecture}",
        f"- **Search as published:** {settings}."
        + (f" Not applied here: {'; '.join(ignored)}." if ignored else ""),
        "- **Scores:** not measured here. Score it on Multi30K with "
        "`python -m transformer.evaluate --checkpoint DIR --data-dir DIR --split test_2016_flickr`.",
    ]
    if upstream.strip():
        body = re.sub(r"^---\s*\n.*?\n---\s*\n", "", upstream, flags=re.S).strip()
        lines += ["", "## The publisher's card", "", body]
    return "\n".join(lines) + "\n"


def convert(directory: str | Path, out: str | Path, source: Source | None = None) -> Path:
    """Write the translator in ``directory`` (Hugging Face layout: Marian, or a multilingual family of
    ``multilingual.py``) to ``out`` as a checkpoint of ours.

    Nothing is written unless everything was read and fits: ``out`` appears whole or not at all.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise HubError(code="hub.not_directory", directory=str(directory))
    if not (directory / "config.json").is_file():
        raise HubError(code="hub.no_config",
                       name=directory.name)
    values = read_json(directory / "config.json")
    if values.get("model_type") in MULTILINGUAL_TYPES:
        tokenizer_path = directory / "tokenizer_config.json"
        tokenizer_config = read_json(tokenizer_path) if tokenizer_path.is_file() else {}
        family = multilingual.family_of(values, tokenizer_config)
        config = multilingual.model_config(values, family)
        tokenizer, languages = multilingual.read_tokenizer(directory, family, config, tokenizer_config)
        published = read_weights(directory)
        weights = multilingual.convert_state_dict(published, config)
        return _write(directory, out, source, values, config, (tokenizer, tokenizer), weights,
                      published_dtype(published), {"languages": languages.to_dict()},
                      multilingual.architecture(config, family),
                      f"transformers {values['model_type']} ({multilingual.FAMILIES[family].name})")
    marian = marian_config(values)
    missing = [name for name in REQUIRED_FILES if not (directory / name).is_file()]
    if missing:
        raise HubError(code="hub.missing_files", files=", ".join(missing))
    config = model_config(marian)
    tokenizers = read_tokenizers(directory, marian)
    published = read_weights(directory)
    return _write(directory, out, source, marian, config, tokenizers, convert_state_dict(published, config),
                  published_dtype(published), {}, marian_architecture(config), "transformers MarianMTModel")


def published_dtype(weights: dict[str, torch.Tensor]) -> torch.dtype | None:
    """The half precision a model's weights were published in (float16 or bfloat16), which its converted copy keeps
    (half the disk of float32); None for float32 or a mix."""
    kinds = {tensor.dtype for tensor in weights.values() if tensor.is_floating_point()}
    return next(iter(kinds)) if len(kinds) == 1 and kinds <= {torch.float16, torch.bfloat16} else None


def _write(directory: Path, out: str | Path, source: Source | None, values: dict, config: ModelConfig,
           tokenizers: tuple[Tokenizer, Tokenizer], weights: dict[str, torch.Tensor], dtype: torch.dtype | None,
           info: dict, architecture: str, converted_from: str) -> Path:
    """The converted weights checked against the config, and written in ``dtype`` (None: float32) with their
    tokenizers, origin and card."""
    model = Transformer(config)
    try:
        load_weights(model, {name: tensor.float() for name, tensor in weights.items()}, directory.name)
    except CheckpointError as error:
        raise HubError(code="hub.weights_misfit",
                       error=detail(error)) from None
    search, ignored = search_settings(directory, values)
    source = source or Source(str(directory.resolve()), license=licence_of(directory))
    upstream = (directory / "README.md").read_text(encoding="utf-8", errors="replace") \
        if (directory / "README.md").is_file() else ""
    info = {"source": {"name": source.name, "revision": source.revision, "license": source.license,
                       "converted_from": converted_from}, "search": search, **languages_of(source.name), **info}
    return save_checkpoint(out, model, *tokenizers, info=info, dtype=dtype,
                           card=model_card(source, architecture, search, ignored, upstream))
