"""Honest scores: a model's translations really decoded (never teacher-forced) and scored with sacreBLEU and
chrF, and the validation loss a training run watches."""

from __future__ import annotations

import time

import torch

from .. import data as datasets
from ..metrics import corpus_scores
from ..paper.sentences import translate_batch
from ..paper.translation import forced_decode
from ..paper.model import Transformer
from ..paper.tokenizer import PAD_ID, Tokenizer
from .corpus import collate
from .loss import token_loss


def evaluate_checkpoint(checkpoint, sources: list[str], references: list[str], beam_size: int = 5,
                        length_penalty: float = 1.0, max_tokens: int = 8000, bf16: bool = False) -> dict:
    """Translate ``sources`` with the checkpoint's model and score against ``references``."""
    started = time.perf_counter()
    with torch.autocast(checkpoint.model.device.type, dtype=torch.bfloat16, enabled=bf16):
        hypotheses = translate_batch(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                                     sources, beam_size=beam_size, length_penalty=length_penalty,
                                     max_tokens=max_tokens, rules=checkpoint.rules)
    seconds = time.perf_counter() - started
    scores = corpus_scores(hypotheses, references)
    return {"bleu": scores["bleu"], "chrf": scores["chrf"], "signature": scores["bleu_signature"],
            "chrf_signature": scores["chrf_signature"], "sentences": len(sources), "seconds": round(seconds, 2),
            "beam": beam_size, "length_penalty": length_penalty, "hypotheses": hypotheses}


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


def probe_attention(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, sentence: str,
                    step: int) -> dict:
    """How the model translates a probe sentence at ``step``, and its cross-attention while doing so (every layer
    and head, 4 decimals): what the Train tab draws as attention forms."""
    probe = forced_decode(model, source_tokenizer, target_tokenizer, sentence,
                          translate_batch(model, source_tokenizer, target_tokenizer, [sentence])[0])
    return {"step": step, "source_tokens": probe.source_pieces, "target_tokens": probe.predicted_pieces,
            "translation": probe.text, "cross": torch.round(probe.cross_attention, decimals=4).tolist()}

