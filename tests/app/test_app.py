"""The app through its HTTP API, as a gradio_client user (or the browser) talks to it."""

import json
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from gradio_client import Client
from gradio.components.plot import PlotData
from gradio_client.exceptions import AppError

from transformer import errors
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui import services
from ui.build import build_app, close_app, remember_signatures
from ui.runtime.chart import Chart
from ui.runtime.errors import as_user_message
from ui.views import text

from helpers import serve_on_loopback

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def app_url():
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    serve_on_loopback(demo)
    yield demo.local_url
    close_app(demo)


@pytest.fixture
def client(app_url):
    return Client(app_url, verbose=False)


def test_every_endpoint_the_running_app_offers_is_in_the_readme_and_a_classs_in_the_classroom_doc(client):
    offered = {name.lstrip("/") for name in client.view_api(print_info=False, return_format="dict")["named_endpoints"]}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    classroom = (ROOT / "docs" / "classroom.md").read_text(encoding="utf-8")
    assert {"translate", "keep_stopped_model", "class_open"} <= offered
    assert sorted(name for name in offered if f"`/{name}`" not in (classroom if name.startswith("class_") else readme)) \
        == []
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {name for doc in docs for name in re.findall(r"`/(\w+)`", doc.read_text(encoding="utf-8"))}
    assert sorted(named - offered) == [], "an endpoint a doc names that the app does not offer"


def translate(client, text, decoding="beam", beam=4, max_tokens=40, model="reverse-tiny"):
    return client.predict(model, text, decoding, beam, max_tokens, api_name="/translate")


def test_translate_endpoint_returns_translation_and_source_pieces(client):
    translation, notes, pieces, step, download = translate(client, "5 6 7 8")
    assert translation == "8 7 6 5"
    assert [p["token"].strip() for p in pieces][-1] == "</s>"
    assert step["value"] == 5  # four digits and </s>
    assert download["visible"] is False, "no file is written unless asked for"


def test_the_raw_attention_of_the_clients_last_translation_comes_as_a_file_when_asked(client):
    translate(client, "5 6 7 8")
    download = client.predict(api_name="/attention")
    contract = json.loads(Path(download["value"]).read_text())
    assert contract["translation"] == "8 7 6 5" and len(contract["attention"]["cross"]) == 2


@pytest.mark.parametrize("text", ["", "    ", "\n"])
def test_empty_input_gets_a_clear_message_not_a_stack_trace(client, text):
    with pytest.raises(AppError, match="empty") as error:
        translate(client, text)
    assert "Traceback" not in str(error.value)


def test_input_length_is_enforced_on_the_server(client):
    translation, notes, pieces, *_ = translate(client, "1 " * 3000, decoding="greedy")
    assert "cut" in notes
    assert translation


@pytest.mark.parametrize("text", ["<img src=x onerror=alert(1)>", "😀😀", "\u202eabc", "שלום עולם", "a\x00b"])
def test_hostile_or_unusual_input_is_answered(client, text):
    translation, notes, pieces, *_ = translate(client, text, decoding="greedy")
    assert translation.strip() or notes, "a translation, or a note saying why there is none"
    assert pieces and pieces[-1]["token"].strip() == "</s>" and all(p["token"].strip() for p in pieces[:-1])


def test_unknown_model_names_are_refused(client):
    # Gradio's dropdown refuses values outside its choices before our code runs; the registry refuses again.
    with pytest.raises(AppError, match="not in the list of choices|no checkpoint named"):
        translate(client, "1 2 3", model="../../etc")


def test_forced_decoding_endpoint(client):
    probabilities, attention = client.predict("reverse-tiny", "1 2 3", "3 2 1", 2, "mean of heads",
                                              api_name="/forced")
    bars = json.loads(probabilities["plot"])["data"][0]
    heatmap = json.loads(attention["plot"])["data"][0]
    assert len(bars["y"]) == 4, "one probability per token of the translation, and one for its end"
    assert np.asarray(heatmap["z"]).shape == (4, 4), "a row per target token, a column per source token"
    assert all(0 < p <= 1 for p in bars["y"])


