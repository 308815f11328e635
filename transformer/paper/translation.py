"""A translation and every number the model computed about it: the ``Translation`` record (and its ``--json``
form), and the one path that inspects a finished target, ``inspect_together`` (``forced_decode`` for one
sentence): one teacher-forced pass that returns, for every position, the probability of the chosen token, the
top-k alternatives and every attention map. Its numbers equal those of the incremental steps (the tests check
this), so whatever search produced a translation, the picture the app shows of it is exact.

``translate`` and ``translate_together`` search (``decoding.py``), then inspect. Like the searches, the
inspection runs under ``torch.inference_mode``: clone a tensor before changing it in place or using it with
autograd.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .decoding import SearchRules, Sampling, beam_search, greedy_search, pad_batch
from .sentences import encode_source
from .model import HeadMask, Transformer
from .watching import Watch
from .tokenizer import Tokenizer


@dataclass
class Translation:
    """A source and target pair with every number the model computed about it.

    ``source_ids`` end with eos; ``target_ids`` are the decoder's inputs (bos
    first) and ``predicted_ids`` what each position predicts (the target
    shifted left, ending with eos), so row i of a decoder or cross-attention
    map is the step that produced ``predicted_ids[i]``. Attention tensors are
    (layers, heads, queries, keys) on the CPU in float32.
    """

    source_ids: list[int]
    source_pieces: list[str]
    target_ids: list[int]
    target_pieces: list[str]
    predicted_ids: list[int]
    predicted_pieces: list[str]
    text: str
    token_probs: list[float]
    top_ids: list[list[int]]
    top_pieces: list[list[str]]
    top_probs: list[list[float]]
    encoder_attention: Tensor
    decoder_attention: Tensor
    cross_attention: Tensor
    source_text: str = ""
    truncated: bool = False
    ended: bool = True
    log_prob: float = 0.0
    beam_size: int = 1                   # how it was decoded (1: greedy or sampled), so others decode it alike
    max_length: int | None = None
    forced_steps: int = 0                # the first steps were forced, not chosen (a multilingual model's language)

    @property
    def num_steps(self) -> int:
        return len(self.predicted_ids)

    def to_json(self) -> dict:
        """The ``--json`` contract of ``python -m transformer.translate``."""
        return {
            "source": self.source_text,
            "translation": self.text,
            "source_tokens": self.source_pieces,
            "target_tokens": self.target_pieces,
            "attention": {
                "encoder": _rounded(self.encoder_attention),
                "decoder": _rounded(self.decoder_attention),
                "cross": _rounded(self.cross_attention),
            },
        }


def _rounded(tensor: Tensor, digits: int = 6) -> list:
    return torch.round(tensor, decimals=digits).tolist()


@torch.inference_mode()
def forced_decode(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                  source: str | list[int], target: str | list[int], top_k: int = 5,
                  head_mask: HeadMask | None = None, positions: bool = True, ended: bool = True) -> Translation:
    """Score a given target (text or generated ids without bos/eos) and capture every attention map.

    ``ended=False`` marks a target the search cut off at its length limit: its
    last step then produced its last token, not an end-of-sentence the model
    never chose.
    """
    model.eval()
    truncated = False
    if isinstance(source, str):
        source_text = source
        source_ids, truncated = encode_source(model, source_tokenizer, source)
    else:
        source_ids, source_text = list(source), source_tokenizer.decode(source)
    target_body = target_tokenizer.encode(target, add_eos=False) if isinstance(target, str) else list(target)
    translation = inspect_together(model, source_tokenizer, target_tokenizer, [source_ids], [target_body], [ended],
                                   top_k, head_mask, positions)[0]
    translation.source_text, translation.truncated = source_text, truncated
    return translation


@torch.inference_mode()
def inspect_together(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                     sources: list[list[int]], targets: list[list[int]], ended: list[bool], top_k: int = 5,
                     head_mask: HeadMask | None = None, positions: bool = True) -> list[Translation]:
    """``forced_decode`` of several finished targets (generated ids without bos/eos) in one padded pass, each
    sentence's numbers cut to its own length. Padding is masked, so a sentence's numbers are those of its pass
    alone up to float rounding (about 1e-6: sums over other shapes add in another order). The source text and
    whether it was cut are the caller's to fill in: it knows the text as it was given."""
    start, eos = model.config.start_id, model.config.eos_id
    bodies = [target[: model.config.max_len - 1] for target in targets]
    ended = [done or not body for body, done in zip(bodies, ended)]
    inputs = [[start] + (body if done else body[:-1]) for body, done in zip(bodies, ended)]
    predictions = [body + [eos] if done else list(body) for body, done in zip(bodies, ended)]
    out = model(pad_batch(sources, model.config.pad_id, model.device),
                pad_batch(inputs, model.config.pad_id, model.device),
                need_weights=True, head_mask=head_mask, positions=positions)
    translations = []
    for row, (source_ids, body, target_ids, predicted_ids, done) in enumerate(
            zip(sources, bodies, inputs, predictions, ended)):
        queries, keys = len(target_ids), len(source_ids)
        probs = out.logits[row, :queries].float().softmax(dim=-1)
        token_probs = probs.gather(1, torch.tensor(predicted_ids, device=probs.device).unsqueeze(1)).squeeze(1)
        top_probs, top_ids = probs.topk(min(top_k, probs.size(-1)), dim=-1)
        maps = lambda layers, rows, columns: torch.stack(  # noqa: E731
            [m[row, :, :rows, :columns].float() for m in layers]).cpu()
        translations.append(Translation(
            source_ids=list(source_ids), source_pieces=source_tokenizer.pieces(source_ids),
            target_ids=target_ids, target_pieces=target_tokenizer.pieces(target_ids),
            predicted_ids=predicted_ids, predicted_pieces=target_tokenizer.pieces(predicted_ids),
            text=target_tokenizer.decode(body), token_probs=token_probs.tolist(),
            top_ids=top_ids.tolist(), top_pieces=[target_tokenizer.pieces(ids) for ids in top_ids.tolist()],
            top_probs=top_probs.tolist(), encoder_attention=maps(out.encoder_attentions, keys, keys),
            decoder_attention=maps(out.decoder_attentions, queries, queries),
            cross_attention=maps(out.cross_attentions, queries, keys), ended=done,
            log_prob=float(token_probs.clamp_min(1e-30).log().sum()),
            forced_steps=forced_steps(body, target_tokenizer.prefix_ids)))
    return translations


