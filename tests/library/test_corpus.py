"""A corpus run: each head's figures over many sentences equal a brute-force count over the same attention maps;
each sentence's source share is the contributions command's; the run is saved in chunks that an interrupted or
repeated run takes up again, and a folder holding another run is never overwritten; and its command line."""

import json
import math
import random

import pytest
import torch

from helpers import run_command
from transformer.data import DataError, corpus_sentences
from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import contributions, corpus_run
from transformer.inside.corpus_run import CHUNK, Decoding, open_run, run_corpus
from transformer.inside.head_roles import role_of, role_measure

REVERSE = REPOSITORY_CHECKPOINTS / "reverse-tiny"
SENTENCES = [" ".join(random.Random(seed).choice("0123456789") for _ in range(3 + seed % 6)) for seed in range(40)]


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REVERSE, device="cpu")


@pytest.fixture(scope="module")
def reverse_run(reverse, tmp_path_factory):
    folder = tmp_path_factory.mktemp("reverse-run")
    return run_corpus(reverse, SENTENCES, None, folder, Decoding.default(reverse))


# --- each head's figures, counted by brute force -----------------------------------------------------------------

def argmax(values):
    return max(range(len(values)), key=lambda i: (values[i], -i))


def entropy(row):
    return -sum(w * math.log(w) for w in row if w > 0)


def divergence(p, q):
    middle = [(a + b) / 2 for a, b in zip(p, q)]
    return sum(a * math.log(a / m) for a, m in zip(p, middle) if a > 0) / 2 + \
        sum(b * math.log(b / m) for b, m in zip(q, middle) if b > 0) / 2


def brute_force(model, translations):
    """Each head's per-sentence counts and the corpus's mean divergence between heads, in plain Python loops over
    the maps; the alignment each word piece is held to comes from ALTI+ of the translation alone."""
    per_sentence, unlike, rows_of = {}, {}, {}
    for number, translation in enumerate(translations):
        keys = len(translation.source_ids)
        total = contributions.contributions(model, translation).source[-1].tolist()
        words = list(range(keys - 1))  # no language token: every source piece but </s>
        alignable = range(translation.forced_steps, translation.num_steps - translation.ended)
        aligned_to = {row: words[argmax([total[row][k] for k in words])] for row in alignable}
        maps = {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
                "cross": translation.cross_attention}
        for kind, attention in maps.items():
            attention = attention.double().tolist()
            special = {keys - 1} if kind != "decoder" else {0}
            heads = [(layer, head) for layer in range(len(attention)) for head in range(len(attention[0]))]
            for layer, head in heads:
                counts = per_sentence.setdefault((kind, layer, head), [])
                sums = dict.fromkeys(("rows", "previous", "same", "next", "special", "entropy", "spread",
                                      "confidence", "aligned", "alignable"), 0.0)
                for i, row in enumerate(attention[layer][head]):
                    seen = i + 1 if kind == "decoder" else len(row)
                    best = argmax(row)
                    sums["rows"] += 1
                    sums["previous"] += best == i - 1
                    sums["same"] += best == i
                    sums["next"] += best == i + 1
                    sums["special"] += sum(row[k] for k in special)
                    sums["entropy"] += entropy(row)
                    sums["spread"] += entropy(row) / math.log(seen) if seen > 1 else 0.0
                    sums["confidence"] += max(row)
                    if kind == "cross" and i in aligned_to:
                        sums["alignable"] += 1
                        sums["aligned"] += words[argmax([row[k] for k in words])] == aligned_to[i]
                counts.append(sums)
            for a, b in ((a, b) for a in heads for b in heads):
                rows = attention[a[0]][a[1]]
                unlike[(kind, a, b)] = unlike.get((kind, a, b), 0.0) + sum(
                    divergence(p, q) for p, q in zip(rows, attention[b[0]][b[1]]))
            rows_of[kind] = rows_of.get(kind, 0) + len(attention[0][0])
    return per_sentence, {key: value / rows_of[key[0]] for key, value in unlike.items()}


