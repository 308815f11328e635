"""A model on disk: checkpoints (config, weights, tokenizers, card), Marian models converted from the Hugging Face
Hub, and the training curves drawn beside a model's card. A training run's own state lives with the run
(``transformer.train.run_directory``)."""
