"""Waiting on a page in Chromium for what it has asked and what it shows, never for a length of time.

``count_requests(page)`` (before ``page.goto``) makes the page count its requests to the server that are still
open: a request is open until its answer has been read to the end, an event's stream (``/queue/data``) until Gradio
has read its last message (the server closes it once no event of the page is pending). The heartbeat, open for the
page's whole life, is not counted. It also notes the frame in which a chart was last drawn (Plotly's
``plotly_afterplot``, or a chart added). ``answered(page)`` then waits until no request is open and no chart has
been drawn for three frames: what the answers brought is drawn (Gradio draws a new figure on a new chart, then
again as it sizes it), and any event they set off (a ``.then``) has been asked for. Frames, not milliseconds: a
loaded machine draws fewer of them, in the same order.
"""

from __future__ import annotations

COUNT_REQUESTS_JS = """(() => {
  let open = 0, frame = 0, drawnAt = 0;
  const count = () => { frame += 1; requestAnimationFrame(count); };
  requestAnimationFrame(count);
  window.framesSinceDrawn = () => frame - drawnAt;
  new MutationObserver(() => document.querySelectorAll(".js-plotly-plot").forEach((chart) => {
    if (chart.drawsCounted) return;
    drawnAt = frame;
    if (!chart.on) return;  // Plotly has not set it up yet: the next change looks again
    chart.drawsCounted = true;
    chart.on("plotly_afterplot", () => { drawnAt = frame; });
  })).observe(document, {childList: true, subtree: true});
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

ANSWERED_JS = """() => window.openRequests() === 0 && window.framesSinceDrawn() >= 3"""


def count_requests(page) -> None:
    """From the next page loaded in ``page`` on, its open requests are counted (call before ``goto``)."""
    page.add_init_script(COUNT_REQUESTS_JS)


def answered(page, timeout: float = 60_000) -> None:
    """Until every request the page has made is answered and its charts drawn, none for three frames."""
    try:
        page.wait_for_function(ANSWERED_JS, timeout=timeout)
    except Exception as error:  # Playwright's TimeoutError: say what was still going on
        state = page.evaluate("() => [window.openRequests(), window.framesSinceDrawn()]")
        raise AssertionError(f"not answered and drawn: {state[0]} requests open, {state[1]} frames since a chart "
                             "was drawn") from error
