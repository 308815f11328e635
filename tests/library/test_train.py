"""Training: a tiny model learns a task, runs resume exactly, stop when asked, fail loudly, and scale to DDP."""

import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sacrebleu
import torch

from transformer.files.checkpoint import load_checkpoint
from transformer.metrics import corpus_scores
from transformer.paper.translation import translate
from transformer.train import cli as train_cli
from transformer.train import trainer as training_loop
from transformer.train.budget import LADDER, Speed, plan_for_work
from transformer.train.calibrate import CorpusShape
from transformer.train.loss import token_loss
from transformer.train.run_directory import decode_state, drop_records_after
from transformer.train.settings import TrainConfig, learning_rate
from transformer.train.trainer import Trainer

from helpers import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny models gain nothing from more, and on a busy machine more threads spin-wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def quick_config(tmp_path: Path, name: str, **overrides) -> TrainConfig:
    """A run of seconds: the copy task, small epochs, small batches."""
    values = dict(data="copy", preset="tiny", steps=40, eval_every=20, synthetic_size=2000, max_tokens=500,
                  eval_sentences=20, out_dir=str(tmp_path / name))
    values.update(overrides)
    return TrainConfig(**values)


def weights(run_dir: Path, name: str = "last") -> dict[str, torch.Tensor]:
    return dict(load_checkpoint(run_dir / name, device="cpu").model.state_dict())


# --- learning ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_tiny_model_learns_to_reverse_digit_sequences(tmp_path):
    # Half the default batch at a higher peak: as good a reverser in half the time (0.975 exact, measured).
    config = TrainConfig(data="reverse", preset="tiny", steps=400, model={"dropout": 0.0}, max_tokens=1000,
                         lr=5e-3, warmup_steps=50, out_dir=str(tmp_path / "run"), eval_every=400)
    final = Trainer(config, show_progress=False).run()
    assert final["exact_match"] >= 0.95, final["sample"]
    assert final["stopped_by"] == "steps" and final["step"] == 400
    run = tmp_path / "run"
    for name in ("last", "best", "step-000400"):
        assert (run / name / "config.json").is_file(), name
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert records[-1]["event"] == "eval" and records[-1]["exact_match"] == final["exact_match"]
    losses = [r["loss"] for r in records if r["event"] == "step"]
    assert losses[-1] < losses[0] / 3
    saved = load_checkpoint(run / "last", device="cpu")
    assert saved.info["training"]["data"] == "reverse" and saved.info["step"] == 400


def small_parallel_tsv(path: Path) -> Path:
    """Made-up English-French pairs with disjoint vocabularies, enough for a tokenizer per language."""
    animals = {"cat": "chat", "dog": "chien", "bird": "oiseau", "horse": "cheval", "fish": "poisson"}
    verbs = {"sees": "voit", "follows": "suit", "hears": "entend", "likes": "aime"}
    lines = [f"the {a} {v} the {b}\tle {animals[a]} {verbs[v]} le {animals[b]}"
             for a in animals for v in verbs for b in animals if a != b]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_separate_vocabularies_give_each_language_its_own_tokenizer_and_embedding(tmp_path):
    config = train_cli.config_from_args(train_cli.build_parser().parse_args(
        ["--data", str(small_parallel_tsv(tmp_path / "pairs.tsv")), "--separate-vocabularies", "--vocab-size", "40",
         "--steps", "4", "--eval-every", "4", "--eval-sentences", "5", "--out", str(tmp_path / "run")]))
    assert config.joint_vocabulary is False
    trainer = Trainer(config, show_progress=False)
    trainer.run()
    source, target = trainer.source_tokenizer, trainer.target_tokenizer
    assert "▁chat" in target.pieces(target.encode("le chat"))
    assert "▁chat" not in source.pieces(source.encode("le chat")), "French is not in the English vocabulary"
    assert not trainer.model.config.share_embeddings and trainer.model.config.tie_output_projection
    assert trainer.model.config.src_vocab_size == source.vocab_size
    assert trainer.model.config.tgt_vocab_size == target.vocab_size
    saved = load_checkpoint(tmp_path / "run" / "last", device="cpu")
    assert {"source.model", "target.model"} <= {p.name for p in (tmp_path / "run" / "last").iterdir()}
    assert saved.target_tokenizer.model_proto == target.model_proto != saved.source_tokenizer.model_proto
    # The saved model reads with the source vocabulary and writes with the target one, as the trained one did.
    reloaded = saved.translate("the dog sees the cat", beam_size=2, length_penalty=1.0)
    trained = translate(trainer.model.eval(), source, target, "the dog sees the cat", beam_size=2, length_penalty=1.0)
    assert reloaded.source_ids == source.encode("the dog sees the cat") != target.encode("the dog sees the cat")
    assert reloaded.target_ids == trained.target_ids and reloaded.text == target.decode(trained.target_ids)