def test_every_head_figure_equals_a_brute_force_count_over_the_same_maps(reverse, reverse_run):
    decoding = Decoding.default(reverse)
    translations = [t for start in range(0, len(SENTENCES), CHUNK)
                    for t in corpus_run.translated(reverse, SENTENCES[start:start + CHUNK], None, decoding)]
    per_sentence, unlike = brute_force(reverse.model, translations)
    heads = reverse_run.summary()["heads"]
    assert len(heads) == len({key for key in per_sentence})
    for shown in heads:
        kind, layer, head = shown["kind"], shown["layer"] - 1, shown["head"] - 1
        counts = per_sentence[(kind, layer, head)]
        total = {name: sum(c[name] for c in counts) for name in counts[0]}
        expected = {"confidence": total["confidence"] / total["rows"], "special": total["special"] / total["rows"],
                    "entropy": total["entropy"] / total["rows"], "spread": total["spread"] / total["rows"],
                    "previous": None if kind == "cross" else total["previous"] / total["rows"],
                    "same": None if kind == "cross" else total["same"] / total["rows"],
                    "next": total["next"] / total["rows"] if kind == "encoder" else None,
                    "aligned": total["aligned"] / total["alignable"] if kind == "cross" else None}
        for name, value in expected.items():
            assert shown[name] == (None if value is None else pytest.approx(value, abs=1e-6)), (shown, name)
        assert shown["role"] == role_of(expected)
        others = {(b[0], b[1]): value for (k, a, b), value in unlike.items() if k == kind and a == (layer, head)
                  and b != (layer, head)}
        closest = min(others, key=lambda b: (others[b], b))
        assert (shown["most_alike"]["layer"] - 1, shown["most_alike"]["head"] - 1) == closest
        assert shown["most_alike"]["divergence"] == pytest.approx(others[closest], abs=1e-6)
        measure, by = role_measure(shown["role"]), "alignable" if shown["role"] == "aligned" else "rows"
        share = [c[measure] / max(c[by], 1) for c in counts]
        assert shown["examples"] == [i + 1 for i in sorted(range(len(share)), key=lambda i: -share[i])[:3]]


@pytest.mark.parametrize(("figures", "role"), [
    ({"previous": 0.6, "same": 0.1, "next": 0.1, "aligned": None, "special": 0.9, "spread": 0.9}, "previous"),
    ({"previous": None, "same": None, "next": None, "aligned": 0.5, "special": 0.9, "spread": 0.9}, "aligned"),
    ({"previous": 0.2, "same": 0.2, "next": None, "aligned": None, "special": 0.5, "spread": 0.9}, "special"),
    ({"previous": None, "same": None, "next": None, "aligned": 0.4, "special": 0.4, "spread": 0.75}, "broad"),
    ({"previous": 0.49, "same": 0.3, "next": 0.2, "aligned": None, "special": 0.49, "spread": 0.74}, "mixed"),
])
def test_a_role_is_what_a_head_does_on_half_its_rows_positions_first(figures, role):
    assert role_of(figures) == role


# --- each sentence ------------------------------------------------------------------------------------------------

def test_a_sentences_source_share_is_the_mean_of_the_steps_the_contributions_command_lists(tmp_path):
    english_german = load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")
    sentences = ["A dog runs across the grass.", "The doctor said that she was tired.", "Two men play chess."]
    run = run_corpus(english_german, sentences, None, tmp_path / "run", Decoding.default(english_german))
    shown = {entry["index"]: entry for entry in run.summary()["least_source"]}
    for index, sentence in enumerate(sentences, start=1):
        result = run_command("transformer.contributions", sentence, "--json", "--checkpoint",
                             str(english_german.path))
        listed = json.loads(result.stdout)
        assert shown[index]["translation"] == listed["translation"]
        steps = [step["source_share"] for step in listed["steps"]]
        assert shown[index]["source_share"] == pytest.approx(sum(steps) / len(steps), abs=1e-4)
    shares = [entry["source_share"] for entry in run.summary()["least_source"]]
    assert shares == sorted(shares)


def test_forced_references_are_read_as_given_and_scored_as_the_model_sees_them(reverse, tmp_path):
    references = ["1 2 3", "9 9 9 9"]
    run = run_corpus(reverse, ["3 2 1", "1 2 3 4"], references, tmp_path / "run",
                     Decoding.default(reverse, forced=True))
    assert [sentence.translation for sentence in run.sentences] == references
    wrong = run.sentences[1]
    right = run.sentences[0]
    assert wrong.log_probability < right.log_probability
    assert all(sentence.ended for sentence in run.sentences)


