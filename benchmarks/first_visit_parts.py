"""What each part of the page costs a first visit: the same page served with parts of it left out.

Starts ``python app.py`` as browser_latency.py does (training off: the Train tab is one note), reads its English
page once, and serves that page to Chromium (through Playwright's routing) with Gradio's config cut down to a part
of the page: the components under the kept parts of its layout, and the events that use nothing else. The page's
opening event (its first translation) is left out of every part, the whole page's included, so that each figure
is Gradio building that part in the browser and nothing more (browser_latency.py's first_load_ms has the first
translation on the server beside it). The page's own scripts and styles stay. Each figure is the median over
``--visits`` first visits (a new browser context each, nothing cached), from navigation until the text box and
the Translate button can be used (browser_latency.py's USABLE_JS), after one untimed visit of each; the parts are
visited in turn, so a slower minute of the machine falls on all of them.

- box_and_button: only the source text box and the Translate button (the page's scaffolding, Gradio's runtime,
  the page's scripts: the floor of this page);
- outside_tabs: those two and everything outside the tabs (the model picker, the Hub, lessons and class panels,
  hidden helpers);
- translate_tab: those two and the Translate tab, nothing outside the tabs;
- opening_view: everything but the other tabs (what a visitor sees first);
- whole_page: the page as served.
Each comes with the count of components and events it keeps.

    python benchmarks/first_visit_parts.py --json
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from browser_latency import BROWSER_ARGS, TIMEOUT_MS, USABLE_JS, start_app, stop_app, wait_until_serving
from common import ROOT, machine

CONFIG_START, CONFIG_END = "window.gradio_config = ", ";</script>"
KEPT_ELEMENTS = ("source-text", "translate-button")  # the page is usable once these two are


def config_of(page: str) -> tuple[dict, int, int]:
    """Gradio's config in a served page, and where its JSON starts and ends."""
    start = page.index(CONFIG_START) + len(CONFIG_START)
    end = page.index(CONFIG_END, start)
    return json.loads(page[start:end]), start, end


def subtree(node: dict) -> set[int]:
    return {node["id"]}.union(*(subtree(child) for child in node.get("children", [])))


def parts(config: dict) -> dict[str, set[int]]:
    """The component ids each measured part keeps (its layout nodes; their ancestors are kept with them)."""
    components = {c["id"]: c for c in config["components"]}
    everything = subtree(config["layout"])
    tab_items = {}

    def find_tabs(node: dict) -> None:
        component = components.get(node["id"], {})
        if component.get("type") == "tabitem":
            tab_items[component["props"].get("label")] = subtree(node)
            return
        for child in node.get("children", []):
            find_tabs(child)

    find_tabs(config["layout"])
    first_tab = next(iter(tab_items.values()))  # the tab the page opens on
    in_tabs = set().union(*tab_items.values())
    kept = {c["id"] for c in components.values() if c["props"].get("elem_id") in KEPT_ELEMENTS}
    if len(kept) != len(KEPT_ELEMENTS):
        raise RuntimeError(f"the page has no {' or '.join(KEPT_ELEMENTS)}")
    return {"box_and_button": kept, "outside_tabs": kept | (everything - in_tabs), "translate_tab": kept | first_tab,
            "opening_view": (everything - in_tabs) | first_tab, "whole_page": everything}


def cut_down(page: str, keep: set[int]) -> tuple[str, int, int]:
    """The page with its config holding the layout nodes ``keep`` (and their ancestors) and the events that use
    nothing else, less the page's opening event; the numbers of components and events left."""
    config, start, end = config_of(page)

    def kept(node: dict) -> bool:
        return node["id"] in keep or any(kept(child) for child in node.get("children", []))

    def prune(node: dict) -> dict:
        if "children" in node:
            node["children"] = [prune(child) for child in node["children"] if kept(child)]
        return node

    layout = prune(config["layout"])
    left = subtree(layout)
    config["components"] = [c for c in config["components"] if c["id"] in left]
    for component in config["components"]:
        if component["props"].get("elem_id") in KEPT_ELEMENTS:  # no event of a small part may read the box
            component["props"]["interactive"] = True  # (Gradio would show it as text); as on the page
    events, kept_events = [], set()
    for event in config["dependencies"]:  # in order: an event a chain follows comes before it
        uses = [*(target for target, _ in event["targets"] if target is not None), *event["inputs"],
                *event["outputs"], *(event.get("show_progress_on") or [])]
        opening = any(trigger == "load" for _, trigger in event["targets"])
        follows = event.get("trigger_after")
        if not opening and set(uses) <= left and (follows is None or follows in kept_events):
            events.append(event)
            kept_events.add(event["id"])
    for event in events:
        event["cancels"] = [other for other in event.get("cancels") or [] if other in kept_events]
    config["dependencies"] = events
    for shown in config.get("page", {}).values():  # Gradio 6 draws a page from its own copy of the layout
        shown.update(layout=layout, components=[i for i in shown["components"] if i in left],
                     dependencies=[e["id"] for e in events])
    # As Gradio writes it: a "<" inside the config would end its <script> early.
    text = json.dumps(config, separators=(",", ":")).replace("<", "\\u003c")
    return page[:start] + text + page[end:], len(config["components"]), len(events)


def first_visit_ms(browser, url: str, page_html: str) -> float:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        context.route(url, lambda route, request: route.fulfill(status=200, content_type="text/html; charset=utf-8",
                                                                body=page_html))
        page = context.new_page()
        started = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_function(USABLE_JS, timeout=TIMEOUT_MS)
        return 1000 * (time.perf_counter() - started)
    finally:
        context.close()


def measure(url: str, visits: int) -> dict:
    request = urllib.request.Request(url, headers={"Accept": "text/html", "Accept-Language": "en"})
    with urllib.request.urlopen(request) as answer:
        served = answer.read().decode("utf-8")
    config, _, _ = config_of(served)
    pages = {name: cut_down(served, keep) for name, keep in parts(config).items()}
    times: dict[str, list[float]] = {name: [] for name in pages}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=BROWSER_ARGS)
        try:
            for visit in range(visits + 1):  # the first round untimed
                for name, (page_html, _, _) in pages.items():
                    ms = first_visit_ms(browser, url, page_html)
                    if visit:
                        times[name].append(round(ms, 1))
        finally:
            browser.close()
    return {name: {"first_load_ms": statistics.median(times[name]), "runs": times[name], "components": components,
                   "events": events} for name, (_, components, events) in pages.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--visits", type=int, default=7, help="timed first visits of each part")
    parser.add_argument("--port", type=int, help="default: a free port on 127.0.0.1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with socket.socket() as s:  # a free port, unless one is given
        s.bind(("127.0.0.1", 0))
        port = args.port or s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    with tempfile.TemporaryFile() as log:
        process = start_app(args.repo.resolve(), port, log)
        try:
            wait_until_serving(url, process)
            result = {"machine": machine(), "visits": max(1, args.visits), **measure(url, max(1, args.visits))}
        finally:
            stop_app(process)
    if args.json:
        print(json.dumps(result))
        return
    print(result["machine"])
    for name, part in result.items():
        if isinstance(part, dict):
            print(f"{name:15s} {part['first_load_ms']:7.0f} ms  ({part['components']} components, "
                  f"{part['events']} events)")


if __name__ == "__main__":
    main()
