"""Measuring this machine's speed for a plan: batches shaped like the corpus's, the smallest size always timed, the
larger ones only while they could still be chosen and measuring stays a small share of the budget."""

import torch

from transformer import data as datasets
from transformer.train.budget import LADDER
from transformer.train.calibrate import PIECES_PER_WORD, CorpusShape, measure, timed_speed

CPU = torch.device("cpu")


def corpus(pairs: int = 300) -> datasets.ParallelCorpus:
    sources = [" ".join(["word"] * (4 + i % 9)) for i in range(pairs)]
    targets = [" ".join(["wort"] * (5 + i % 11)) for i in range(pairs)]
    return datasets.ParallelCorpus(sources, targets)


def test_a_corpus_shape_is_its_lengths_in_pieces_with_the_end_of_sentence():
    shape = CorpusShape.of(datasets.ParallelCorpus(["a b c d e", "a"], ["a b", "a b c d e f g h i j"]))
    assert shape.lengths == ((round(5 * PIECES_PER_WORD) + 1, round(2 * PIECES_PER_WORD) + 1),
                             (round(PIECES_PER_WORD) + 1, round(10 * PIECES_PER_WORD) + 1))
    assert shape.epoch_tokens == 4 + 15 and shape.pairs == 2


def test_a_timed_speed_is_seconds_and_target_tokens_per_update():
    shape = CorpusShape.of(corpus())
    speed = timed_speed(LADDER[0], shape, CPU)
    assert speed.update_s > 0 and speed.tokens_per_s > 0
    largest_target = max(target for _, target in shape.lengths)
    assert largest_target < speed.tokens_per_update <= LADDER[0].max_tokens, "whole batches of the corpus's pairs"


def test_a_short_budget_times_only_the_sizes_it_could_choose():
    measurement = measure(CorpusShape.of(corpus()), budget_s=6, device=CPU)
    assert list(measurement.speeds) == [LADDER[0].name], "d_model 192 could never make its updates in 6 seconds"
    assert measurement.seconds > 0


def test_measuring_stops_at_its_share_of_the_budget():
    measurement = measure(CorpusShape.of(corpus()), budget_s=10**6, device=CPU, share=0.0)
    assert list(measurement.speeds) == [LADDER[0].name], "the smallest is always measured, then time is up"
