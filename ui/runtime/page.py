"""The page: every component by name, the events that run handlers, and what the tabs declare to each other.

A handler is a module-level function of plain values. Its parameters name the components it reads (a first
parameter ``services`` gets the app's ``Services``, a last one named ``language`` the page's language;
``gr.Request`` and ``gr.SelectData`` parameters, and one whose default is ``gr.Progress()``, are filled by
Gradio), and it returns a dict from component names to new values (a message written in the page's language):
components it leaves out stay as they are. So a handler is tested by calling it, and no list of outputs
has to match a tuple in another file.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import time
import typing
from collections.abc import Callable, Iterable, Iterator

import gradio as gr
import pandas
from gradio.components import Component

from . import bounds
from .costly import CONCURRENCY as COSTLY_CONCURRENCY
from .costly import CORES
from .errors import as_user_message, as_warning
from .language import ENGLISH, WRITTEN_PER_LANGUAGE, numbers_written, said, text
from .later_pages import HANDLERS
from .tab_changes import PAGE_LANGUAGE, TabChanges

# Each handler's own working time, at DEBUG: what benchmarks/browser_latency.py prints beside the page's figures.
handler_times = logging.getLogger("ui.handler_times")


@contextlib.contextmanager
def working_time(name: str):
    """Log the handler ``name``'s working time for the block it runs in, at DEBUG."""
    started = time.perf_counter()
    yield
    handler_times.debug("%s worked %.1f ms", name, 1000 * (time.perf_counter() - started))


def steps_working_time(name: str, steps: Iterator) -> Iterator:
    """``steps`` as they come; then the time spent making them (not the time each waited at its ``yield`` for
    Gradio to send it) logged as the handler ``name``'s working time, at DEBUG."""
    working, resumed = 0.0, time.perf_counter()
    for step in steps:
        working += time.perf_counter() - resumed
        yield step
        resumed = time.perf_counter()
    handler_times.debug("%s worked %.1f ms", name, 1000 * (working + time.perf_counter() - resumed))

SPECIAL_PARAMETERS = (gr.Request, gr.SelectData, gr.EventData)
STOPPED = object()  # a generator handler has no more results


def page_asked(request) -> bool:
    """Whether an event's request came from the page (its messages are shown as HTML), not from an API client."""
    return request is None or request.headers.get("x-gradio-user") != "api"


def stop_costly_work(services, request: gr.Request = None) -> dict:
    """A Stop button's handler (``Page.stops``): the costly event running for this page is asked to end."""
    services.costly.stop(request)
    return {}


def each_step(results: Iterator) -> Iterator:
    """A generator handler's results, its code run between them while no page is being built (later_pages.py);
    not held while its page shows one of them."""
    while True:
        with HANDLERS.handling():
            result = next(results, STOPPED)
        if result is STOPPED:
            return
        yield result


