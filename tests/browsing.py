"""Waiting on a page in Chromium for what it has asked and what it shows, never for a length of time.

``count_requests(page)`` (before ``page.goto``) makes the page count what it has asked of the server and not yet
had: each event it joined the queue with (``/queue/join``) until the event's ``process_completed`` message has come
on the page's stream of answers (``/queue/data``), and each other request until its answer has been read to the
end (``asked_in_all``: how many it has made in all). The streams themselves are not counted: Gradio may open one
that no event needs, which then stays open with only heartbeats in it, as does the heartbeat request for the
page's whole life. It also notes the frame in which a chart was last drawn (Plotly's ``plotly_afterplot``, or a
chart added) and in which something asked was last answered. ``answered(page)`` then waits until nothing asked is
outstanding, nothing was answered and no chart drawn for three frames, and the page has no figure waiting to be
drawn (ui/static/explorer.js): what the answers brought is drawn, and any event they set off (a ``.then``, the
page's own drawing) has begun. Frames, not milliseconds: a loaded machine draws fewer of them, in the same order.
"""

from __future__ import annotations

COUNT_REQUESTS_JS = """(() => {
  let frame = 0, drawnAt = 0, answeredAt = 0;
  const count = () => { frame += 1; requestAnimationFrame(count); };
  requestAnimationFrame(count);
  window.framesSinceDrawn = () => frame - Math.max(drawnAt, answeredAt);
  new MutationObserver(() => document.querySelectorAll(".js-plotly-plot").forEach((chart) => {
    if (chart.drawsCounted) return;
    drawnAt = frame;
    if (!chart.on) return;  // Plotly has not set it up yet: the next change looks again
    chart.drawsCounted = true;
    chart.on("plotly_afterplot", () => { drawnAt = frame; });
  })).observe(document, {childList: true, subtree: true});

  const requests = new Map();  // url -> how many are being answered
  let askedInAll = 0;  // requests made since the page loaded, answered or not
  window.askedInAll = () => askedInAll;
  const events = new Set(), completed = new Set();  // event ids joined and not completed; completed ones
  const answered = () => { answeredAt = frame; };
  const started = (url) => { askedInAll += 1; requests.set(url, (requests.get(url) || 0) + 1); };
  const ended = (url) => {
    if (requests.get(url) > 1) requests.set(url, requests.get(url) - 1); else requests.delete(url);
    answered();
  };
  window.openRequests = () => [...requests.values()].reduce((a, b) => a + b, 0) + events.size;
  window.openRequestUrls = () => [...requests.keys(), ...[...events].map((id) => `event ${id}`)];
  // The messages of a stream of answers, as they come: "data: {json}" blocks, each ended by a blank line.
  const reading = (onMessage) => {
    let text = "";
    const decoder = new TextDecoder();
    return (chunk) => {
      text += decoder.decode(chunk, {stream: true});
      const blocks = text.split("\\n\\n");
      text = blocks.pop();
      for (const block of blocks) {
        const data = block.split("\\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5));
        if (data.length) { try { onMessage(JSON.parse(data.join("\\n"))); } catch (error) { /* not JSON */ } }
      }
    };
  };
  const completion = (message) => {
    if (message.msg !== "process_completed" || !message.event_id) return;
    completed.add(message.event_id);
    if (events.delete(message.event_id)) answered();
  };

  const send = window.fetch.bind(window);
  window.fetch = async (...args) => {
    const url = String(args[0] && args[0].url !== undefined ? args[0].url : args[0]);
    if (!url.includes("/gradio_api/") || url.includes("/heartbeat/")) return send(...args);
    const stream = url.includes("/queue/data");
    if (!stream) started(url);
    let response;
    try {
      response = await send(...args);
    } catch (error) {
      if (!stream) ended(url);
      throw error;
    }
    if (url.includes("/queue/join")) {
      response.clone().json().then((joined) => {
        if (joined && joined.event_id && !completed.has(joined.event_id)) events.add(joined.event_id);
      }).catch(() => {}).finally(() => ended(url));
      return response;
    }
    if (!response.body) { if (!stream) ended(url); return response; }
    const reader = response.body.getReader(), seen = stream ? reading(completion) : () => {};
    let closed = false;
    const close = () => { if (!closed && !stream) { closed = true; ended(url); } };
    const body = new ReadableStream({  // read as its reader reads, so it ends once the reader has seen the end
      async pull(controller) {
        try {
          const {done, value} = await reader.read();
          if (done) { controller.close(); close(); } else { seen(value); controller.enqueue(value); }
        } catch (error) { close(); controller.error(error); }
      },
      cancel(reason) { close(); return reader.cancel(reason); },
    }, {highWaterMark: 0});
    return new Response(body, {status: response.status, statusText: response.statusText, headers: response.headers});
  };
})();"""

ANSWERED_JS = """() => window.openRequests() === 0 && window.framesSinceDrawn() >= 3 &&
  !(window.explorer && window.explorer.drawing && window.explorer.drawing())"""


def count_requests(page) -> None:
    """From the next page loaded in ``page`` on, its open requests are counted (call before ``goto``)."""
    page.add_init_script(COUNT_REQUESTS_JS)


def asked_in_all(page) -> int:
    """How many requests the page has made since it loaded: wait for it to grow to know an event has begun."""
    return page.evaluate("window.askedInAll()")


def answered(page, timeout: float = 60_000) -> None:
    """Until every request the page has made is answered and its charts drawn, none for three frames."""
    try:
        page.wait_for_function(ANSWERED_JS, timeout=timeout)
    except Exception as error:  # Playwright's TimeoutError: say what was still going on
        state = page.evaluate("() => [window.openRequests(), window.framesSinceDrawn(), window.openRequestUrls(),"
                              " !!(window.explorer && window.explorer.drawing())]")
        raise AssertionError(f"not answered and drawn: {state[0]} requests open ({state[2]}), {state[1]} frames "
                             f"since a chart was drawn or a request answered, still drawing: {state[3]}") from error


IN_SIGHT_JS = """(id) => {
  const element = document.getElementById(id), top = element && element.getBoundingClientRect().top;
  return element !== null && element.offsetParent !== null && top > -1 && top < window.innerHeight;  // -1: sub-pixel
}"""


def brought_into_sight(page, element_id: str, timeout: float = 30_000) -> None:
    """Until the element's top is on the screen (a click that opens a tab on a view brings that view there)."""
    try:
        page.wait_for_function(IN_SIGHT_JS, arg=element_id, timeout=timeout)
    except Exception as error:  # Playwright's TimeoutError: say where it is
        top = page.evaluate("(id) => document.getElementById(id)?.getBoundingClientRect().top", element_id)
        raise AssertionError(f"#{element_id}'s top is at {top} px, off a screen "
                             f"{page.viewport_size['height']} px tall") from error
