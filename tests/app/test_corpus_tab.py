"""The Corpus tab: what it runs, what each view shows of the run, what a click opens, and what it refuses."""

import gzip
import os
import json
from pathlib import Path

import pytest

from transformer.inside.corpus_run import open_run
from transformer.inside.head_roles import head_roles
from ui import services
from ui.runtime.worker import Stopped
from ui.tabs import corpus as tab
from ui.training.jobs import JobManager
from ui.drawing import corpus as corpus_drawing
from ui.views import corpus as views
from ui.views.lessons import LESSONS
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS

MODEL = "multi30k-en-de"
# Sentences of this test's own, in two lines each of a .tsv (a reference beside) and a text file.
SENTENCES = ["A dog runs across the grass.", "Two children are playing in the snow.", "A man is riding a bike.",
             "A woman sings on a stage.", "The old man is reading a newspaper.", "A girl in a red coat waits.",
             "People are walking along the beach.", "A boy jumps into the lake.", "Three men are fixing a roof.",
             "A brown dog catches a ball.", "A crowd watches a concert at night.", "A cat sleeps on a chair."]


@pytest.fixture(scope="module")
def corpus_services(tmp_path_factory):
    return services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"),
                             JobManager(tmp_path_factory.mktemp("runs")))


@pytest.fixture(scope="module")
def sentences_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("upload") / "captions.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def shown(corpus_services, sentences_file):
    return tab.on_run_upload(corpus_services, MODEL, str(sentences_file), None, "position", progress=None)


def opened(corpus_services, shown):
    return corpus_services.corpora.get(shown["corpus_shown"]["folder"])


def test_a_run_shows_every_head_and_every_sentence_by_its_source_share(corpus_services, shown):
    run = opened(corpus_services, shown).run
    checkpoint = corpus_services.registry.get(MODEL)
    config = checkpoint.model.config
    assert [s.source for s in run.sentences] == SENTENCES
    heads = config.n_heads * (config.n_encoder_layers + 2 * config.n_decoder_layers)
    assert len(shown["corpus_heads_table"]) == heads
    roles = head_roles(run.heads, run.unlike)
    assert [row[3] for row in shown["corpus_heads_table"]] == [role.role for role in roles]  # English role names
    least = shown["corpus_least"]
    shares = [row[1] for row in least]
    assert shares == sorted(shares) and len(least) == len(SENTENCES)
    first = run.sentences[least[0][0] - 1]
    assert least[0][1] == round(100 * sum(first.source_shares) / len(first.source_shares), 1)
    assert least[0][3] == min(range(len(first.source_shares)), key=first.source_shares.__getitem__) + 1
    assert "12 sentences" in shown["corpus_status"] and "captions.txt" in shown["corpus_status"]


def test_the_heads_map_names_each_heads_role_and_what_a_click_opens(corpus_services, shown):
    figure = shown["corpus_heads"]
    roles = {(r["kind"], r["layer"], r["head"]): r["role"] for r in opened(corpus_services, shown).roles}
    for trace in figure.data:
        for row_cells, row_text in zip(trace.customdata, trace.text):
            for (kind, layer, head), label in zip(row_cells, row_text):
                assert label.startswith(roles[kind, layer, head])


def test_a_heads_picture_holds_its_queries_and_keys_each_opening_its_sentence_and_step(corpus_services, shown):
    figure = tab.on_head(corpus_services, shown["corpus_shown"], "cross", 3, 2, "token")["corpus_space"]
    queries, keys = figure["data"][:2]
    run = opened(corpus_services, shown).run
    assert len(queries["x"]) == sum(len(s.target_pieces) for s in run.sentences)
    assert len(keys["x"]) == sum(len(s.source_pieces) for s in run.sentences)
    for hover, (sentence, step) in zip(queries["hovertext"], queries["customdata"]):
        piece = run.sentences[sentence - 1].target_pieces[step - 1]  # the decoder's input at that step
        assert hover.startswith(piece.replace("<", "&lt;").replace(">", "&gt;") + " (sentence " + str(sentence))
    legend = [trace["name"] for trace in figure["data"][2:]]
    assert legend and len(set(legend)) == len(legend)  # the most frequent tokens, each its own colour


