"""Open the multilingual translators (M2M100, NLLB-200, SMaLL-100, mBART-50) as checkpoints of this project.

One set of weights translates between 50 to 200 languages; a token per language says which. These models are the
paper's Transformer with the choices fairseq made for them, which ``ModelConfig`` names:

- pre-norm layers, and a final LayerNorm after each stack (``norm_first``);
- embeddings times sqrt(d_model), one matrix for source, target and output; positions numbered from 2
  (``position_offset``), in tensor2tensor's sinusoids (M2M100, NLLB: ``position_layout="fairseq"``) or a learned
  table per stack with a LayerNorm after it (mBART: ``"learned"``, ``embedding_norm``, and a bias on the logits);
- ``</s>`` as the decoder's first input, and the target language's token forced as its first output.

Each family numbers its pieces its own way, which ``vocabulary`` rebuilds as one piece -> id table:

- M2M100 and SMaLL-100: ``vocab.json`` over a SentencePiece model, then ``__de__``-style language tokens, then
  unused "made-up words" up to the embedding's size;
- NLLB and mBART-50: the SentencePiece model's own ids plus one (fairseq's ``<s> <pad> </s> <unk>`` come first),
  then the language codes (``deu_Latn``, ``de_DE``), then ``<mask>``.

The source starts with its language's token (SMaLL-100: the target language's, and nothing is forced). The
codes are listed in ``languages.json`` in each family's order, which fixes their ids (M2M100's tokenizer_config.json
names which of its two lists). ``tests/library/test_multilingual.py`` holds the result to
transformers' ``M2M100ForConditionalGeneration`` and ``MBartForConditionalGeneration``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch

from ..errors import detail
from ..paper.config import ModelConfig
from ..paper.tokenizer import Languages, Tokenizer
from .transformers_format import HubError, feed_forward_activation, read_json, shared_embedding, stack_weights

CODES = json.loads((Path(__file__).with_name("languages.json")).read_text(encoding="utf-8"))
SENTENCEPIECE = "sentencepiece.bpe.model"
FAIRSEQ_SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}


@dataclass(frozen=True)
class Family:
    """What a family's files and tokens look like."""

    name: str                    # as the model card says it
    files: tuple[str, ...]       # what its tokenizer needs
    codes: str                   # its list in languages.json
    source: str                  # the default source and target languages, as it writes them
    target: str
    token: str = "{}"            # a language's piece from its code ("__{}__" for M2M100)
    source_marked_by: str = "source"
    target_forced: bool = True
    licence_note: str = ""
    published: str = ""          # its translators' Hub ids, as a shell pattern


FAMILIES = {
    "m2m100": Family("M2M100", (SENTENCEPIECE, "vocab.json"), "m2m100", "en", "de", "__{}__",
                     published="facebook/m2m100_*"),
    "small100": Family("SMaLL-100", (SENTENCEPIECE, "vocab.json"), "m2m100", "en", "de", "__{}__",
                       source_marked_by="target", target_forced=False, published="alirezamsh/small100"),
    "nllb": Family("NLLB-200", (SENTENCEPIECE,), "nllb", "eng_Latn", "deu_Latn",
                   licence_note="CC-BY-NC 4.0: not for commercial use", published="facebook/nllb-200-*"),
    "mbart50": Family("mBART-50", (SENTENCEPIECE,), "mbart50", "en_XX", "de_DE",
                      published="facebook/mbart-large-50-*-mmt"),
}


# NLLB writes a language by its ISO 639-3 code and a script ("deu_Latn"), M2M100 ("de") and mBART-50 ("de_DE") by
# ISO 639-1 where there is one; language_aliases.json (from Unicode CLDR: tools/language_tables.py) maps each code
# of languages.json that CLDR writes otherwise to CLDR's.
ALIASES = json.loads((Path(__file__).with_name("language_aliases.json")).read_text(encoding="utf-8"))