def test_a_joint_vocabulary_is_the_default_one_file_and_one_embedding(tmp_path):
    config = train_cli.config_from_args(train_cli.build_parser().parse_args(
        ["--data", str(small_parallel_tsv(tmp_path / "pairs.tsv")), "--vocab-size", "40", "--steps", "2",
         "--eval-every", "2", "--eval-sentences", "5", "--out", str(tmp_path / "run")]))
    assert config.joint_vocabulary is True
    trainer = Trainer(config, show_progress=False)
    trainer.run()
    assert trainer.source_tokenizer is trainer.target_tokenizer and trainer.model.config.share_embeddings
    files = {p.name for p in (tmp_path / "run" / "last").iterdir()}
    assert "tokenizer.model" in files and not {"source.model", "target.model"} & files


def test_a_run_that_did_all_its_updates_ended_by_steps_even_past_its_time_limit(tmp_path):
    final = Trainer(quick_config(tmp_path, "run", steps=1, eval_every=1, max_minutes=1e-9), show_progress=False).run()
    assert final["step"] == 1 and final["stopped_by"] == "steps"
    cut = Trainer(quick_config(tmp_path, "cut", steps=2, eval_every=2, max_minutes=1e-9), show_progress=False).run()
    assert cut["step"] == 1 and cut["stopped_by"] == "time", "with updates left, the clock does end the run"


def test_a_run_cut_short_by_its_time_limit_still_evaluates_along_the_way(tmp_path):
    config = quick_config(tmp_path, "clock", steps=100_000, eval_every=100_000, max_minutes=0.05,
                          eval_every_minutes=0.005, eval_sentences=5)
    trainer = Trainer(config, show_progress=False)
    final = trainer.run()
    assert final["stopped_by"] == "time"
    evaluated_at = [record["step"] for record in trainer.history]
    assert len(evaluated_at) >= 3 and evaluated_at == sorted(set(evaluated_at)), "spread over the run, not only at its end"


def test_the_model_card_names_the_kind_of_vocabulary():
    from transformer.export import tokenizer_description

    joint = tokenizer_description({"model_type": "unigram", "vocab_size": 8000, "target_vocab_size": 8000,
                                   "joint": True})
    separate = tokenizer_description({"model_type": "unigram", "vocab_size": 6000, "target_vocab_size": 7000,
                                      "joint": False})
    assert joint.startswith("one joint sentencepiece unigram model, 8000 pieces")
    assert "one sentencepiece unigram model per language, 6000 source and 7000 target pieces" in separate
    digits = tokenizer_description({"model_type": "word", "vocab_size": 14, "target_vocab_size": 14, "joint": False,
                                    "identical": True})
    assert digits.endswith("(they came out identical: both sides use the same symbols)")


# --- resuming ------------------------------------------------------------------------------------

def test_resumed_run_ends_with_exactly_the_weights_of_an_uninterrupted_one(tmp_path):
    # 300 examples make epochs of a few batches, so the run is cut mid-epoch and crosses epochs after resuming;
    # the tiny preset's dropout makes the result depend on the restored random state too.
    # A short warm-up puts most updates on the decaying part of the schedule, which must resume exactly too.
    small = dict(synthetic_size=300, warmup_steps=5)
    straight = Trainer(quick_config(tmp_path, "a", steps=40, **small), show_progress=False).run()
    interrupt = threading.Event()
    Trainer(quick_config(tmp_path, "b", steps=40, **small), show_progress=False, cancel=interrupt,
            on_step=lambda metrics: metrics["step"] == 20 and interrupt.set()).run()
    cut = decode_state(tmp_path / "b" / "last")
    assert cut["step"] == 20 and cut["epoch"] >= 1 and cut["batch_in_epoch"] > 0
    resumed = Trainer(quick_config(tmp_path, "b", steps=40, **small), resume=tmp_path / "b",
                      show_progress=False).run()
    assert resumed["step"] == straight["step"] == 40
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    state_a, state_b = decode_state(tmp_path / "a" / "last"), decode_state(tmp_path / "b" / "last")
    assert (state_a["step"], state_a["epoch"], state_a["batch_in_epoch"]) == \
           (state_b["step"], state_b["epoch"], state_b["batch_in_epoch"])
    assert torch.equal(state_a["torch_rng"], state_b["torch_rng"])


