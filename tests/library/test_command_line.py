"""Every ``python -m transformer.X`` behaves alike: help on every flag with its default, a number out of range
refused as it is parsed, every mistake one line ``error [CODE]: ...`` with status 2, a failure at run time one line
with status 1 (its traceback only with ``--debug``), the old flag names still working with a notice, and the
model's own published decoding unless told otherwise."""

import argparse
import dataclasses
import importlib

import pytest

from helpers import run_command
from transformer import arguments
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint

COMMANDS = ("translate", "evaluate", "export", "hub", "inside_head", "attribute", "contributions", "patch", "corpus",
            "align", "lens", "train")
MODULES = {name: f"transformer.{name}" if name != "train" else "transformer.train.cli" for name in COMMANDS}
# What each command needs besides the flag under test, so that only that flag can be wrong.
NEEDED = {"translate": ["a dog"], "evaluate": [], "export": ["nowhere", "elsewhere"], "hub": ["x/y", "--out", "z"],
          "inside_head": ["a dog"], "attribute": ["a dog"], "contributions": ["a dog"],
          "patch": ["a dog", "a cat"], "corpus": ["--input", "x.txt", "--out", "y"], "align": ["--text", "x"],
          "lens": ["--input", "x.txt"], "train": []}
# A value each of the shared number types refuses, and how it says so.
REFUSED = {arguments.positive_int: ("0", "expected a whole number of at least 1, got '0'"),
           arguments.whole_number: ("-1", "expected a whole number from 0, got '-1'"),
           arguments.positive_number: ("0", "expected a number above 0, got '0'"),
           arguments.non_negative_number: ("-0.5", "expected a number from 0, got '-0.5'"),
           arguments.share: ("1", "expected a number from 0 to below 1, got '1'")}


def parser_of(command: str, monkeypatch) -> arguments.CommandLine:
    """The parser a command builds, caught as it is handed to ``arguments.run``."""
    caught = []
    monkeypatch.setattr(arguments, "run", lambda parser, command, argv: caught.append(parser) or 0)
    importlib.import_module(MODULES[command]).main([])
    return caught[0]


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings and action.dest != "help"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_has_help_that_says_its_default(command, monkeypatch):
    parser = parser_of(command, monkeypatch)
    assert parser.prog == f"python -m transformer.{command}"
    formatter = parser.formatter_class(parser.prog)
    for action in flags(parser):
        said = formatter._get_help_string(action)
        assert said, (command, action.option_strings)
        if not action.required and not isinstance(action, (argparse._StoreTrueAction, argparse._AppendAction)):
            assert "default" in said, (command, action.option_strings, said)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_printed_and_ends_with_status_0(command):
    result = run_command(MODULES[command], "--help")
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: python -m transformer.{command}")
    assert "--debug" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_a_number_out_of_range_is_one_line_naming_the_flag_and_the_value(command, monkeypatch):
    numbers = [action for action in flags(parser_of(command, monkeypatch)) if action.type in REFUSED]
    monkeypatch.undo()
    assert numbers or command in ("hub",), command
    for action in numbers:
        value, reason = REFUSED[action.type]
        flag = action.option_strings[0]
        result = run_command(MODULES[command], *NEEDED[command], flag, value)
        assert (result.returncode, result.stdout) == (2, ""), (command, flag)
        assert result.stderr == (f"error [usage]: argument {flag}: {reason} (see python -m transformer.{command} "
                                 "--help)\n"), (command, flag)


def test_every_device_flag_is_checked_as_it_is_parsed(monkeypatch):
    devices = {command: action for command in COMMANDS for action in flags(parser_of(command, monkeypatch))
               if action.dest == "device"}
    monkeypatch.undo()
    assert {"translate", "train"} <= set(devices)
    assert {command: action.type for command, action in devices.items()
            if action.type not in (arguments.device, arguments.device_name)} == {}
    result = run_command(MODULES["train"], "--device", "banana")
    assert (result.returncode, result.stderr) == (2, "error [usage]: argument --device: unknown device 'banana'; use "
                                                     "cpu or cuda (see python -m transformer.train --help)\n")


@pytest.mark.parametrize("command", [name for name in COMMANDS if name not in ("hub", "export", "train")])
def test_a_checkpoint_that_is_not_there_is_one_line_with_its_code(command, tmp_path):
    missing = tmp_path / "no-model"
    result = run_command(MODULES[command], *NEEDED[command], "--checkpoint", str(missing))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error [checkpoint.not_found]: checkpoint directory not found: {missing}\n"