def test_a_click_on_a_cell_opens_its_head_and_a_click_on_a_point_opens_its_sentence(corpus_services, shown):
    picked = tab.on_pick(corpus_services, shown["corpus_shown"], json.dumps(["encoder", 2, 4]), "cross", 3, 1,
                         "position", "one head", None)
    assert (picked["corpus_kind"], picked["corpus_layer"], picked["corpus_head"]) == ("encoder", 2, 4)
    assert picked["corpus_space"]["layout"]["title"]["text"].startswith("Encoder self-attention, layer 2, head 4")
    opened_at = tab.on_pick(corpus_services, shown["corpus_shown"], json.dumps([3, 2]), "cross", 3, 2, "position",
                            "one head", None)
    assert opened_at["text"] == SENTENCES[2] and opened_at["tabs"].selected == "translate"
    assert opened_at["translation_state"].source_text == SENTENCES[2]
    assert (opened_at["kind"], opened_at["layer"], opened_at["head"]) == ("Cross-attention (decoder → encoder)", 3, 2)
    with pytest.raises(Exception, match="names nothing"):
        tab.on_pick(corpus_services, shown["corpus_shown"], "{not json", "cross", 3, 2, "position", "one head", None)


def test_a_row_of_the_least_source_list_opens_its_sentence_at_its_lowest_share_step(corpus_services, shown):
    row = shown["corpus_least"][0]

    class Chosen:
        row_value = row
    result = tab.on_least_select(corpus_services, shown["corpus_shown"], "cross", 3, 1, "one head", None, Chosen())
    assert result["text"] == row[4]
    assert result["step"].value == row[3]


def test_the_nearest_tokens_of_a_corpus_sentences_own_token_start_with_itself(corpus_services, shown):
    """Translated again, a corpus sentence's token enters the layer as it did in the run (float16 apart), so its
    nearest token in the corpus is itself; and where the head looks from each is the head's own weight."""
    checkpoint = corpus_services.registry.get(MODEL)
    run = opened(corpus_services, shown).run
    sentence = run.sentences[4]
    translation = checkpoint.translate(sentence.source)
    assert translation.target_ids == sentence.target_ids
    rows = views.nearest_rows(opened(corpus_services, shown), checkpoint, translation, "cross", 2, 3, "target:3")
    assert rows[0][0] > 0.999 and (rows[0][2], rows[0][1]) == (5, sentence.target_pieces[3])
    checked = 0
    for similarity, piece, number, _, looked_at, weight in rows:
        corpus_sentence = run.sentences[number - 1]
        again = checkpoint.translate(corpus_sentence.source)
        position = corpus_sentence.target_pieces.index(piece)
        row = again.cross_attention[1, 2, position] if corpus_sentence.target_pieces.count(piece) == 1 else None
        if row is not None:
            assert corpus_sentence.source_pieces[int(row.argmax())] == looked_at
            assert weight == pytest.approx(float(row.max()), abs=2e-2)  # the run kept its states in float16
            checked += 1
    assert checked >= len(rows) // 2


def test_the_search_starts_from_a_token_on_the_heads_side(corpus_services, shown):
    checkpoint = corpus_services.registry.get(MODEL)
    translation = checkpoint.translate(SENTENCES[0])
    choices = views.token_choices(translation)
    assert choices[0] == ("source, token 1: ▁A", "source:0")
    with pytest.raises(Exception, match="choose a step's token"):
        tab.on_search(corpus_services, shown["corpus_shown"], MODEL, translation, "cross", 3, 1, "source:0")
    with pytest.raises(Exception, match="Translate a sentence first"):
        tab.on_search(corpus_services, shown["corpus_shown"], MODEL, None, "encoder", 3, 1, "source:0")
    with pytest.raises(Exception, match="another model's than the corpus's"):
        tab.on_search(corpus_services, shown["corpus_shown"], "multi30k-en-fr", translation, "encoder", 3, 1, None)
    found = tab.on_search(corpus_services, shown["corpus_shown"], MODEL, translation, "encoder", 3, 1, None)
    assert len(found["corpus_neighbours"]) == views.NEIGHBOURS


def test_a_second_run_of_the_same_sentences_reuses_the_first(corpus_services, sentences_file, shown):
    folder = shown["corpus_shown"]["folder"]
    made = {path.name: path.stat().st_mtime_ns for path in Path(folder).iterdir()}
    again = tab.on_run_upload(corpus_services, MODEL, str(sentences_file), None, "position", progress=None)
    assert again["corpus_shown"]["folder"] == folder
    assert {path.name: path.stat().st_mtime_ns for path in Path(folder).iterdir()} == made