def forced_steps(body: list[int], forced: tuple[int, ...]) -> int:
    """How many of a target's first tokens are the ones decoding forces (a multilingual model's language)."""
    return len(forced) if forced and tuple(body[:len(forced)]) == forced else 0


def translate(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, text: str,
              beam_size: int = 1, length_penalty: float = 1.0, max_length: int | None = None,
              top_k: int = 5, head_mask: HeadMask | None = None, positions: bool = True,
              sampling: Sampling | None = None, rules: SearchRules = SearchRules()) -> Translation:
    """Translate one sentence (greedy, beam, or sampled with ``sampling``) and return it fully inspected."""
    return translate_together(model, source_tokenizer, target_tokenizer, [text], beam_size, length_penalty,
                              max_length, top_k, head_mask, positions, sampling, rules)[0]


def translate_together(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                       texts: list[str], beam_size: int = 1, length_penalty: float = 1.0,
                       max_length: int | None = None, top_k: int = 5, head_mask: HeadMask | None = None,
                       positions: bool = True, sampling: Sampling | None = None,
                       rules: SearchRules = SearchRules(), watch: Watch | None = None) -> list[Translation]:
    """Translate sentences that arrive together in one batched search, then inspect them in one padded pass.

    A search step costs the CPU little more for many sentences than for one (its time goes to launching small
    operations), so a server that receives sentences at once decodes them together. Each sentence keeps its own
    length limit and leaves the batch when done, so its translation is the one it gets alone, and its numbers
    are, up to float rounding (the tests check both). ``watch`` sees each step of the search as it is decided
    (``decoding.SearchProgress``), and may end it early.
    """
    if not texts:
        return []
    model.eval()
    sources = [encode_source(model, source_tokenizer, text) for text in texts]
    src = pad_batch([ids for ids, _ in sources], model.config.pad_id, model.device)
    if beam_size <= 1 or sampling is not None:
        rows, ended = greedy_search(model, src, max_length, head_mask=head_mask, positions=positions,
                                    return_ended=True, sampling=sampling, forced=target_tokenizer.prefix_ids,
                                    watch=watch)
        searched = list(zip(rows, ended))
    else:
        searched = [(hyps[0].tokens, hyps[0].ended)
                    for hyps in beam_search(model, src, beam_size, length_penalty, max_length, head_mask=head_mask,
                                            positions=positions, rules=rules, forced=target_tokenizer.prefix_ids,
                                            watch=watch)]
    translations = inspect_together(model, source_tokenizer, target_tokenizer, [ids for ids, _ in sources],
                                    [generated for generated, _ in searched], [ended for _, ended in searched],
                                    top_k, head_mask, positions)
    for translation, text, (_, truncated) in zip(translations, texts, sources):
        translation.source_text, translation.truncated = text, truncated
        translation.beam_size, translation.max_length = (1 if sampling is not None else max(1, beam_size)), max_length
    return translations