def test_concurrent_users_each_get_their_own_translation(app_url):
    sentences = ["1 2 3", "4 5 6 7", "9 8 7 6 5", "0 1 0 2", "3 3 4", "7 1 2 8 9 4"]

    def one_user(text):
        return translate(Client(app_url, verbose=False), text)[0]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(one_user, sentences))
    assert results == [" ".join(reversed(s.split())) for s in sentences]


def test_error_messages_are_escaped_because_the_browser_shows_them_as_html():
    with pytest.raises(gr.Error) as error, as_user_message("refuse"):
        raise errors.InputError("a <unk> & a </s>")
    assert error.value.message == "a &lt;unk&gt; &amp; a &lt;/s&gt;"


def test_switching_to_another_kind_of_model_and_back_brings_the_typed_sentence_back(client):
    sentence = "A cat sleeps on a warm windowsill."

    def switch(model, text):  # the input box after the switch: an update with a value, or left as it was
        box = client.predict(model, text, 1, 1, api_name="/select_model")[7]
        assert box["label"] == ("Digits" if model == "reverse-tiny" else "English sentence")
        return box.get("value", text)

    assert switch("multi30k-en-de", sentence) == sentence, "a sentence that suits the model is left alone"
    digits = switch("reverse-tiny", sentence)
    assert text.text_kind(digits) == "digits"
    assert switch("multi30k-en-de", "5 4 3") == sentence
    assert switch("reverse-tiny", sentence) == "5 4 3"


def test_a_taken_port_is_one_clear_line_not_a_traceback():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is taken" in done.stderr and "--port" in done.stderr
    assert "Traceback" not in done.stderr


def test_step_replays_the_clients_last_translation_with_four_values(client):
    translate(client, "5 6 7 8", decoding="greedy")
    revealed, candidates, attention, caption = client.predict(2, 1, 1, False, api_name="/step")
    current = [piece["token"] for piece in revealed if piece["class_or_confidence"] == "current"]
    assert current == ["▁7 "], "the second token of '8 7 6 5' is the current one"
    assert "Step 2 of 5" in caption
    bars = json.loads(attention["plot"])["data"][0]
    assert len(bars["y"]) == 5 and abs(sum(bars["y"]) - 1) < 1e-4, "a weight per source piece, summing to 1"


def test_an_api_client_reads_a_refusal_as_plain_text(client):
    with pytest.raises(AppError) as refused:
        client.predict("nonexistent<x>", "1 2 3", "greedy", 2, 40, api_name="/translate")
    assert "no checkpoint named 'nonexistent<x>'" in str(refused.value) and "&lt;" not in str(refused.value)


def test_both_bundled_translators_are_offered_and_the_german_one_opens_the_app():
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")
    assert {"multi30k-en-de", "multi30k-en-fr", "reverse-tiny"} <= set(registry.names())
    assert registry.default_name() == "multi30k-en-de"


def test_the_positional_encoding_charts_are_drawn_when_their_tab_opens_not_with_the_page():
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    charts = {block._id for block in demo.blocks.values() if isinstance(block, Chart) and block.label in (
        "The encoding matrix", "Dimensions across positions", "Dot products between positions")}
    assert len(charts) == 3

    def drawn_by(trigger: str) -> set[int]:
        return {output._id for event in demo.fns.values() if trigger in (name for _, name in event.targets)
                for output in event.outputs}

    assert not charts & drawn_by("load"), "the page's first load carries no chart of a tab nobody opened"
    assert charts <= drawn_by("select")


def test_a_new_visitors_session_is_set_up_as_gradio_would_without_recomputing_what_never_changes():
    from gradio.state_holder import SessionState

    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    constructors = {type(block).__init__ for block in demo.blocks.values()}
    assert all("__signature__" in init.__dict__ for init in constructors), "each kind's signature worked out once"
    remembered = SessionState(demo).config_values
    for init in constructors:
        del init.__signature__
    try:
        assert SessionState(demo).config_values == remembered
    finally:
        remember_signatures(demo)
    chart = next(block for block in demo.blocks.values() if isinstance(block, Chart))
    assert chart.api_info() is Chart().api_info() and chart.api_info() == PlotData.model_json_schema()


