"""After every event, what the Translate tab draws is what its controls say: a seeded random walk through the page
in Chromium (lessons, translations, examples, steps, layers, heads, attention types, views, averaging, model and
page-language switches, a token overridden in Experiments), with shown_views.py's check after each event.

A failure names the seed and every event up to it, so the same walk can be run again: the walk is the seed's
alone (``VIEWS_WALK_SEED`` runs another).
"""

import os
import random

import pytest

from browsing import answered, asked_in_all, count_requests
from shown_views import disagreements, shown
from ui.runtime.language import LANGUAGES, table
from ui.views import lessons

playwright = pytest.importorskip("playwright.sync_api")

SEED = int(os.environ.get("VIEWS_WALK_SEED", "70"))
EVENTS = int(os.environ.get("VIEWS_WALK_EVENTS", "40"))  # a longer walk on request; 40 meet every kind
SENTENCES = {"words": ["A man is riding a horse on the beach.", "Two children play football in the park.",
                       "A woman reads a book.", "The old man sells fish at the market."],
             "digits": ["1 2 3", "5 9 2 6 5", "3 1 4 1 5 9 2 6"]}
# The page's own drawing, counted: a change of a selector has been handled once the count grows.
COUNT_DRAWING = """() => {
  window.explorerCalls = 0;
  for (const name of ["show", "step", "select"]) {
    const own = window.explorer[name];
    window.explorer[name] = (...args) => { window.explorerCalls += 1; return own(...args); };
  }
}"""


