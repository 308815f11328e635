"""What a translation or a model switch changes across a page's tabs, and which tab is shown: the part of a
``Page`` (page.py) the tabs declare to each other through.

A tab declares what a new translation changes in it (``when_translated``) and what a model switch does
(``when_model_changes``). A translation changes the tab on screen in the same round trip (``translated``); the
other tabs wait, and draw theirs when they are next opened (``wire_tabs``). A model switch changes every tab
(``model_changed``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import json
import threading
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import gradio as gr

from .model_names import listed_with

# A handler's or a hook's parameter the page fills with its own language, by name (never one of Gradio's values).
PAGE_LANGUAGE = "language"


@dataclass
class Hook:
    """A tab's answer to something that happened elsewhere: ``fn`` returns new values of ``outputs``. A hook with
    a ``tab`` answers a translation only while that tab is shown: another tab's views wait until it is opened."""

    fn: Callable[..., dict]
    outputs: tuple[str, ...]
    tab: str | None = None
    drawn_on_opening: bool = True  # else the tab's own opening event draws what waits (it needs it first)


class ModelsShown:
    """The model each visitor's page shows, or is switching to, by session (the most recent sessions).

    A switch to the model a page already shows or is switching to changes nothing, and is answered at once: the
    same model picked again, a lesson's Show me on the model shown, or a second ask while the first is under way."""

    def __init__(self, most: int = 10_000):
        self.most = most
        self.models: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.lock = threading.Lock()

    def shown(self, session: str | None, name: str) -> None:
        if session:
            with self.lock:
                self.models[session] = name
                self.models.move_to_end(session)
                while len(self.models) > self.most:
                    self.models.popitem(last=False)

    @contextlib.contextmanager
    def switching(self, session: str | None, name: str):
        """Yields whether ``name`` is new to the session's page; if so, it is the one the page switches to, unless
        the switch fails (then the page still shows the one before)."""
        with self.lock:
            before = self.models.get(session) if session else None
            new = not session or before != name
        if not new:
            yield False
            return
        self.shown(session, name)
        try:
            yield True
        except BaseException:
            with self.lock:
                if self.models.get(session) == name:
                    if before is None:
                        self.models.pop(session, None)
                    else:
                        self.models[session] = before
            raise