def test_a_forced_reference_longer_than_the_models_positions_is_read_as_far_as_they_reach_and_not_ended(
        reverse, tmp_path):
    positions = reverse.model.config.max_len
    long = " ".join(["7"] * (positions + 10))
    run = run_corpus(reverse, ["1 2", "3 4"], [long, "2 1"], tmp_path / "run", Decoding.default(reverse, forced=True))
    cut, whole = run.sentences
    assert (cut.ended, whole.ended) == (False, True)
    assert cut.translation.split() == ["7"] * (positions - 1), "read as far as its positions reach, no end after it"
    assert whole.translation == "2 1"


# --- saved in chunks ----------------------------------------------------------------------------------------------

def summaries_alike(first, second):
    for summary in (first, second):
        summary.pop("seconds")
    assert first == second


def test_an_interrupted_run_resumes_and_ends_as_a_run_in_one_go(reverse, reverse_run, tmp_path):
    chunks_seen = []
    stopped = run_corpus(reverse, SENTENCES, None, tmp_path / "run", Decoding.default(reverse),
                         progress=lambda done, total: chunks_seen.append((done, total)),
                         should_stop=lambda: len(chunks_seen) == 1)
    assert chunks_seen == [(CHUNK, len(SENTENCES))] and not stopped.complete
    resumed = run_corpus(reverse, SENTENCES, None, tmp_path / "run", Decoding.default(reverse))
    assert resumed.complete
    summaries_alike(resumed.summary(), reverse_run.summary())
    summaries_alike(open_run(tmp_path / "run").summary(), reverse_run.summary())


def test_a_second_run_reuses_every_chunk_and_fewer_sentences_reuse_the_first(reverse, reverse_run):
    folder = reverse_run.folder
    written = {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}
    again = run_corpus(reverse, SENTENCES, None, folder, Decoding.default(reverse))
    fewer = run_corpus(reverse, SENTENCES[:CHUNK + 3], None, folder, Decoding.default(reverse))
    assert {path.name: path.stat().st_mtime_ns for path in folder.iterdir()} == written
    summaries_alike(again.summary(), reverse_run.summary())
    assert [sentence.source for sentence in fewer.sentences] == SENTENCES[:CHUNK + 3]


def test_more_sentences_extend_the_last_chunk(reverse, tmp_path):
    run_corpus(reverse, SENTENCES[:CHUNK + 3], None, tmp_path / "run", Decoding.default(reverse))
    more = run_corpus(reverse, SENTENCES, None, tmp_path / "run", Decoding.default(reverse))
    assert [sentence.source for sentence in more.sentences] == SENTENCES


@pytest.mark.parametrize(("change", "code"), [
    ("sentences", "corpus.other_sentences"), ("decoding", "corpus.other_run"), ("model", "corpus.other_run")])
def test_a_folder_holding_another_run_is_refused_and_left_as_it_is(reverse, tmp_path, change, code):
    folder = tmp_path / "run"
    run_corpus(reverse, SENTENCES[:5], None, folder, Decoding.default(reverse))
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    sentences = ["5 5 5"] + SENTENCES[1:5] if change == "sentences" else SENTENCES[:5]
    decoding = Decoding.default(reverse, beam=2) if change == "decoding" else Decoding.default(reverse)
    checkpoint = reverse
    if change == "model":
        checkpoint = load_checkpoint(REVERSE, device="cpu")
        with torch.no_grad():
            checkpoint.model.src_embed.weight[5] += 1
        checkpoint.path = None
    with pytest.raises(InputError) as refused:
        run_corpus(checkpoint, sentences, None, folder, decoding)
    assert refused.value.code == code
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_a_refusal_names_the_first_sentence_that_differs(reverse, tmp_path):
    run_corpus(reverse, SENTENCES[:5], None, tmp_path / "run", Decoding.default(reverse))
    with pytest.raises(InputError, match="holds a run of other sentences from sentence 3 on"):
        run_corpus(reverse, [*SENTENCES[:2], "5 5 5", *SENTENCES[3:5]], None, tmp_path / "run",
                   Decoding.default(reverse))


