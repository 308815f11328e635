"""What the Translate tab shows, read back from the page in Chromium and held to its selectors: after any event
settles, the step caption, both step charts, the heatmap and its subtitle, and the revealed pieces show the step,
attention type, view, layer and head that the controls on screen hold.

``disagreements(page)`` lists, in plain words, each place where a view says something its controls do not (empty
when the page agrees with itself). It checks each view two ways:
- by what it says, read off the screen in any of the page's languages: the step the caption and the charts' titles
  name, and the layer and head their subtitles name (in the page's own words for them, ``which``), and the
  attention type the heatmap's title names (the checked radio's label);
- as a whole: each chart's numbers, title and outline are those the page's own drawing code makes of the numbers
  shown at the selectors' values (``explorer.figures``, held to the server's figures by test_browser.py).
"""

from __future__ import annotations

import re

from ui.views.choices import ATTENTION_KINDS

SHOWN_JS = """() => {
  const config = window.explorerPage.config.explorer;
  const number = (id) => Number(document.querySelector(`#${id} input[type=number]`).value);
  const radio = (id) => document.querySelector(`#${id} input:checked`);
  const controls = {kind: radio("attention-kind")?.value ?? null, view: radio("attention-view")?.value ?? null,
                    layer: number("layer-slider"), head: number("head-slider"),
                    average: document.querySelector("#average-heads input").checked, step: number("step-slider")};
  const figure = (fig) => fig && fig.layout && {
    title: fig.layout.title?.text ?? null, shapes: JSON.stringify(fig.layout.shapes ?? []),
    numbers: JSON.stringify(fig.data.map((trace) => trace.z ?? trace.y ?? null))};
  const chart = (id) => figure(document.querySelector(`#${id} .js-plotly-plot`));
  const drawn = window.explorer.drawn();
  let expected = null;
  if (drawn) {
    const made = window.explorer.figures(drawn.numbers, controls);
    expected = {heatmap: figure(made.heatmap), topK: figure(made.candidates), stepAttention: figure(made.sources),
                revealed: made.text.revealed.map((piece) => piece.token.trim())};
  }
  return {controls, kindLabel: radio("attention-kind")?.closest("label")?.innerText.trim() ?? null,
          viewFigures: config.viewFigures, which: config.which,
          drawnAt: drawn && drawn.selection, heads: drawn && drawn.numbers.heads,
          layers: drawn && Object.fromEntries(Object.entries(drawn.numbers.maps).map(([k, m]) => [k, m.layers])),
          produced: drawn && drawn.numbers.produced,
          caption: document.querySelector("#step-caption")?.innerText ?? "",
          revealed: [...document.querySelectorAll("#revealed .token .text")].map((text) => text.innerText.trim()),
          charts: {heatmap: chart("attention-plot"), topK: chart("topk-plot"), stepAttention: chart("step-attention")},
          expected};
}"""

KIND_KEYS = {label: key for key, label in ATTENTION_KINDS.items()}


def numbers_in(text: str | None) -> list[int]:
    return [int(found) for found in re.findall(r"\d+", text or "")]


def filled(template: str, **values) -> str:
    return re.sub(r"\{(\w+)\}", lambda found: str(values[found.group(1)]), template)


def shown(page) -> dict:
    """The controls and every view of the Translate tab as the page shows them now."""
    return page.evaluate(SHOWN_JS)


def disagreements(page) -> list[str]:
    """Every place where the Translate tab's views say something its controls do not (call once the page has
    answered and drawn: ``browsing.answered``)."""
    seen = shown(page)
    controls, charts = seen["controls"], seen["charts"]
    if seen["drawnAt"] is None:
        return ["no translation is drawn"]
    step, layer = controls["step"], controls["layer"]
    head = 0 if controls["average"] else controls["head"]
    kind = KIND_KEYS.get(controls["kind"], controls["kind"])
    found = []
    drawn_at = {**seen["drawnAt"]}
    wanted = {"kind": kind, "view": controls["view"], "layer": layer, "head": head, "step": step}
    if drawn_at != wanted:
        found.append(f"the views were last drawn at {drawn_at}, the controls hold {wanted}")
    steps = len(seen["produced"])
    if numbers_in(seen["caption"])[:2] != [step, steps]:
        found.append(f"the caption says {seen['caption']!r} where the step slider holds {step} of {steps}")
    for name in ("topK", "stepAttention"):
        if not charts[name] or numbers_in(charts[name]["title"])[:1] != [step]:
            found.append(f"the {name} chart is titled {charts[name] and charts[name]['title']!r} at step {step}")
    shown_layer = min(max(1, layer), seen["layers"]["cross"])
    which = (filled(seen["which"]["meanOfHeads"], layer=shown_layer, heads=seen["heads"]) if head == 0 else
             filled(seen["which"]["oneHead"], layer=shown_layer, head=head))
    if charts["stepAttention"] and which not in charts["stepAttention"]["title"]:
        found.append(f"the step's attention chart is titled {charts['stepAttention']['title']!r}, not {which!r}")
    heatmap = charts["heatmap"]
    if not heatmap or not heatmap["title"].startswith(seen["kindLabel"]):
        found.append(f"the heatmap is titled {heatmap and heatmap['title']!r}, not {seen['kindLabel']!r}")
    elif seen["viewFigures"][controls["view"]]["mean" if head == 0 else "heads"] == "map":  # one map, named
        map_layer = min(max(1, layer), seen["layers"][kind])
        which = (filled(seen["which"]["meanOfHeads"], layer=map_layer, heads=seen["heads"]) if head == 0 else
                 filled(seen["which"]["oneHead"], layer=map_layer, head=head))
        if which not in heatmap["title"]:
            found.append(f"the heatmap is titled {heatmap['title']!r}, not {which!r}")
    expected = seen["expected"]
    for name in ("heatmap", "topK", "stepAttention"):
        for part in ("title", "numbers", "shapes"):
            if (charts[name] or {}).get(part) != (expected[name] or {}).get(part):
                found.append(f"the {name} chart's {part} is not what the controls draw")
    if seen["revealed"] != expected["revealed"]:
        found.append(f"the revealed pieces are {seen['revealed']}, at step {step} {expected['revealed']}")
    return found


def produced_at_step(page) -> str:
    """The piece the model produced at the step shown (▁ and spaces off)."""
    seen = shown(page)
    return seen["produced"][seen["controls"]["step"] - 1].replace("▁", "").strip()