def test_a_run_resumed_after_a_crash_logs_each_update_once(tmp_path):
    small = dict(synthetic_size=300, steps=60, eval_every=20)  # updates logged at 1 and 50, evaluations every 20
    straight = Trainer(quick_config(tmp_path, "a", **small), show_progress=False)
    straight.run()

    def crash(metrics):
        if metrics["step"] == 55:
            raise KeyboardInterrupt  # killed after update 50 was logged, with the last save at 40
    with pytest.raises(KeyboardInterrupt):
        Trainer(quick_config(tmp_path, "b", **small), show_progress=False, on_step=crash).run()
    with open(tmp_path / "b" / "probes.jsonl", "a") as handle:
        handle.write('{"step": 55, "cross": []}\n')  # as if an evaluation had begun after the last save
    with open(tmp_path / "b" / "log.jsonl", "a") as handle:
        handle.write('{"event": "step", "st')  # and cut off in the middle of writing a record
    Trainer(quick_config(tmp_path, "b", **small), resume=tmp_path / "b", show_progress=False).run()

    def logged(run):
        records = [json.loads(line) for line in (tmp_path / run / "log.jsonl").read_text().splitlines()]
        probes = [json.loads(line)["step"] for line in (tmp_path / run / "probes.jsonl").read_text().splitlines()]
        return [(record["event"], record["step"]) for record in records], probes
    assert logged("b") == logged("a") == ([("step", 1), ("eval", 20), ("eval", 40), ("step", 50), ("eval", 60)],
                                          [20, 40, 60])


def test_drop_records_after_keeps_the_log_of_saved_updates_and_lines_without_a_step(tmp_path):
    log_file = tmp_path / "log.jsonl"
    log_file.write_text('\ufeff{"event": "step", "step": 1}\r\n{"note": "no step"}\n{"event": "eval", "step": 20}\n'
                        '{"event": "step", "step": 50}\n{"event": "step", "step": 60.0}\n[1, 2]\n{"event": "st',
                        encoding="utf-8")
    assert drop_records_after(log_file, 20) == 4
    assert log_file.read_text() == '{"event": "step", "step": 1}\n{"note": "no step"}\n{"event": "eval", "step": 20}\n'
    assert drop_records_after(log_file, 20) == 0
    assert drop_records_after(tmp_path / "missing.jsonl", 20) == 0
    log_file.write_text('{"event": "step", "step": 1}')  # whole, but with no newline for the next record
    assert drop_records_after(log_file, 20) == 0 and log_file.read_text() == '{"event": "step", "step": 1}\n'


def test_a_run_killed_right_after_saving_still_logs_that_evaluation_once(tmp_path, monkeypatch):
    small = dict(synthetic_size=300, steps=60, eval_every=20)
    save = Trainer.save

    def save_then_die(self, name, with_state=False):
        saved = save(self, name, with_state)
        if name == "last" and self.step == 40:
            raise KeyboardInterrupt  # killed between writing last/ and whatever came after it
        return saved
    monkeypatch.setattr(Trainer, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        Trainer(quick_config(tmp_path, "run", **small), show_progress=False).run()
    monkeypatch.setattr(Trainer, "save", save)
    Trainer(quick_config(tmp_path, "run", **small), resume=tmp_path / "run", show_progress=False).run()
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["event"] == "eval"] == [20, 40, 60]


def test_resuming_into_another_directory_leaves_that_directorys_log_alone(tmp_path, caplog):
    Trainer(quick_config(tmp_path, "a", steps=4, eval_every=2), show_progress=False).run()
    other = tmp_path / "b"
    other.mkdir()
    earlier = '{"event": "step", "step": 1}\n{"event": "eval", "step": 100}\n'
    (other / "log.jsonl").write_text(earlier)
    with caplog.at_level(logging.WARNING):
        Trainer(quick_config(tmp_path, "b", steps=6, eval_every=2), resume=tmp_path / "a", show_progress=False).run()
    assert (other / "log.jsonl").read_text().startswith(earlier), "records of another run are not ours to drop"
    assert "already holds a run's log" in caplog.text


