"""The pages built once the server serves (the students' pages, the page in German and French): a request for one
waits until it is built, never "not found"; a page that cannot be built is a sentence, and the others still come;
and no handler's code runs while a page is being built, so that a component a handler makes never joins it."""

import asyncio
import json
import threading
import urllib.request

import gradio as gr

from helpers import serve_on_loopback
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS
from ui import services
from ui.build import LaterPage, build_app, close_app, launch_options
from ui.runtime.language import table
from ui.runtime.later_pages import HANDLERS, HandlersOrBuilding, LaterPages, WaitForLaterPages
from ui.runtime.page import Page


def test_a_request_for_a_page_not_built_yet_waits_for_it_and_one_for_another_path_does_not():
    started, release = threading.Event(), threading.Event()

    def slow_page():
        started.set()
        release.wait(60)
        return "students' page in German"

    async def scenario():
        later, mounted = LaterPages(), {}

        async def mount(path, blocks):
            mounted[path] = blocks

        building = later.start({"/class/": lambda: "students' page", "/class/de/": slow_page}, mount)
        await asyncio.to_thread(started.wait, 60)
        asked = [asyncio.create_task(later.ready(path)) for path in ("/class/de/gradio_api/info", "/class")]
        assert await later.ready("/classes/") and await later.ready("/gradio_api/info"), "other paths pass at once"
        await asyncio.sleep(0)
        assert not any(task.done() for task in asked), "both wait: /class/ is built after /class/de/, below it"
        release.set()
        assert await asyncio.gather(*asked) == [True, True]
        await building
        return mounted

    mounted = asyncio.run(scenario())
    assert list(mounted.items()) == [("/class/de/", "students' page in German"), ("/class/", "students' page")]


def test_a_page_that_cannot_be_built_is_a_sentence_in_its_language_and_the_next_page_still_comes(caplog):
    def broken():
        raise RuntimeError("no memory left")

    async def scenario():
        later, mounted = LaterPages(), []

        async def mount(path, blocks):
            mounted.append(path)

        await later.start({"/class/": lambda: "students' page", "/class/fr/": broken}, mount)
        sent = []

        async def send(message):
            sent.append(message)

        async def page(scope, receive, send):
            raise AssertionError("a page that is not there is not asked for")

        await WaitForLaterPages(page, later)({"type": "http", "path": "/class/fr/config", "headers": []}, None,
                                             send)
        return mounted, sent

    mounted, sent = asyncio.run(scenario())
    assert mounted == ["/class/"]
    assert sent[0]["status"] == 503 and json.loads(sent[1]["body"])["detail"] == table("fr")["runtime.page_not_built"]
    assert "the page at /class/fr/ could not be built" in caplog.text and "no memory left" in caplog.text


def test_no_handler_runs_while_a_page_is_built_so_the_component_it_makes_stays_out_of_that_page():
    page = Page(services=None)
    page.add(head=gr.Slider(1, 4, render=False))
    made = []

    def on_layer() -> dict:  # a handler answering with a new component, as many here do
        made.append(gr.Slider(1, 8, value=2))
        return {"head": made[-1]}

    handler = page.handler(on_layer)
    building, handled = threading.Event(), threading.Event()

    def build():
        with gr.Blocks() as blocks:
            building.set()
            gr.Textbox()
            handler_thread.join(0.5)  # looking for a handler that ran: one that is held off never fails this
            assert handler_thread.is_alive() and not made
        return blocks

    handler_thread = threading.Thread(target=lambda: (building.wait(60), handler(), handled.set()))
    handler_thread.start()
    with HANDLERS.building():
        blocks = build()
    assert handled.wait(60) and made
    assert not any(isinstance(block, gr.Slider) for block in blocks.blocks.values())


def test_the_server_serves_the_english_page_then_builds_the_others_and_serves_each_in_its_language():
    release = threading.Event()
    demo = build_app(services.Services(services.ModelRegistry([REPOSITORY_CHECKPOINTS], device="cpu")),
                     "reverse-tiny")
    assert set(demo.later_pages) == {"/de/", "/fr/", "/class/", "/class/de/", "/class/fr/"}
    german = demo.later_pages["/de/"]
    demo.later_pages["/de/"] = LaterPage("de", lambda: (release.wait(60), german.build())[1])
    serve_on_loopback(demo, **launch_options())
    try:
        with urllib.request.urlopen(demo.local_url, timeout=60) as english:
            assert english.status == 200, "served while the German page is still to be built"
        answer = {}
        asking = threading.Thread(target=lambda: answer.update(page=urllib.request.urlopen(
            urllib.request.Request(demo.local_url + "de/", headers={"Accept": "text/html"}), timeout=60).read()))
        asking.start()
        asking.join(0.5)  # looking for an answer too soon: a request that waits never fails this
        assert asking.is_alive(), "the request for the German page waits for it"
        release.set()
        asking.join(60)
        assert table("de")["page.title"] in answer["page"].decode("utf-8")
        with urllib.request.urlopen(demo.local_url + "class/fr/", timeout=60) as french:
            assert french.status == 200
    finally:
        release.set()
        close_app(demo)


def test_a_long_handler_holds_back_the_page_waiting_to_be_built_never_the_other_handlers():
    lock, started, release, asking, built = (HandlersOrBuilding(), threading.Event(), threading.Event(),
                                             threading.Event(), threading.Event())

    def long_handler():  # a computation of a minute, just after start-up
        with lock.handling():
            started.set()
            release.wait(60)

    def builder():
        asking.set()
        with lock.building():
            built.set()

    threads = [threading.Thread(target=long_handler), threading.Thread(target=builder)]
    threads[0].start()
    assert started.wait(60)
    threads[1].start()
    assert asking.wait(60)
    other_click = threading.Event()

    def other_handler():
        with lock.handling():
            other_click.set()

    threading.Thread(target=other_handler).start()
    assert other_click.wait(60), "another visitor's click runs while the page waits"
    assert not built.is_set(), "the page is not built while the long handler runs"
    release.set()
    assert built.wait(60), "then it is"
