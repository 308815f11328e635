"""The step view while a search decodes: each step's numbers as the page draws them the moment it is decided.

The search reports its leading hypothesis after every step (``transformer.paper.decoding.SearchProgress``); this
turns one report into what the page's script draws (ui/static/explorer.js, ``live``): the pieces so far, the step's
candidates, and where it looked in the source at the layer and head the page shows, with a caption in the page's
language. The finished translation's numbers (``explorer.page_numbers``) replace them when the search ends.
"""

from __future__ import annotations

from transformer.files.checkpoint import Checkpoint
from transformer.paper.watching import SearchProgress
from transformer.paper.sentences import encode_source
from transformer.paper.translation import forced_steps

from ..drawing import figures
from ..runtime.language import ENGLISH, Number, text
from ..runtime.numbers import clamp
from .text import clean_text, markdown_escape
from .explorer import step_frames
from .translate import WEIGHT_DECIMALS

UNDER_WAY = "…"  # ends the text of a translation still being decoded


def source_pieces_read(checkpoint: Checkpoint, sentence: str) -> list[str]:
    """The source pieces the model reads for ``sentence``, cleaned and cut as a translation does."""
    cleaned, _ = clean_text(sentence)
    ids, _ = encode_source(checkpoint.model, checkpoint.source_tokenizer, cleaned)
    return checkpoint.source_tokenizer.pieces(ids)


def text_so_far(checkpoint: Checkpoint, progress: SearchProgress) -> str:
    """The translation as the search's leading hypothesis reads so far (special tokens dropped), marked as under
    way. Without the mark a finished search's last step would read as the translation before the server holds it,
    and a click in another tab in between would find no translation to look into."""
    return checkpoint.target_tokenizer.decode(progress.tokens) + UNDER_WAY


def live_numbers(checkpoint: Checkpoint, progress: SearchProgress, source: list[str], layer: int,
                 head: int | None, beam_size: int, sent: int, language: str = ENGLISH) -> dict:
    """What the page draws of one step while the search goes on: the pieces so far (``forced`` of them the
    target language's), the step's candidates as their chart shows them, the cross-attention row at ``layer`` and
    ``head`` (None: the mean of heads) over the ``source`` pieces, and the caption, with the step view's frames
    (``step_frames``) they fill. ``sent`` numbers the translation these steps belong to, as its finished numbers
    will be."""
    tokenizer = checkpoint.target_tokenizer
    produced = tokenizer.pieces(progress.tokens)
    forced = forced_steps(progress.tokens, tokenizer.prefix_ids)
    layers, heads = progress.cross_attention.shape[:2]
    layer = clamp(layer, 1, layers)
    weights = progress.cross_attention[layer - 1]
    row = weights.mean(dim=0) if head is None else weights[clamp(head, 1, heads) - 1]
    step, piece = len(produced), markdown_escape(produced[-1])
    key = "translate.live.caption" if beam_size <= 1 else "translate.live.caption_beam"
    return {"sent": sent, "step": step, "produced": produced, "forced": forced,
            "candidates": figures.candidates(tokenizer.pieces(progress.top_ids), progress.top_probs, produced[-1],
                                             language),
            **step_frames(source, len(progress.top_ids), language),
            "layer": layer, "head": 0 if head is None else clamp(head, 1, heads),
            "heads": heads, "attention": [round(weight, WEIGHT_DECIMALS) for weight in row.tolist()],
            "caption": text(language, key, step=step, piece=piece, beams=beam_size,
                            probability=Number(progress.probability, ".1%"))}
