"""``speed_choices.choose_speed`` times the ways a model may decode on the machine it runs on, keeps the fastest,
and remembers them for the next start; whichever it keeps, the model computes the same numbers."""

import json
import logging
import pickle
from copy import deepcopy
from itertools import product

import pytest
import torch

from transformer import cpu, speed_choices
from transformer.cpu import speed_up
from transformer.paper.model import DecoderCache, Transformer
from transformer.speed_choices import SpeedChoices, choose_speed, fastest

from test_model import padded_batch, tiny_config


class InjectedClock:
    """A clock that moves only when a candidate says it worked: no timing of this machine enters the test."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float):
        def run():
            self.now += seconds
        return run


@pytest.mark.parametrize("slower_first", [True, False])
def test_of_two_candidates_the_faster_is_kept_wherever_it_is_named(slower_first):
    clock = InjectedClock()
    candidates = {"slow": clock.work(2.0), "quick": clock.work(1.0)}
    if not slower_first:
        candidates = dict(reversed(candidates.items()))
    assert fastest(candidates, clock) == "quick"


def test_a_candidate_slow_only_in_its_first_round_is_judged_on_the_rounds_after_it():
    """The first round warms up (caches, a first copy of a weight) and is not counted."""
    clock, calls = InjectedClock(), {"cold": 0}

    def cold():
        calls["cold"] += 1
        clock.now += 100.0 if calls["cold"] == 1 else 1.0

    assert fastest({"steady": clock.work(1.5), "cold": cold}, clock) == "cold"


def test_quick_candidates_are_timed_over_more_rounds_and_never_past_the_most():
    clock, rounds = InjectedClock(), []
    fastest({"tiny": lambda: rounds.append(clock.work(1e-6)())}, clock)
    assert len(rounds) == speed_choices.MOST_ROUNDS
    rounds.clear()
    fastest({"long": lambda: rounds.append(clock.work(1.0)())}, clock)
    assert len(rounds) == speed_choices.ROUNDS


def model(tied=True) -> Transformer:
    torch.manual_seed(0)
    return speed_up(Transformer(tiny_config(tie_output_projection=tied))).eval()


def outputs(model: Transformer):
    """Logits of the whole pass, and of cached decoding step by step (one row, then the beams' five)."""
    src, tgt = padded_batch([6, 4]), padded_batch([5, 5], seed=3)
    with torch.no_grad():
        steps = []
        for rows in (1, 5):
            source = src[:1].expand(rows, -1)
            encoded, cache = model.encode(source), DecoderCache()
            steps += [model.decode(tgt[:1, t : t + 1].expand(rows, -1), encoded, cache).logits for t in range(5)]
        return model(src, tgt).logits, torch.cat(steps, dim=0)


LAYOUTS = [layout for layout in cpu.LAYOUTS if layout != "prepacked" or cpu.PACKING]


@pytest.mark.parametrize("layout, attention", list(product(LAYOUTS, ["fused", "formula"])))
def test_whichever_way_is_kept_the_model_computes_the_same(layout, attention):
    plain, chosen = model(), model()
    plain_outputs = outputs(plain)
    shapes = speed_choices.weight_groups(chosen)
    speed_choices.apply_choices(chosen, SpeedChoices({shape: layout for shape in shapes}, attention))
    for got, expected in zip(outputs(chosen), plain_outputs, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    laid = {held[3] for module in chosen.modules() if isinstance(module, cpu.Linear)
            for held in module.decoding_weight._copies.values()}
    assert laid == {layout}
    attentions = [m for m in chosen.modules() if isinstance(m, cpu.ScaledDotProductAttention)]
    assert attentions and all(m.formula_chosen == (attention == "formula") for m in attentions)


class FusedCalls:
    """Counts the calls of PyTorch's fused attention kernel, which it still makes."""

    def __init__(self, monkeypatch):
        self.count, fused = 0, torch.nn.functional.scaled_dot_product_attention

        def counted(*args, **kwargs):
            self.count += 1
            return fused(*args, **kwargs)
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)


def test_the_formula_chosen_serves_decoding_steps_alone(monkeypatch):
    """It was timed for one new position at a time: a whole sentence at once (the encoder, a teacher-forced pass)
    and training keep the fused kernel, and training its weights themselves."""
    chosen = model()
    speed_choices.apply_choices(chosen, SpeedChoices({s: "transposed" for s in speed_choices.weight_groups(chosen)},
                                                     "formula"))
    fused = FusedCalls(monkeypatch)
    src, tgt = padded_batch([6, 4]), padded_batch([5, 3], seed=3)
    with torch.no_grad():
        encoded = chosen.encode(src)
        assert fused.count == 2, "each encoder layer's self-attention over the sentence"
        chosen.decode(tgt[:, :1], encoded, DecoderCache())
        assert fused.count == 2, "a decoding step's attention by the formula"
    plain = model().train()
    chosen.train()
    for module in chosen.modules():
        if isinstance(module, cpu.Linear):
            module.decoding_weight.clear()  # the steps' copies: training makes none
    for each in (plain, chosen):
        each(src, tgt).logits.square().mean().backward()
    assert fused.count == 2 + 2 * 6, "training: every layer's attention of both models by the kernel"
    for (name, mine), theirs in zip(chosen.named_parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-6, rtol=1e-5, msg=name)
    assert all(not m.decoding_weight._copies for m in chosen.modules() if isinstance(m, cpu.Linear))


@pytest.mark.parametrize("square", LAYOUTS)
def test_the_memory_decodings_copies_will_take_is_known_whatever_was_chosen(square):
    """Cross-attention's projection is copied in two parts, its queries' rows in the square shape's layout and its
    keys' and values' in their own: a server bounding its models by memory counts them before they are made."""
    chosen = model(tied=False)
    layouts = {shape: "transposed" for shape in speed_choices.weight_groups(chosen)}
    speed_choices.apply_choices(chosen, SpeedChoices({**layouts, "32x32": square}, "fused"))
    expected = cpu.decoding_copy_bytes(chosen)
    outputs(chosen)
    made = sum(copy.numel() * copy.element_size() for module in chosen.modules() if isinstance(module, cpu.Linear)
               for _, _, copy, layout in module.decoding_weight._copies.values() if layout != "stored")
    assert made == expected > 0


def test_every_shape_a_decoding_step_multiplies_is_timed_and_applied(tmp_path):
    """The tiny model's step: self-attention's 96 x 32 projection, the 32 x 32 ones (with cross-attention's query
    rows), the feed-forward's 64 x 32 and 32 x 64, and the 40 x 32 output; described in one line."""
    chosen = model(tied=False)
    choices = choose_speed(chosen, tmp_path / "choices.json")
    assert set(choices.layouts) == {"96x32", "32x32", "64x32", "32x64", "40x32"}
    assert set(choices.layouts.values()) <= set(LAYOUTS) and choices.attention in ("fused", "formula")
    assert not choices.from_cache and choices.timed_s > 0
    line = choices.describe()
    assert "\n" not in line and f"{torch.get_num_threads()} threads" in line and "96x32 " in line
    assert line.endswith(f"timed in {choices.timed_s:.2f} s")
    assert all(module.decoding_weight.layouts == choices.layouts for module in chosen.modules()
               if isinstance(module, cpu.Linear))


def test_a_restart_on_the_same_machine_reads_the_choices_instead_of_timing_them(tmp_path, monkeypatch):
    cache = tmp_path / "choices.json"
    first = choose_speed(model(), cache)
    monkeypatch.setattr(speed_choices, "time_choices", lambda *args: pytest.fail("timed again"))
    again = choose_speed(model(), cache)
    assert again.from_cache and again == first


def test_another_thread_count_or_torch_or_shape_is_timed_anew(tmp_path, monkeypatch):
    cache = tmp_path / "choices.json"
    choose_speed(model(), cache)
    keys = {speed_choices.key_of(model())}
    keys.add(speed_choices.key_of(speed_up(Transformer(tiny_config(d_model=48)))))
    machine = speed_choices.machine()
    for change in ({"threads": machine["threads"] + 1}, {"torch": "9.9.9"}, {"cpu": "another CPU"},
                   {"flags": "0" * 16}):
        monkeypatch.setattr(speed_choices, "machine", lambda change=change: {**machine, **change})
        keys.add(speed_choices.key_of(model()))
    assert len(keys) == 6
    assert len(json.loads(cache.read_text())) == 1


def test_an_unreadable_cache_is_timed_again_and_rewritten(tmp_path, caplog):
    cache = tmp_path / "choices.json"
    cache.write_text("{ not json")
    with caplog.at_level(logging.WARNING, logger="transformer.speed_choices"):
        choices = choose_speed(model(), cache)
    assert not choices.from_cache and "could not be read" in caplog.text
    assert choose_speed(model(), cache).from_cache


def test_a_cache_that_cannot_be_written_leaves_the_choices_applied(tmp_path, caplog):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    chosen = model()
    with caplog.at_level(logging.WARNING, logger="transformer.speed_choices"):
        choices = choose_speed(chosen, blocked / "choices.json")
    assert choices is not None and "could not be kept" in caplog.text
    assert all(m.decoding_weight.layouts == choices.layouts for m in chosen.modules() if isinstance(m, cpu.Linear))


def test_the_cache_keeps_the_newest_choices_only(tmp_path, monkeypatch):
    cache = tmp_path / "choices.json"
    monkeypatch.setattr(speed_choices, "KEPT", 2)
    for threads in (1, 2, 3):
        monkeypatch.setattr(speed_choices, "machine", lambda threads=threads: {"cpu": "a CPU", "threads": threads})
        choose_speed(model(), cache)
    kept = json.loads(cache.read_text())
    newest = []
    for threads in (2, 3):
        monkeypatch.setattr(speed_choices, "machine", lambda threads=threads: {"cpu": "a CPU", "threads": threads})
        newest.append(speed_choices.key_of(model()))
    assert list(kept) == newest, "the first made is the one dropped"


def test_nothing_is_chosen_for_a_model_in_bfloat16_or_not_sped_up(tmp_path):
    assert choose_speed(model().to(torch.bfloat16), tmp_path / "choices.json") is None
    assert choose_speed(Transformer(tiny_config()).eval(), tmp_path / "choices.json") is None
    assert not (tmp_path / "choices.json").exists()


def test_a_chosen_prepacking_where_this_torch_cannot_prepack_reads_the_rule_measured_before(monkeypatch):
    monkeypatch.setattr(cpu, "PACKING", False)
    weight = torch.randn(40, 32)
    holder = cpu.DecodingWeight()
    holder.layouts = {"40x32": "prepacked"}
    assert holder.layout(weight) == "transposed"
    holder.layouts = {"40x32": "stored"}
    assert holder.layout(weight) == "stored" and holder.copy_bytes(weight) == 0


@pytest.mark.parametrize("copy", [deepcopy, lambda model: pickle.loads(pickle.dumps(model))])
def test_a_copied_or_pickled_model_keeps_its_choices_but_not_its_copies(copy):
    chosen = model()
    speed_choices.apply_choices(chosen, SpeedChoices({"96x32": "stored"}, "formula"))
    outputs(chosen)
    copied = copy(chosen)
    linear = copied.decoder.layers[0].self_attn.in_proj
    assert linear.decoding_weight.layouts == {"96x32": "stored"} and linear.decoding_weight._copies == {}
    assert copied.decoder.layers[0].cross_attn.attention.formula_chosen
