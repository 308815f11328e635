"""The command-line tools, run as a user runs them: in this process as ``python -m`` runs them (``run_command``), and
one of them in a new Python, through the real entry point."""

import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import torch

from helpers import run_command

ROOT = Path(__file__).resolve().parents[2]
REVERSE = str(ROOT / "checkpoints" / "reverse-tiny")


def run(module, *args, stdin=""):
    return run_command(module, *args, stdin=stdin)


def test_translate_prints_one_line_per_input_line():
    result = run("transformer.translate", "--checkpoint", REVERSE, stdin="1 2 3\n4 5 6 7\n\n9 8 7\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["3 2 1", "7 6 5 4", "", "7 8 9"]


def test_translate_keeps_blank_lines_blank_and_reads_past_bytes_that_are_not_utf8():
    result = subprocess.run([sys.executable, "-m", "transformer.translate", "--beam", "1"], cwd=ROOT,
                            input=b"A dog runs.\n\n  \nA dog\xff runs.\n", capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 4 and lines[1] == lines[2] == "", "nothing is made up for an empty line"
    assert "Hund" in lines[0] and "Hund" in lines[3]
    as_json = run("transformer.translate", "--json", "--beam", "1", stdin="A dog runs.\n\n")
    blank = json.loads(as_json.stdout.splitlines()[1])
    assert blank["translation"] == "" and blank["source_tokens"] == [] and blank["attention"]["cross"] == []


def test_command_line_mistakes_are_one_line_errors_with_exit_code_2(tmp_path):
    (tmp_path / "src.txt").write_text("1 2\n3 4\n5 6\n")
    (tmp_path / "ref.txt").write_text("2 1\n\n6 5\n")
    mistakes = {("transformer.evaluate", "--checkpoint", REVERSE, "--source", str(tmp_path / "src.txt"),
                 "--reference", str(tmp_path / "ref.txt")): "empty source or reference, first src.txt line 2",
                ("transformer.evaluate", "--checkpoint", REVERSE, "--source", str(tmp_path / "missing.txt"),
                 "--reference", str(tmp_path / "ref.txt")): "missing.txt does not exist",
                ("transformer.evaluate", "--limit", "0"): "expected a whole number of at least 1, got '0'",
                ("transformer.translate", "--beam", "0", "1 2"): "expected a whole number of at least 1, got '0'",
                ("transformer.translate", "--checkpoint", str(ROOT / "README.md"), "1 2"): "is a file; a checkpoint",
                ("transformer.translate", "--checkpoint", str(tmp_path / "model.pt"), "1 2"): "is a pickle file"}
    (tmp_path / "model.pt").write_bytes(b"\x80\x04")
    if not torch.cuda.is_available():
        mistakes[("transformer.translate", "--device", "cuda", "1 2")] = "no CUDA GPU that PyTorch can use"
    for command, message in mistakes.items():
        result = run(*command)
        assert result.returncode == 2 and message in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr


def test_translate_says_when_a_line_is_longer_than_the_models_positions():
    result = run("transformer.translate", "--checkpoint", REVERSE, "--beam", "1", " ".join(["7"] * 300))
    assert result.returncode == 0, result.stderr
    assert "input 1 has 301 pieces; only its first 127 are translated" in result.stderr


def test_translate_json_contract():
    result = run("transformer.translate", "--checkpoint", REVERSE, "--json", "1 2 3", "5 5 6")
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["translation"] for o in objects] == ["3 2 1", "6 5 5"]
    first = objects[0]
    assert first["source"] == "1 2 3"
    assert first["source_tokens"] == ["▁1", "▁2", "▁3", "</s>"]
    assert first["target_tokens"] == ["<s>", "▁3", "▁2", "▁1"]
    layers, heads = 2, 4
    for kind, (queries, keys) in {"encoder": (4, 4), "decoder": (4, 4), "cross": (4, 4)}.items():
        weights = first["attention"][kind]
        assert len(weights) == layers and len(weights[0]) == heads
        assert len(weights[0][0]) == queries and len(weights[0][0][0]) == keys
        assert abs(sum(weights[1][2][3]) - 1) < 1e-4


def test_translate_reports_a_missing_checkpoint_in_one_line():
    result = run("transformer.translate", "--checkpoint", "/nonexistent/model", "hello")
    assert result.returncode == 2
    assert "checkpoint directory not found" in result.stderr and "Traceback" not in result.stderr


def test_evaluate_scores_a_pair_of_files_and_prints_json_last(tmp_path):
    (tmp_path / "src.txt").write_text("1 2 3\n4 5 6\n7 8 9 0\n")
    (tmp_path / "ref.txt").write_text("3 2 1\n6 5 4\n0 9 8 7\n")
    result = run("transformer.evaluate", "--checkpoint", REVERSE, "--source", str(tmp_path / "src.txt"),
                 "--reference", str(tmp_path / "ref.txt"), "--beam", "3", "--json",
                 "--output", str(tmp_path / "hyp.txt"))
    assert result.returncode == 0, result.stderr
    last = json.loads(result.stdout.splitlines()[-1])
    assert {"bleu", "chrf", "signature", "sentences", "seconds"} <= set(last)
    assert last["bleu"] == 100.0 and last["sentences"] == 3
    assert "tok:13a" in last["signature"] and "case:mixed" in last["signature"]
    assert (tmp_path / "hyp.txt").read_text().splitlines() == ["3 2 1", "6 5 4", "0 9 8 7"]
    assert last["bf16"] is False
    plain = run("transformer.evaluate", "--checkpoint", REVERSE, "--source", str(tmp_path / "src.txt"),
                "--reference", str(tmp_path / "ref.txt"), "--output", str(tmp_path / "hyp.txt"))
    assert plain.returncode == 0 and plain.stdout == "" and "BLEU 100.00" in plain.stderr, "JSON only when asked"


def test_export_writes_a_complete_checkpoint_scored_as_stored(tmp_path):
    destination = tmp_path / "reverse-tiny"  # the bundled model's name: nothing of the repository may change
    (tmp_path / "log.jsonl").write_text("\n".join(json.dumps(record) for record in (
        {"event": "step", "step": 1, "loss": 3.0, "lr": 1e-4, "elapsed_s": 1.0},
        {"event": "eval", "step": 2, "epoch": 0, "val_loss": 2.0, "bleu": 10.0, "chrf": 20.0, "exact_match": 0.1}))
        + '\n{"event": "step", "st')  # a run killed mid-write still exports
    repository = lambda: {p: p.read_bytes() for folder in ("assets", "checkpoints")  # noqa: E731
                          for p in (ROOT / folder).rglob("*") if p.is_file()}
    repository_before = repository()
    result = run("transformer.export", REVERSE, str(destination), "--run", str(tmp_path), "--beam", "2",
                 "--command", "python -m transformer.train --data reverse")
    assert result.returncode == 0, result.stderr
    assert {"config.json", "model.safetensors", "tokenizer.model", "README.md", "metrics.json"} <= {
        p.name for p in destination.iterdir()}
    curves = ElementTree.parse(destination / "training.svg").getroot()  # drawn without a browser or Plotly
    assert len(curves.findall("{http://www.w3.org/2000/svg}polyline")) == 5  # losses, lr, BLEU, exact match
    assert "![training curves](training.svg)" in (destination / "README.md").read_text()
    assert repository() == repository_before
    metrics = json.loads((destination / "metrics.json").read_text())
    assert metrics["stored_dtype"] == "float16"
    assert metrics["scores"]["fresh reverse examples:greedy"]["exact_match"] > 0.9
    assert "python -m transformer.train --data reverse" in (destination / "README.md").read_text()
    translated = run("transformer.translate", "--checkpoint", str(destination), "1 2 3")
    assert translated.stdout.strip() == "3 2 1", translated.stderr


def test_a_failed_export_leaves_the_destination_as_it_was(tmp_path):
    destination = tmp_path / "bundled"
    shutil.copytree(REVERSE, destination)
    before = {p.name: p.read_bytes() for p in destination.iterdir()}
    result = run("transformer.export", str(ROOT / "checkpoints" / "multi30k-en-de"), str(destination),
                 "--run", str(tmp_path), "--data-dir", str(tmp_path / "no-such-directory"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "left as it was" in result.stderr
    assert "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in destination.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundled"]


def test_translate_and_evaluate_decode_with_the_length_penalty_the_checkpoint_was_scored_with(tmp_path):
    scored = tmp_path / "scored"
    shutil.copytree(ROOT / "checkpoints" / "multi30k-en-de", scored)
    metrics = json.loads((scored / "metrics.json").read_text())
    (scored / "metrics.json").write_text(json.dumps({**metrics, "length_penalty": 3.0}))
    sentence = "A group of people stand in front of an igloo."  # alpha 3 finds a longer hypothesis than 0.6-1.4
    default = run("transformer.translate", "--checkpoint", str(scored), sentence)
    assert default.returncode == 0, default.stderr
    assert default.stdout == run("transformer.translate", "--checkpoint", str(scored), "--length-penalty", "3",
                                 sentence).stdout
    assert default.stdout != run("transformer.translate", "--checkpoint", str(scored), "--length-penalty", "1",
                                 sentence).stdout
    (tmp_path / "src.txt").write_text(sentence + "\n")
    (tmp_path / "ref.txt").write_text("Eine Gruppe von Menschen steht vor einem Iglu.\n")
    for flag, alpha in (([], 3.0), (["--length-penalty", "1"], 1.0)):
        result = run("transformer.evaluate", "--checkpoint", str(scored), "--source", str(tmp_path / "src.txt"),
                     "--reference", str(tmp_path / "ref.txt"), "--json", "--output", str(tmp_path / "hyp.txt"), *flag)
        assert json.loads(result.stdout.splitlines()[-1])["length_penalty"] == alpha, result.stderr
