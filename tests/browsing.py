"""Waiting on a page in Chromium for what it has asked and what it shows, never for a length of time.

``count_requests(page)`` (before ``page.goto``) makes the page count its requests to the server that are still
open: a request is open until its answer has been read to the end, an event's stream (``/queue/data``) until Gradio
has read its last message (the server closes it once no event of the page is pending). The heartbeat, open for the
page's whole life, is not counted. ``answered(page)`` then waits until none is open, and still none two frames
later: what the answers brought, and any event they set off (a ``.then``), has been drawn or asked for by then.
"""

from __future__ import annotations

COUNT_REQUESTS_JS = """(() => {
  let open = 0;
  const send = window.fetch.bind(window);
  window.openRequests = () => open;
  window.fetch = async (...args) => {
    const url = String(args[0] && args[0].url !== undefined ? args[0].url : args[0]);
    if (!url.includes("/gradio_api/") || url.includes("/heartbeat/")) return send(...args);
    open += 1;
    let closed = false;
    const close = () => { if (!closed) { closed = true; open -= 1; } };
    let response;
    try {
      response = await send(...args);
    } catch (error) {
      close();
      throw error;
    }
    if (!response.body) { close(); return response; }
    const reader = response.body.getReader();
    const body = new ReadableStream({  // read as its reader reads, so it ends once the reader has seen the end
      async pull(controller) {
        try {
          const {done, value} = await reader.read();
          if (done) { controller.close(); close(); } else controller.enqueue(value);
        } catch (error) { close(); controller.error(error); }
      },
      cancel(reason) { close(); return reader.cancel(reason); },
    }, {highWaterMark: 0});
    return new Response(body, {status: response.status, statusText: response.statusText, headers: response.headers});
  };
})();"""

ANSWERED_JS = """() => new Promise((settled) => {
  if (window.openRequests() !== 0) return settled(false);
  requestAnimationFrame(() => requestAnimationFrame(() => settled(window.openRequests() === 0)));
})"""


def count_requests(page) -> None:
    """From the next page loaded in ``page`` on, its open requests are counted (call before ``goto``)."""
    page.add_init_script(COUNT_REQUESTS_JS)


def answered(page, timeout: float = 60_000) -> None:
    """Until every request the page has made is answered, and nothing new asked two frames later."""
    page.wait_for_function(ANSWERED_JS, timeout=timeout)
