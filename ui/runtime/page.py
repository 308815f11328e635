"""The page: every component by name, the events that run handlers, and what the tabs declare to each other.

A handler is a module-level function of plain values. Its parameters name the components it reads (a first
parameter ``services`` gets the app's ``Services``, a last one named ``language`` the page's language;
``gr.Request`` and ``gr.SelectData`` parameters, and one whose default is ``gr.Progress()``, are filled by
Gradio), and it returns a dict from component names to new values (a message written in the page's language):
components it leaves out stay as they are. So a handler is tested by calling it, and no list of outputs
has to match a tuple in another file.
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
import pandas
from gradio.components import Component

from . import bounds
from .costly import CONCURRENCY as COSTLY_CONCURRENCY
from .costly import CORES
from .errors import as_user_message, as_warning
from .language import ENGLISH, WRITTEN_PER_LANGUAGE, numbers_written, said, text
from .model_names import listed_with

SPECIAL_PARAMETERS = (gr.Request, gr.SelectData, gr.EventData)
# A handler's or a hook's parameter the page fills with its own language, by name (never one of Gradio's values).
PAGE_LANGUAGE = "language"


def stop_costly_work(services, request: gr.Request = None) -> dict:
    """A Stop button's handler (``Page.stops``): the costly event running for this page is asked to end."""
    services.costly.stop(request)
    return {}


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


