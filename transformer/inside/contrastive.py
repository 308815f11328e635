"""Why this word and not that one? Contrastive evidence (Yin & Neubig, 2022, "Interpreting Language Models with
Contrastive Explanations"): what in the source and in the translation so far favours the token a step chose over
a named alternative ("Ärztin" over "Arzt", "der" over "die").

The quantity explained is the step's contrast f = log p(chosen) − log p(alternative), the difference of the two
logits (the softmax's normaliser cancels). Its evidence is taken over the token embeddings of the source and of
the decoder's inputs up to that step, after the √d_model scaling and before the positional encoding (section
3.4), as ``attribution.py`` takes it for one token:

- gradient × input: ∂f/∂e · e, summed over each embedding's dimensions;
- integrated gradients: (e − e') · ∫₀¹ ∂f(e' + α(e − e'))/∂e dα from a zero baseline e' (every embedding at once,
  source and prefix), by the midpoint rule. Completeness: the scores of all tokens sum to f(e) − f(e');
  ``completeness_gap`` says how far they are from it, relative to that difference.

A positive score favours the chosen token, a negative one the alternative.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import InputError
from ..paper.translation import Translation
from ..paper.model import Transformer
from ..paper.tokenizer import Tokenizer

METHODS = ("gradient_x_input", "integrated_gradients")


@dataclass
class ContrastiveEvidence:
    """For step ``step`` (1-based): ``source`` (source tokens,) and ``prefix`` (the decoder's inputs up to the step,
    ``<s>`` first), each token's share of the evidence for ``chosen`` over ``alternative``; ``contrast`` is f at
    the input, ``baseline_contrast`` f at the zero baseline (integrated gradients)."""

    method: str
    step: int
    chosen: str
    alternative: str
    source: Tensor
    prefix: Tensor
    contrast: float
    baseline_contrast: float | None = None
    completeness_gap: float | None = None

    def to_json(self, translation: Translation) -> dict:
        result = {"method": self.method, "step": self.step, "chosen": self.chosen, "alternative": self.alternative,
                  "source_tokens": translation.source_pieces,
                  "prefix_tokens": translation.target_pieces[:self.step],
                  "source": [round(x, 6) for x in self.source.tolist()],
                  "prefix": [round(x, 6) for x in self.prefix.tolist()], "contrast": round(self.contrast, 6)}
        if self.completeness_gap is not None:
            result.update(baseline_contrast=round(self.baseline_contrast, 6),
                          completeness_gap=round(self.completeness_gap, 6))
        return result


def alternative_id(translation: Translation, tokenizer: Tokenizer, step: int, alternative: str | int | None) -> int:
    """The alternative's id: a piece as the translation shows it, a typed word tried as a word start, or, when none
    is named, the step's most probable other token."""
    chosen = translation.predicted_ids[step - 1]
    if alternative is None or alternative == "":
        others = [i for i in translation.top_ids[step - 1] if i != chosen]
        if not others:
            raise InputError(code="inside.no_alternative", step=step)
        return others[0]
    if isinstance(alternative, int):
        token = alternative
    else:
        token = tokenizer.typed_id(alternative)
        if token is None:
            raise InputError(code="inside.unknown_piece", piece=alternative)
    if token == chosen:
        raise InputError(code="inside.alternative_is_chosen", piece=tokenizer.piece(token), step=step)
    return token


def check_step(translation: Translation, step: int) -> None:
    if not 1 <= step <= translation.num_steps:
        raise InputError(code="inside.step_out_of_range", step=step,
                         steps=translation.num_steps)


class _Contrast:
    """f = logit(chosen) − logit(alternative) at one step, for a batch of source and prefix embeddings that replace
    what the embedding layers would give (the positional encoding is added after them)."""

    def __init__(self, model: Transformer, translation: Translation, step: int, alternative: int):
        self.model = model
        self.src = torch.tensor([translation.source_ids], device=model.device)
        self.tgt = torch.tensor([translation.target_ids[:step]], device=model.device)
        self.pair = torch.tensor([translation.predicted_ids[step - 1], alternative], device=model.device)

    def embeddings(self) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            return self.model.src_embed(self.src), self.model.tgt_embed(self.tgt)

    def __call__(self, source: Tensor, prefix: Tensor) -> Tensor:
        batch = source.size(0)
        src, tgt = self.src.expand(batch, -1), self.tgt.expand(batch, -1)
        replacements = {id(src): source, id(tgt): prefix}

        def replace(module, args, output):
            return replacements.get(id(args[0]))

        hooks = {self.model.src_embed, self.model.tgt_embed}  # one module when the embeddings are shared
        handles = [module.register_forward_hook(replace) for module in hooks]
        try:
            logits = self.model.decode(tgt, self.model.encode(src)).logits[:, -1].float()
        finally:
            for handle in handles:
                handle.remove()
        chosen, other = logits[:, self.pair].unbind(-1)
        return chosen - other


def _gradients(contrast: _Contrast, source: Tensor, prefix: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    source, prefix = source.detach().requires_grad_(True), prefix.detach().requires_grad_(True)
    values = contrast(source, prefix)
    grad_source, grad_prefix = torch.autograd.grad(values.sum(), (source, prefix))
    return grad_source, grad_prefix, values.detach()


def contrastive_evidence(model: Transformer, translation: Translation, tokenizer: Tokenizer, step: int,
                         alternative: str | int | None = None, method: str = "integrated_gradients",
                         steps: int = 64, batch: int = 16) -> ContrastiveEvidence:
    """Evidence for the token of ``step`` (1-based) over ``alternative`` (default: the step's runner-up), by
    ``method``; integrated gradients over ``steps`` points, ``batch`` at a time."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    check_step(translation, step)
    model.eval()
    other = alternative_id(translation, tokenizer, step, alternative)
    contrast = _Contrast(model, translation, step, other)
    source, prefix = contrast.embeddings()
    names = dict(step=step, chosen=translation.predicted_pieces[step - 1], alternative=tokenizer.piece(other))
    if method == "gradient_x_input":
        grad_source, grad_prefix, value = _gradients(contrast, source, prefix)
        return ContrastiveEvidence(method, source=(grad_source * source).sum(-1)[0].cpu(),
                                   prefix=(grad_prefix * prefix).sum(-1)[0].cpu(), contrast=float(value[0]), **names)
    total_source, total_prefix = torch.zeros_like(source[0]), torch.zeros_like(prefix[0])
    alphas = (torch.arange(steps, device=model.device, dtype=source.dtype) + 0.5) / steps
    for start in range(0, steps, batch):
        chunk = alphas[start:start + batch].view(-1, 1, 1)
        grad_source, grad_prefix, _ = _gradients(contrast, chunk * source, chunk * prefix)
        total_source += grad_source.sum(0)
        total_prefix += grad_prefix.sum(0)
    scores_source = (total_source / steps * source[0]).sum(-1)
    scores_prefix = (total_prefix / steps * prefix[0]).sum(-1)
    with torch.no_grad():
        ends = contrast(torch.cat([source, torch.zeros_like(source)]), torch.cat([prefix, torch.zeros_like(prefix)]))
    difference = float(ends[0] - ends[1])
    gap = abs(float(scores_source.sum() + scores_prefix.sum()) - difference) / max(abs(difference), 1e-6)
    return ContrastiveEvidence(method, source=scores_source.cpu(), prefix=scores_prefix.cpu(), contrast=float(ends[0]),
                               baseline_contrast=float(ends[1]), completeness_gap=gap, **names)