def test_a_stopped_run_shows_what_it_saved_and_goes_on_from_there(corpus_services, tmp_path):
    sentences = [f"A dog number {n} runs across the grass." for n in range(40)]  # two chunks of 32
    path = tmp_path / "many.txt"
    path.write_text("\n".join(sentences), encoding="utf-8")
    corpus = views.uploaded_corpus(path)

    def stop_after_the_first_chunk(share, desc):
        raise Stopped()
    stopped = tab.shown_run(corpus_services, MODEL, corpus, None, "position", stop_after_the_first_chunk)
    assert "32 of 40 sentences so far" in stopped["corpus_status"]
    assert len(stopped["corpus_least"]) == 32
    finished = tab.shown_run(corpus_services, MODEL, corpus, None, "position", None)
    assert "40 sentences" in finished["corpus_status"] and len(finished["corpus_least"]) == 40
    assert len(open_run(finished["corpus_shown"]["folder"]).sentences) == 40


@pytest.mark.parametrize("content, refused", [
    ("A dog runs.\n" * (views.MAX_SENTENCES + 1), "at most 500"),
    ("A" * (views.MAX_SENTENCE_CHARS + 1) + "\n", "at most 2,000"),
    (("x" * 80 + "\n") * (views.MAX_FILE_BYTES // 80 + 1), "at most 1 MB"),
])
def test_a_file_too_large_is_refused_with_its_limit_and_the_run_shown_stays(corpus_services, shown, tmp_path,
                                                                            content, refused):
    path = tmp_path / "big.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(Exception, match=refused):
        tab.on_run_upload(corpus_services, MODEL, str(path), None, "position", progress=None)
    assert len(open_run(shown["corpus_shown"]["folder"]).sentences) == len(SENTENCES)


def test_without_multi30k_the_tab_opens_on_the_apps_samples_and_with_it_on_the_test_set(corpus_services, tmp_path,
                                                                                      monkeypatch):
    checkpoint = corpus_services.registry.get(MODEL)
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path / "absent"))
    samples = views.default_corpus(checkpoint)
    assert len(samples.sources) == views.SAMPLE_SENTENCES and samples.references is None
    for lang, lines in (("en", SENTENCES[:3]), ("de", ["Ein Hund.", "Zwei Kinder.", "Ein Mann."])):
        with gzip.open(tmp_path / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path))
    test_set = views.default_corpus(checkpoint)
    assert test_set.sources == tuple(SENTENCES[:3]) and test_set.references[0] == "Ein Hund."
    monkeypatch.setenv("EXPLORER_CORPUS_SENTENCES", "2")  # a host's choice of how many
    assert views.default_corpus(checkpoint).sources == tuple(SENTENCES[:2])


def test_the_tab_speaks_the_pages_language(corpus_services, shown):
    german = tab.on_head(corpus_services, shown["corpus_shown"], "cross", 3, 2, "position", language="de")
    assert german["corpus_space"]["layout"]["title"]["text"].startswith("Cross-Attention")
    rows = views.heads_rows(opened(corpus_services, shown), "fr")
    assert rows[0][0] == "Auto-attention de l'encodeur"


def test_a_picture_of_more_points_than_it_draws_spreads_them_over_the_corpus(corpus_services, shown, monkeypatch):
    monkeypatch.setattr(views, "MOST_POINTS", 10)
    figure = tab.on_head(corpus_services, shown["corpus_shown"], "encoder", 1, 1, "position")["corpus_space"]
    queries, keys = figure["data"][:2]
    assert len(queries["x"]) == len(keys["x"]) == 10
    sentences = [sentence for sentence, _ in queries["customdata"]]
    assert sentences[0] == 1 and sentences[-1] == len(SENTENCES) and sentences == sorted(sentences)
    assert "10 of" in figure["layout"]["title"]["text"]
    assert views.evenly(5, 10) == [0, 1, 2, 3, 4] and views.evenly(101, 3) == [0, 50, 100]