def test_resume_refuses_a_directory_without_trainer_state(tmp_path):
    Trainer(quick_config(tmp_path, "run", steps=2, eval_every=2), show_progress=False).run()
    for name in ("trainer_state.json", "trainer_state.safetensors"):
        assert (tmp_path / "run" / "last" / name).is_file()
    (tmp_path / "run" / "last" / "trainer_state.json").unlink()
    with pytest.raises(ValueError, match="not a resumable checkpoint"):
        Trainer(quick_config(tmp_path, "run", steps=4), resume=tmp_path / "run", show_progress=False)


# --- stopping ------------------------------------------------------------------------------------

def test_cancel_stops_after_the_current_update_and_saves_last(tmp_path):
    cancel = threading.Event()
    seen = []

    def on_step(metrics):
        seen.append(metrics["step"])
        if metrics["step"] == 5:
            cancel.set()

    config = quick_config(tmp_path, "run", steps=1000, eval_every=1000)
    final = Trainer(config, on_step=on_step, cancel=cancel, show_progress=False).run()
    assert seen == [1, 2, 3, 4, 5]
    assert final["stopped_by"] == "cancel" and final["step"] == 5
    state = decode_state(tmp_path / "run" / "last")
    assert state["step"] == 5
    assert load_checkpoint(tmp_path / "run" / "last", device="cpu").info["step"] == 5


def test_a_nan_loss_stops_training_with_a_clear_error(tmp_path, monkeypatch):
    real_loss = training_loop.batch_loss

    def poisoned(*args, **kwargs):
        loss = real_loss(*args, **kwargs)
        return loss * float("nan") if poisoned.calls >= 2 else loss

    poisoned.calls = 0

    def count(metrics):
        poisoned.calls += 1

    monkeypatch.setattr(training_loop, "batch_loss", poisoned)
    trainer = Trainer(quick_config(tmp_path, "run", steps=10), on_step=count, show_progress=False)
    with pytest.raises(FloatingPointError, match=r"the loss became nan at update 3; lower the learning rate"):
        trainer.run()
    assert trainer.step == 2


# --- schedules -----------------------------------------------------------------------------------

def schedule(name: str, steps: int = 1000, warmup: int = 100) -> list[float]:
    config = TrainConfig(schedule=name, lr=2.0, steps=steps, warmup_steps=warmup)
    return [learning_rate(config, step) for step in range(1, steps + 1)]


@pytest.mark.parametrize("name", ["noam", "cosine", "linear", "constant"])
def test_every_schedule_warms_up_linearly_to_the_peak(name):
    rates = schedule(name)
    assert rates[0] == pytest.approx(2.0 / 100)
    assert rates[49] == pytest.approx(1.0)
    assert rates[99] == pytest.approx(2.0) and max(rates) == pytest.approx(2.0)


def test_noam_peaks_at_warmup_then_decays_with_the_inverse_square_root():
    rates = schedule("noam")
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 100
    for step in (100, 400, 900):
        assert rates[step - 1] == pytest.approx(2.0 * math.sqrt(100 / step))
    assert rates[399] == pytest.approx(rates[99] / 2)


def test_cosine_decays_almost_to_zero_at_the_last_step():
    rates = schedule("cosine")
    assert rates[549] == pytest.approx(1.0, abs=0.01)  # halfway through the decay
    assert 0 < rates[-1] < 1e-4, "the last update still learns a little"
    assert all(a >= b for a, b in zip(rates[99:], rates[100:]))


def test_linear_decays_almost_to_zero_at_the_last_step():
    rates = schedule("linear")
    assert rates[549] == pytest.approx(1.0, abs=0.01)
    assert 0 < rates[-1] <= rates[-2] / 2
    diffs = [a - b for a, b in zip(rates[100:], rates[101:])]
    assert all(d == pytest.approx(diffs[0]) for d in diffs)


def test_constant_schedule_stays_at_the_peak():
    assert set(schedule("constant")[99:]) == {2.0}