def test_translations_of_the_translate_tab_the_opening_and_a_model_switch_name_no_other_tabs_views():
    """Each output an event names costs the server a component and the page a status update on every later event,
    even when it is left as it is (Gradio 6): the Translate tab's own translations, the page's first one and a
    model switch name none of the views another tab draws of a translation when it is opened (or redrawn, for the
    tab on screen after a model switch)."""
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")

    def outputs(name: str) -> set[int]:
        return {output._id for event in demo.fns.values() if event.name == name for output in event.outputs}

    opened = [event for event in demo.fns.values() if (event.name or "").endswith("_opened")
              and event.name != "on_translate_opened" and any(trigger == "select" for _, trigger in event.targets)]
    # Views: what shows a translation, not the selectors a model switch sizes.
    drawn_when_opened = {output._id for event in opened for output in event.outputs
                         if not isinstance(output, (gr.State, gr.Slider, gr.Dropdown, gr.Textbox))}
    assert len(opened) >= 4 and len(drawn_when_opened) > 20
    for name in ("on_translate_click", "on_example_then_translate", "on_open", "on_model", "on_open_from_hub"):
        assert demo.named_components["translation"]._id in outputs(name)
        names = {component._id: key for key, component in demo.named_components.items()}
        assert not {names[i] for i in outputs(name) & drawn_when_opened}, name


def test_the_page_shows_a_translation_under_way_on_its_text_and_hidden_progress_on_nothing():
    """Gradio's page updates every component any event has shown progress on, at each step of every later event
    (170 ms of a Translate click in Chromium once every tab's views had been named): translations show theirs on
    the translation box and the control that asked, and an event with hidden progress on no component."""
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    names = {component._id: name for name, component in demo.named_components.items()}
    shown_on = {event.name: {names.get(c._id) for c in event.show_progress_on}
                for event in demo.fns.values() if event.show_progress_on is not None}
    assert shown_on["on_translate_click"] == shown_on["on_open"] == {"translation"}
    assert shown_on["on_model"] == {"model_status", "translation"}
    assert shown_on["on_show_me"] == {"lesson_text", "translation"}
    hidden = [event for event in demo.fns.values()
              if event.fn is not None and event.outputs and event.show_progress == "hidden"]
    assert hidden and all(event.show_progress_on == [] for event in hidden)


def test_what_looks_into_the_last_translation_reads_the_model_that_made_it_not_the_model_list():
    """During a model switch the model list already names the new model while the translation (and what was
    computed from it) is still the old one's: a tab that paired the two would compute one model over another's
    tokens. Every event that sets the translation also sets the name of its model, and every event that reads
    something made from the translation reads that name."""
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    named = demo.named_components
    made_from_translation = {named[name]._id for name in ("translation_state", "last_comparison", "hypotheses_state")}
    readers = [event for event in demo.fns.values() if made_from_translation & {c._id for c in event.inputs}]
    setters = [event for event in demo.fns.values() if named["translation_state"] in event.outputs]
    assert len(readers) > 15 and len(setters) >= 5
    for event in setters:
        assert named["translation_model"] in event.outputs, event.name
    for event in readers:
        assert named["model"] not in event.inputs, event.name
    assert sum(named["translation_model"] in event.inputs for event in readers) > 10


def test_a_model_is_switched_once_per_pick_on_the_dropdowns_select_event():
    """Gradio 6's dropdown sends one pick as two input events (as it is chosen, and as its list closes) and another
    each time it loses focus; its select event comes once per pick, by mouse or keyboard."""
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")), "reverse-tiny")
    model = demo.named_components["model"]
    triggers = {target for event in demo.fns.values() if event.name == "on_model" for target in event.targets}
    assert triggers == {(model._id, "select")}
    assert not [event.name for event in demo.fns.values() if (model._id, "input") in event.targets]
