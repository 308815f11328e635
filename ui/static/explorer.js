// The Translate tab's views drawn in the page, without a round trip: a step, and a layer, head or attention type
// in the one-head view once every head's frames have come (ui/tabs/translate.py, view_frames). The page merges a
// frame's changes into the figure as figures.changed does on the server, and draws the result with Plotly on the
// chart already shown. (Handed to Gradio as a new value, each figure would be drawn on a new chart, and twice.)
// explorer.step takes the values of STEP_INPUTS and a move (-1, 0 or 1) and returns those of STEP_OUTPUTS;
// explorer.select takes SELECT_INPUTS' and returns SELECT_OUTPUTS'.
window.explorer = (() => {
  const {cross, oneHead, chosenSelection, everySelection, drawnInPage, charts, idleMs, idleFallbackMs} =
    window.explorerPage.config.explorer;
  let text = null, frames = null;
  const parsed = (value) => {  // the frames travel as text: parsed once, not at every click
    if (value !== text) { text = value; frames = value ? JSON.parse(value) : null; }
    return frames;
  };
  const merge = (into, changes) => {
    for (const [key, value] of Object.entries(changes)) {
      const nested = value && typeof value === "object" && !Array.isArray(value);
      if (nested && into[key] && typeof into[key] === "object") merge(into[key], value);
      else into[key] = value;
    }
  };
  const changed = (figure, changes) => {
    (changes.data || []).forEach((trace, i) => merge(figure.data[i], trace));
    merge(figure.layout, changes.layout || {});
    return figure;
  };
  const chart = (id) => document.querySelector(`#${id} .js-plotly-plot`);
  // As Gradio's Plot readies a figure (responsive, sized to its box, room above for its title line), on the chart
  // it shows: with its configuration unchanged, Plotly.react redraws only what differs.
  const draw = (id, figure) => {
    const layout = figure.layout;
    layout.autosize = true;
    layout.margin = layout.margin || {};
    if (layout.title) layout.margin.t = Math.max(100, layout.margin.t || 0);
    layout.margin.autoexpand = true;
    window.Plotly.react(chart(id), figure.data, layout);
  };
  const within = (value, high) => Math.min(Math.max(1, Math.trunc(Number(value)) || 1), high);
  const selection = (f, kind, layer, head, average) =>  // as selection_key names it, clamped as the server clamps
    `${within(layer, f.layers[kind])} ${average ? "mean" : within(head, f.heads)}`;
  const bars = (f, layer, head, average) => f && f.source_attention[selection(f, cross, layer, head, average)];
  const drawable = (...ids) => window.Plotly && ids.every(chart);
  let asked = 0;  // changes the server is drawing: its answers, in order, would land over a change drawn here
  return {
    step([value, step, layer, head, average, revealed, candidates, attention, caption], move) {
      const f = parsed(value), sources = bars(f, layer, head, average);
      if (!sources || !candidates || !attention || !drawable(charts.topK, charts.stepAttention)) {
        return [step, revealed, caption];
      }
      step = within(Math.round(Number(step) || 1) + move, f.steps.length);
      draw(charts.topK, changed(JSON.parse(candidates.plot), f.steps[step - 1].candidates));
      draw(charts.stepAttention, changed(JSON.parse(attention.plot), sources[step - 1]));
      const shown = f.pieces.slice(0, step).map((piece, i) =>
        ({token: piece + " ", class_or_confidence: i === step - 1 ? "current" : null}));
      if (step < f.steps.length) shown.push({token: "…", class_or_confidence: null});
      return [step, shown, f.steps[step - 1].caption];
    },
    select([value, kind, view, layer, head, average, step, attention]) {
      const f = parsed(value), sources = bars(f, layer, head, average);
      const held = f && f.heatmaps ? everySelection : chosenSelection;
      if (held !== everySelection || view !== oneHead || !attention ||
          !drawable(charts.heatmap, charts.stepAttention)) {
        asked += 1;
        return [held];
      }
      const maps = f.heatmaps[kind];
      draw(charts.heatmap, changed(structuredClone(maps.figure), maps.maps[selection(f, kind, layer, head, average)]));
      draw(charts.stepAttention, changed(JSON.parse(attention.plot), sources[within(step, f.steps.length) - 1]));
      if (!asked) return [drawnInPage];
      asked += 1;  // the server draws this one too, after those before it
      return [everySelection];
    },
    answered() { asked = Math.max(0, asked - 1); },
    // An event's values passed on once the browser is idle (at most idleMs later; where it cannot tell, as Safari
    // before 2025, idleFallbackMs later): work asked for then does not take the CPU from the page's drawing.
    onceIdle(values) {
      const idle = window.requestIdleCallback || ((then) => setTimeout(then, idleFallbackMs));
      return new Promise((go) => idle(() => go(values), {timeout: idleMs}));
    },
  };
})();
