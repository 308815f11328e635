"""What each layer knows, in the Inside a head tab: the translation the decoder makes from every encoder layer
(DecoderLens, ``transformer/inside/decoder_lens.py``), and every decoder layer read by the tuned lens beside the
logit lens (``transformer/inside/tuned_lens.py``); where a model has no tuned lens yet, one trained for it and kept.
What each reading shows and does not: docs/lenses.md."""

from __future__ import annotations

import difflib
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

import plotly.graph_objects as go

from transformer import data as datasets
from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside import one_head
from transformer.inside.corpus_run import model_fingerprint
from transformer.inside.decoder_lens import translations_by_layer
from transformer.inside.tuned_lens import LENS_FILE, LensTraining, TunedLens, shipped_lens, train_lens
from transformer.metrics import corpus_scores
from transformer.paper.translation import Translation

from ..drawing import charts
from ..runtime.language import ENGLISH, Message, Number, message, text
from .choices import require_translation
from .samples import sample_sentences
from .text import markdown_escape
from .translate import AttentionMap, map_of

log = logging.getLogger(__name__)

# A lens trained here, for a model that ships none, on the sentences below: a model of the bundled size in about
# 40 s on two cores; a real translator's (a larger projection to a larger vocabulary) on fewer positions and steps,
# in a few minutes at opus-mt's size (docs/lenses.md).
APP_TRAINING = LensTraining(sentences=1000, steps=300)
LARGE_TRAINING = LensTraining(sentences=200, steps=100, batch_positions=128)
LARGE_PROJECTION = 4_000_000  # d_model x vocabulary: the bundled models' is 2,048,000, opus-mt's 29,747,712


def training_for(checkpoint: Checkpoint) -> LensTraining:
    config = checkpoint.model.config
    return APP_TRAINING if config.d_model * config.tgt_vocab_size <= LARGE_PROJECTION else LARGE_TRAINING


class KeptLenses:
    """The tuned lens of each model, read once: the one kept beside its weights (shipped with a bundled model;
    trained here for a Hub model, whose directory in the Hub cache then takes it along when it is removed), else the
    one trained here for a model whose directory this server may not write (``folder/<fingerprint>/``). The
    ``HELD`` last read stay in memory."""

    HELD = 8

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.lenses: OrderedDict[str, TunedLens] = OrderedDict()
        self.unreadable: set[Path] = set()  # said once in the log, then passed over
        self.lock = threading.Lock()

    def folder_for(self, checkpoint: Checkpoint) -> Path:
        """Where a lens trained here for ``checkpoint`` is kept: beside its weights where this server may write."""
        if checkpoint.path is not None and os.access(checkpoint.path, os.W_OK):
            return Path(checkpoint.path)
        return self.folder / model_fingerprint(checkpoint)[:32]

    def get(self, checkpoint: Checkpoint) -> TunedLens | None:
        fingerprint = model_fingerprint(checkpoint)
        with self.lock:
            if fingerprint in self.lenses:
                self.lenses.move_to_end(fingerprint)
                return self.lenses[fingerprint]
            lens = None
            for folder in (checkpoint.path, self.folder / fingerprint[:32]):
                if folder is None or Path(folder) / LENS_FILE in self.unreadable:
                    continue
                try:
                    lens = shipped_lens(checkpoint, folder)
                except InputError as error:  # a file cut short, or of a later version: as if there were none
                    self.unreadable.add(Path(folder) / LENS_FILE)
                    log.warning("%s", error)
                if lens is not None:
                    break
            if lens is not None:
                self.lenses[fingerprint] = lens.to(checkpoint.model.device)
                while len(self.lenses) > self.HELD:
                    self.lenses.popitem(last=False)
            return lens


def lens_sentences(checkpoint: Checkpoint, count: int) -> tuple[list[str], str]:
    """What a lens is trained on here, and the name to record: Multi30K's training sentences where this machine has
    Multi30K (never a download) and the model learnt from them or came from the Hub reading one of its languages;
    else the app's sample sentences (a model trained on digits reads digits)."""
    source, _ = checkpoint.direction
    from_hub = "converted_from" in (checkpoint.info.get("source") or {})
    learnt_from = checkpoint.info.get("training", {}).get("data")
    if (learnt_from == "multi30k" or from_hub) and source in datasets.MULTI30K_LANGS:
        try:
            sources, _ = datasets.corpus_sentences(datasets.MULTI30K_PREFIX + "train", source, None,
                                                   datasets.multi30k_dir(download=False))
            return sources, datasets.MULTI30K_PREFIX + "train"
        except datasets.DataError:
            pass
    return sample_sentences(checkpoint, count), "samples"


def train_and_keep(checkpoint: Checkpoint, folder: str, progress=None) -> dict:
    """A tuned lens trained for ``checkpoint`` and saved in ``folder``; what it was trained on. Runs in the worker
    process (ui/runtime/worker.py), with ``progress(stage, done, total)``."""
    training = training_for(checkpoint)
    sentences, name = lens_sentences(checkpoint, training.sentences)
    lens = train_lens(checkpoint, sentences, name, training, progress=progress)
    Path(folder).mkdir(parents=True, exist_ok=True)
    lens.save(Path(folder) / LENS_FILE)
    return lens.trained_on


