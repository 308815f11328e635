"""A translator converted from the Hub's layout (Marian, or a multilingual M2M100 or mBART-50) is a model like the
bundled ones: every event of the page runs on it, and the model picker opens one by its Hub id (from
huggingface_hub's cache when offline)."""

import shutil
import subprocess
import sys
import warnings

import gradio as gr
import pytest
import torch

from marian_models import build_marian
from multilingual_models import build_multilingual
from page_driver import PageDriver
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError
from ui.tabs import header
from ui import services, views
from ui.tabs import lessons as lessons_tab
from ui.views import languages as language_views
from ui.views.lessons import LESSONS
from ui.build import build_app
from ui.runtime.errors import UNEXPECTED
from ui.runtime.language import said, table
from ui.hub_models import HubModels
from ui.services import ModelRegistry, Services, model_bytes

SENTENCE = "A dog runs across the grass."
# Events that start, stop, keep or delete training jobs: the Train tab's own tests run them. Integrated gradients
# over the 20 sample sentences is on_attribute's code (run here) 20 times over: about a minute on this CPU.
MULTILINGUAL = ("m2m100", "mbart50")  # tensor2tensor's sinusoids; learned positions with a LayerNorm after them
NOT_RUN = {"on_start", "on_stop", "on_keep", "on_delete", "leave", "on_clock", "on_sample_agreement"}


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    """Another size than the bundled models (d_model 48, 2+3 layers, 6 heads) and a vocabulary of its own; taught to
    copy a sentence's first words, so its translations end as a real translator's do (an untrained one runs every
    sentence to its length limit, which makes the sample-wide views slow)."""
    return build_marian(tmp_path_factory.mktemp("marian"), trained_steps=60, d_model=48, heads=6)


