// The Translate tab's frames built in the page, for the offline pack, which has no server to build them: the one-head
// heatmap of each attention kind and the step view's two charts, as ui/views/explorer.py's view_frame and
// step_frames build them with ui/drawing/figures.py's rules. Each function mirrors the Python function it names;
// tests/pack/test_pack_browser.py holds every figure filled from these frames equal to the app's for the same numbers.
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
  // `title` (default: the kind's name) and `marked` (whether it outlines the step) as `translate.py:map_of` sets
  // them for forced decoding's map.
  function heatmapFrame(kind, rows, columns, title = words[`map.kind.${kind}`], marked = kind !== "encoder") {
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
    if (marked) {
      layout.shapes = [{type: "rect", x0: -0.5, x1: columns.length - 0.5, y0: {$: "step", plus: -1.5},
                        y1: {$: "step", plus: -0.5}, line: {color: MARK, width: 3}, fillcolor: "rgba(0,0,0,0)"}];
    }
    const figure = laidOut({data: [trace], layout},
                           {$template: titledWith(title, "{which}", say("keys_columns", {name: columnTitle}))},
                           Math.min(1400, 230 + 26 * rows.length));
    figure.layout.margin = {l: HEATMAP_MARGIN.l, r: HEATMAP_MARGIN.r, t: topMargin(columns), b: 20};
    const width = readableWidth(columns.length);
    if (width !== null) figure.layout.width = width;
    return {figure, shared: []};
  }

  // Mirrors the constants of `figures.py` for small multiples.
  const PANEL_HEIGHT = 230, PANEL_TICK_FONT = 11, PANEL_LABEL_CHAR_PX = LABEL_CHAR_PX * PANEL_TICK_FONT / 13;
  const MOST_PANEL_LABELS = 12, MOST_GRID_COLUMN_LABELS = 80, PANEL_GAP = 0.05;
  // Python's round: halves to even.
  const roundHalfEven = (value) => {
    const floor = Math.floor(value), rest = value - floor;
    return rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  };
  // Mirrors `figures.py:_grid_margin`.
  function gridMargin(queryLabels, keyLabels, keyAngle) {
    const needed = (labels, slant) => Math.trunc(Math.min(200, 20 + PANEL_LABEL_CHAR_PX * Math.max(1, ...labels.map(characters)) * slant));
    return {l: needed(queryLabels, 1.0), b: needed(keyLabels, Math.abs(Math.sin(radians(keyAngle))))};
  }

  // Mirrors `figures.py:grid_json` as `explorer.py:_kind_figure` calls it: `maps[r][c]` the holes of each panel's
  // map, rows and columns of panels named `rowNames` and `columnNames`.
  function gridJson(kind, maps, queryLabels, keyLabels, rowNames, columnNames, subtitle) {
    const [queryTitle, keyTitle] = axesTitles(kind), rowsAreSteps = kind !== "encoder", weight = say("weight");
    const hover = hoverText(queryLabels, keyLabels, rowsAreSteps).$outer;
    const rows = rowNames.length, columns = columnNames.length, named = rowNames.some((name) => name);
    const queries = queryLabels.length, keys = keyLabels.length;
    const apart = [Math.max(1, roundHalfEven(queries * PANEL_GAP)), Math.max(1, roundHalfEven(keys * PANEL_GAP))];
    const down = queries + apart[0], across = keys + apart[1], right = named ? 0.98 : 1.0;
    const panelHover = (r, c) => {
      const name = [rowNames[r], columnNames[c]].filter((part) => part).join(" · ");
      return {$outer: [name ? hover[0].map((row) => `${name}<br>${row}`) : hover[0], hover[1], hover[2]]};
    };
    const repeated = (ticks, count, period) => ({
      tickmode: "array", tickvals: range(count).flatMap((n) => ticks.tickvals.map((v) => n * period + v)),
      ticktext: range(count).flatMap(() => ticks.ticktext)});
    const trace = {type: "heatmap", z: {$panels: maps, gap: null, apart}, zmin: 0, zmax: 1,
                   colorscale: {$: "colorscale"}, hoverongaps: false,
                   colorbar: {title: {text: weight}, thickness: 10},
                   text: {$panels: range(rows).map((r) => range(columns).map((c) => panelHover(r, c))), gap: "", apart},
                   hovertemplate: `%{text}<br>${weight} %{z:.4f}<extra></extra>`,
                   meta: {panel: {queries, keys, rowsApart: apart[0], columnsApart: apart[1]},
                          ...(rowsAreSteps ? {rows: ROWS_ARE_STEPS} : {})}};
    const keyAngle = slantRoom(keyLabels, -60), tickFont = {size: PANEL_TICK_FONT};
    const bare = {tickfont: tickFont, automargin: false, showgrid: false, zeroline: false};
    const layout = {
      xaxis: {...bare, domain: [0, right], tickangle: keyAngle,
              ...repeated(tickLabels(keyLabels, Math.max(MOST_PANEL_LABELS, Math.floor(MOST_GRID_COLUMN_LABELS / columns))),
                          columns, across)},
      yaxis: {...bare, autorange: "reversed", ...repeated(tickLabels(queryLabels, MOST_PANEL_LABELS), rows, down)}};
    const note = {font: tickFont, showarrow: false};
    layout.annotations = columnNames.map((name, c) => ({...note, text: name, xref: "x", x: c * across + (keys - 1) / 2,
                                                        xanchor: "center", yref: "paper", y: 1.0, yanchor: "bottom"}));
    if (named) {
      layout.annotations.push(...rowNames.map((name, r) => ({...note, text: name, textangle: 90, xref: "paper", x: right,
                                                             xanchor: "left", yref: "y", y: r * down + (queries - 1) / 2,
                                                             yanchor: "middle"})));
    }
    const title = {$template: titledWith(words[`map.kind.${kind}`], subtitle, say("queries_rows", {name: queryTitle}),
                                         say("keys_columns", {name: keyTitle}))};
    const figure = laidOut({data: [trace], layout}, title, 90 + PANEL_HEIGHT * rows);
    Object.assign(figure.layout.margin, gridMargin(queryLabels, keyLabels, keyAngle));
    return figure;
  }

  // Mirrors `explorer.py:view_frame` of a grid (`_kind_figure`'s "layerHeads", "everyHead" and "everyMean").
  function gridFrame(kind, figure, rows, columns, layers, heads) {
    const map = (layer, head) => ({$: "map", ...(layer === null ? {} : {layer}), ...(head === null ? {} : {head})});
    const headNames = range(heads).map((h) => filled(words["translate.map.head"], {head: h + 1}));
    const layerNames = range(layers).map((l) => filled(words["translate.map.layer"], {layer: l + 1}));
    if (figure === "layerHeads") {
      return {figure: gridJson(kind, [range(heads).map((h) => map(null, h + 1))], rows, columns, [""], headNames,
                               filled(words["translate.map.layer_heads"], {layer: "{layer}"})), shared: []};
    }
    if (figure === "everyMean") {
      return {figure: gridJson(kind, range(layers).map((l) => [map(l + 1, 0)]), rows, columns, layerNames,
                               [words["translate.mean_of_heads"]], words["translate.map.every_mean"]), shared: []};
    }
    return {figure: gridJson(kind, range(layers).map((l) => range(heads).map((h) => map(l + 1, h + 1))), rows, columns,
                             layerNames, headNames, words["translate.map.every_head"]), shared: []};
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

  // Mirrors `figures.py:token_probability_bar`: the probability the model gave each token of a forced target.
  function tokenProbabilities(pieces, probabilities, title) {
    const trace = {type: "bar", x: range(pieces.length), y: probabilities, marker: {color: "#2ca02c"},
                   customdata: pieces.map(escape), hovertemplate: "%{customdata}: %{y:.4f}<extra></extra>"};
    const layout = {xaxis: {tickangle: slantRoom(pieces), ...tickLabels(pieces)},
                    yaxis: {range: [0, 1], title: {text: say("probability")}}};
    return laidOut({data: [trace], layout}, title, 320, false);
  }

  // Mirrors `language.py:Number.in_` for a format of Python's ".2f".
  const fixed2 = (value) => value.toFixed(2).replace(".", marks.decimal);

  // Mirrors `language.py:Number.in_` for a format of Python's ".1%": the decimal mark and the percent sign of the
  // page's language.
  const percent = (value) => (value * 100).toFixed(1).replace(".", marks.decimal) + marks.percent;

  // Mirrors `figures.py:candidates`.
  function candidates(pieces, probabilities, chosen) {
    const labels = pieces.map((piece, i) => `${piece}  ${percent(probabilities[i])}`);
    return {probabilities, ticktext: tickLabels(labels).ticktext, pieces: pieces.map(escape),
            colors: pieces.map((piece) => (piece === chosen ? "#d62728" : "#1f77b4"))};
  }

  return {heatmapFrame, gridFrame, candidatesFrame, sourcesFrame, tokenProbabilities, candidates, axesTitles, escape,
          percent, fixed2, roundHalfEven, laidOut};
})();