def test_a_folder_of_other_files_or_a_file_is_refused(reverse, tmp_path):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        run_corpus(reverse, SENTENCES[:2], None, tmp_path, Decoding.default(reverse))
    assert refused.value.code == "corpus.folder_not_empty"
    with pytest.raises(InputError) as refused:
        run_corpus(reverse, SENTENCES[:2], None, tmp_path / "notes.txt", Decoding.default(reverse))
    assert refused.value.code == "corpus.out_is_file"
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_the_saved_states_are_what_each_block_projected_its_queries_and_keys_from(reverse, reverse_run):
    from safetensors.torch import load_file
    from transformer.inside.contributions import record_blocks
    sentence = reverse_run.sentences[0]
    states = load_file(reverse_run.folder / "chunk-00000.safetensors")
    records = record_blocks(reverse.model, [sentence.source_ids], [sentence.target_ids])
    for kind in ("encoder", "decoder", "cross"):
        recorded = torch.stack([r.block_input[0] for r in records[kind]])
        assert torch.allclose(states[f"0.{kind}"].float(), recorded, atol=2e-3 * recorded.abs().max())
    assert states["0.memory"].shape == (len(sentence.source_ids), reverse.model.config.d_model)


# --- the input and the command line -------------------------------------------------------------------------------

def test_the_input_is_a_tsv_with_references_a_text_file_or_a_multi30k_split(tmp_path, monkeypatch):
    tsv, text = tmp_path / "pairs.tsv", tmp_path / "lines.txt"
    tsv.write_text("A dog.\tUn chien.\nTwo cats.\tDeux chats.\n", encoding="utf-8")
    text.write_text("A dog.\n\nTwo cats.\n", encoding="utf-8")
    assert corpus_sentences(str(tsv)) == (["A dog.", "Two cats."], ["Un chien.", "Deux chats."])
    assert corpus_sentences(str(text)) == (["A dog.", "Two cats."], None)
    multi30k = tmp_path / "multi30k"
    multi30k.mkdir()
    (multi30k / "val.en").write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    (multi30k / "val.fr").write_text("Un chien.\nDeux chats.\n", encoding="utf-8")
    assert corpus_sentences("multi30k:val", "en", "fr", multi30k) == (["A dog.", "Two cats."],
                                                                      ["Un chien.", "Deux chats."])
    assert corpus_sentences("multi30k:val", "en", "es", multi30k) == (["A dog.", "Two cats."], None)
    with pytest.raises(DataError) as refused:
        corpus_sentences("multi30k:dev", "en", "fr", multi30k)
    assert refused.value.code == "data.unknown_split"


def test_the_command_prints_each_head_and_every_sentence_by_its_source_share(reverse, reverse_run, tmp_path):
    lines = tmp_path / "digits.txt"
    lines.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    result = run_command("transformer.corpus", "--checkpoint", str(REVERSE), "--input", str(lines), "--out",
                         str(tmp_path / "run"), "--limit", "10", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == {"sentences", "seconds", "bytes", "heads", "least_source"}
    assert printed["sentences"] == 10 and printed["bytes"] > 0
    assert [sorted(entry) for entry in printed["least_source"]] == [
        ["index", "log_probability", "source", "source_share", "translation"]] * 10
    assert {(h["kind"], h["layer"], h["head"]) for h in printed["heads"]} == {
        (h["kind"], h["layer"], h["head"]) for h in reverse_run.summary()["heads"]}
    assert "10 of 10 sentences" in result.stderr


def test_the_command_says_what_is_wrong_in_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "mine.txt").write_text("mine", encoding="utf-8")
    lines = tmp_path / "lines.txt"
    lines.write_text("1 2 3\n", encoding="utf-8")
    result = run_command("transformer.corpus", "--checkpoint", str(REVERSE), "--input", str(lines), "--out",
                         str(tmp_path / "run"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error [corpus.folder_not_empty]: {tmp_path / 'run'} holds other files; choose an "
                             "empty folder or one a corpus run saved.\n")
    missing = run_command("transformer.corpus", "--checkpoint", str(REVERSE), "--input", str(tmp_path / "none.txt"),
                          "--out", str(tmp_path / "other"))
    assert missing.returncode == 2
    assert missing.stderr == f"error [data.missing]: {tmp_path / 'none.txt'} does not exist\n"
