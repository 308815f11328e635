"""Limits applied before the app sees a request: the size of its body (a 10 MB "sentence" costs the server a
JSON parse and a copy before any of the app's own checks can refuse it) and each client's share of the work.

A refusal is said in the language of the page that sent the request, read from its path (``/de/gradio_api/...``
comes from the German page), else in English. A page in every language counts as one page."""

from __future__ import annotations

import collections
import ipaddress
import json
import os
import re
import time

from . import settings
from .language import ENGLISH, LANGUAGES, Number, text

MAX_BODY_BYTES = 1_000_000  # a request of the page is a few kilobytes; uploads have their own limit
CLIENT_EVENTS, CLIENT_WINDOW_S = 30, 10.0  # a student clicking through the page starts a few per second at most
# New sessions an address may start per window: a page opens one, and a class behind one address opens one per
# student over a minute. A script starting a session with each request made Gradio set each one up (a quarter of
# a 2-core server's time in docs/fair-share.md); past this, it is refused before Gradio sees it.
CLIENT_SESSIONS = 10
KNOWN_SESSIONS = 50  # an address's sessions remembered as started, the most recently used kept
MAX_TRACKED_CLIENTS = 10_000
LOOPBACK = ("127.0.0.1", "::1")
EXEMPT_PATHS = ("/gradio_api/upload",)  # refused by Gradio's max_file_size as they arrive


class BodySizeLimit:
    """ASGI middleware: a request whose body is larger than ``max_bytes`` gets 413 with a message, unread.

    A declared Content-Length over the limit is refused at once; a body sent without one is counted as it
    arrives and cut off (the app sees the client go away) once it passes the limit.
    """

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES, exempt: tuple[str, ...] = EXEMPT_PATHS):
        self.app, self.max_bytes, self.exempt = app, max_bytes, exempt

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"].startswith(self.exempt):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await refuse(send, 413, text(asking_language(scope), "runtime.too_large",
                                                most=Number(self.max_bytes, ",")))
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            return {"type": "http.disconnect"} if received > self.max_bytes else message

        return await self.app(scope, counted, send)


def from_this_machine(headers, peer: str | None) -> bool:
    """Whether a request comes from the app's own user: from loopback with no proxy in between, and not on a Space
    (whose proxy may reach the app over loopback). Everyone else is a visitor of a public server."""
    return peer in LOOPBACK and "x-forwarded-for" not in headers and not os.environ.get("SPACE_ID")


def trusted_proxies() -> int:
    """How many proxies in front of the app append to X-Forwarded-For (``EXPLORER_TRUSTED_PROXIES``; a Space has
    one, its edge proxy, which appends the address its client connected from)."""
    return settings.value("EXPLORER_TRUSTED_PROXIES")


def client_address(headers, host: str | None) -> str:
    """Who a request comes from: the peer, or, when the peer is a proxy on a private network (as on a Hugging Face
    Space), the address the outermost trusted proxy saw: the entry of X-Forwarded-For that proxy appended, counted
    from the right. Entries left of it are whatever the client sent, so a client cannot pose as another."""
    forwarded = headers.get("x-forwarded-for")
    try:
        behind_proxy = host is not None and ipaddress.ip_address(host).is_private  # loopback counts as private
    except ValueError:
        behind_proxy = False
    if not (forwarded and behind_proxy):
        return host or "unknown"
    entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
    return entries[-min(trusted_proxies(), len(entries))] if entries else host or "unknown"


def visitor(headers: dict[str, str], peer: str | None) -> str | None:
    """The address of a visitor of a public server, from a request's headers (lower-case names) and the address
    it came from; None for this machine's own user, who is neither counted nor budgeted."""
    return None if from_this_machine(headers, peer) else client_address(headers, peer)


def visiting_client(request) -> str | None:
    """``visitor`` of a Gradio ``request`` (None for calls made without one, as tests do)."""
    client = getattr(request, "client", None)
    if client is None:
        return None
    return visitor({name.lower(): value for name, value in dict(request.headers).items()}, client.host)