@pytest.mark.parametrize("name", ["cosine", "linear"])
def test_a_decaying_schedule_ends_with_the_time_limit_when_that_comes_before_the_updates(name):
    config = TrainConfig(schedule=name, lr=2.0, steps=10_000, warmup_steps=100, max_minutes=1.0)
    # Warm-up ended 6 s in; at 33 s half the remaining time is gone, though only 2% of the updates are.
    halfway = learning_rate(config, 300, elapsed_s=33.0, warmup_end_s=6.0)
    assert halfway == pytest.approx(1.0, abs=0.01)
    assert 0 < learning_rate(config, 900, elapsed_s=59.9, warmup_end_s=6.0) < 0.01, "about to stop: almost 0"
    assert learning_rate(config, 50, elapsed_s=59.0) == pytest.approx(1.0), "warm-up is counted in updates"
    by_updates = learning_rate(config, 9_000, elapsed_s=10.0, warmup_end_s=6.0)
    assert by_updates == learning_rate(TrainConfig(schedule=name, lr=2.0, steps=10_000, warmup_steps=100), 9_000), \
        "whichever budget runs out first leads"
    assert learning_rate(TrainConfig(schedule="noam", lr=2.0, warmup_steps=100, max_minutes=1.0), 400,
                         elapsed_s=59.0, warmup_end_s=1.0) == pytest.approx(1.0), "noam has no end to reach"


def test_a_run_with_a_time_limit_spends_its_last_updates_at_a_learning_rate_near_zero(tmp_path):
    rates = []
    config = quick_config(tmp_path, "clock", steps=100_000, eval_every=100_000, warmup_steps=5, lr=1e-3,
                          max_minutes=0.1, eval_sentences=5)
    final = Trainer(config, show_progress=False, on_step=lambda metrics: rates.append(metrics["lr"])).run()
    assert final["stopped_by"] == "time" and len(rates) > 10
    # By its 100,000 updates the schedule would still be at its peak; by the clock it falls to near 0 as the
    # time runs out (the last update starts a little before the end, later the busier the machine).
    assert max(rates) == pytest.approx(1e-3) and rates[-1] < 0.5 * max(rates), "the schedule ends with the clock"
    assert all(a >= b for a, b in zip(rates[5:], rates[6:]))


def test_a_resumed_run_continues_the_clock_its_time_limit_and_schedule_read(tmp_path):
    interrupt = threading.Event()
    config = quick_config(tmp_path, "run", steps=100_000, eval_every=100_000, warmup_steps=3, max_minutes=5)
    Trainer(config, show_progress=False, cancel=interrupt,
            on_step=lambda metrics: metrics["step"] == 10 and interrupt.set()).run()
    saved = decode_state(tmp_path / "run" / "last")
    assert saved["elapsed_s"] > 0 and 0 < saved["warmup_end_s"] < saved["elapsed_s"]
    clock = []
    interrupt.clear()
    resumed = Trainer(config, resume=tmp_path / "run", show_progress=False, cancel=interrupt,
                      on_step=lambda metrics: (clock.append(metrics["elapsed_s"]), interrupt.set()))
    assert resumed.clock.warmup_end_s == saved["warmup_end_s"]
    resumed.run()
    assert clock[0] > saved["elapsed_s"], "the resumed segment's clock starts where the saved one stopped"


def test_unknown_schedule_and_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="unknown schedule 'exp'"):
        TrainConfig(schedule="exp").validate()
    with pytest.raises(ValueError, match="must be positive"):
        TrainConfig(steps=0).validate()


# --- loss ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_the_training_loss_is_pytorchs_label_smoothed_cross_entropy_in_value_and_gradient(smoothing):
    generator = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(2, 7, 50, generator=generator)).requires_grad_()
    labels = torch.randint(4, 50, (2, 7), generator=generator)
    labels[0, 5:] = labels[1, 2:] = 0  # padding, which counts for nothing
    ours = token_loss(logits, labels, smoothing)
    (ours_grad,) = torch.autograd.grad(3.0 * ours, logits)
    theirs = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), labels.reshape(-1), ignore_index=0,
                                               label_smoothing=smoothing, reduction="sum")
    (their_grad,) = torch.autograd.grad(3.0 * theirs, logits)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(ours_grad, their_grad, rtol=1e-5, atol=1e-6)
    assert ours_grad[0, 5:].abs().max() == 0 and ours_grad[1, 2:].abs().max() == 0


# --- metrics -------------------------------------------------------------------------------------