class TabChanges:
    """A page's tabs as they answer each other (mixed into ``Page``, whose components, tabs, services and events it
    uses)."""

    def __init__(self):
        # What a new translation clears or sets in each tab: fn(services, translation) -> {name: value}.
        self.after_translation: list[Hook] = []
        # What a model switch sets in each tab: fn(services, checkpoint) -> {name: value}.
        self.after_model_change: list[Hook] = []
        # Slow work for one sentence and model, cancelled by a model switch so none lands after it.
        self.sentence_work: list = []
        self.models_shown = ModelsShown()

    def when_translated(self, fn: Callable[..., dict], outputs: Iterable[str], tab: str,
                        drawn_on_opening: bool = True) -> None:
        """``fn(translation)`` sets ``outputs`` of ``tab`` for a new translation: at once while the tab is shown,
        else when it is next opened (once per translation; ``wire_tabs``, or the tab's own opening event)."""
        self.after_translation.append(Hook(self.in_its_language(fn), tuple(outputs), tab, drawn_on_opening))

    def when_model_changes(self, fn: Callable[..., dict], outputs: Iterable[str]) -> None:
        self.after_model_change.append(Hook(self.in_its_language(fn), tuple(outputs)))

    def in_its_language(self, fn: Callable) -> Callable:
        """``fn`` given the page's language where it takes one (a parameter ``language``), as handlers are."""
        if PAGE_LANGUAGE in inspect.signature(fn).parameters:
            return functools.partial(fn, **{PAGE_LANGUAGE: self.language})
        return fn

    def translation_outputs(self, shown: str | None = None) -> tuple[str, ...]:
        """What a new translation may set in the tabs: in every tab, or in ``shown`` alone where the event is that
        tab's own (each output an event names costs the server and the page work even when it is left as it is)."""
        hooks = [hook for hook in self.after_translation if shown is None or hook.tab == shown]
        return (*(name for hook in hooks for name in hook.outputs), "tabs_waiting", "visible_tab")

    def model_outputs(self) -> tuple[str, ...]:
        return tuple(name for hook in self.after_model_change for name in hook.outputs)

    def views_for(self, translation, shown: str, waiting: Iterable[str] = ()) -> dict:
        """What a new translation sets in the tab ``shown``; the other tabs join ``waiting``, to be drawn when
        they are opened."""
        views, waiting = {}, set(waiting) - {shown}
        for hook in self.after_translation:
            if hook.tab == shown:
                views.update(hook.fn(translation))
            else:
                waiting.add(hook.tab)
        return {**views, "tabs_waiting": sorted(waiting)}

    def add_redraw_buttons(self, drawn_by_switches: str) -> None:
        """A hidden button per tab that the page presses to have the tab on screen draw the views that wait for it,
        as opening it does (``explorerPage.redrawShownTab``, after a model switch drew the tab
        ``drawn_by_switches`` alone)."""
        for tab_id in self.tabs:
            if tab_id != drawn_by_switches:
                self.add(**{f"redraw_{tab_id}": gr.Button(visible="hidden", elem_id=f"redraw-{tab_id}")})

    def shown(self, tab_id: str) -> list:
        """The triggers that draw what waits for ``tab_id``: the visitor opening it, or the page redrawing it."""
        redraw = self.components.get(f"redraw_{tab_id}")
        return [self.tabs[tab_id].select, *([redraw.click] if redraw else [])]

    def wire_tabs(self) -> None:
        """Opening a tab notes, in the page, that it is shown; a tab with views of a translation made while another
        was shown draws them (the first time it is opened after it). Called once every tab has declared its hooks."""
        for tab_id, tab in self.tabs.items():
            tab.select(None, None, self.components["visible_tab"], js=f"() => {json.dumps(tab_id)}")
            hooks = [hook for hook in self.after_translation if hook.tab == tab_id and hook.drawn_on_opening]
            if hooks:
                self.on(self.shown(tab_id), self.opened_views(tab_id),
                        [*(name for hook in hooks for name in hook.outputs), "tabs_waiting"],
                        show_progress="hidden")

    def opened_views(self, tab_id: str) -> Callable[..., dict]:
        """The handler of opening ``tab_id``: its views of the last translation, if they wait."""
        def on_opened(translation_state, tabs_waiting) -> dict:
            if translation_state is None or tab_id not in (tabs_waiting or ()):
                return {}
            return self.views_for(translation_state, tab_id, tabs_waiting)
        on_opened.__name__ = f"on_{tab_id}_opened"
        return on_opened

    def translated(self, fn: Callable[..., dict], shown: str | None = None) -> Callable[..., dict]:
        """``fn`` followed, in the same round trip, by the shown tab's answer to the translation it made (if any):
        the tab ``fn`` opens, else the one the page shows: ``shown``, the tab whose own controls start ``fn``, or
        else ``fn``'s parameter ``visible_tab`` (the page's component). The other tabs wait. A generator ``fn`` (a
        translation seen as it happens) is answered at each value it yields that holds a translation."""
        signature = inspect.signature(fn)
        if shown is None and "visible_tab" not in signature.parameters:
            raise TypeError(f"{fn.__name__} names no visible_tab: the tab that answers its translation is unknown")

        def with_views(result, args, kwargs):
            if result and result.get("translation_state") is not None:
                visible_tab = shown or signature.bind_partial(*args, **kwargs).arguments.get("visible_tab")
                opened = getattr(result.get("tabs"), "selected", None)
                result.update(self.views_for(result["translation_state"], opened or visible_tab or "translate"))
                if opened:  # the tab on screen now; a model switch draws the Translate tab without showing it
                    result["visible_tab"] = opened
            return result

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def run(*args, **kwargs):
                for result in fn(*args, **kwargs):
                    yield with_views(result, args, kwargs)
        else:
            @functools.wraps(fn)
            def run(*args, **kwargs):
                return with_views(fn(*args, **kwargs), args, kwargs)
        return run

    def model_changed(self, fn: Callable[..., dict], asked: str | None = None) -> Callable[..., dict]:
        """``fn`` followed by every tab's answer to the model it chose (its "model" value, a name); the model list
        is read afresh on the way (models trained since the page was built join it). ``fn`` takes the event's
        request (a ``gr.Request`` parameter): its session is the visitor's page. ``asked``: the parameter of ``fn``
        that names the model the visitor asks for; ``fn`` is not run when their page shows it already or is
        switching to it (``ModelsShown``)."""
        signature, hints = inspect.signature(fn), typing.get_type_hints(fn)
        request = next((name for name in signature.parameters if hints.get(name) is gr.Request), None)
        if request is None:
            raise TypeError(f"{fn.__name__} takes no gr.Request: the page switching models is unknown")

        @functools.wraps(fn)
        def run(*args, **kwargs):
            arguments = signature.bind_partial(*args, **kwargs).arguments
            session = getattr(arguments.get(request), "session_hash", None)
            wanted = arguments.get(asked) if asked else None
            with (self.models_shown.switching(session, wanted) if wanted else contextlib.nullcontext(True)) as new:
                if not new:
                    return {}
                result = fn(*args, **kwargs)
            name = result.get("model") if result else None
            if name is not None:
                self.models_shown.shown(session, name)
                checkpoint = self.services.registry.get(name)
                for hook in self.after_model_change:
                    result.update(hook.fn(checkpoint))
                result["model"] = gr.Dropdown(choices=listed_with(self.services.registry.names(), name), value=name)
            return result
        return run