def iso_code(code: str) -> str:
    """A multilingual model's language code as CLDR writes the language, ISO 639-1 where there is one: "deu_Latn"
    and "de_DE" are "de", "zsm_Latn" is "ms"."""
    first = code.split("_")[0]
    return ALIASES.get(first, first)


def code_for(codes, iso: str) -> str | None:
    """The first of a model's language ``codes`` that writes the ISO 639-1 language ``iso`` ("de": "deu_Latn")."""
    return next((code for code in codes if iso_code(code) == iso), None)


def family_of(values: dict, tokenizer_config: dict) -> str:
    """Which family a config.json and tokenizer_config.json describe; one this project cannot read is refused."""
    kind, tokenizer = values.get("model_type"), str(tokenizer_config.get("tokenizer_class") or "")
    if kind == "mbart":
        if not tokenizer.startswith("MBart50"):
            raise HubError(code="hub.not_mbart50")
        return "mbart50"
    if tokenizer.startswith("Nllb"):
        return "nllb"
    return "small100" if tokenizer.upper().startswith("SMALL100") else "m2m100"


def model_config(values: dict, family: str) -> ModelConfig:
    """Our config for an M2M100 or mBART config.json; a choice our modules do not have is refused by name."""
    activation = feed_forward_activation({"activation_function": "relu", **values})
    mbart, pad = family == "mbart50", values.get("pad_token_id", 1)
    try:
        return ModelConfig(
            src_vocab_size=values["vocab_size"], tgt_vocab_size=values["vocab_size"], d_model=values["d_model"],
            n_heads=values["encoder_attention_heads"], n_encoder_layers=values["encoder_layers"],
            n_decoder_layers=values["decoder_layers"], d_ff=values["encoder_ffn_dim"],
            dropout=float(values.get("dropout", 0.1)), attention_dropout=float(values.get("attention_dropout", 0.0)),
            max_len=values.get("max_position_embeddings", 1024), share_embeddings=True,
            tie_output_projection=bool(values.get("tie_word_embeddings", True)), norm_first=True,
            layer_norm_eps=1e-5, pad_id=pad, start_id=values.get("decoder_start_token_id", 2),
            eos_id=values.get("eos_token_id", 2), activation=activation,
            position_layout="learned" if mbart else "fairseq", position_offset=2 if mbart else pad + 1,
            embedding_norm=mbart, scale_embeddings=bool(values.get("scale_embedding", True)), output_bias=mbart)
    except (KeyError, ValueError, TypeError) as error:
        raise HubError(code="hub.config_unbuildable", error=detail(error)) from None