class Page:
    def __init__(self, services, blocks: gr.Blocks | None = None, language: str = ENGLISH):
        self.services = services  # the app's Services (ui/services.py), handed to the handlers that ask for it
        self.language = language  # the page is built once per language (language.py); its handlers write in it
        self.blocks = blocks  # the page's Blocks, for its load and unload events
        self.components: dict[str, Component] = {}
        self.tabs: dict[str, gr.Tab] = {}  # by id, in the page's order
        # What a new translation clears or sets in each tab: fn(services, translation) -> {name: value}.
        self.after_translation: list[Hook] = []
        # What a model switch sets in each tab: fn(services, checkpoint) -> {name: value}.
        self.after_model_change: list[Hook] = []
        # Slow work for one sentence and model, cancelled by a model switch so none lands after it.
        self.sentence_work: list = []
        self.models_shown = ModelsShown()

    def add(self, **components: Component) -> None:
        for name, component in components.items():
            if name in self.components:
                raise ValueError(f"two components are called {name!r}")
            if hasattr(component, "page_language"):  # a Chart: what it draws from numbers, in the page's words
                component.page_language = self.language
            self.components[name] = component

    def __getitem__(self, name: str) -> Component:
        return self.components[name]

    def words(self, key: str, **values) -> str:
        """The words of ``key`` (ui/locales/) in the page's language, for its layout."""
        return text(self.language, key, **values)

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
        return {**views, "tabs_waiting": sorted(waiting), "visible_tab": shown}

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
                        [*(name for hook in hooks for name in hook.outputs), "tabs_waiting", "visible_tab"],
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
        the tab ``fn`` opens, else the one the page shows (its last input, ``visible_tab``). The other tabs wait.
        ``shown``: the tab whose own controls start ``fn``, so the one shown (its outputs are
        ``translation_outputs(shown)``)."""
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if shown is None:
                *args, visible_tab = args
            else:
                visible_tab = shown
            result = fn(*args, **kwargs)
            if result and result.get("translation_state") is not None:
                opened = getattr(result.get("tabs"), "selected", None)
                result.update(self.views_for(result["translation_state"], opened or visible_tab or "translate"))
            return result
        if shown is not None:
            return run
        signature = inspect.signature(fn)
        # The shown tab, Gradio's last value: before the page's language, which the page gives by name.
        others = [p for p in signature.parameters.values() if p.name != PAGE_LANGUAGE]
        language = [p for p in signature.parameters.values() if p.name == PAGE_LANGUAGE]
        run.__signature__ = signature.replace(parameters=[
            *others, inspect.Parameter("visible_tab", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="translate"),
            *language])
        return run

    def model_changed(self, fn: Callable[..., dict], asked: str | None = None) -> Callable[..., dict]:
        """``fn`` followed by every tab's answer to the model it chose (its "model" value, a name); the model list
        is read afresh on the way (models trained since the page was built join it). ``asked``: the parameter of
        ``fn`` that names the model the visitor asks for; ``fn`` is not run when their page shows it already or is
        switching to it (``ModelsShown``)."""
        signature = inspect.signature(fn)
        positional = len([name for name in signature.parameters if name != PAGE_LANGUAGE])  # the page's, by keyword

        @functools.wraps(fn)
        def run(*args, page_session: gr.Request | None = None, **kwargs):
            if len(args) > positional:  # as Gradio calls it: the request last
                *args, page_session = args
            session = getattr(page_session, "session_hash", None)
            wanted = signature.bind_partial(*args, **kwargs).arguments.get(asked) if asked else None
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
        # Gradio gives it the request too: its session is the visitor's page.
        run.__signature__ = signature.replace(parameters=[
            *signature.parameters.values(),
            inspect.Parameter("page_session", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                              annotation=gr.Request)])
        run.__annotations__ = {**typing.get_type_hints(fn), "page_session": gr.Request}
        return run

    def in_its_words(self, value, component: Component):
        """A value a handler returns for ``component``, as the page shows it: a message written in the page's
        language (views return words as messages), a table's numbers as that language writes them."""
        if isinstance(value, WRITTEN_PER_LANGUAGE):
            return said(value, self.language)
        if self.language != ENGLISH and isinstance(component, gr.Dataframe) and component.interactive is False:
            if isinstance(value, list) and value and len(component.headers) == len(value[0]):
                value = pandas.DataFrame(value, columns=component.headers)
            if isinstance(value, pandas.DataFrame):
                return numbers_written(value, self.language)
        return value

    def handler(self, fn: Callable, keep_on_input_problem: bool = False,
                outputs: Iterable[str] | None = None, costly: bool = False) -> Callable:
        """``fn`` as Gradio calls it: services given, names turned into components, problems into messages.

        ``keep_on_input_problem``: for the page's own buttons, a problem with the input is a warning and every
        output stays as it was (no error badges over earlier results). ``costly``: ``fn`` runs within its
        visitor's budget of CPU-seconds, one at a time, on half the cores; the rest stay for everyone else
        (costly.py).
        """
        parameters = list(inspect.signature(fn).parameters.values())
        takes_services = bool(parameters) and parameters[0].name == "services"
        bound = functools.partial(fn, self.services) if takes_services else fn
        if any(p.name == PAGE_LANGUAGE for p in parameters):
            bound = functools.partial(bound, **{PAGE_LANGUAGE: self.language})
        components = self.components
        declared = None if outputs is None else set(outputs)

        def named(result):
            """Values by component; of a shared helper's result, the outputs this event declared."""
            unknown = set(result or {}) - set(components)
            if unknown:
                raise KeyError(f"{fn.__name__} returned values for no component: {sorted(unknown)}")
            if declared is not None and not declared:
                return None  # an event with no outputs takes no values
            values = {components[name]: self.in_its_words(value, components[name])
                      for name, value in (result or {}).items() if declared is None or name in declared}
            # Gradio reads an empty dict as one value, not as "nothing changes".
            return values or {components[name]: gr.skip() for name in declared or ()}

        own = [p for p in (parameters[1:] if takes_services else parameters) if p.name != PAGE_LANGUAGE]
        # Every value is bounded by the component it is for before the handler sees it (bounds.py).
        checked = [(i, p.name, components[p.name]) for i, p in enumerate(own) if p.name in components]
        # Gradio also hands the wrapper the request, to tell the page (messages shown as HTML) from API clients.
        asker = inspect.Parameter("asked_by", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                  annotation=gr.Request)

        def split(args, kwargs):
            """The handler's own arguments, and the request (whether its messages go to the page, who sent it)."""
            request = args[-1] if len(args) > len(own) else kwargs.pop("asked_by", None)
            args = args[:len(own)] if len(args) > len(own) else args
            return args, kwargs, request

        def page_asked(request) -> bool:
            return request is None or request.headers.get("x-gradio-user") != "api"

        def bounded(args, request):
            """Every value checked, then the work's share of the server taken (a context for the handler)."""
            for index, name, component in checked:
                if index < len(args):
                    bounds.check(component, args[index], name)
            if costly:
                return self.services.costly.share(request)
            CORES.for_ordinary_event()
            return contextlib.nullcontext()

        if inspect.isgeneratorfunction(fn):
            def run(*args, **kwargs):
                args, kwargs, request = split(args, kwargs)
                with as_user_message(fn.__name__, page_asked(request), self.language), bounded(args, request):
                    for result in bound(*args, **kwargs):
                        yield named(result)
        else:
            def run(*args, **kwargs):
                args, kwargs, request = split(args, kwargs)
                with as_user_message(fn.__name__, page_asked(request), self.language):
                    if not keep_on_input_problem:
                        with bounded(args, request):
                            return named(bound(*args, **kwargs))
                    with as_warning(self.language), bounded(args, request):
                        return named(bound(*args, **kwargs))
                    return named({})
        functools.update_wrapper(run, fn)
        run.__signature__ = inspect.Signature([*own, asker])
        run.__annotations__ = {**getattr(fn, "__annotations__", {}), "asked_by": gr.Request}
        return run

    def inputs_of(self, fn: Callable) -> list[Component]:
        """The components a handler reads: its parameters, less ``services`` and those Gradio fills itself."""
        hints = typing.get_type_hints(fn)
        return [self.components[p.name] for p in inspect.signature(fn).parameters.values()
                if p.name not in ("services", PAGE_LANGUAGE) and hints.get(p.name) not in SPECIAL_PARAMETERS
                and not isinstance(p.default, gr.Progress)]  # Gradio fills a progress tracker itself

    def on(self, triggers, fn: Callable, outputs: Iterable[str], *, keep_on_input_problem: bool = False,
           api_name: str | None = None, costly: bool = False, progress_on: Iterable[str] | None = None,
           **options):
        """Run ``fn`` when any of ``triggers`` fires; it may set the components named in ``outputs``.

        ``costly``: ``fn`` is one of the expensive computations, which run one at a time, each within its
        visitor's budget (costly.py). ``progress_on``: the outputs that show the event under way (default: all
        of them, none with ``show_progress="hidden"``). Gradio's page updates every component any event has shown
        progress on at each step of every later event, so the page's big events name a few."""
        triggers = triggers if isinstance(triggers, (list, tuple)) else [triggers]
        outputs = list(dict.fromkeys(outputs))
        visibility = {"api_name": api_name} if api_name else {"api_visibility": "private"}
        return gr.on(triggers, self.handler(fn, keep_on_input_problem, outputs, costly), self.inputs_of(fn),
                     [self.components[name] for name in outputs], **visibility,
                     **(COSTLY_CONCURRENCY if costly else {}), **self.progress(progress_on, options))

    def progress(self, progress_on: Iterable[str] | None, options: dict) -> dict:
        """An event's options with the components it shows progress on (``on``'s ``progress_on``)."""
        if progress_on is None and options.get("show_progress") == "hidden":
            progress_on = ()
        if progress_on is None:
            return options
        return {**options, "show_progress_on": [self.components[name] for name in progress_on]}

    def stops(self, button, event) -> None:
        """``button`` stops ``event``, a costly one: the page stops waiting for it (Gradio's cancel), and its
        computation in the worker ends at its next progress report (``CostlyWork.stop``), freeing the slot."""
        self.on(button.click, stop_costly_work, [], cancels=[event], queue=False)

    def in_browser(self, triggers, js: str, inputs: Iterable[str], outputs: Iterable[str]):
        """Run ``js`` in the browser alone when any of ``triggers`` fires: it gets the values of the components
        named in ``inputs`` and returns new values of ``outputs``. For views drawn from data already on the page,
        which need no round trip."""
        return gr.on(triggers, None, [self.components[name] for name in inputs],
                     [self.components[name] for name in outputs], js=js, queue=False, api_visibility="private")

    def then(self, event, fn: Callable, outputs: Iterable[str], **options):
        """Run ``fn`` once ``event`` (what ``on`` returned) has finished; it may set the components named in
        ``outputs``."""
        outputs = list(dict.fromkeys(outputs))
        return event.then(self.handler(fn, outputs=outputs), self.inputs_of(fn),
                          [self.components[name] for name in outputs], api_visibility="private",
                          **self.progress(None, options))
