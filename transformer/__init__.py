"""An encoder-decoder Transformer ("Attention Is All You Need") built to be read, trained and inspected."""

from .checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .config import PRESETS, ModelConfig, preset
from .decoding import Translation, beam_search, decode_steps, forced_decode, greedy_search, translate, translate_batch
from .model import DecoderCache, HeadMask, Seq2SeqOutput, Transformer
from .tokenizer import Tokenizer

__all__ = [
    "Checkpoint", "CheckpointError", "DecoderCache", "HeadMask", "ModelConfig", "PRESETS", "Seq2SeqOutput",
    "Tokenizer", "Transformer", "Translation", "beam_search", "decode_steps", "forced_decode", "greedy_search",
    "load_checkpoint", "preset", "save_checkpoint", "translate", "translate_batch",
]