def test_runs_past_the_last_twenty_leave_the_disk_except_those_held_open(corpus_services, shown, tmp_path):
    runs_dir = tmp_path / "runs"
    folders = [runs_dir / views.FOLDER / f"run-{n:02d}" for n in range(views.RUNS_KEPT + 3)]
    for age, folder in enumerate(reversed(folders)):  # run-00 the newest
        folder.mkdir(parents=True)
        (folder / "run.json").write_text("{}")
        os.utime(folder, (1_000_000 + age, 1_000_000 + age))
    held = views.OpenCorpora()
    held.runs[str(folders[-1])] = opened(corpus_services, shown)  # the oldest, open on a page
    removed = views.prune_runs(runs_dir, held)
    assert removed == folders[views.RUNS_KEPT:-1]
    assert [folder.is_dir() for folder in folders] == [True] * views.RUNS_KEPT + [False, False, True]


def test_what_the_heads_specialise_lesson_says_of_the_map_is_what_the_map_shows(corpus_services, tmp_path,
                                                                               monkeypatch):
    """Its "Look for", read against the map of the model's own corpus (here the app's samples)."""
    lesson = next(lesson for lesson in LESSONS if lesson.key == "heads_specialise")
    assert lesson.tab == tab.TAB_ID and lesson.focus == "corpus-heads"
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path / "absent"))
    checkpoint = corpus_services.registry.get(lesson.model)
    shown_map = tab.shown_run(corpus_services, lesson.model, views.default_corpus(checkpoint), None, "position", None)
    heads = {(r["kind"], r["layer"], r["head"]): r for r in opened(corpus_services, shown_map).roles}
    look_for = lesson.words().look_for
    assert "layer 1 head 3 looks at its own token on about 60%" in look_for
    assert heads["decoder", 1, 3]["role"] == "same" and round(heads["decoder", 1, 3]["same"], 1) == 0.6
    assert "head 1 puts about half its weight on <s>" in look_for
    assert round(heads["decoder", 1, 1]["special"], 1) == 0.5
    assert max(heads["decoder", 1, h]["special"] for h in (1, 2, 3, 4)) == heads["decoder", 1, 1]["special"]
    assert "encoder layer 2 head 4 looks at the previous word on over half" in look_for
    assert heads["encoder", 2, 4]["role"] == "previous" and heads["encoder", 2, 4]["previous"] > 0.5
    assert "every cross-attention head of layer 3 is aligned" in look_for
    assert all(heads["cross", 3, h]["role"] == "aligned" for h in (1, 2, 3, 4))


def test_a_click_opens_what_it_names_as_checked_and_a_run_no_longer_kept_is_asked_for_again(corpus_services, shown,
                                                                                          tmp_path):
    far = tab.on_pick(corpus_services, shown["corpus_shown"], json.dumps([99999, -5]), "cross", 3, 1, "position",
                      "one head", None)
    last = len(SENTENCES)
    assert (far["text"], far["corpus_sentence"], far["corpus_step"]) == (SENTENCES[-1], last, 1)

    class Odd:
        row_value = 7
    assert tab.on_least_select(corpus_services, shown["corpus_shown"], "cross", 3, 1, "one head", None, Odd()) == {}
    gone = {**shown["corpus_shown"], "folder": str(tmp_path / "pruned")}
    with pytest.raises(Exception, match="The corpus is not open yet"):
        tab.on_head(corpus_services, gone, "cross", 3, 1, "position")


def test_a_compressed_file_is_refused_by_the_size_of_its_text(tmp_path):
    path = tmp_path / "small.txt"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("A dog runs.\n" * 200_000)  # 2.4 MB of text in a few kB
    assert path.stat().st_size < views.MAX_FILE_BYTES
    with pytest.raises(Exception, match="MB"):
        views.uploaded_corpus(path)


def test_the_heads_map_draws_an_encoder_deeper_than_its_decoder():
    roles = [{"kind": kind, "layer": layer, "head": head, "role": "mixed", "previous": None, "same": None,
              "next": None, "special": 0.1, "aligned": None, "spread": 0.5, "confidence": 0.4, "entropy": 1.0,
              "most_alike": None}
             for kind, layers in (("encoder", 6), ("decoder", 2), ("cross", 2)) for layer in range(1, layers + 1)
             for head in (1, 2)]
    figure = corpus_drawing.heads_map(roles, ("encoder", "decoder", "cross"), "title")
    assert [len(trace.z) for trace in figure.data] == [6, 2, 2]
