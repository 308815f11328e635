"""Translation quality as the field reports it: sacreBLEU (13a, cased, detokenized) and chrF, with signatures."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF


def corpus_scores(hypotheses: list[str], references: list[str]) -> dict:
    """Corpus BLEU and chrF of detokenized hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {"bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2),
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}