class ClientShare:
    """ASGI middleware: each client may start at most ``events`` pieces of work (queue joins, API calls) per
    ``window_s`` seconds, and at most ``sessions`` new sessions (a queue join naming a session it has not used
    before, or a call, which Gradio gives a session of its own); more get 429 with a message, before Gradio sets
    a session up. One client can then fill no more than its share of the queue, however fast it sends. A request
    from this machine itself with no proxy in between is not counted (the app run locally, tests and benchmarks).

    ``own_allowance`` maps a mounted app's path (``"/class/"``) to how many clients' shares one address has
    there, counted apart from the rest: the students of a class on a Space all come through their school's one
    address."""

    WORK = re.compile(r"^((?:/[\w-]+)*)/gradio_api/(queue/join|call/|run/)")

    def __init__(self, app, events: int = CLIENT_EVENTS, window_s: float = CLIENT_WINDOW_S,
                 own_allowance: dict[str, int] | None = None, sessions: int = CLIENT_SESSIONS):
        self.app, self.events, self.window_s, self.sessions = app, events, window_s, sessions
        self.own_allowance = own_allowance or {}
        self.recent: dict[tuple[str, str], collections.deque] = {}
        self.started: dict[tuple[str, str], collections.deque] = {}  # when each client started its new sessions
        self.known: dict[tuple[str, str], collections.OrderedDict] = {}  # the sessions each client started

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and (work := self.WORK.match(scope["path"])):
            headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
            client = visitor(headers, (scope.get("client") or (None,))[0])
            mount = f"{work.group(1)}/" if work.group(1) else ""
            # A page in every language is one page: /de/ and /fr/ with /, /class/de/ with /class/.
            parts = [part for part in mount.split("/") if part and part not in LANGUAGES]
            mount = "/".join(["", *parts, ""]) if parts else ""
            allowance = self.own_allowance.get(mount, 1)
            if client is not None:
                starts, session, receive = await session_named(work.group(2), receive)
                if starts and not self.admit_session((client, mount), session, self.sessions * allowance):
                    return await refuse(send, 429, text(asking_language(scope), "runtime.too_many_sessions",
                                                        sessions=self.sessions * allowance,
                                                        seconds=Number(self.window_s, "g")))
                if not self.admit((client, mount), self.events * allowance):
                    return await refuse(send, 429, text(asking_language(scope), "runtime.too_many",
                                                        events=self.events * allowance,
                                                        seconds=Number(self.window_s, "g")))
        return await self.app(scope, receive, send)

    def admit(self, key, events: int | None = None) -> bool:
        """Whether ``key`` may start one more piece of work now."""
        return self._within(self.recent, key, events or self.events)

    def admit_session(self, key, session: str | None, sessions: int) -> bool:
        """Whether ``key``'s request may go on in ``session``: one it started before, or a new one (None: a session
        Gradio makes for the request) within ``sessions`` a window."""
        known = self.known.setdefault(key, collections.OrderedDict())
        if session is not None and session in known:
            known.move_to_end(session)
            return True
        if not self._within(self.started, key, sessions):
            return False
        if session is not None:
            known[session] = None
            while len(known) > KNOWN_SESSIONS:
                known.popitem(last=False)
        return True

    def _within(self, table: dict, key, most: int) -> bool:
        """Whether ``key`` did fewer than ``most`` things in the last window by ``table``; if so, this one counts."""
        now = time.monotonic()
        recent = table.setdefault(key, collections.deque())
        while recent and recent[0] <= now - self.window_s:
            recent.popleft()
        if len(recent) >= most:
            return False
        recent.append(now)
        if len(table) > MAX_TRACKED_CLIENTS:  # forget clients gone quiet, so the tables stay small
            for quiet in [c for c, times in table.items() if not times or times[-1] <= now - self.window_s]:
                del table[quiet]
                self.known.pop(quiet, None)
        return True


async def session_named(work: str, receive):
    """(whether the request is work in a session, the session it names: None for a call, which Gradio gives a new
    one; ``receive`` that hands the body read to find it on to the app). A queue join naming none is no session's:
    Gradio refuses it."""
    if work != "queue/join":
        return True, None, receive
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: the app hears it
            return False, None, replayed([message], receive)
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    try:
        named = json.loads(body).get("session_hash")
    except (ValueError, AttributeError):  # not a JSON object: Gradio refuses it
        named = None
    named = named if isinstance(named, str) and named else None
    return named is not None, named, replayed([{"type": "http.request", "body": body}], receive)


def replayed(messages: list[dict], receive):
    """``receive`` that first hands out ``messages``."""
    async def replaying():
        return messages.pop(0) if messages else await receive()
    return replaying


def asking_language(scope) -> str:
    """The language of the page a request comes from: the one its path names (``/class/fr/gradio_api/...``), else
    English (the page at /, and scripts, which read these messages as they always have)."""
    named = [part for part in scope["path"].split("/gradio_api/")[0].split("/") if part in LANGUAGES]
    return named[-1] if named else ENGLISH


async def refuse(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
