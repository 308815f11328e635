// Two switches of the lessons panel for the room the page is shown in: large text for a projector, and
// colour-blind-safe colours. Both apply to every chart now on the page and to each one drawn later.
window.explorerDisplay = (() => {
  const page = window.explorerPage;
  const settings = {large: false, safe: false};

  // Chart text is laid out by Plotly, which places titles, labels and margins for its font sizes: CSS that
  // enlarged them afterwards made lines overlap. So in large text each chart is laid out again, its fonts at least
  // 16 px and its margins grown to match (a title's second line is drawn at 70%: 16 px).
  const SIZE = 17, TITLE = 23, GROW = 1.35;
  const PLOTLY_MARGINS = {l: 80, t: 100};  // Plotly's own, where a figure sets none (Gradio's Plot: t >= 100)
  const enlarged = (chart) => chart.layout && chart.layout.meta && chart.layout.meta.explorerLarge;
  function enlarge(chart) {
    if (!chart.layout || enlarged(chart) || !window.Plotly) return;
    const layout = chart.layout, margin = layout.margin || {};
    const update = {"font.size": SIZE, "title.font.size": TITLE,
                    "meta": {explorerLarge: true, saved: JSON.parse(JSON.stringify(layout))}};
    for (const key of ["xaxis", "yaxis", ...Object.keys(layout).filter((k) => /^[xy]axis[0-9]+$/.test(k))]) {
      update[key + ".tickfont.size"] = SIZE - 1;
    }
    for (const side of ["l", "t"]) update["margin." + side] = Math.round((margin[side] ?? PLOTLY_MARGINS[side]) * GROW);
    (layout.annotations || []).forEach((_, i) => { update["annotations[" + i + "].font.size"] = SIZE - 1; });
    window.Plotly.relayout(chart, update);
  }
  function shrink(chart) {
    if (enlarged(chart)) window.Plotly.react(chart, chart.data, chart.layout.meta.saved);
  }

  // For students who do not see red and green (or blue and yellow) apart: every heatmap's scale becomes one that
  // stays ordered for every kind of colour vision, cividis for weights and blue-orange for signed values (red-blue
  // ones); the page's own colours come back when the switch is off.
  const DIVERGING = [[0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#fdb863"], [1, "#b35806"]];
  const signed = (t) => t.zmid !== undefined || (t.zmin !== undefined && t.zmin < 0);
  const heatmaps = (chart) => (chart.data || []).map((t, i) => [t, i]).filter(([t]) => t.type === "heatmap");
  // Each recoloured trace's own colours, to come back to. Kept beside the trace, not in its meta: a heatmap's meta
  // says its rows are steps (a click on one goes there). A trace drawn anew is a new object, its colours its own.
  const ownColours = new WeakMap();
  function recolour(chart, safe) {
    const traces = heatmaps(chart).filter(([t]) => safe !== ownColours.has(t));
    if (!traces.length || !window.Plotly) return;
    const indices = traces.map(([, i]) => i);
    if (safe) {
      const own = traces.map(([t]) => ({colorscale: t.colorscale, reversescale: !!t.reversescale}));
      window.Plotly.restyle(chart, {
        colorscale: traces.map(([t]) => (signed(t) ? DIVERGING : "Cividis")), reversescale: traces.map(() => false)},
        indices);
      traces.forEach(([t], k) => ownColours.set(t, own[k]));
    } else {
      const own = traces.map(([t]) => ownColours.get(t));
      traces.forEach(([t]) => ownColours.delete(t));
      window.Plotly.restyle(chart, {colorscale: own.map((o) => o.colorscale),
                                    reversescale: own.map((o) => o.reversescale)}, indices);
    }
  }

  page.onChart((chart) => {
    if (settings.large) enlarge(chart);
    if (settings.safe) recolour(chart, true);
  });
  const everyChart = (change) => document.querySelectorAll(".js-plotly-plot").forEach(change);
  return {
    largeText(large) {
      settings.large = large;
      document.body.classList.toggle("large-text", large);
      everyChart(large ? enlarge : shrink);
    },
    safeColours(safe) {
      settings.safe = safe;
      everyChart((chart) => recolour(chart, safe));
    },
  };
})();