class Page(TabChanges):
    """The page of one language: its components by name, and its events (``on``, ``then``, ``in_browser``), each
    running a handler as ``handler`` makes it. What a translation or a model switch changes across its tabs, and
    which tab is shown: ``TabChanges`` (tab_changes.py)."""

    def __init__(self, services, blocks: gr.Blocks | None = None, language: str = ENGLISH):
        self.services = services  # the app's Services (ui/services.py), handed to the handlers that ask for it
        self.language = language  # the page is built once per language (language.py); its handlers write in it
        self.blocks = blocks  # the page's Blocks, for its load and unload events
        self.components: dict[str, Component] = {}
        self.tabs: dict[str, gr.Tab] = {}  # by id, in the page's order
        # fn(values) -> values, applied to every handler's values before they are sent (``joins``).
        self.joined: list[Callable[[dict], dict]] = []
        TabChanges.__init__(self)

    def add(self, **components: Component) -> None:
        for name, component in components.items():
            if name in self.components:
                raise ValueError(f"two components are called {name!r}")
            if hasattr(component, "page_language"):  # a Chart: what it draws from numbers, in the page's words
                component.page_language = self.language
            self.components[name] = component

    def __getitem__(self, name: str) -> Component:
        return self.components[name]

    def joins(self, fn: Callable[[dict], dict]) -> None:
        """``fn(values) -> values`` sees every handler's values, by name, before they are sent: for a value that
        must carry others set in the same answer. (The page's script that a new value sets off reads the other
        components as they were before that answer: Gradio stores an answer's values one by one.)"""
        self.joined.append(fn)

    def words(self, key: str, **values) -> str:
        """The words of ``key`` (ui/locales/) in the page's language, for its layout."""
        return text(self.language, key, **values)

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
                outputs: Iterable[str] | None = None, costly: bool = False, page_only: bool = True) -> Callable:
        """``fn`` as Gradio calls it: services given, names turned into components, problems into messages.

        ``keep_on_input_problem``: for the page's own buttons, a problem with the input is a warning and every
        output stays as it was (no error badges over earlier results). ``costly``: ``fn`` runs within its
        visitor's budget of CPU-seconds, one at a time, on half the cores; the rest stay for everyone else
        (costly.py). ``page_only``: no script calls it (it has no ``api_name``).
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
            sent = {name: value for name, value in (result or {}).items() if declared is None or name in declared}
            for join in self.joined:
                sent = join(sent)
            values = {components[name]: self.in_its_words(value, components[name]) for name, value in sent.items()}
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
                with as_user_message(fn.__name__, page_asked(request), self.language):
                    with as_warning(self.language) if keep_on_input_problem else contextlib.nullcontext([]) \
                            as warned, bounded(args, request):
                        yield from steps_working_time(fn.__name__, map(named, each_step(bound(*args, **kwargs))))
                    # Gradio sends a generator's last values again when it ends: for the page alone, ending on
                    # values that change nothing keeps a big answer (a translation's numbers) from crossing the
                    # network twice (a script reads the last values as the answer). After an input problem, a
                    # warning, and every output as it was.
                    if declared and (page_only or warned):
                        yield named({})
        else:
            def run(*args, **kwargs):
                args, kwargs, request = split(args, kwargs)
                with as_user_message(fn.__name__, page_asked(request), self.language):
                    with as_warning(self.language) if keep_on_input_problem else contextlib.nullcontext(), \
                            bounded(args, request), HANDLERS.handling(), working_time(fn.__name__):
                        return named(bound(*args, **kwargs))
                    return named({})  # an input problem: a warning, and every output as it was
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
        return gr.on(triggers, self.handler(fn, keep_on_input_problem, outputs, costly, page_only=not api_name),
                     self.inputs_of(fn),
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

    def in_browser(self, triggers, function: str, inputs: Iterable[str] = (), outputs: Iterable[str] = ()):
        """Run the page's ``function`` (a script expression, such as ``"explorer.show"``) in the browser alone when
        any of ``triggers`` fires. For views drawn from data already on the page, which need no round trip.

        The contract is by name, not by position: the function gets one object, the values of the components named
        in ``inputs`` under their names, and returns one object with a new value under each name in ``outputs``
        (a name it leaves out is an error in the page, never a component silently emptied): ui/static/page.js,
        ``byName``."""
        inputs, outputs = list(inputs), list(outputs)
        js = (f"(...values) => explorerPage.byName({function}, {json.dumps(function)}, {json.dumps(inputs)}, "
              f"{json.dumps(outputs)}, values)")
        return gr.on(triggers, None, [self.components[name] for name in inputs],
                     [self.components[name] for name in outputs], js=js, queue=False, api_visibility="private")

    def brings_into_sight(self, event, element_id: str) -> None:
        """Once ``event`` (a click that opens another tab on a view) has answered, the element ``element_id`` (the
        view it set) is brought to the top of the screen, and held there while the charts above it still draw
        (page.js, holdInSight): the tab opens where the page was scrolled, often far below it."""
        event.then(None, js=f"() => explorerPage.holdInSight({json.dumps(element_id)})", queue=False,
                   api_visibility="private")

    def then(self, event, fn: Callable, outputs: Iterable[str], **options):
        """Run ``fn`` once ``event`` (what ``on`` returned) has finished; it may set the components named in
        ``outputs``."""
        outputs = list(dict.fromkeys(outputs))
        return event.then(self.handler(fn, outputs=outputs), self.inputs_of(fn),
                          [self.components[name] for name in outputs], api_visibility="private",
                          **self.progress(None, options))
