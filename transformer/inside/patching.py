"""Which layer, head or position carries the difference? Activation patching between a minimal pair, the
encoder-decoder form of causal tracing (Meng et al., 2022, "Locating and Editing Factual Associations in GPT";
Vig et al., 2020, "Investigating Gender Bias in Language Models Using Causal Mediation Analysis").

    python -m transformer.patch "The doctor said that she was tired." "The doctor said that he was tired." \\
        --step 8 --alternative ▁er --json

Two runs read the clean translation (the clean source's own, forced on both): the *clean* run from the clean
source, the *corrupted* run from the corrupted one (a minimal pair, or the clean source with noise on chosen
tokens' embeddings). At the chosen step, d = logit(target) − logit(alternative) measures the difference the pair
makes. Then one component of the corrupted run at a time gets the value it had in the clean run, and

    restored = (d_patched − d_corrupted) / (d_clean − d_corrupted)

is the share of the difference that component alone carries: 1 restores the clean prediction, 0 nothing. The
components: each encoder layer's output at each source position; each head's output (its weighted sum of values,
before W_O) in encoder self-, decoder self- and cross-attention, at every position; each decoder layer's output at
every position. Two checks come with every grid: patching nothing restores 0, and patching the last encoder
layer's output at every position makes the corrupted run's logits the clean run's; both to float32 rounding, since
runs in batches of different sizes may round apart.

The sources may differ in length: positions are then paired by ``alignment`` (clean, corrupted), by default the
pieces the two share from the start and from the end; an unpaired position is not patched (and shows as NaN).
Patching depends on the pair chosen: it says what carries *this* difference, not what the model knows.

Noise (Meng et al.): Gaussian noise of 3 standard deviations of the source embeddings (after the √d_model
scaling, section 3.4) added to the chosen source tokens' embeddings stands in for a corrupted sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..errors import InputError
from ..paper.translation import Translation
from ..paper.model import Transformer
from ..paper.tokenizer import Tokenizer
from .contrastive import alternative_id, check_step
from .hooks import in_this_thread
from .one_head import KINDS, block_modules

NOISE_STANDARD_DEVIATIONS = 3.0  # Meng et al.'s ν = 3σ
ROWS_PER_PASS = 32  # patched runs batched together: memory stays small for long sentences
SAME_DIFFERENCE = 1e-6  # logit differences closer than this leave nothing to restore (float32 rounding)


@dataclass(frozen=True)
class Patch:
    """One component to copy from the clean run into the corrupted one: ``site`` "encoder_layer", "head" or
    "decoder_layer"; ``kind`` of a head; ``layer`` and ``head`` from 0; ``positions`` (clean, corrupted) pairs
    of the stream it acts on, None for all."""

    site: str
    layer: int
    kind: str = ""
    head: int = -1
    positions: tuple[tuple[int, int], ...] | None = None


def component(model: Transformer, patch: Patch) -> nn.Module:
    """The module whose output ``patch`` replaces: an encoder or decoder layer, or the attention formula of a head's
    block (its output holds every head's weighted values, (B, H, queries, d_k))."""
    if patch.site == "encoder_layer":
        return model.encoder.layers[patch.layer]
    if patch.site == "decoder_layer":
        return model.decoder.layers[patch.layer]
    attention, _ = block_modules(model, patch.kind, patch.layer + 1)
    return attention.attention


def every_component(model: Transformer) -> list[nn.Module]:
    config = model.config
    sites = [Patch("encoder_layer", layer) for layer in range(config.n_encoder_layers)]
    sites += [Patch("decoder_layer", layer) for layer in range(config.n_decoder_layers)]
    sites += [Patch("head", layer, kind) for kind in KINDS for layer in range(config.layers(kind))]
    return [component(model, patch) for patch in sites]


def _stream(output: tuple) -> Tensor:
    """The activation a component hands on, first in the tuple of its outputs (the rest are its attention maps):
    a layer's new stream, or the heads' weighted values."""
    return output[0]


class _Runs:
    """The model run with hooks that record (a clean run) or replace (patched runs) module outputs, in this thread's
    passes alone (``hooks.in_this_thread``)."""

    def __init__(self, model: Transformer):
        self.model = model

    def run(self, src: Tensor, tgt: Tensor, on_output: Callable, embeddings: Tensor | None = None) -> Tensor:
        """Logits of the last target position, (B, vocabulary), with ``on_output(module, output)`` watching (or
        replacing, by returning) every component's output; ``embeddings`` replace the source's."""
        @in_this_thread
        def hook(module, args, output):
            return on_output(module, output)

        @in_this_thread
        def replace_source(module, args, output):
            return embeddings if args[0] is src else None

        handles = [module.register_forward_hook(hook) for module in every_component(self.model)]
        if embeddings is not None:
            handles.append(self.model.src_embed.register_forward_hook(replace_source))
        try:
            return self.model.decode(tgt, self.model.encode(src)).logits[:, -1].float()
        finally:
            for handle in handles:
                handle.remove()

    def record(self, src: Tensor, tgt: Tensor) -> tuple[dict[int, Tensor], Tensor]:
        """Every component's output in the clean run (batch one), by module, and the logits."""
        kept: dict[int, Tensor] = {}

        def keep(module, output):
            kept[id(module)] = _stream(output)[0]

        return kept, self.run(src, tgt, keep)[0]

    def patched(self, src: Tensor, tgt: Tensor, patches: list[Patch | None], clean: dict[int, Tensor],
                embeddings: Tensor | None = None) -> Tensor:
        """Logits of the last position for each patch (a row each; None patches nothing)."""
        by_module: dict[int, list[tuple[int, Patch]]] = {}
        for row, patch in enumerate(patches):
            if patch is not None:
                by_module.setdefault(id(component(self.model, patch)), []).append((row, patch))

        def replace(module, output):
            rows = by_module.get(id(module))
            if not rows:
                return None
            stream = _stream(output).clone()
            for row, patch in rows:
                copy_into(stream[row], clean[id(module)], patch)
            return (stream, *output[1:])

        batch = len(patches)
        rows_embeddings = None if embeddings is None else embeddings.expand(batch, -1, -1)
        return self.run(src.expand(batch, -1), tgt.expand(batch, -1), replace, rows_embeddings)


def copy_into(stream: Tensor, clean: Tensor, patch: Patch) -> None:
    """Copy ``patch``'s part of one row's clean activation into the corrupted one, in place: a layer's stream is
    (positions, d_model), heads are (H, positions, d_k)."""
    if patch.site == "head":  # one head's slice, a view: copied into in place as a layer's stream is
        stream, clean = stream[patch.head], clean[patch.head]
    if patch.positions is None:
        stream.copy_(clean)
    else:
        for clean_at, corrupted_at in patch.positions:
            stream[corrupted_at] = clean[clean_at]


def default_alignment(clean: list[int], corrupted: list[int]) -> list[tuple[int, int]]:
    """Positions paired as a minimal pair lines up: every position when the lengths agree, else the pieces the two
    share from the start and, after them, from the end."""
    if len(clean) == len(corrupted):
        return [(i, i) for i in range(len(clean))]
    start = 0
    while start < min(len(clean), len(corrupted)) and clean[start] == corrupted[start]:
        start += 1
    end = 0
    while end < min(len(clean), len(corrupted)) - start and clean[-1 - end] == corrupted[-1 - end]:
        end += 1
    return [(i, i) for i in range(start)] + [(len(clean) - 1 - i, len(corrupted) - 1 - i) for i in range(end)]


@dataclass
class Patching:
    """The restored share of every component (module docstring); NaN where a position has no partner.
    ``encoder_positions`` (encoder layers, clean source positions); ``heads`` per kind (layers, heads);
    ``decoder_layers`` (decoder layers,). ``nothing`` and ``last_encoder_layer_all_positions`` are the checks:
    the share patching nothing restores, and the largest logit difference from the clean run when the last
    encoder layer is patched at every position (with the share that restores; exact only where
    ``every_position_paired``: positions without a partner keep the corrupted run's values)."""

    step: int
    target: str
    alternative: str
    clean_difference: float
    corrupted_difference: float
    encoder_positions: Tensor
    heads: dict[str, Tensor]
    decoder_layers: Tensor
    nothing: float
    last_encoder_layer_all_positions: dict
    alignment: list[tuple[int, int]] = field(default_factory=list)
    corrupted_source: list[str] = field(default_factory=list)

    def to_json(self, translation: Translation) -> dict:
        """The ``--json`` contract of ``python -m transformer.patch``."""
        def numbers(values: Tensor) -> list:
            if values.dim() > 1:
                return [numbers(row) for row in values]
            return [None if x != x else round(x, 6) for x in values.tolist()]
        return {"step": self.step, "target": self.target, "alternative": self.alternative,
                "source_tokens": translation.source_pieces, "corrupted_source_tokens": self.corrupted_source,
                "target_tokens": translation.target_pieces, "translation": translation.text,
                "clean_difference": round(self.clean_difference, 6),
                "corrupted_difference": round(self.corrupted_difference, 6),
                "encoder_positions": numbers(self.encoder_positions),
                "heads": {kind: numbers(values) for kind, values in self.heads.items()},
                "decoder_layers": numbers(self.decoder_layers), "nothing": round(self.nothing, 9),
                "last_encoder_layer_all_positions": self.last_encoder_layer_all_positions,
                "alignment": [[clean + 1, corrupted + 1] for clean, corrupted in self.alignment]}


def grid(model: Transformer, alignment: list[tuple[int, int]], source_length: int) -> list[Patch]:
    """Every component of the grids, encoder layers position by position (clean positions without a partner left
    out), in the order ``Patching`` reads them back."""
    config = model.config
    pairs = dict(alignment)
    same_positions = None if alignment == [(i, i) for i in range(source_length)] else tuple(alignment)
    patches = [Patch("encoder_layer", layer, positions=((position, pairs[position]),))
               for layer in range(config.n_encoder_layers) for position in range(source_length) if position in pairs]
    patches += [Patch("head", layer, kind, head, same_positions if kind == "encoder" else None)
                for kind in KINDS for layer in range(config.layers(kind)) for head in range(config.n_heads)]
    patches += [Patch("decoder_layer", layer) for layer in range(config.n_decoder_layers)]
    return patches


@torch.inference_mode()
def activation_patching(model: Transformer, translation: Translation, tokenizer: Tokenizer,
                        corrupted_ids: list[int] | None, step: int, alternative: str | int | None = None,
                        alignment: list[tuple[int, int]] | None = None, noise_positions: list[int] | None = None,
                        seed: int = 0, on_progress: Callable[[int, int], None] | None = None) -> Patching:
    """Patch every component of the corrupted run (``corrupted_ids``, a source ending in eos; or None with
    ``noise_positions``, 0-based source positions to add noise to) with the clean run's (``translation``'s), at
    ``step`` (1-based) for its token against ``alternative`` (default: the step's runner-up). ``on_progress(done,
    total)`` is called after each batch of runs; raising from it stops the computation."""
    check_step(translation, step)
    model.eval()
    device = model.device
    other = alternative_id(translation, tokenizer, step, alternative)
    target = translation.predicted_ids[step - 1]
    clean_src = torch.tensor([translation.source_ids], device=device)
    tgt = torch.tensor([translation.target_ids[:step]], device=device)
    runs = _Runs(model)
    clean, clean_logits = runs.record(clean_src, tgt)
    embeddings = None
    if corrupted_ids is None:
        corrupted_ids = list(translation.source_ids)
        embeddings = noised_embeddings(model, clean_src, noise_positions, seed)
    corrupted_src = torch.tensor([corrupted_ids], device=device)
    alignment = check_alignment(alignment if alignment is not None else
                                default_alignment(translation.source_ids, corrupted_ids),
                                len(translation.source_ids), len(corrupted_ids))
    corrupted_logits = runs.run(corrupted_src, tgt, lambda module, output: None, embeddings)[0]

    def difference(logits: Tensor) -> Tensor:
        return logits[..., target] - logits[..., other]

    d_clean, d_corrupted = float(difference(clean_logits)), float(difference(corrupted_logits))
    if abs(d_clean - d_corrupted) < SAME_DIFFERENCE:
        raise InputError(code="inside.nothing_to_restore")
    every_position = tuple(alignment) if len(corrupted_ids) != len(translation.source_ids) else None
    checks = runs.patched(corrupted_src, tgt, [None, Patch("encoder_layer", model.config.n_encoder_layers - 1,
                                                           positions=every_position)], clean, embeddings)
    patches = grid(model, alignment, len(translation.source_ids))
    shares = []
    for start in range(0, len(patches), ROWS_PER_PASS):
        logits = runs.patched(corrupted_src, tgt, patches[start:start + ROWS_PER_PASS], clean, embeddings)
        shares.append(difference(logits))
        if on_progress is not None:
            on_progress(min(start + ROWS_PER_PASS, len(patches)), len(patches))
    restored = ((torch.cat([difference(checks)] + shares) - d_corrupted) / (d_clean - d_corrupted)).cpu()
    return _read_back(model, translation, tokenizer, patches, restored, checks[1], clean_logits, step, other,
                      d_clean, d_corrupted, alignment, corrupted_ids)


def _read_back(model, translation, tokenizer, patches, shares, last_layer_logits, clean_logits, step, other,
               d_clean, d_corrupted, alignment, corrupted_ids) -> Patching:
    """The grids from one share per row: row 0 patched nothing, row 1 the last encoder layer, then ``patches``."""
    config = model.config
    encoder_positions = torch.full((config.n_encoder_layers, len(translation.source_ids)), float("nan"))
    heads = {kind: torch.zeros(config.layers(kind), config.n_heads) for kind in KINDS}
    decoder_layers = torch.zeros(config.n_decoder_layers)
    for patch, share in zip(patches, shares[2:].tolist()):
        if patch.site == "encoder_layer":
            encoder_positions[patch.layer, patch.positions[0][0]] = share
        elif patch.site == "head":
            heads[patch.kind][patch.layer, patch.head] = share
        else:
            decoder_layers[patch.layer] = share
    gap = float((last_layer_logits - clean_logits).abs().max())
    return Patching(step, translation.predicted_pieces[step - 1], tokenizer.piece(other), d_clean, d_corrupted,
                    encoder_positions, heads, decoder_layers, nothing=float(shares[0]),
                    last_encoder_layer_all_positions={"restored": round(float(shares[1]), 9),
                                                      "max_logit_difference": gap,
                                                      "every_position_paired": len(alignment) == len(corrupted_ids)
                                                      == len(translation.source_ids)},
                    alignment=alignment, corrupted_source=tokenizer.pieces(corrupted_ids))


@torch.inference_mode()
def most_affected_step(model: Transformer, translation: Translation, corrupted_ids: list[int]) -> tuple[int, int]:
    """Where a minimal pair matters most: the step (1-based) whose token the corrupted source makes least likely,
    both reading the clean translation; and the token the corrupted run prefers there (its runner-up when it still
    prefers the clean one)."""
    model.eval()
    device = model.device
    tgt = torch.tensor([translation.target_ids], device=device)
    log_probs = [model(torch.tensor([ids], device=device), tgt).logits[0].float().log_softmax(-1)
                 for ids in (translation.source_ids, corrupted_ids)]
    chosen = torch.tensor(translation.predicted_ids, device=device).unsqueeze(1)
    drops = (log_probs[0].gather(1, chosen) - log_probs[1].gather(1, chosen)).squeeze(1)
    step = int(drops.argmax()) + 1
    preferred = log_probs[1][step - 1].topk(2).indices.tolist()
    return step, preferred[0] if preferred[0] != translation.predicted_ids[step - 1] else preferred[1]


def check_alignment(alignment: list[tuple[int, int]], clean_length: int,
                    corrupted_length: int) -> list[tuple[int, int]]:
    """Pairs within both sources, each position used once."""
    for clean, corrupted in alignment:
        if not (0 <= clean < clean_length and 0 <= corrupted < corrupted_length):
            raise InputError(code="inside.alignment_outside",
                             clean=clean + 1, corrupted=corrupted + 1, clean_length=clean_length,
                             corrupted_length=corrupted_length)
    if len({c for c, _ in alignment}) < len(alignment) or len({c for _, c in alignment}) < len(alignment):
        raise InputError(code="inside.alignment_repeats")
    return sorted(alignment)


@torch.no_grad()
def noised_embeddings(model: Transformer, src: Tensor, positions: list[int] | None, seed: int) -> Tensor:
    """The source's embeddings with Gaussian noise of ``NOISE_STANDARD_DEVIATIONS`` × the embeddings' standard
    deviation on ``positions`` (default: every piece but the final eos)."""
    embeddings = model.src_embed(src).float()
    length = src.size(1)
    positions = list(range(length - 1)) if not positions else positions
    for position in positions:
        if not 0 <= position < length:
            raise InputError(code="inside.position_outside", position=position + 1, length=length)
    spread = NOISE_STANDARD_DEVIATIONS * float((model.src_embed.weight.float() * model.src_embed.scale).std())
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(len(positions), embeddings.size(-1), generator=generator) * spread
    embeddings[0, positions] += noise.to(embeddings.device)
    return embeddings.to(model.src_embed.weight.dtype)