def test_bleu_and_chrf_are_sacrebleus():
    hypotheses = ["A man is riding a bicycle down the street.", "Two dogs play in the snow.",
                  "The girl eats an apple"]
    references = ["A man rides a bike down the street.", "Two dogs are playing in the snow.",
                  "A girl is eating an apple."]
    scores = corpus_scores(hypotheses, references)
    assert scores["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
    assert scores["chrf"] == round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)
    assert 0 < scores["bleu"] < 100
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert corpus_scores(references, references)["bleu"] == 100.0
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        corpus_scores(hypotheses[:2], references)


# --- command line and DDP ------------------------------------------------------------------------

def test_cli_reports_bad_data_in_one_line_with_exit_code_2_and_no_traceback(tmp_path, capsys):
    code = train_cli.main(["--data", "no-such-corpus.tsv", "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 2
    assert capsys.readouterr().err == ("error [data.unknown_source]: --data must be copy, reverse, sort, multi30k or "
                                       "an existing .tsv file; 'no-such-corpus.tsv' is none of these.\n")
    assert not (tmp_path / "run").exists()


def test_cli_reports_a_malformed_tsv_with_exit_code_2(tmp_path, capsys):
    path = tmp_path / "few.tsv"
    path.write_text("one\teins\ntwo\tzwei\n")
    assert train_cli.main(["--data", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert capsys.readouterr().err == ("error [data.too_few_pairs]: few.tsv has only 2 usable pairs; at least 20 "
                                       "are needed\n")
    path.write_text("one\teins\ntwo zwei\n")
    assert train_cli.main(["--data", str(path), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "error [data.too_few_pairs_one_skipped_one_row]: few.tsv has only 1 usable pair; at least 20 are needed (1 "
        "row skipped, first few.tsv line 2: no tab between source and target)\n")


def test_averaging_the_last_checkpoints_averages_their_weights_and_records_the_last_step(tmp_path):
    config = quick_config(tmp_path, "averaged", steps=40, eval_every=10, keep_checkpoints=5, average_last=3)
    Trainer(config, show_progress=False).run()
    out = tmp_path / "averaged"
    averaged = load_checkpoint(out / "averaged", device="cpu")
    assert averaged.info["step"] == 40 and averaged.info["averaged_from"] == [f"step-0000{s}" for s in (20, 30, 40)]
    parts = [weights(out, f"step-0000{s}") for s in (20, 30, 40)]
    for name, tensor in averaged.model.state_dict().items():
        assert torch.allclose(tensor, sum(part[name] for part in parts) / 3, atol=1e-6), name


def test_a_resumed_runs_training_time_adds_up_its_segments():
    from transformer.export import training_minutes

    steps = [{"elapsed_s": 30.0}, {"elapsed_s": 60.0}, {"elapsed_s": 5.0}, {"elapsed_s": 90.0}]
    assert training_minutes(steps) == pytest.approx(2.5)
    assert training_minutes([]) == 0.0


def test_ctrl_c_stops_the_command_after_its_update_and_saves_a_run_that_resumes(tmp_path, caplog):
    out = tmp_path / "interrupted"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "transformer.train", "--data", "copy", "--steps", "100000",
                                "--eval-every", "100000", "--eval-sentences", "10", "--batch-tokens", "400",
                                "--max-minutes", "3", "--out", str(out), "--no-progress"],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # wait for the first updates, logged every 50
        if (out / "log.jsonl").is_file() or process.poll() is not None:
            break
        threading.Event().wait(0.1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr and "press Ctrl-C again to stop at once" in stderr
    final = json.loads(stdout.strip().splitlines()[-1])
    assert final["stopped_by"] == "cancel"
    assert decode_state(out / "last")["step"] == final["step"]

    with caplog.at_level(logging.WARNING):
        assert train_cli.main(["--resume", str(out), "--steps", str(final["step"] + 2), "--lr", "0.5",
                           "--no-progress"]) == 0
    assert "ignored: --lr" in caplog.text
    assert f"changing them from 100000 to {final['step'] + 2} reshapes it" in caplog.text


def test_a_run_resumed_with_a_time_limit_it_did_not_have_ends_its_schedule_with_it(tmp_path):
    interrupt = threading.Event()
    config = quick_config(tmp_path, "run", steps=100_000, eval_every=100_000, warmup_steps=3, lr=1e-3)
    Trainer(config, show_progress=False, cancel=interrupt,
            on_step=lambda metrics: metrics["step"] == 10 and interrupt.set()).run()
    saved = decode_state(tmp_path / "run" / "last")
    rates = []
    limited = dataclasses.replace(config, max_minutes=saved["elapsed_s"] / 60 + 0.15)
    final = Trainer(limited, resume=tmp_path / "run", show_progress=False,
                    on_step=lambda metrics: rates.append(metrics["lr"])).run()
    assert final["stopped_by"] == "time"
    # Near the peak at first (a busy machine may take a few of the 9 s added to resume), near zero at the end.
    assert rates[0] > 0.75e-3 and rates[-1] < 0.1e-3, "from the peak down with the time that was added"


def test_cli_plans_a_run_for_its_time_limit_and_keeps_what_was_set_by_hand(tmp_path, capsys):
    out = tmp_path / "planned"
    assert train_cli.main(["--data", "copy", "--preset", "auto", "--max-minutes", "0.03", "--lr", "0.002",
                       "--eval-sentences", "5", "--out", str(out), "--no-progress"]) == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["stopped_by"] == "time"
    recorded = load_checkpoint(out / "last", device="cpu").info["training"]
    assert recorded["plan"] == "auto" and recorded["preset"] == "tiny" and recorded["lr"] == 0.002
    assert recorded["max_minutes"] == 0.03 and recorded["steps"] >= 100_000, "the clock, not a count, ends it"


def test_a_run_planned_for_text_measures_this_machine_and_counts_the_time_in_its_budget(tmp_path):
    config = TrainConfig(data=str(small_parallel_tsv(tmp_path / "pairs.tsv")), preset="auto", max_minutes=0.1,
                         eval_sentences=5, out_dir=str(tmp_path / "run"))
    clock = []
    trainer = Trainer(config, show_progress=False, on_step=lambda metrics: clock.append(metrics["elapsed_s"]))
    assert trainer.clock.measuring_s > 0, "measuring is on the run's clock"
    assert trainer.clock.elapsed_s() == trainer.clock.measuring_s
    recorded = trainer.info()["budget_plan"]
    speeds = {name: Speed(**fields) for name, fields in recorded["measured"].items()}
    assert LADDER[0].name in speeds
    again = plan_for_work(0.1, speeds, CorpusShape.of(trainer.data.train).epoch_tokens, pairs=80,
                          spent_s=trainer.clock.measuring_s)
    assert recorded == dataclasses.asdict(again), "the plan is the planner's for the speeds it measured"
    assert trainer.config.model["d_model"] == again.model["d_model"] and trainer.config.lr == again.lr
    assert again.vocab_size == 200, "80 pairs bound the vocabulary"
    assert trainer.run()["stopped_by"] == "time"
    assert clock[0] > trainer.clock.measuring_s and clock[-2] <= 6, "updates from the end of measuring to the 6 s limit"


def test_cli_asks_for_a_time_limit_before_planning_for_one(capsys):
    assert train_cli.main(["--data", "copy", "--preset", "auto"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error [usage]: ") and "give it a time limit (--max-minutes)" in said
    assert len(said.splitlines()) == 1


def test_cli_rejects_an_unknown_preset_as_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--preset", "huge"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_a_run_trains_on_the_device_its_caller_names_else_on_cuda_when_there_is_one(monkeypatch):
    from transformer.train.processes import Processes
    monkeypatch.setenv("EXPLORER_DEVICE", "meta")  # the app's own setting: the library does not read it
    assert Processes.join().device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert Processes.join("cpu").device == torch.device("cpu")
    args = train_cli.build_parser().parse_args(["--device", "cpu"])
    assert train_cli.config_from_args(args).device == "cpu"


def test_ddp_with_two_processes_trains_in_lockstep(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
               "-m", "transformer.train", "--data", "copy", "--steps", "6", "--eval-every", "6",
               "--max-minutes", "30",  # a schedule that reads the clock: the processes must agree on it
               "--batch-tokens", "400", "--eval-sentences", "20", "--out", str(out), "--no-progress"]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    final = json.loads(result.stdout.strip().splitlines()[-1])
    assert final["step"] == 6 and final["stopped_by"] == "steps"
    assert final["ranks_identical"] is True
    assert decode_state(out / "last")["step"] == 6
    assert load_checkpoint(out / "last", device="cpu").info["step"] == 6
    assert len((out / "command.txt").read_text().splitlines()) == 1  # written by rank 0 only
