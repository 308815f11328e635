// The Translate tab's views, drawn in the page from a translation's numbers (ui/views/explorer.py, page_numbers):
// the heatmap in each of its views, the step's candidates and its attention over the source, the pieces so far and
// the step's caption, each the server's frame of it filled with the numbers (ui/static/figures.js). A step, a layer,
// a head, an attention type or a view is drawn here without the server; only maps a long sentence on a large model
// did not bring at once, and the frames of views not shown yet, are asked for (more).
// Each function takes the values of the components its event names (ui/tabs/translate.py), one object by their
// names, and returns new values by name (Page.in_browser).
// Its words come in the page's language (the config, translate.page_settings); the kinds' and views' values, which
// the radios send, stay English.
window.explorer = (() => {
  const {kinds, viewFigures, which: whichWords, charts, words} = window.explorerPage.config.explorer;
  const figures = window.explorerFigures;
  // The rules below are mirrored in Python, each marked on both sides; tests/app/test_page_rules.py runs both on
  // the same inputs. Mirrors `ui/views/choices.py:kind_key`.
  const kindKey = (label) => {
    const key = Object.keys(kinds).find((name) => name === label || kinds[name] === label);
    if (key === undefined) throw new Error(`no attention kind is called ${label}`);
    return key;
  };
  const filled = (template, values) => template.replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
  // Mirrors `ui/runtime/numbers.py:clamp` from 1, but for what is not a number (no slider sends one), which is 1
  // here and which the server refuses, naming the field.
  const within = (value, high) => Math.min(Math.max(1, Math.trunc(Number(value)) || 1), high);
  // A value the server sent as JSON text (ui/runtime/page_data.py), or none.
  const read = (value) => (typeof value === "string" && value ? JSON.parse(value) : value || null);

  // The views of one translation's numbers (page_numbers): its maps decoded as they are first shown, its frames
  // (ui/views/explorer.py, view_frame and step_frames) filled with them.
  function viewsOf(numbers) {
    const blocks = new Map();  // decoded maps by "kind layer"
    // One kind's and layer's maps: (heads + 1) x rows x columns numbers, every head's and then their mean.
    function block(kind, layer) {
      const key = `${kind} ${layer}`, encoded = numbers.maps[kind].blocks[layer - 1];
      if (!blocks.has(key) && encoded) blocks.set(key, figures.fromFixedPoint(encoded, numbers.decimals));
      return blocks.get(key) || null;
    }
    // One map (head counts from 1; 0 for their mean) as rows of numbers.
    function matrix(kind, layer, head) {
      const {rows, columns} = numbers.maps[kind], values = block(kind, layer);
      const start = (head === 0 ? numbers.heads : head - 1) * rows.length * columns.length;
      return rows.map((_, i) => Array.from(values.subarray(start + i * columns.length,
                                                          start + (i + 1) * columns.length)));
    }
    const missing = (kind, layers) => [...new Set(layers)].filter((layer) => !numbers.maps[kind].blocks[layer - 1]);
    // The selection's frame of its kind and view, and what fills it: its maps, which one it is, its layer and step.
    function framing({kind, view, layer, head, step}) {
      const maps = numbers.maps[kind], chosen = within(layer, maps.layers);
      const shownHead = head === 0 ? 0 : within(head, numbers.heads);
      const name = viewFigures[view][shownHead === 0 ? "mean" : "heads"];
      return {kind, name, frame: numbers.frames[kind][name], values: {
        map: (where) => matrix(kind, where.layer ?? chosen, where.head ?? shownHead),
        which: whichMap(chosen, shownHead, numbers.heads), layer: chosen, step: within(step, maps.rows.length)}};
    }
    const layersOf = ({frame, values}) => figures.holes(frame, "map").map((hole) => hole.layer ?? values.layer);

    // The heatmap(s) of the selection; null while its frame or a map it needs has not come. A step moves only the
    // outline: the traces are the last figure's, the same arrays, so that Plotly redraws the outline alone.
    let last = null;
    function heatmap(chosen) {
      const framed = framing(chosen);
      if (!framed.frame || missing(framed.kind, layersOf(framed)).length) return null;
      const key = JSON.stringify({...chosen, step: undefined});
      if (!last || last.key !== key) last = {key, data: figures.fill(framed.frame, framed.values, "data")};
      return {data: last.data, layout: figures.fill(framed.frame, framed.values, "layout")};
    }

    // The step view at the selection's step: its candidates, and where it looked in the source (null while its
    // map has not come).
    function stepCharts({layer, head, step}) {
      const chosen = within(layer, numbers.maps.cross.layers), index = within(step, numbers.steps.length) - 1;
      const candidates = figures.fill(numbers.candidatesFrame, {...numbers.steps[index], step: index + 1});
      if (missing("cross", [chosen]).length) return [candidates, null];
      const shownHead = head === 0 ? 0 : within(head, numbers.heads);
      return [candidates, figures.fill(numbers.sourcesFrame, {
        row: matrix("cross", chosen, shownHead)[index], step: index + 1,
        which: whichMap(chosen, shownHead, numbers.heads)})];
    }

    // What the page lacks to draw the selection: "sent:kind layer,kind figure,..." for the server (more), or ""
    // for nothing.
    function wanted(chosen) {
      const framed = framing(chosen), cross = within(chosen.layer, numbers.maps.cross.layers);
      const lacking = [...(framed.frame ? missing(framed.kind, layersOf(framed)).map((l) => `${framed.kind} ${l}`)
                                        : [`${framed.kind} ${framed.name}`]),
                       ...missing("cross", [cross]).map((l) => `cross ${l}`)];
      const keys = [...new Set(lacking)];
      return keys.length ? `${numbers.sent}:${keys.join(",")}` : "";
    }

    // Maps and frames the server sent on request, kept.
    function add(encodedBlocks, frames) {
      for (const [key, encoded] of Object.entries(encodedBlocks)) {
        const [kind, layer] = key.split(" ");
        if (numbers.maps[kind] && numbers.maps[kind].blocks[Number(layer) - 1] === null) {
          numbers.maps[kind].blocks[Number(layer) - 1] = encoded;
        }
      }
      for (const [kind, named] of Object.entries(frames || {})) {
        for (const [name, frame] of Object.entries(named)) {
          if (numbers.frames[kind] && numbers.frames[kind][name] === null) numbers.frames[kind][name] = frame;
        }
      }
    }
    return {numbers, heatmap, stepCharts, wanted, add};
  }

  // A map's layer and head as its subtitle says them (head 0: the mean of the heads). Mirrors
  // `ui/views/translate.py:subtitle`.
  const whichMap = (layer, head, heads) => (head === 0 ? filled(whichWords.meanOfHeads, {layer, heads})
                                                       : filled(whichWords.oneHead, {layer, head}));

  // The selection as the server reads it (from the selectors by name): numbers within their ranges, the head 0
  // for the mean of heads.
  function selection({kind, view, layer, head, average, step}, numbers) {
    return {kind: kindKey(kind), view, layer: Number(layer), head: average ? 0 : Number(head),
            step: within(step, numbers.steps.length)};
  }

  // The pieces produced so far (the last marked, and those forced), and the step's caption.
  function stepText(numbers, step) {
    return {revealed: revealedPieces(numbers.produced, numbers.forced, step),
            step_caption: numbers.steps[step - 1].caption};
  }
  // Mirrors `ui/views/translate.py:revealed_pieces`.
  function revealedPieces(produced, forced, step) {
    const revealed = produced.slice(0, step).map((piece, i) =>
      ({token: piece + " ", class_or_confidence: i === step - 1 ? words.current : i < forced ? words.forced : null}));
    if (step < produced.length) revealed.push({token: "…", class_or_confidence: null});
    return revealed;
  }

  // The step view of a step under way, as the finished translation's view of that step draws it, in the step
  // view's frames (step_frames), which each step brings.
  function liveFigures(value) {
    return {candidates: figures.fill(value.candidatesFrame, {...value.candidates, step: value.step}),
            sources: figures.fill(value.sourcesFrame, {row: value.attention, step: value.step,
                                                       which: whichMap(value.layer, value.head, value.heads)}),
            text: {revealed: revealedPieces(value.produced, value.forced, value.step), step_caption: value.caption}};
  }

  let current = null;   // the views of the translation shown
  let decoding = null;  // the translation under way (its sent), whose steps are drawn as they are decided
  let shown = null;     // the selection shown: {kind, view, layer, head (0: the mean), step}
  let arrived = false;  // numbers have come that show has not drawn yet

  // What to ask the server for: what the selection lacks, or else what was last asked (unchanged, so that
  // nothing is asked: each new value of maps_wanted is a request).
  function draw(asked, moved = true) {
    const [candidates, sources] = current.stepCharts(shown);
    if (moved) window.explorerCharts.drawById(charts.topK, candidates);
    if (sources) window.explorerCharts.drawById(charts.stepAttention, sources);
    const map = current.heatmap(shown);
    // After a step the heatmap moves only its outline, drawn a frame after the step's own charts.
    if (map && moved) window.explorerCharts.drawById(charts.heatmap, map, {nextFrame: true});
    else if (map) window.explorerCharts.drawById(charts.heatmap, map);
    return current.wanted(shown) || asked;
  }

  return {
    rules: {kindKey, within, whichMap, revealedPieces},
    // New numbers have come (the hidden component's js_on_load sees them first): until show has drawn them, the
    // page is still drawing (tests/browsing.py waits on it).
    arriving() { arrived = true; },
    drawing() { return arrived || window.explorerCharts.pending() > 0; },
    // A new translation (its numbers), with the selectors as they were before the answer that brought it:
    // {page_numbers, ...selection, maps_wanted} -> {step, revealed, step_caption, maps_wanted}. The selectors the
    // same answer set, it names (translate.with_selection): the page has not stored them yet, so those are drawn.
    show(values) {
      arrived = false;
      const value = read(values.page_numbers);
      const asked = values.maps_wanted;
      if (!value || !value.steps) {
        current = null;
        Object.values(charts).forEach((id) => window.explorerCharts.drawById(id, null));
        return {step: 1, revealed: [], step_caption: words.noTranslation, maps_wanted: asked};
      }
      current = viewsOf(value);
      document.getElementById(charts.heatmap)?.classList.remove("explorer-outdated");
      shown = selection({...values, ...value.selection}, value);
      const wanted = draw(asked);
      return {step: shown.step, ...stepText(value, shown.step), maps_wanted: wanted};
    },
    // A step moved (-1, 0 or +1 from the slider's value, a number past either end meaning that end):
    // {...selection, maps_wanted} -> {step, revealed, step_caption, maps_wanted}.
    step(values, move) {
      const asked = values.maps_wanted;
      if (!current) return {step: 1, revealed: [], step_caption: words.noTranslation, maps_wanted: asked};
      shown = selection(values, current.numbers);
      shown.step = within(shown.step + move, current.numbers.steps.length);
      const wanted = draw(asked);
      return {step: shown.step, ...stepText(current.numbers, shown.step), maps_wanted: wanted};
    },
    // Another attention type, view, layer, head or averaging: {...selection, maps_wanted} -> {layer, head,
    // maps_wanted}, a number typed past either end of its slider moved to that end.
    select(values) {
      const {maps_wanted: asked, layer, head} = values;
      if (!current) return {layer, head, maps_wanted: asked};
      const layers = Math.max(...Object.values(current.numbers.maps).map((maps) => maps.layers));
      const moved = {...values, layer: within(layer, layers), head: within(head, current.numbers.heads)};
      shown = selection(moved, current.numbers);
      return {layer: moved.layer, head: moved.head, maps_wanted: draw(asked, false)};
    },
    // A step of a search under way (ui/views/live.py), drawn as it is decided: its candidates, where it looked
    // and the pieces so far; the translation before it leaves the tab's views. {live_step} -> {revealed,
    // step_caption}.
    live({live_step: sent}) {
      const value = read(sent);
      if (!value) return {revealed: [], step_caption: words.noTranslation};
      if (decoding !== value.sent) {  // the heatmap is the last translation's until this one's numbers come
        decoding = value.sent;
        current = null;
        document.getElementById(charts.heatmap)?.classList.add("explorer-outdated");
      }
      const {candidates, sources, text} = liveFigures(value);
      window.explorerCharts.drawById(charts.topK, candidates);
      window.explorerCharts.drawById(charts.stepAttention, sources);
      return text;
    },
    liveFigures,
    // Maps and frames the server sent on request ({sent, blocks: {"kind layer": base64}, frames: {kind: {name:
    // frame}}}): kept, and the selection redrawn. {more_maps} -> {}.
    more({more_maps: sent}) {
      const value = read(sent);
      if (!current || !value || value.sent !== current.numbers.sent) return {};
      current.add(value.blocks, value.frames);
      draw("", false);
      return {};
    },
    // The numbers shown and the selection they were last drawn at (null before a translation), for the tests that
    // hold the views to the selectors.
    drawn() { return current && {numbers: current.numbers, selection: shown}; },
    // Every figure of a selection (the selectors' values by name) of ``numbers``, as the page draws them, for the
    // tests that hold them equal to the server's.
    figures(numbers, values) {
      const views = viewsOf(numbers), chosen = selection(values, numbers);
      const [candidates, sources] = views.stepCharts(chosen);
      return {heatmap: views.heatmap(chosen), candidates, sources, text: stepText(numbers, chosen.step)};
    },
  };
})();
