// The Translate tab's frames built in the page, for the offline pack, which has no server to build them: the one-head
// heatmap of each attention kind and the step view's two charts, as ui/views/explorer.py's view_frame and
// step_frames build them with ui/drawing/figures.py's rules. Each function mirrors the Python function it names;
// tests/pack/test_pack_views.py holds every figure filled from these frames equal to the app's for the same numbers.
// The frames are filled and drawn by the page's own scripts (figures.js, explorer.js, charts.js), as the app's are.
// Words come from the pack's config in the page's language (ui/locales, written into the pack).
window.explorerPackFrames = (() => {
  const {words, marks} = window.explorerPage.config.packFrames;
  // Mirrors the constants of `ui/drawing/figures.py`.
  const FONT = {family: "Inter, Segoe UI, Helvetica, Arial, sans-serif", size: 13};
  const MOST_TICK_LABELS = 60, LABEL_CHAR_PX = 7.5, MIN_COLUMN_PX = 22, LAPTOP_CHART_PX = 760, PHONE_COLUMNS = 6;
  const HEATMAP_MARGIN = {l: 130, r: 20}, GRID = "#e5ecf6", MARK = "#ff7f0e", HOVER_JOINER = " → ";
  const ROWS_ARE_STEPS = "rows are steps";
  const ZOOM_BUTTONS = ["zoom", "pan", "select", "lasso", "resetscale"], REPEATED_BUTTONS = ["zoomin", "zoomout", "autoscale"];
  const AXIS_LOOKS = {gridcolor: GRID, zerolinecolor: GRID};
  const filled = (template, values) => template.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  // Mirrors `figures.py:say`.
  const say = (key, values = {}) => filled(words[`figures.${key}`], values);
  const characters = (label) => [...String(label)].length;  // Python's len: code points
  const radians = (degrees) => degrees * (Math.PI / 180);  // as Python's math.radians

  // Mirrors `figures.py:escape`.
  const escape = (label) => String(label).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
  // Mirrors `figures.py:tick_positions`.
  const tickPositions = (count, most = MOST_TICK_LABELS) => {
    const every = Math.max(1, Math.ceil(count / most)), positions = [];
    for (let i = 0; i < count; i += every) positions.push(i);
    return positions;
  };
  // Mirrors `figures.py:tick_labels`.
  const tickLabels = (labels, most = MOST_TICK_LABELS) => {
    const positions = tickPositions(labels.length, most);
    return {tickmode: "array", tickvals: positions, ticktext: positions.map((i) => escape(labels[i]))};
  };
  // Mirrors `figures.py:slant_room`.
  const slantRoom = (labels, angle = -45) => (labels.length > 30 ? -90 : angle);
  const range = (count) => Array.from({length: count}, (_, i) => i);

  // Mirrors `figures.py:looks`.
  function looks(title, height, zoomable = true) {
    const layout = {template: {$: "template"}, title: {text: title, x: 0.01, font: {size: 15}}, font: FONT,
                    paper_bgcolor: "white", plot_bgcolor: "white", margin: {l: 10, r: 10, t: 60, b: 10},
                    modebar: {remove: [...REPEATED_BUTTONS, ...(zoomable ? [] : ZOOM_BUTTONS)]}};
    if (height !== undefined) layout.height = height;
    if (!zoomable) layout.dragmode = false;
    if (marks.separators) layout.separators = marks.separators;
    return layout;
  }
  // Mirrors `figures.py:laid_out`.
  function laidOut(figure, title, height, zoomable = true) {
    const layout = {...figure.layout, ...looks(title, height, zoomable)};
    for (const key of Object.keys(layout).filter((name) => /^[xy]axis[0-9]*$/.test(name))) {
      layout[key] = {...layout[key], ...AXIS_LOOKS};
    }
    return {data: figure.data, layout};
  }
  // Mirrors `figures.py:_hover_text`.
  function hoverText(queryLabels, keyLabels, rowsAreSteps) {
    const rows = queryLabels.map((label, i) => (rowsAreSteps ? say("step", {step: i + 1, label: escape(label)})
                                                           : say("position", {position: i, label: escape(label)})));
    const columns = keyLabels.map((label, j) => say("position", {position: j, label: escape(label)}));
    return {$outer: [rows, columns, HOVER_JOINER]};
  }
  // Mirrors `figures.py:_top_margin`.
  function topMargin(labels) {
    const longest = labels.length ? Math.max(...labels.map(characters)) : 1;
    return Math.trunc(Math.min(200, 90 + LABEL_CHAR_PX * longest * Math.abs(Math.sin(radians(slantRoom(labels))))));
  }
  // Mirrors `figures.py:_readable_width`.
  function readableWidth(columns) {
    const needed = HEATMAP_MARGIN.l + HEATMAP_MARGIN.r + 80 + MIN_COLUMN_PX * columns;
    return columns > PHONE_COLUMNS ? Math.max(needed, LAPTOP_CHART_PX) : null;
  }
  // Mirrors `figures.py:titled_with` and `heatmap_title`.
  const titledWith = (title, ...notes) => {
    const line = notes.filter((note) => note).join(" · ");
    return line ? `${title}<br><sup>${line}</sup>` : title;
  };

  // Mirrors `figures.py:heatmap_json` as `explorer.py:view_frame` calls it for one map: its weights the hole
  // `map`, its subtitle `{which}`, the step outlined the hole `step` (not on the encoder's).
  function heatmapFrame(kind, rows, columns) {
    const [rowTitle, columnTitle] = axesTitles(kind), rowsAreSteps = kind !== "encoder";
    const weight = say("weight");
    const trace = {type: "heatmap", z: {$: "map"}, x: range(columns.length), y: range(rows.length), zmin: 0, zmax: 1,
                   colorscale: {$: "colorscale"}, text: hoverText(rows, columns, rowsAreSteps),
                   hovertemplate: `%{text}<br>${weight} %{z:.4f}<extra></extra>`,
                   colorbar: {title: {text: weight}, thickness: 12}};
    if (rowsAreSteps) trace.meta = ROWS_ARE_STEPS;
    const layout = {xaxis: {side: "top", tickangle: slantRoom(columns), automargin: false, ...tickLabels(columns)},
                    yaxis: {title: {text: say("queries", {name: rowTitle})}, autorange: "reversed", automargin: false,
                            ...tickLabels(rows)}};
    if (rowsAreSteps) {
      layout.shapes = [{type: "rect", x0: -0.5, x1: columns.length - 0.5, y0: {$: "step", plus: -1.5},
                        y1: {$: "step", plus: -0.5}, line: {color: MARK, width: 3}, fillcolor: "rgba(0,0,0,0)"}];
    }
    const title = {$template: titledWith(words[`map.kind.${kind}`], "{which}", say("keys_columns", {name: columnTitle}))};
    const figure = laidOut({data: [trace], layout}, title, Math.min(1400, 230 + 26 * rows.length));
    figure.layout.margin = {l: HEATMAP_MARGIN.l, r: HEATMAP_MARGIN.r, t: topMargin(columns), b: 20};
    const width = readableWidth(columns.length);
    if (width !== null) figure.layout.width = width;
    return {figure, shared: []};
  }

  // Mirrors `translate.py:AXES` and `attention_axes`'s names.
  const AXES = {encoder: ["source", "source"], decoder: ["producing", "target_so_far"], cross: ["producing", "source"]};
  const axesTitles = (kind) => AXES[kind].map((name) => words[`map.axis.${name}`]);

  // Mirrors `figures.py:top_k_json` as `explorer.py:_step_frames` calls it.
  function candidatesFrame(count) {
    const trace = {type: "bar", orientation: "h", hovertemplate: "%{customdata}: %{x:.4f}<extra></extra>",
                   x: {$: "probabilities"}, y: range(count), customdata: {$: "pieces"}, marker: {color: {$: "colors"}}};
    const layout = {yaxis: {autorange: "reversed", ticklabelstandoff: 6, tickmode: "array",
                            tickvals: tickPositions(count), ticktext: {$: "ticktext"}},
                    xaxis: {range: [0, 1], title: {text: say("probability")}}};
    return {figure: laidOut({data: [trace], layout}, {$template: words["translate.map.candidates"]}, 120 + 34 * count,
                            false), shared: []};
  }

  // Mirrors `figures.py:source_attention_json` as `explorer.py:_step_frames` calls it.
  function sourcesFrame(source) {
    const trace = {type: "bar", x: range(source.length), y: {$: "row"},
                   marker: {colorscale: {$: "colorscale"}, cmin: 0, cmax: 1, color: {$: "row"},
                            line: {color: "#444", width: 0.5}},
                   customdata: source.map(escape), hovertemplate: "%{customdata}: %{y:.4f}<extra></extra>"};
    const layout = {xaxis: {tickangle: slantRoom(source), ...tickLabels(source)},
                    yaxis: {range: [0, 1], title: {text: say("attention_axis")}}};
    return {figure: laidOut({data: [trace], layout}, {$template: words["translate.map.source_attention"]}, 320, false),
            shared: []};
  }

  // Mirrors `language.py:Number.in_` for a format of Python's ".1%": the decimal mark and the percent sign of the
  // page's language.
  const percent = (value) => (value * 100).toFixed(1).replace(".", marks.decimal) + marks.percent;

  // Mirrors `figures.py:candidates`.
  function candidates(pieces, probabilities, chosen) {
    const labels = pieces.map((piece, i) => `${piece}  ${percent(probabilities[i])}`);
    return {probabilities, ticktext: tickLabels(labels).ticktext, pieces: pieces.map(escape),
            colors: pieces.map((piece) => (piece === chosen ? "#d62728" : "#1f77b4"))};
  }

  return {heatmapFrame, candidatesFrame, sourcesFrame, candidates, axesTitles, escape, percent};
})();