class Walk:
    """One visitor's page, and the events a walk is made of: each acts, then waits until the page has handled it
    (its requests asked and answered, its charts drawn), never for a length of time."""

    def __init__(self, page, url: str, rng: random.Random):
        self.page, self.url, self.rng = page, url, rng
        self.done: list[str] = []

    # --- the page ---

    def words(self, key: str) -> str:
        return table(self.page.evaluate("document.documentElement.lang"))[key]

    def opened(self) -> None:
        self.page.wait_for_selector("#attention-plot .js-plotly-plot", timeout=90_000)
        self.page.wait_for_function("() => window.explorer && window.explorer.drawn()", timeout=60_000)
        answered(self.page)
        self.page.evaluate(COUNT_DRAWING)

    def on_tab(self, tab: str) -> None:
        button = self.page.locator(f"button[role=tab][data-tab-id={tab}]")
        if button.get_attribute("aria-selected") != "true":
            button.click()
            playwright.expect(button).to_have_attribute("aria-selected", "true")

    def asking(self, act) -> None:
        """``act``, an event the server answers: until its requests are made and answered, and drawn."""
        before = asked_in_all(self.page)
        act()
        self.page.wait_for_function("n => window.askedInAll() > n", arg=before, timeout=30_000)
        answered(self.page)

    def drawing(self, act) -> None:
        """``act``, an event the page draws itself: until the page's drawing has run, and any maps it lacked come."""
        before = self.page.evaluate("window.explorerCalls")
        act()
        self.page.wait_for_function("n => window.explorerCalls > n", arg=before, timeout=30_000)
        answered(self.page)

    def typed(self, slider: str, value: int) -> None:
        box = self.page.locator(f"#{slider} input[type=number]")
        box.fill(str(value))
        box.press("Enter")

    # --- the events ---

    def lesson(self) -> str:
        language = self.page.evaluate("document.documentElement.lang")
        label, choice = self.rng.choice(lessons.lesson_choice_labels(language))
        header = self.page.locator("#lessons .label-wrap").first
        if "open" not in (header.get_attribute("class") or ""):
            header.click()
        box = self.page.locator("#lessons input").first
        box.click()
        box.fill(label)
        box.press("Enter")
        playwright.expect(box).to_have_value(label)
        self.asking(lambda: self.page.locator("#show-me").click())
        return f"lesson {choice!r}"

    def translate(self) -> str:
        self.on_tab("translate")
        model = self.page.locator("#model-choice input").first.input_value()
        sentence = self.rng.choice(SENTENCES["digits" if model == "reverse-tiny" else "words"])
        self.page.locator("#source-text textarea").fill(sentence)
        self.asking(lambda: self.page.locator("#translate-button").click())
        return f"translate {sentence!r}"

    def example(self) -> str:
        self.on_tab("translate")
        examples = self.page.locator("#examples button.gallery-item")
        index = self.rng.randrange(min(3, examples.count()))
        self.asking(lambda: examples.nth(index).click())
        return f"example {index + 1}"

    def step(self) -> str:
        self.on_tab("translate")
        steps = int(self.page.locator("#step-slider input[type=number]").get_attribute("max"))
        way = self.rng.choice(["previous", "next", "typed"])
        if way == "typed":
            value = self.rng.choice([v for v in range(1, steps + 3) if v != shown(self.page)["controls"]["step"]])
            self.drawing(lambda: self.typed("step-slider", value))
            return f"step typed {value}"
        name = self.words(f"translate.step.{way}")
        self.drawing(lambda: self.page.get_by_role("button", name=name, exact=True).click())
        return f"step {way}"

    def layer(self) -> str:
        return self.typed_selector("layer")

    def head(self) -> str:
        if shown(self.page)["controls"]["average"]:  # the head slider is off while the heads are averaged
            return self.average()
        return self.typed_selector("head")

    def typed_selector(self, name: str) -> str:
        """A layer or head typed, another than shown, up to one past the slider's end."""
        self.on_tab("translate")
        controls = shown(self.page)["controls"]
        most = int(self.page.locator(f"#{name}-slider input[type=number]").get_attribute("max"))
        value = self.rng.choice([v for v in range(1, most + 2) if v != controls[name]])
        self.drawing(lambda: self.typed(f"{name}-slider", value))
        return f"{name} typed {value}"

    def radio(self, elem_id: str, what: str) -> str:
        self.on_tab("translate")
        options = self.page.locator(f"#{elem_id} input[type=radio]")
        index = self.rng.choice([i for i in range(options.count()) if not options.nth(i).is_checked()])
        value = options.nth(index).get_attribute("value")
        self.drawing(lambda: options.nth(index).check())
        return f"{what} {value!r}"

    def kind(self) -> str:
        return self.radio("attention-kind", "attention type")

    def view(self) -> str:
        return self.radio("attention-view", "view")

    def average(self) -> str:
        self.on_tab("translate")
        self.drawing(lambda: self.page.locator("#average-heads input").click())
        return "average heads toggled"

    def model(self) -> str:
        box = self.page.locator("#model-choice input").first
        current = box.input_value()
        box.click()
        options = self.page.get_by_role("option")
        listed = [name.replace("✓", "").strip() for name in options.all_inner_texts()]  # ✓ marks the chosen one
        chosen = self.rng.choice(sorted(name for name in listed if name and name != current))
        self.asking(lambda: self.page.get_by_role("option", name=chosen, exact=True).click())
        playwright.expect(box).to_have_value(chosen)
        return f"model {chosen}"

    def language(self) -> str:
        current = self.page.evaluate("document.documentElement.lang")
        chosen = self.rng.choice([code for code in LANGUAGES if code != current])
        self.page.locator("#page-languages").get_by_role("link", name=LANGUAGES[chosen]).click()
        self.page.wait_for_function("lang => document.documentElement.lang === lang", arg=chosen, timeout=60_000)
        self.opened()
        return f"page in {chosen}"

    def override(self) -> str:
        self.on_tab("experiments")
        section = self.page.get_by_text(self.words("experiments.override_token"), exact=True)
        if self.page.get_by_role("button", name=self.words("experiments.continue_button")).is_hidden():
            section.click()
        self.asking(lambda: self.page.get_by_role("button", name=self.words("experiments.continue_button")).click())
        return "a token overridden"

    WEIGHTS = {"step": 10, "layer": 5, "head": 5, "kind": 6, "view": 6, "average": 3, "translate": 6, "example": 3,
               "lesson": 9, "model": 4, "language": 2, "override": 2}

    def next_event(self) -> tuple[str, str]:
        """The next event, chosen at random by ``WEIGHTS``, done: its name, and what was done."""
        names = list(self.WEIGHTS)
        name = self.rng.choices(names, weights=[self.WEIGHTS[n] for n in names])[0]
        return name, getattr(self, name)()


@pytest.mark.slow
def test_a_random_walk_of_page_events_leaves_every_view_showing_what_its_controls_hold(app_url, browser):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    count_requests(page)
    page.goto(app_url[0])
    walk = Walk(page, app_url[0], random.Random(SEED))
    walk.opened()
    assert disagreements(page) == [], "as the page opens"
    kinds = set()
    for number in range(1, EVENTS + 1):
        kind, done = walk.next_event()
        kinds.add(kind)
        walk.done.append(done)
        found = disagreements(page)
        assert found == [], f"seed {SEED}, event {number} of: {walk.done}"
    assert kinds == set(Walk.WEIGHTS), f"seed {SEED} walks no {set(Walk.WEIGHTS) - kinds}: choose another"
    context.close()