def convert_state_dict(weights: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """transformers' M2M100 or mBART state dict under this project's names (``Transformer(config)``'s)."""
    weights = {name.removeprefix("model."): tensor for name, tensor in weights.items()}
    ours = {}
    try:
        ours["src_embed.weight"] = shared_embedding(weights)
        if not config.tie_output_projection:
            ours["output_proj.weight"] = weights["lm_head.weight"]
        for stack, side in (("encoder", "source"), ("decoder", "target")):
            ours[f"{stack}.final_norm.weight"] = weights[f"{stack}.layer_norm.weight"]
            ours[f"{stack}.final_norm.bias"] = weights[f"{stack}.layer_norm.bias"]
            if config.position_layout == "learned":
                ours[f"{side}_positions.table"] = weights[f"{stack}.embed_positions.weight"]
            if config.embedding_norm:
                for part in ("weight", "bias"):
                    ours[f"{side}_embedding_norm.{part}"] = weights[f"{stack}.layernorm_embedding.{part}"]
        if config.output_bias:
            ours["output_bias"] = weights.get("final_logits_bias", torch.zeros(1, config.tgt_vocab_size)).reshape(-1)
        ours.update(stack_weights(weights, config))
    except (KeyError, StopIteration) as error:
        raise HubError(code="hub.multilingual_weights_lack", name=str(error or "embeddings")) from None
    return {name: tensor.contiguous() for name, tensor in ours.items()}


def language_codes(family: str, tokenizer_config: dict) -> list[str]:
    """The family's language codes in id order. Their ids follow from the published list, as transformers' and
    fairseq's tokenizers number them (a tokenizer_config.json's list of special tokens does not number them);
    M2M100's names which list it uses ("m2m100", or "wmt21" for its WMT models)."""
    name = tokenizer_config.get("language_codes", FAMILIES[family].codes) if family in ("m2m100", "small100") \
        else FAMILIES[family].codes
    if not isinstance(name, str) or name not in CODES:
        raise HubError(code="hub.unknown_language_list", name=repr(name))
    return CODES[name]


def vocabulary(directory: Path, family: str, codes: list[str], size: int) -> dict[str, int]:
    """Every piece's id, as the family numbers them, filled with unused pieces up to the embedding's ``size``."""
    token = FAMILIES[family].token
    if family in ("m2m100", "small100"):
        pieces = dict(read_json(directory / "vocab.json"))
    else:
        processor = spm.SentencePieceProcessor(model_file=str(directory / SENTENCEPIECE))
        pieces = dict(FAIRSEQ_SPECIALS)
        for i in range(3, processor.get_piece_size()):  # its <unk> <s> </s> are fairseq's, numbered above
            pieces.setdefault(processor.id_to_piece(i), len(pieces))
    for code in codes:
        pieces[token.format(code)] = len(pieces)
    if family in ("nllb", "mbart50"):
        pieces["<mask>"] = len(pieces)
    if len(pieces) > size:
        raise HubError(code="hub.vocabulary_too_big", pieces=len(pieces), size=size)
    while len(pieces) < size:
        pieces[f"madeupword{len(pieces):06d}"] = len(pieces)
    return pieces


def read_tokenizer(directory: Path, family: str, config: ModelConfig,
                   tokenizer_config: dict) -> tuple[Tokenizer, Languages]:
    """The one tokenizer both sides share, and the languages it is told."""
    missing = [name for name in FAMILIES[family].files if not (directory / name).is_file()]
    if missing:
        raise HubError(code="hub.multilingual_missing_files", files=", ".join(missing), family=FAMILIES[family].name)
    codes = language_codes(family, tokenizer_config)
    try:
        tokenizer = Tokenizer.load(directory / SENTENCEPIECE,
                                   vocabulary(directory, family, codes, config.tgt_vocab_size))
    except (OSError, ValueError) as error:
        raise HubError(code="hub.tokenizer_unreadable",
                       error=detail(error)) from None
    if (tokenizer.pad_id, tokenizer.eos_id) != (config.pad_id, config.eos_id):
        raise HubError(code="hub.special_ids")
    spec = FAMILIES[family]
    default = lambda wanted, other: wanted if wanted in codes else next(  # noqa: E731
        (code for code in codes if code != other), codes[0])
    source = default(tokenizer_config.get("src_lang") or spec.source, None)
    languages = Languages({code: spec.token.format(code) for code in codes}, source,
                          default(tokenizer_config.get("tgt_lang") or spec.target, source),
                          spec.source_marked_by, spec.target_forced)
    return tokenizer, languages


def architecture(config: ModelConfig, family: str) -> str:
    """The model card's line on what was built."""
    positions = "a learned position table per stack, then a LayerNorm" if config.position_layout == "learned" \
        else "tensor2tensor's sinusoids"
    return (f"{FAMILIES[family].name}: {config.n_encoder_layers}+{config.n_decoder_layers} pre-norm layers, "
            f"d_model {config.d_model}, {config.n_heads} heads, feed-forward {config.d_ff} with "
            f"{config.activation.upper()}, one vocabulary of {config.tgt_vocab_size:,} pieces, {positions} from "
            "position 2, `</s>` as the decoder's first input, and a token per language.")
