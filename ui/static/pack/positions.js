// The Positional encoding tab's three views, drawn in the offline pack's page: mirrors `ui/views/positions.py`'s
// positional_views with `transformer/paper/model.py:sinusoidal_table` and `ui/drawing/charts.py`'s three figures
// (float32 as torch computes the table); tests/pack/test_pack_browser.py holds them equal to the app's.
window.explorerPackPositions = (() => {
  const {words} = window.explorerPage.config.packFrames;
  const frames = window.explorerPackFrames;
  const MAX_PE_LINES = 12;  // mirrors `positions.py:MAX_PE_LINES`
  // Plotly's "RdBu" and "Viridis", as a Python figure writes them out (ui/drawing/charts.py names them).
  const RDBU = ["rgb(103,0,31)", "rgb(178,24,43)", "rgb(214,96,77)", "rgb(244,165,130)", "rgb(253,219,199)",
                "rgb(247,247,247)", "rgb(209,229,240)", "rgb(146,197,222)", "rgb(67,147,195)", "rgb(33,102,172)",
                "rgb(5,48,97)"];
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
                   "#fde725"];
  const scale = (colours) => colours.map((colour, i) => [i / (colours.length - 1), colour]);
  const filled = (key, values = {}) => words[key].replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  const say = (key, values) => filled(`figures.${key}`, values);
  const f32 = Math.fround;
  const clamp = (value, low, high) => Math.max(low, Math.min(high, Math.trunc(Number(value)) || low));

  // Mirrors `model.py:sinusoidal_table` (the "interleaved" layout): PE(pos, 2i) = sin(pos / 10000^(2i/d)), and
  // cos at 2i + 1.
  function sinusoidalTable(length, dModel) {
    const step = f32(-Math.log(10000.0) / dModel);
    const inverse = Array.from({length: Math.ceil(dModel / 2)}, (_, i) => f32(Math.exp(f32(2 * i * step))));
    return Array.from({length}, (_, position) => Array.from({length: dModel}, (_, d) => {
      const angle = f32(position * inverse[d >> 1]);
      return f32(d % 2 ? Math.cos(angle) : Math.sin(angle));
    }));
  }

  const shown = (figure) => window.explorerFigures.fill({figure, shared: []});
  const heatmap = (z, extra, title, xTitle, height) => shown(frames.laidOut({
    data: [{type: "heatmap", z, colorbar: {thickness: 12}, ...extra}],
    layout: {xaxis: {title: {text: xTitle}}, yaxis: {title: {text: say("position_axis")}, autorange: "reversed"}}},
  title, height));

  // Mirrors `positions.py:positional_views`: the encoding matrix, the chosen dimensions across positions, and
  // the dot products between positions, with the notes their titles carry.
  function views(dModelAsked, lengthAsked, dimensions) {
    const asked = clamp(dModelAsked, 2, 1024), dModel = asked + (asked % 2), length = clamp(lengthAsked, 2, 512);
    const table = sinusoidalTable(length, dModel);
    let chosen = [];
    const ignored = [];
    for (const written of String(dimensions).replaceAll(";", ",").split(",")) {
      const part = written.trim();
      if (/^\d+$/.test(part) && Number(part) < dModel) chosen.push(Number(part));
      else if (part) ignored.push(part);
    }
    let title = filled("positions.lines.title");
    chosen = [...new Set(chosen)];
    if (chosen.length > MAX_PE_LINES) {
      title += filled("positions.lines.first", {most: MAX_PE_LINES, asked: chosen.length});
      chosen = chosen.slice(0, MAX_PE_LINES);
    }
    if (!chosen.length) {
      chosen = [0, 1, 4, 5, Math.floor(dModel / 2)];
      title = filled("positions.lines.fallback");
    }
    if (ignored.length) {
      title += filled("positions.lines.ignored", {ignored: frames.escape(ignored.join(", ").slice(0, 80)), last: dModel - 1});
    }
    let matrixTitle = filled("positions.matrix.title", {length, d_model: dModel});
    if (dModel !== asked) matrixTitle += filled("positions.matrix.rounded", {asked, d_model: dModel});
    const hover = say("positions.hover", {position: "%{y}", dimension: "%{x}", value: "%{z:.4f}"});
    const matrix = heatmap(table, {zmin: -1, zmax: 1, colorscale: scale(RDBU), reversescale: true,
                                   hovertemplate: `${hover}<extra></extra>`}, matrixTitle, say("dimension_i"), 420);
    const positions = Array.from({length}, (_, i) => i);
    const lines = shown(frames.laidOut({
      data: chosen.filter((d) => d >= 0 && d < dModel).map((d) => ({
        type: "scatter", mode: "lines", x: positions, y: table.map((row) => row[d]),
        name: say("lines.name", {dimension: d, wave: d % 2 === 0 ? "sin" : "cos"})})),
      layout: {xaxis: {title: {text: say("position_axis")}}, yaxis: {title: {text: say("value")}, range: [-1.1, 1.1]},
               showlegend: true}}, title, 360));
    const dots = table.map((a) => table.map((b) => a.reduce((total, value, d) => total + value * b[d], 0)));
    const similarity = heatmap(dots, {colorscale: scale(VIRIDIS), hovertemplate: "PE(%{y}) · PE(%{x}) = %{z:.2f}<extra></extra>"},
                               filled("positions.dots.title"), say("position_axis"), 420);
    return [matrix, lines, similarity, {dModel, length}];
  }

  return {views, sinusoidalTable};
})();