def test_export_and_train_say_a_missing_model_or_run_in_one_line_and_keep_what_is_there(tmp_path):
    destination = tmp_path / "kept"
    destination.mkdir()
    (destination / "mine.txt").write_text("mine", encoding="utf-8")
    exported = run_command("transformer.export", str(tmp_path / "no-model"), str(destination))
    assert exported.returncode == 2
    assert exported.stderr == (f"error [checkpoint.not_found]: checkpoint directory not found: "
                               f"{tmp_path / 'no-model'}; {destination} was left as it was\n")
    assert (destination / "mine.txt").read_text(encoding="utf-8") == "mine"
    resumed = run_command("transformer.train.cli", "--resume", str(tmp_path / "no-run"))
    assert resumed.returncode == 2
    assert resumed.stderr == (f"error [checkpoint.no_config]: not a checkpoint: {tmp_path / 'no-run' / 'last'} has "
                              "no config.json\n")


def failing(args):
    raise RuntimeError("the disk\nis full")


def test_a_failure_at_run_time_is_one_line_with_status_1_and_its_traceback_only_with_debug(capsys):
    parser = arguments.CommandLine("translate", "A command that fails.")
    assert arguments.run(parser, failing, []) == 1
    assert capsys.readouterr().err == "error [failed]: RuntimeError: the disk is full\n"
    assert arguments.run(parser, failing, ["--debug"]) == 1
    said = capsys.readouterr().err
    assert said.startswith("Traceback (most recent call last):")
    assert said.endswith("error [failed]: RuntimeError: the disk is full\n")


def test_a_mistake_in_the_library_says_its_code_and_a_stop_by_ctrl_c_is_status_130(capsys):
    from transformer.errors import InputError
    parser = arguments.CommandLine("translate", None)

    def refused(args):
        raise InputError(code="corpus.empty")

    def stopped(args):
        raise KeyboardInterrupt

    assert arguments.run(parser, refused, []) == 2
    assert capsys.readouterr().err == "error [corpus.empty]: There are no sentences to run.\n"
    assert arguments.run(parser, stopped, []) == 130
    assert capsys.readouterr().err == "error [interrupted]: stopped\n"


def test_a_named_failure_at_run_time_keeps_its_code_with_status_1(capsys):
    from transformer.errors import AT_RUN_TIME, SENTENCES
    from transformer.files.hub import HubError
    parser = arguments.CommandLine("hub", None)

    def unreachable(args):
        raise HubError(code="hub.offline", repo_id="Helsinki-NLP/opus-mt-en-de")

    assert AT_RUN_TIME <= set(SENTENCES), "each names a problem the library says"
    assert arguments.run(parser, unreachable, []) == 1
    assert capsys.readouterr().err == (
        "error [hub.offline]: the Hub cannot be reached from this server, and Helsinki-NLP/opus-mt-en-de was never "
        "downloaded here.\n")


@pytest.mark.parametrize(("command", "old", "new", "dest", "value"), [
    ("translate", "--max-tokens", "--max-length", "max_length", 7),
    ("evaluate", "--max-tokens", "--batch-tokens", "batch_tokens", 700),
    ("evaluate", "--src-lang", "--source-language", "source_language", "fr"),
    ("train", "--tgt-lang", "--target-language", "tgt_lang", "fr"),
    ("train", "--max-tokens", "--batch-tokens", "max_tokens", 700),
])
def test_an_old_flag_name_still_works_for_one_release_with_a_notice(command, old, new, dest, value, monkeypatch,
                                                                     capsys):
    parser = parser_of(command, monkeypatch)
    parsed = parser.parse_args([*NEEDED[command], f"{old}={value}"])
    assert getattr(parsed, dest) == value
    assert capsys.readouterr().err == f"notice: {old} is now {new}; the old name goes in the next release\n"


def test_an_old_name_is_renamed_only_where_the_command_has_the_new_one():
    result = run_command("transformer.hub", "x/y", "--out", "z", "--src-lang", "en")
    assert result.returncode == 2 and "notice" not in result.stderr
    assert "unrecognized arguments: --src-lang en" in result.stderr


def test_an_old_name_after_the_end_of_the_options_is_a_sentence_not_a_flag(monkeypatch, capsys):
    parsed = parser_of("translate", monkeypatch).parse_args(["--", "--max-tokens"])
    assert parsed.text == ["--max-tokens"] and capsys.readouterr().err == ""


def test_decoding_is_the_models_published_search_unless_told_otherwise():
    bundled = load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")
    published = dataclasses.replace(bundled, info={**bundled.info, "search": {"beam_size": 4, "length_penalty": 0.6}},
                                    metrics={})  # a converted model: no scores of its own, its published search
    unset = argparse.Namespace(beam=None, length_penalty=None)
    told = argparse.Namespace(beam=2, length_penalty=1.2)
    assert (arguments.beam_of(bundled, unset), arguments.length_penalty_of(bundled, unset)) == (5, 1.0)
    assert (arguments.beam_of(published, unset), arguments.length_penalty_of(published, unset)) == (4, 0.6)
    assert (arguments.beam_of(published, told), arguments.length_penalty_of(published, told)) == (2, 1.2)
