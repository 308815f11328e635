"""Runs a built page's events in this process, as a visitor's clicks run them on a server.

Every event of the page (named API or not) is found in the page's own dependency list, so a new event is covered
without editing a test. Each event's handler reads the values its input components hold now, and what it returns
becomes their new values, as the browser would hold them.
"""

from __future__ import annotations

import copy

import gradio as gr
import pandas
from gradio.components import Component
from gradio.helpers import special_args


def initial_value(component: Component):
    """A component's value as its handler receives it."""
    if isinstance(component, gr.State):
        return copy.deepcopy(component.value)
    if isinstance(component, gr.Dataframe) and isinstance(component.value, dict):
        return pandas.DataFrame(component.value["data"], columns=component.value["headers"])
    return component.value


class PageDriver:
    def __init__(self, demo: gr.Blocks):
        self.demo = demo
        self.values = {block_id: initial_value(block) for block_id, block in demo.blocks.items()
                       if isinstance(block, Component)}
        # Each slider's range as this visitor's session holds it: an update may move it (Gradio keeps it per session).
        self.ranges = {block_id: (block.minimum, block.maximum) for block_id, block in demo.blocks.items()
                       if isinstance(block, gr.Slider)}

    def events(self) -> list:
        """The page's events that run Python (the js-only ones run in the browser)."""
        return [event for event in self.demo.fns.values() if event.fn is not None]

    def event(self, name: str, module: str | None = None):
        """The event whose handler is called ``name`` (in ``module``; the first, where several are)."""
        return next(event for event in self.events()
                    if event.name == name and module in (None, event.fn.__module__))

    def set(self, component: Component, value) -> None:
        self.values[component._id] = value

    def value(self, component: Component):
        return self.values[component._id]

    def out_of_range(self) -> dict[str, tuple]:
        """The sliders, by name, whose value lies outside their range: the next event that reads one is refused by
        Gradio ("Value 3 is greater than maximum value 2") before any handler runs."""
        names = {component._id: name for name, component in self.demo.named_components.items()}
        return {names.get(block_id, block_id): (self.values[block_id], low, high)
                for block_id, (low, high) in self.ranges.items()
                if isinstance(self.values.get(block_id), (int, float)) and not low <= self.values[block_id] <= high}

    def run(self, event, inputs: list | None = None, request: gr.Request | None = None):
        """Call an event's handler with the components' values (or ``inputs``), as sent in ``request``; its outputs
        become their values. Returns what the handler returned (a generator's last result that changes something)."""
        values = [self.values.get(c._id) for c in event.inputs] if inputs is None else list(inputs)
        arguments = special_args(event.fn, values, request=request, event_data=self.selection(event))[0]
        result = event.fn(*arguments)
        if hasattr(result, "__next__"):
            last = None
            for each in result:
                self._take(event, each)
                if not (isinstance(each, dict) and each and all(value == gr.skip() for value in each.values())):
                    last = each  # a generator ends on values that change nothing (Page.handler): not its result
            return last
        self._take(event, result)
        return result

    def selection(self, event) -> gr.SelectData | None:
        """For a select event, a click on the first row (or item) of what its component shows now."""
        selected = [block_id for block_id, trigger in event.targets if trigger == "select"]
        if not selected:
            return None
        block, shown = self.demo.blocks[selected[0]], self.values.get(selected[0])
        shown = getattr(shown, "data", shown)  # a pandas Styler's table
        if isinstance(block, gr.Dataframe):
            row = shown.iloc[0].tolist() if isinstance(shown, pandas.DataFrame) and len(shown) else []
            return gr.SelectData(block, {"index": [0, 0], "value": row[0] if row else None, "row_value": row})
        return gr.SelectData(block, {"index": 0, "value": None})

    def _take(self, event, result) -> None:
        if isinstance(result, dict) and result.get("__type__") != "update":  # values by component
            updates = result.items()
        else:
            outputs = event.outputs
            updates = zip(outputs, result if isinstance(result, (list, tuple)) and len(outputs) > 1 else [result])
        for component, update in updates:
            if isinstance(update, dict) and update.get("__type__") == "update":
                if "value" in update:
                    self.values[component._id] = update["value"]
            elif isinstance(update, Component):
                if "value" in update.constructor_args:
                    self.values[component._id] = update.constructor_args["value"]
                if component._id in self.ranges:
                    low, high = self.ranges[component._id]
                    self.ranges[component._id] = (update.constructor_args.get("minimum", low),
                                                  update.constructor_args.get("maximum", high))
            else:
                self.values[component._id] = update
