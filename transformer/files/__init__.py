"""A model on disk: checkpoints (weights, tokenizers, a run's resumable state), Marian models converted from the
Hugging Face Hub, and the training curves drawn beside a model's card."""
