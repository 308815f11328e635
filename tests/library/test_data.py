"""Data in: parallel text from TSV files, aligned files and Multi30K, synthetic tasks, and token-bucketed batches."""

import gzip
import random
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from transformer import data
from transformer.data import DataError

SHARED_MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"


def write(path: Path, text: str, compress: bool = False) -> Path:
    raw = text.encode("utf-8")
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


# --- TSV -----------------------------------------------------------------------------------------

def test_tsv_reads_source_tab_target_and_ignores_further_columns(tmp_path):
    path = write(tmp_path / "pairs.tsv", "Hello.\tHallo.\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
                                         "Thank you.\tDanke.\n")
    corpus = data.load_parallel_tsv(path)
    assert corpus.sources == ["Hello.", "Thank you."]
    assert corpus.targets == ["Hallo.", "Danke."]
    assert corpus.skipped == 0 and corpus.problems == []
    assert len(corpus) == 2


def test_tsv_counts_and_describes_rows_without_a_tab(tmp_path):
    path = write(tmp_path / "pairs.tsv", "one\teins\nno tab on this line\ntwo\tzwei\nnor here\n")
    corpus = data.load_parallel_tsv(path)
    assert corpus.sources == ["one", "two"]
    assert corpus.skipped == 2
    assert len(corpus.problems) == 2
    assert "line 2" in corpus.problems[0] and "no tab" in corpus.problems[0]
    assert "line 4" in corpus.problems[1]


def test_tsv_skips_rows_with_an_empty_source_or_target(tmp_path):
    path = write(tmp_path / "pairs.tsv", "one\teins\n\tnur Ziel\nonly source\t  \ntwo\tzwei\n")
    corpus = data.load_parallel_tsv(path)
    assert corpus.sources == ["one", "two"]
    assert corpus.targets == ["eins", "zwei"]
    assert corpus.skipped == 2
    assert all("empty source or target" in problem for problem in corpus.problems)


def test_tsv_ignores_blank_lines_and_strips_whitespace(tmp_path):
    path = write(tmp_path / "pairs.tsv", "\n  one \t eins \r\n\n")
    corpus = data.load_parallel_tsv(path)
    assert (corpus.sources, corpus.targets, corpus.skipped) == (["one"], ["eins"], 0)


@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_empty_tsv_is_refused_with_a_clear_message(tmp_path, text):
    path = write(tmp_path / "empty.tsv", text)
    with pytest.raises(DataError, match="empty.tsv is empty"):
        data.load_parallel_tsv(path)


def test_tsv_without_any_tab_is_refused_and_says_what_format_is_expected(tmp_path):
    path = write(tmp_path / "prose.tsv", "just a sentence\nand another\n")
    with pytest.raises(DataError, match=r"no tab-separated pairs .*a tab, its translation"):
        data.load_parallel_tsv(path)


def test_tsv_whose_every_pair_is_empty_is_refused(tmp_path):
    path = write(tmp_path / "hollow.tsv", "\tx\ny\t\n")
    with pytest.raises(DataError, match="no usable sentence pairs"):
        data.load_parallel_tsv(path)


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "model.tsv"
    path.write_bytes(b"PK\x03\x04\x00\x00\x00binary\tstuff\n")
    with pytest.raises(DataError, match="binary"):
        data.load_parallel_tsv(path)


