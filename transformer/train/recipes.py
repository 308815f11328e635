"""Settings that train a fixed-size model well in a given number of updates, for each kind of data.

A planned run (``budget.py``) chooses the model for a time budget; these are for a chosen model and a number of
updates (the Train tab's tiny and small sizes). What differs by data: the digit tasks learn from short sequences
with a high learning rate and no dropout; Multi30K and an uploaded corpus take the paper's warm-up, scaled down
to the run, and an upload's vocabulary is bounded by its size.
"""

from __future__ import annotations

KINDS = ("synthetic", "multi30k", "upload")
QUICK_EVAL_SENTENCES = 200  # an evaluation during a short run decodes this many validation sentences


def fixed_size_run(kind: str, steps: int, pairs: int | None = None) -> dict:
    """``TrainConfig`` settings for ``steps`` updates on data of ``kind``; ``pairs``: an upload's sentence pairs."""
    if kind == "synthetic":
        return dict(lr=3e-3, warmup_steps=min(100, steps // 5), max_tokens=2000, eval_every=max(10, steps // 10),
                    model={"dropout": 0.0})
    if kind == "multi30k":
        return dict(lr=1e-3, warmup_steps=min(400, steps // 5), max_tokens=4000, eval_every=max(50, steps // 8),
                    eval_sentences=QUICK_EVAL_SENTENCES)
    if kind == "upload":
        return dict(lr=1e-3, warmup_steps=min(200, steps // 5), max_tokens=3000, eval_every=max(20, steps // 8),
                    eval_sentences=QUICK_EVAL_SENTENCES, vocab_size=min(8000, max(200, (pairs or 0) // 2)))
    raise ValueError(f"no recipe for {kind!r}; the kinds are {', '.join(KINDS)}")
