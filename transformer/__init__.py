"""An encoder-decoder Transformer ("Attention Is All You Need") built to be read, trained and inspected.

``translate`` is not exported here: ``transformer.translate`` is the command-line tool's module, and importing it
would replace a function of that name (import it from ``transformer.paper.translation``)."""

from .files.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .paper.config import PRESETS, ModelConfig, preset
from .paper.decoding import beam_search, greedy_search
from .paper.sentences import decode_steps, translate_batch
from .paper.translation import Translation, forced_decode
from .paper.model import DecoderCache, HeadMask, Seq2SeqOutput, Transformer
from .paper.tokenizer import Tokenizer

__all__ = [
    "Checkpoint", "CheckpointError", "DecoderCache", "HeadMask", "ModelConfig", "PRESETS", "Seq2SeqOutput",
    "Tokenizer", "Transformer", "Translation", "beam_search", "decode_steps", "forced_decode", "greedy_search",
    "load_checkpoint", "preset", "save_checkpoint", "translate_batch",
]
