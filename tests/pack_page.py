"""The offline pack's page in Chromium, opened from disk with every request that would leave its folder refused."""

from __future__ import annotations

import json
from pathlib import Path

LOCAL = ("file:", "data:", "blob:")


class OpenedPack:
    """A pack's page in Chromium, opened from disk; ``left`` lists each request that would have left it."""

    def __init__(self, browser, folder: Path, before_load: str = "", query: str = ""):
        self.page = browser.new_page()
        self.left: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        if before_load:
            self.page.add_init_script(before_load)
        self.page.goto((folder / "index.html").as_uri() + query)

    def _route(self, route):
        if route.request.url.startswith(LOCAL):
            route.continue_()
        else:
            self.left.append(route.request.url)
            route.abort()

    def settled(self, timeout: float = 60_000) -> str:
        """Wait until the page is ready to translate or has said what went wrong; the status or the problem."""
        self.page.wait_for_function("document.getElementById('problem').textContent || "
                                    "!document.getElementById('translate').disabled", timeout=timeout)
        return self.page.text_content("#problem") or self.page.text_content("#status")

    def answer(self, script: str, argument=None):
        """What the page's ``script`` (a function, maybe async) answers for ``argument``, sent as JSON text
        (Playwright's own transfer of large nested arrays of numbers is many times slower)."""
        return json.loads(self.page.evaluate(f"async (argument) => JSON.stringify(await ({script})(argument))",
                                             argument))

    def translate(self, text: str, **options) -> dict:
        """What ``window.explorerPack.translate`` answers, sent as JSON text (Playwright's own transfer of nested
        arrays of numbers took most of a test's time)."""
        return json.loads(self.page.evaluate(
            "async ([text, options]) => JSON.stringify(await explorerPack.translate(text, options))", [text, options]))

    def close(self):
        self.page.close()