def trained_on_words(lens: TunedLens, language: str = ENGLISH) -> str:
    """"trained on 2,000 Multi30K training sentences (29,972 positions)", in ``language``."""
    trained = lens.trained_on
    where = "multi30k" if trained.get("input") == datasets.MULTI30K_PREFIX + "train" else \
        "samples" if trained.get("input") == "samples" else "other"
    said = text(language, f"inside.tuned.trained_on.{where}", sentences=Number(trained.get("sentences", 0), ","),
                positions=Number(trained.get("positions", 0), ","), input=markdown_escape(str(trained.get("input"))))
    pair = trained.get("languages")
    return said if not pair else text(language, "inside.tuned.languages", trained=said,
                                      pair=markdown_escape(" → ".join(map(str, pair))))


def lens_views(checkpoint: Checkpoint, translation: Translation | None, lens: TunedLens | None,
               language: str = ENGLISH) -> tuple[go.Figure | None, str]:
    """The tuned lens's reading of the translation, drawn as the logit lens is, and a line per decoder layer with
    both lenses' KL to the last layer on this sentence; without a lens, what to do to have one."""
    require_translation(translation)
    if lens is None:
        return None, text(language, "inside.tuned.none")
    model = checkpoint.model
    logit = one_head.logit_lens(model, translation, top_k=1)
    tuned = one_head.logit_lens(model, translation, top_k=1, lens=lens)
    favourite = [[checkpoint.target_tokenizer.piece(int(i)) for i in layer] for layer in tuned.top_ids[..., 0]]
    figure = charts.logit_lens_heatmap(tuned.probabilities, favourite, translation.predicted_pieces,
                                       title_key="lens.tuned_title", language=language)
    rows = "\n".join(f"| {layer} | {Number(float(a), '.3f').in_(language)} | {Number(float(b), '.3f').in_(language)} |"
                     for layer, (a, b) in enumerate(zip(logit.kl, tuned.kl), start=1))
    head = text(language, "inside.tuned.kl_head")
    return figure, (f"{text(language, 'inside.tuned.trained', trained=trained_on_words(lens, language))}\n\n"
                    f"{head}\n|---|---|---|\n{rows}")


def marked_words(translation: str, final: str) -> str:
    """``translation`` with the words that differ from ``final`` in bold (Markdown; the rest escaped)."""
    words, final_words = translation.split(), final.split()
    shown = []
    for tag, start, end, _, _ in difflib.SequenceMatcher(a=words, b=final_words, autojunk=False).get_opcodes():
        for word in words[start:end]:
            shown.append(markdown_escape(word) if tag == "equal" else f"**{markdown_escape(word)}**")
    return " ".join(shown)


def chrf(translation: str, final: str) -> float:
    """chrF (sacreBLEU) of one translation against the final one (100 for two empty ones, which are the same)."""
    return 100.0 if translation == final else corpus_scores([translation], [final])["chrf"]


def layer_translations(checkpoint: Checkpoint, translation: Translation) -> list[Translation]:
    """The sentence translated from every encoder layer at once, decoded as the shown translation was."""
    return translations_by_layer(checkpoint, translation.source_text, translation.beam_size, translation.max_length)


def layers_table(by_layer: list[Translation], language: str = ENGLISH) -> str:
    """One row per encoder layer: its translation, the words that differ from the final one in bold, and its chrF
    against the final one."""
    final = by_layer[-1].text
    rows = "\n".join(
        f"| {layer} | {marked_words(translation.text, final) or '∅'} | "
        f"{Number(chrf(translation.text, final), '.1f').in_(language)} |"
        for layer, translation in enumerate(by_layer, start=1))
    head, note = text(language, "inside.layers.table_head"), text(language, "inside.layers.bold")
    return f"{head}\n|---|---|---|\n{rows}\n\n{note}"


def layer_map(by_layer: list[Translation], layer: int) -> AttentionMap:
    """The cross-attention of the translation from encoder layer ``layer``: the mean of the last decoder layer's
    heads."""
    translation = by_layer[max(1, min(layer, len(by_layer))) - 1]
    decoder_layers = translation.cross_attention.size(0)
    return map_of(translation, "cross", decoder_layers, None,
                  title=message("inside.layers.map_title", layer=max(1, min(layer, len(by_layer)))))


def first_same_layer(by_layer: list[Translation]) -> int:
    """The first encoder layer from which the decoder gives the final translation (every deeper layer too)."""
    final = by_layer[-1].predicted_ids
    first = len(by_layer)
    for layer in range(len(by_layer), 0, -1):
        if by_layer[layer - 1].predicted_ids != final:
            break
        first = layer
    return first


def layer_summary(by_layer: list[Translation], layer: int) -> Message:
    """A sentence on the layer shown: its translation's chrF against the final one, and whether it is the final."""
    layer = max(1, min(layer, len(by_layer)))
    translation, final = by_layer[layer - 1], by_layer[-1]
    return message("inside.layers.summary", layer=layer, layers=len(by_layer),
                   translation=markdown_escape(translation.text),
                   chrf=Number(chrf(translation.text, final.text), ".1f"), first=first_same_layer(by_layer))