@pytest.fixture(scope="module")
def hub_services(marian_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    hub.convert(marian_dir, root / "tiny-marian")
    for family in MULTILINGUAL:
        hub.convert(build_multilingual(tmp_path_factory.mktemp(family), family), root / f"tiny-{family}")
    return Services(ModelRegistry([root, REPOSITORY_CHECKPOINTS], device="cpu"),
                    hub=HubModels(tmp_path_factory.mktemp("hub-cache")))


@pytest.fixture
def services_keeping_bfloat16(hub_services, monkeypatch):
    """A server that keeps tiny-m2m100 in bfloat16, as it keeps a model too big for its memory in float32 (on a CPU
    computing in bfloat16 natively)."""
    monkeypatch.setattr(services, "computes_bf16_natively", lambda: True)
    registry = ModelRegistry(hub_services.registry.roots, device="cpu")
    registry.max_bytes = model_bytes(hub_services.registry.get("tiny-m2m100")) - 1
    return Services(registry, hub=hub_services.hub)


# M2M100 kept in bfloat16, as a server keeps a model too big in float32 (its float32 numbers are held to
# transformers' in tests/library/test_multilingual.py); mBART-50 in float32.
@pytest.mark.slow
@pytest.mark.parametrize("name, kept_in", [("tiny-marian", None), ("tiny-m2m100", torch.bfloat16),
                                           ("tiny-mbart50", None)])
def test_every_event_of_the_page_runs_on_a_converted_model(hub_services, name, kept_in, request, tmp_path,
                                                           monkeypatch):
    monkeypatch.setenv("MULTI30K_DIR", str(tmp_path / "absent"))  # the Corpus tab on the app's samples: 3 s, not 10
    if kept_in is not None:
        hub_services = request.getfixturevalue("services_keeping_bfloat16")
        assert hub_services.registry.get(name).model.dtype == kept_in
    demo = build_app(hub_services, name)
    page = PageDriver(demo)
    components = {block.elem_id: block for block in demo.blocks.values() if getattr(block, "elem_id", None)}
    page.set(components["source-text"], SENTENCE)
    page.run(page.event("on_open", "ui.tabs.header"))
    page.run(page.event("on_translate_click"))
    translation = next(v for v in page.values.values() if type(v).__name__ == "Translation")
    checkpoint = hub_services.registry.get(name)
    assert translation.source_text == SENTENCE
    assert translation.target_pieces[0] == ("<pad>" if name == "tiny-marian" else "</s>")
    assert translation.forced_steps == len(checkpoint.target_tokenizer.prefix_ids)
    refused, ran = {}, set()
    for event in page.events():
        if event.name in NOT_RUN:
            continue
        try:
            page.run(event)
            ran.add(event.name)
        except gr.Error as error:
            assert error.message != str(UNEXPECTED), f"{event.name} failed on {name} (see the log)"
            refused[event.name] = error.message
    every_tab = {"on_translate_click", "on_maps_wanted", "on_attention",  # Translate (views: in the page), analysis
                 "on_inside", "on_temperature", "on_sample", "on_look_inside",  # Inside a head
                 "on_ablate", "on_override", "on_positions", "on_shuffle", "on_importance",  # Experiments
                 "on_attribute", "on_contrast", "on_prune",  # Attention vs evidence
                 "on_tree", "on_statistics", "on_alignment", "on_csv", "on_npz", "on_svg", "on_share",  # Analysis
                 "on_run_default", "on_head", "on_search",  # Corpus
                 "on_model", "on_history_step"}  # the model switch and the Model tab
    assert every_tab <= ran, f"refused: {refused}"


def test_the_model_picker_opens_a_hub_id_from_the_download_cache(marian_dir, tmp_path, monkeypatch):
    """Offline, huggingface_hub answers from its cache: the id is converted once and joins the model list."""
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo = tmp_path / "hf-cache" / "models--Helsinki-NLP--opus-mt-en-xx"
    shutil.copytree(marian_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    hub_models = HubModels(tmp_path / "converted")
    services = Services(ModelRegistry([REPOSITORY_CHECKPOINTS, hub_models.directory], device="cpu"), hub=hub_models)
    arguments = (SENTENCE, {}, "beam", 4, 40, "cross", "one head", 1, 1, False, None)
    opened = header.on_open_from_hub(services, " Helsinki-NLP/opus-mt-en-xx ", *arguments)
    assert opened["model"] == "Helsinki-NLP--opus-mt-en-xx" in services.registry.names()
    assert "`Helsinki-NLP/opus-mt-en-xx`" in opened["hub_status"]
    assert opened["translation_state"].target_pieces[0] == "<pad>"
    assert "cc-by-4.0" in services.registry.get("Helsinki-NLP--opus-mt-en-xx").card


# Another server process sharing the cache, holding it while it opens a model: it says "held" once it has the lock,
# and lets it go when told on its standard input.
OTHER_PROCESS = ("import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
                 "sys.stdin.readline(); lock.release()")


def test_processes_sharing_the_hub_cache_open_one_model_at_a_time(marian_dir, tmp_path):
    hub_models = HubModels(tmp_path / "shared")
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(hub_models.cache_lock().lock_file)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "held\n"
        with pytest.raises(hub.HubError) as busy:
            hub_models.open(str(marian_dir), directories=True)
        assert said(busy.value.args[0], "en") == table("en")["model.hub.busy"]
        assert hub_models.converted() == {}
        other.communicate("done\n", timeout=60)
        name = hub_models.open(str(marian_dir), directories=True)
        assert (hub_models.directory / name / "config.json").is_file()
    finally:
        other.kill()


VISITOR = "203.0.113.7"  # a visitor of a public server (None: this machine's own user)


@pytest.mark.parametrize("repo_id, visitor, patterns, message", [
    ("someone/opus-mt-en-de", VISITOR, None, "opens only models matching Helsinki-NLP/opus-mt-"),
    *((repo_id, VISITOR, None, "opens only models matching Helsinki-NLP/opus-mt-") for repo_id in (  # over 600 MB
        "facebook/m2m100_418M", "alirezamsh/small100", "facebook/nllb-200-distilled-600M",
        "facebook/mbart-large-50-many-to-many-mmt")),
    ("facebook/m2m100_418M", VISITOR, "Helsinki-NLP/opus-mt-*,facebook/m2m100_*",  # admitted by the host, weighed
     "cannot be reached|more than the 600 MB"),
    ("facebook/mbart-large-cc25", VISITOR, None, "opens only models matching"),  # not a translator
    ("Helsinki-NLP/opus-mt-en-de", VISITOR, "", "turned off"),
    ("../../etc", None, None, "not a Hub model id"),
    ("Helsinki-NLP/opus-mt-en-zz", None, None, "cannot be reached"),
])
def test_a_hub_id_the_server_will_not_open_gets_one_sentence(tmp_path, monkeypatch, repo_id, visitor, patterns,
                                                             message):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    hub_models = HubModels(tmp_path / "converted", patterns=patterns)
    with pytest.raises(hub.HubError, match=message):
        hub_models.open(repo_id, visitor)
    left = {path.name for path in (tmp_path / "converted").glob("*")}
    assert left <= {hub_models.cache_lock().lock_file.rsplit("/", 1)[-1]}, "nothing but the processes' lock"


def test_a_public_visitors_download_limit_is_the_servers_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("EXPLORER_HUB_MODEL_MB", raising=False)
    assert HubModels(tmp_path).max_bytes == 600 * 10**6
    monkeypatch.setenv("EXPLORER_HUB_MODEL_MB", "2500")  # room for M2M100-418M's 1,936 MB
    assert HubModels(tmp_path).max_bytes == 2500 * 10**6


@pytest.mark.parametrize("language, forced", [("en", "was forced, not chosen"), ("de", "wurde vorgegeben"),
                                              ("fr", "a été imposé")])
def test_the_step_view_says_a_multilingual_models_language_token_was_forced_not_chosen(hub_services, language,
                                                                                       forced):
    checkpoint = hub_services.registry.get("tiny-m2m100").in_languages(target="ru")
    translation = checkpoint.translate(SENTENCE, max_length=4)
    steps = views.explorer.page_numbers(translation, language=language)["steps"]
    assert translation.predicted_pieces[0] == "__ru__" and forced in steps[0]["caption"]
    assert not any(forced in step["caption"] for step in steps[1:])
    mark = {"en": "forced", "de": "vorgegeben", "fr": "imposé"}[language]
    assert views.translate.revealed_pieces(translation, 3, language)[:3] == [("__ru__ ", mark), (
        translation.predicted_pieces[1] + " ", None), (translation.predicted_pieces[2] + " ", table(language)["translate.piece.current"])]


def test_a_multilingual_model_translates_into_the_language_picked_and_the_worker_follows(hub_services):
    """The picker shows the model's languages; picking one switches every tab to the model set for it, and a
    computation in the worker process (the beam tree) decodes into that language too."""
    demo = build_app(hub_services, "tiny-marian")
    page = PageDriver(demo)
    components = demo.named_components
    page.set(components["text"], SENTENCE)
    page.run(page.event("on_open", "ui.tabs.header"))
    assert page.value(components["target_language"]) is None, "a model of one pair has no languages to pick"
    page.set(components["model"], "tiny-m2m100")
    switched = page.run(page.event("on_model", "ui.tabs.header"))
    picker = next(update for component, update in switched.items()
                  if component is components["target_language"]).constructor_args
    assert picker["visible"] and ("Russian (ru)", "ru") in picker["choices"] and picker["value"] == "de"
    page.set(components["target_language"], "ru")
    page.run(page.event("on_language", "ui.tabs.header"))
    assert page.value(components["model"]) == "tiny-m2m100@ru"
    translation = page.value(components["translation_state"])
    assert translation.target_pieces[1] == "__ru__" and translation.forced_steps == 1
    page.run(page.event("on_tree"))
    hypotheses = page.value(components["hypotheses_state"])
    assert all(tokens[0] == translation.target_ids[1] for tokens, _ in hypotheses["hypotheses"])
    page.set(components["source_language"], "de")
    switched = page.run(page.event("on_language", "ui.tabs.header"))
    assert page.value(components["model"]) == "tiny-m2m100@de>ru"
    translation = page.value(components["translation_state"])
    assert translation.source_pieces[0] == "__de__" and translation.target_pieces[1] == "__ru__"
    box = next(update for name, update in switched.items() if name is components["text"])
    assert box.constructor_args["label"] == "German sentence"


@pytest.mark.parametrize("asked, opened", [("tiny-m2m100@ru", "tiny-m2m100@ru"), ("tiny-m2m100@tlh", "tiny-m2m100")])
def test_a_shared_link_opens_a_multilingual_model_in_its_language_or_else_in_the_models_own(hub_services, asked,
                                                                                             opened):
    demo = build_app(hub_services, "tiny-marian")
    page = PageDriver(demo)
    link = gr.Request(session_hash="link", query_params={"model": asked, "text": SENTENCE}, headers={},
                      client={"host": "127.0.0.1", "port": 4242})
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        page.run(page.event("on_open", "ui.tabs.header"), request=link)
    assert page.value(demo.named_components["model"]) == opened
    translation = page.value(demo.named_components["translation_state"])
    assert translation.target_pieces[1] == ("__ru__" if opened.endswith("@ru") else "__de__")
    said = [str(w.message) for w in warned]
    assert any("is not one of this model's languages" in message for message in said) == (asked != opened)


def test_one_sentence_into_several_languages_side_by_side_on_a_multilingual_model_only(hub_services):
    demo = build_app(hub_services, "tiny-marian")
    page = PageDriver(demo)
    components = demo.named_components
    page.set(components["text"], SENTENCE)
    page.run(page.event("on_open", "ui.tabs.header"))
    page.set(components["model"], "tiny-m2m100")
    switched = page.run(page.event("on_model", "ui.tabs.header"))
    offered = {name: update.constructor_args for name, update in switched.items()
               if name in (components["languages_section"], components["many_targets"])}
    assert offered[components["languages_section"]]["visible"] is True
    assert offered[components["many_targets"]]["value"] == ["de"]
    page.set(components["many_targets"], ["ru", "ja", "de"])
    page.run(page.event("on_languages"))
    rows = page.value(components["languages_table"])
    assert [row[0] for row in rows] == ["Russian (ru)", "Japanese (ja)", "German (de)"]
    assert all("←" in row[2] for row in rows)
    heatmaps = [trace for trace in page.value(components["languages_plot"]).data if trace.type == "heatmap"]
    assert len(heatmaps) == 3
    page.set(components["many_targets"], ["ru", "ja", "de", "cs", "en"])
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        page.run(page.event("on_languages"))
    assert any("Choose at most 4 languages (you chose 5)" in str(w.message) for w in warned)
    assert page.value(components["languages_table"]) == rows, "what was shown stays"
    page.set(components["model"], "tiny-marian")
    switched = page.run(page.event("on_model", "ui.tabs.header"))
    hidden = next(update for name, update in switched.items() if name is components["languages_section"])
    assert hidden.constructor_args["visible"] is False


@pytest.mark.parametrize("code, language, label", [
    ("deu_Latn", "en", "German (deu_Latn)"), ("de_DE", "de", "Deutsch (de_DE)"), ("ru", "fr", "russe (ru)"),
    ("zho_Hant", "en", "Chinese (zho_Hant)"), ("ast", "fr", "asturien (ast)"), ("acm_Arab", "en", "acm_Arab")])
def test_a_language_is_named_in_the_pages_language_beside_its_code_where_the_locales_name_it(code, language,
                                                                                            label):
    assert language_views.language_label(code, language) == label


def test_named_languages_come_first_in_the_pages_alphabetical_order():
    assert language_views.language_choices(["acm", "ru", "de", "en"], "de") == [
        ("Deutsch (de)", "de"), ("Englisch (en)", "en"), ("Russisch (ru)", "ru"), ("acm", "acm")]


def test_the_word_order_lesson_compares_one_multilingual_model_into_german_and_french_where_one_is_open(
        hub_services):
    """The same weights, two language tokens: where a multilingual model is open, the lesson's pair is that model
    into German and into French, instead of two models."""
    lesson = next(lesson for lesson in LESSONS if lesson.key == "word_order")
    shown = lessons_tab.pair_views(hub_services, lesson, None)
    left, right = shown["pair_left_caption"], shown["pair_right_caption"]
    assert left.startswith("**English → German** · tiny\\-m2m100")  # the name as Markdown escapes it
    assert right.startswith("**English → French** · tiny\\-m2m100")
    assert shown["pair_left_plot"] is not None and shown["pair_right_plot"] is not None
    bundled_only = Services(ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu"))
    assert "· multi30k\\-en\\-fr" in lessons_tab.pair_views(bundled_only, lesson, None)["pair_right_caption"]

    class TooBigToLoad(ModelRegistry):  # as a real one is under the default EXPLORER_MODELS_MB
        def get(self, name):
            if name.startswith("tiny-m2m100"):
                raise CheckpointError("tiny-m2m100 needs more memory than this server keeps for models")
            return hub_services.registry.get(name)
    crowded = Services(TooBigToLoad(hub_services.registry.roots, device="cpu"))
    assert "· multi30k\\-en\\-fr" in lessons_tab.pair_views(crowded, lesson, None)["pair_right_caption"]


def test_the_word_order_question_is_asked_of_the_multilingual_model_the_lesson_compares_where_one_is_open(
        hub_services):
    lesson = next(lesson for lesson in LESSONS if lesson.key == "word_order")
    question = hub_services.ask(lesson)  # as a class asks it: in the costly slot, from the models on disk
    layers = hub_services.registry.get("tiny-m2m100").model.config.n_decoder_layers
    assert said(question.text, "en") == (f"In French, the heads of layer {layers} on average: is the word that looks "
                                         "most at 'red' written before or after the word that looks most at 'ball'?")
    assert question.view.columns[0] == "__en__" and question.view.rows[0] == "__fr__"

    class TooBigToLoad(ModelRegistry):  # as real ones are on a CPU without bfloat16 arithmetic
        def get(self, name):
            if name.startswith(tuple(f"tiny-{family}" for family in MULTILINGUAL)):
                raise CheckpointError(f"{name} needs more memory than this server keeps for models")
            return hub_services.registry.get(name)
    crowded = Services(TooBigToLoad(hub_services.registry.roots, device="cpu"))
    bundled = crowded.ask(lesson)  # of multi30k-en-fr, as the lesson's pair then shows it
    assert said(bundled.text, "en").startswith("In French, head 2 of layer 3:")