def test_non_utf8_file_is_refused_with_the_byte_offset(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("café\tKaffee\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"not UTF-8 text \(byte 3\)"):
        data.load_parallel_tsv(path)


def test_corrupt_gzip_file_is_refused_as_data_error(tmp_path):
    whole = gzip.compress(("hello\thallo\n" * 200).encode())
    path = tmp_path / "pairs.tsv"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match="pairs.tsv"):
        data.load_parallel_tsv(path)


# --- plain and gzip text, aligned files ------------------------------------------------------------

@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_read_lines_reads_plain_and_gzip_text_alike(tmp_path, compress):
    path = write(tmp_path / "lines.txt", "Ein Mann.\r\nZwei Hunde ü\n", compress=compress)
    assert data.read_lines(path) == ["Ein Mann.", "Zwei Hunde ü"]


def test_read_lines_drops_a_utf8_byte_order_mark(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufefffirst\nsecond\n".encode("utf-8"))
    assert data.read_lines(path) == ["first", "second"]


def test_two_aligned_files_become_one_corpus(tmp_path):
    src = write(tmp_path / "train.en", "A dog.\nTwo cats.\n")
    tgt = write(tmp_path / "train.de.gz", "Ein Hund.\nZwei Katzen.\n", compress=True)
    corpus = data.load_parallel_files(src, tgt)
    assert corpus.sources == ["A dog.", "Two cats."]
    assert corpus.targets == ["Ein Hund.", "Zwei Katzen."]


def test_aligned_files_with_different_line_counts_are_refused(tmp_path):
    src = write(tmp_path / "a.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path / "a.de", "eins\nzwei\n")
    with pytest.raises(DataError, match=r"a.en has 3 lines but a.de has 2.*not aligned"):
        data.load_parallel_files(src, tgt)


# --- synthetic tasks -----------------------------------------------------------------------------

@pytest.mark.parametrize("task, expected", [("copy", lambda s: s), ("reverse", lambda s: s[::-1]),
                                            ("sort", sorted)])
def test_synthetic_tasks_produce_the_right_targets(task, expected):
    corpus = data.synthetic_corpus(task, 200, seed=3, min_length=2, max_length=7)
    assert len(corpus) == 200
    for source, target in zip(corpus.sources, corpus.targets):
        symbols = source.split(" ")
        assert 2 <= len(symbols) <= 7
        assert all(s in data.SYNTHETIC_ALPHABET and len(s) == 1 for s in symbols)
        assert target.split(" ") == list(expected(symbols))


def test_unknown_synthetic_task_is_a_data_error_listing_the_choices():
    with pytest.raises(DataError, match="unknown synthetic task 'shuffle'.*copy, reverse, sort"):
        data.synthetic_corpus("shuffle", 5)


def test_synthetic_corpus_is_reproducible_from_its_seed():
    first, again = data.synthetic_corpus("reverse", 50, seed=7), data.synthetic_corpus("reverse", 50, seed=7)
    other = data.synthetic_corpus("reverse", 50, seed=8)
    assert (first.sources, first.targets) == (again.sources, again.targets)
    assert first.sources != other.sources


# --- batching ------------------------------------------------------------------------------------

def random_examples(n: int, seed: int = 0, longest: int = 30) -> list[data.Example]:
    rng = random.Random(seed)
    return [([5] * rng.randint(2, longest), [6] * rng.randint(1, longest)) for _ in range(n)]


def padded_tokens(examples, batch) -> int:
    return len(batch) * max(max(len(examples[i][0]), len(examples[i][1])) for i in batch)


def test_no_batch_holds_more_than_max_tokens_padded_tokens():
    examples = random_examples(500)
    batches = data.token_batches(examples, max_tokens=120, seed=1)
    assert all(padded_tokens(examples, batch) <= 120 for batch in batches)
    assert max(len(batch) for batch in batches) > 1


def test_every_example_is_in_exactly_one_batch():
    examples = random_examples(321)
    for shuffle in (True, False):
        batches = data.token_batches(examples, max_tokens=200, seed=4, epoch=2, shuffle=shuffle)
        assert sorted(i for batch in batches for i in batch) == list(range(len(examples)))


def test_an_example_longer_than_max_tokens_gets_a_batch_of_its_own():
    examples = [([5] * 3, [6] * 3), ([5] * 50, [6] * 10), ([5] * 4, [6] * 2)]
    batches = data.token_batches(examples, max_tokens=20, shuffle=False)
    assert [1] in batches
    assert sorted(i for batch in batches for i in batch) == [0, 1, 2]


def test_batches_group_similar_lengths():
    examples = random_examples(400, seed=2)
    batches = data.token_batches(examples, max_tokens=300, seed=0)
    spreads = [max(len(examples[i][1]) for i in b) - min(len(examples[i][1]) for i in b) for b in batches]
    assert sum(spreads) / len(spreads) <= 1


def test_batches_are_reproducible_per_seed_and_epoch_and_change_between_epochs():
    examples = random_examples(300)
    first = data.token_batches(examples, 150, seed=5, epoch=0)
    assert data.token_batches(examples, 150, seed=5, epoch=0) == first
    assert data.token_batches(examples, 150, seed=5, epoch=1) != first
    assert data.token_batches(examples, 150, seed=6, epoch=0) != first


def test_unshuffled_batches_come_in_length_order():
    examples = random_examples(100)
    batches = data.token_batches(examples, 100, shuffle=False)
    lengths = [len(examples[i][1]) for batch in batches for i in batch]
    assert lengths == sorted(lengths)


def test_filter_by_length_drops_pairs_that_do_not_fit_or_are_empty():
    eos = 3
    fits = ([7, 8, eos], [9, eos])
    examples = [
        fits,
        ([7] * 9 + [eos], [9, eos]),          # source of 10 positions: fits exactly
        ([7] * 10 + [eos], [9, eos]),         # source of 11 positions: too long
        ([7, eos], [9] * 9 + [eos]),          # decoder reads bos + 9 pieces = 10 positions: fits exactly
        ([7, eos], [9] * 10 + [eos]),         # bos + 10 pieces = 11 positions: too long
        ([eos], [9, eos]),                    # empty source
        ([7, eos], [eos]),                    # empty target
    ]
    kept, dropped = data.filter_by_length(examples, max_length=10)
    assert kept == [examples[0], examples[1], examples[3]]
    assert dropped == 4


# --- Multi30K ------------------------------------------------------------------------------------

EN = ["A man rides a bike.", "Two dogs play.", "A girl smiles."]
DE = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen.", "Ein Mädchen lächelt."]


def fake_multi30k(directory: Path, splits=("train",)) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for split in splits:
        write(directory / f"{split}.en.gz", "\n".join(EN) + "\n", compress=True)
        write(directory / f"{split}.de.gz", "\n".join(DE) + "\n", compress=True)
    return directory


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No Multi30K from the environment or the cache, and any attempt to download fails as it would offline."""
    attempts = []

    def refuse(url, *args, **kwargs):
        attempts.append(url)
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return attempts


def test_multi30k_reads_gzip_files_from_data_dir(tmp_path, offline):
    directory = fake_multi30k(tmp_path / "m30k")
    corpus = data.load_multi30k("train", "en", "de", data_dir=directory)
    assert corpus.sources == EN and corpus.targets == DE
    reverse = data.load_multi30k("train", "de", "en", data_dir=str(directory))
    assert reverse.sources == DE and reverse.targets == EN
    assert offline == []


def test_multi30k_reads_plain_text_files_too(tmp_path, offline):
    directory = tmp_path / "plain"
    directory.mkdir()
    write(directory / "val.en", "\n".join(EN) + "\n")
    write(directory / "val.de", "\n".join(DE) + "\n")
    assert data.load_multi30k("val", data_dir=directory).targets == DE


def test_multi30k_directory_can_come_from_the_environment(tmp_path, monkeypatch, offline):
    directory = fake_multi30k(tmp_path / "from-env")
    monkeypatch.setenv("MULTI30K_DIR", str(directory))
    assert data.multi30k_dir() == directory
    assert data.load_multi30k("train").sources == EN
    assert offline == []


def test_multi30k_missing_directory_names_the_option(tmp_path, offline):
    with pytest.raises(DataError, match=r"does not exist.*--data-dir"):
        data.load_multi30k("train", data_dir=tmp_path / "nowhere")


def test_multi30k_directory_without_the_split_names_the_missing_files(tmp_path, offline):
    directory = fake_multi30k(tmp_path / "m30k", splits=("train",))
    with pytest.raises(DataError, match=r"lacks val.en.gz, val.de.gz"):
        data.load_multi30k("val", data_dir=directory)
    assert offline == []


def test_unknown_multi30k_split_is_refused(tmp_path):
    with pytest.raises(DataError, match="unknown Multi30K split 'dev'"):
        data.load_multi30k("dev", data_dir=fake_multi30k(tmp_path / "m30k"))


def test_multi30k_download_failure_offline_says_to_use_data_dir(offline):
    with pytest.raises(DataError, match=r"could not download Multi30K.*--data-dir"):
        data.load_multi30k("train")
    assert len(offline) == 1 and offline[0].startswith("https://")


def test_loading_one_multi30k_split_fetches_that_split_only(offline):
    with pytest.raises(DataError, match=r"holds test_2016_flickr\.en\.gz"):
        data.load_multi30k("test_2016_flickr")
    assert len(offline) == 1 and offline[0].endswith("test_2016_flickr.en.gz"), "not the training set first"


def test_a_language_multi30k_does_not_have_is_named(tmp_path, offline):
    with pytest.raises(DataError, match=r"Multi30K has no digits side \(it has en, de, fr, cs\)"):
        data.load_multi30k("val", "digits", "digits", data_dir=fake_multi30k(tmp_path / "m30k"))
    assert offline == []


def test_multi30k_not_downloaded_when_download_is_off(offline):
    with pytest.raises(DataError, match="--data-dir"):
        data.multi30k_dir(download=False)
    assert offline == []


def test_multi30k_downloaded_earlier_is_found_without_downloading(offline):
    cache = fake_multi30k(data.default_cache_dir(), splits=data.MULTI30K_SPLITS)
    assert data.multi30k_dir(download=False) == cache
    assert offline == []


def test_multi30k_checksums_match_the_shared_copy():
    sums = SHARED_MULTI30K / "SHA256SUMS"
    if not sums.is_file():
        pytest.skip(f"no {sums}")
    published = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line.strip())
    for name, digest in data.MULTI30K_SHA256.items():
        if name in published:
            assert published[name] == digest, name
    assert set(data.MULTI30K_SHA256) <= set(published)
