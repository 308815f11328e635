// The page's own figure builders: numbers and labels in, a Plotly figure ({data, layout}) out, as ui/figures.py
// builds them on the server (its exports, the API and the other tabs), from the same settings (its page_settings,
// in the page's config), with the same words in the page's language (its figures.json, the settings' words).
// tests/app/test_page_figures.py holds the two equal in Chromium.
window.explorerFigures = (() => {
  const s = window.explorerPage.config.figures;
  const range = (n) => Array.from({length: n}, (_, i) => i);
  const escape = (label) => String(label).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  // A figure's words in the page's language, its {placeholders} filled, as figures.py's say writes them.
  const words = (key, values = {}) => s.words[key].replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
  // A share of 1 as a percentage of one decimal, as the page's language writes it (language.Number, ".1%").
  const percent = (share) => `${(share * 100).toFixed(1).replace(".", s.decimalMark)}${s.percentSign}`;

  // Every position labelled, or every n-th one when more would overlap into a smear (hover names them all).
  const ticks = (labels, most = s.mostTickLabels) => {
    const every = Math.max(1, Math.ceil(labels.length / most));
    const positions = range(labels.length).filter((i) => i % every === 0);
    return {tickmode: "array", tickvals: positions, ticktext: positions.map((i) => escape(labels[i]))};
  };
  const slanted = (labels, angle = -45) => (labels.length > 30 ? -90 : angle);
  const titled = (title, ...notes) => {
    const line = notes.filter(Boolean).join(" · ");
    return line ? `${title}<br><sup>${line}</sup>` : title;
  };
  const heatmapTitle = (title, subtitle, keyTitle) => titled(title, subtitle,
                                                             words("keys_columns", {name: keyTitle}));

  // Each cell's row and column, named for the hover: positions count from 0, decoding steps from 1.
  const hoverText = (queryLabels, keyLabels, rowsAreSteps) => {
    const columns = keyLabels.map((label, j) => words("position", {position: j, label: escape(label)}));
    return queryLabels.map((label, i) => {
      const row = rowsAreSteps ? words("step", {step: i + 1, label: escape(label)})
        : words("position", {position: i, label: escape(label)});
      return columns.map((column) => `${row} → ${column}`);
    });
  };
  const axis = (extra) => ({...extra, gridcolor: s.grid, zerolinecolor: s.grid});

  // The shared looks of ui/figures.py's apply_layout, on a figure's layout.
  const laidOut = (layout, title, height, zoomable = true) => {
    const out = {template: s.template, ...layout, title: {text: title, x: 0.01, font: {size: 15}}, font: s.font,
                 paper_bgcolor: "white", plot_bgcolor: "white", margin: {l: 10, r: 10, t: 60, b: 10},
                 modebar: {remove: [...s.repeatedButtons, ...(zoomable ? [] : s.zoomButtons)]}};
    if (height !== null && height !== undefined) out.height = height;
    if (!zoomable) out.dragmode = false;
    if (s.separators) out.separators = s.separators;  // a decimal comma in German and French
    for (const key of Object.keys(out).filter((k) => /^[xy]axis[0-9]*$/.test(k))) out[key] = axis(out[key]);
    return out;
  };

  // The outline of row ``row`` (0-based) across ``columns`` columns: the step a lesson or the step view is on.
  const rowOutline = (row, columns) => ({type: "rect", x0: -0.5, x1: columns - 0.5, y0: row - 0.5, y1: row + 0.5,
                                         line: {color: s.mark, width: 3}, fillcolor: "rgba(0,0,0,0)"});

  const topMargin = (labels) => {
    const longest = Math.max(1, ...labels.map((label) => label.length));
    const slant = Math.abs(Math.sin((slanted(labels) * Math.PI) / 180));
    return Math.trunc(Math.min(200, 90 + s.labelCharPx * longest * slant));
  };
  // Room for the outer panels' labels, as _grid_margin works it out (Plotly's automargin measures every label).
  const gridMargin = (queryLabels, keyLabels, keyAngle) => {
    const needed = (labels, slant) => Math.trunc(
      Math.min(200, 20 + s.panelLabelCharPx * Math.max(1, ...labels.map((label) => label.length)) * slant));
    return {l: needed(queryLabels, 1), b: needed(keyLabels, Math.abs(Math.sin((keyAngle * Math.PI) / 180)))};
  };
  const readableWidth = (columns) => {
    const needed = s.heatmapMargin.l + s.heatmapMargin.r + 80 + s.minColumnPx * columns;  // 80: the colour bar
    return columns > s.phoneColumns ? Math.max(needed, s.laptopChartPx) : null;
  };

  // One attention map (queries x keys); options as attention_heatmap's keyword arguments.
  function attentionHeatmap(matrix, queryLabels, keyLabels, {title = words("attention"), queryTitle = words("query"),
    keyTitle = words("key"), rowsAreSteps = false, subtitle = "", markedRow = null} = {}) {
    const weight = words("weight");
    const trace = {type: "heatmap", z: matrix, x: range(keyLabels.length), y: range(queryLabels.length), zmin: 0,
                   zmax: 1, colorscale: s.colorscale, text: hoverText(queryLabels, keyLabels, rowsAreSteps),
                   hovertemplate: `%{text}<br>${weight} %{z:.4f}<extra></extra>`,
                   colorbar: {title: {text: weight}, thickness: 12}};
    if (rowsAreSteps) trace.meta = s.rowsAreSteps;
    const layout = {
      xaxis: {side: "top", tickangle: slanted(keyLabels), automargin: false, ...ticks(keyLabels)},
      yaxis: {title: {text: words("queries", {name: queryTitle})}, autorange: "reversed", automargin: false,
              ...ticks(queryLabels)},
    };
    if (markedRow !== null) layout.shapes = [rowOutline(markedRow, keyLabels.length)];
    const out = laidOut(layout, heatmapTitle(title, subtitle, keyTitle),
                        Math.min(1400, 230 + 26 * queryLabels.length));
    out.margin = {l: s.heatmapMargin.l, r: s.heatmapMargin.r, t: topMargin(keyLabels), b: 20};
    const width = readableWidth(keyLabels.length);
    if (width !== null) out.width = width;
    return {data: [trace], layout: out};
  }

  // Small multiples, weights[row][column] a map each, laid out as plotly's make_subplots lays them out (shared
  // axes, rows named on the right and columns on top), as attention_grid does.
  function attentionGrid(weights, queryLabels, keyLabels, {title, rowNames, columnNames, queryTitle = words("query"),
    keyTitle = words("key"), rowsAreSteps = false, subtitle = ""}) {
    const weight = words("weight");
    const rows = rowNames.length, columns = columnNames.length, named = rowNames.some(Boolean);
    const across = 0.015, down = Math.min(0.06, 0.3 / rows), right = named ? 0.98 : 1;
    const width = (right - across * (columns - 1)) / columns, height = (1 - down * (rows - 1)) / rows;
    const text = hoverText(queryLabels, keyLabels, rowsAreSteps);
    const data = [], layout = {annotations: []};
    const suffix = (r, c) => (r * columns + c === 0 ? "" : String(r * columns + c + 1));
    const xTicks = ticks(keyLabels, Math.max(s.mostPanelLabels, Math.trunc(s.mostGridColumnLabels / columns)));
    const yTicks = ticks(queryLabels, s.mostPanelLabels), keyAngle = slanted(keyLabels, -60);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < columns; c++) {
        const n = suffix(r, c), panel = [rowNames[r], columnNames[c]].filter(Boolean).join(" · ");
        const trace = {type: "heatmap", z: weights[r][c], x: range(keyLabels.length), y: range(queryLabels.length),
                       zmin: 0, zmax: 1, colorscale: s.colorscale, showscale: r === 0 && c === 0,
                       colorbar: {title: {text: weight}, thickness: 10}, text,
                       hovertemplate: `${panel}<br>%{text}<br>${weight} %{z:.4f}<extra></extra>`,
                       xaxis: `x${n}`, yaxis: `y${n}`};
        if (rowsAreSteps) trace.meta = s.rowsAreSteps;
        data.push(trace);
        const x0 = c * (width + across), y1 = 1 - r * (height + down);
        layout[`xaxis${n}`] = {anchor: `y${n}`, domain: [x0, x0 + width], tickfont: {size: s.panelTickFont},
                               tickangle: keyAngle, automargin: false, ...xTicks};
        if (r < rows - 1) {
          Object.assign(layout[`xaxis${n}`], {matches: `x${suffix(rows - 1, c)}`, showticklabels: false});
        }
        layout[`yaxis${n}`] = {anchor: `x${n}`, domain: [y1 - height, y1], tickfont: {size: s.panelTickFont},
                               autorange: "reversed", automargin: false, ...yTicks};
        if (c > 0) Object.assign(layout[`yaxis${n}`], {matches: `y${suffix(r, 0)}`, showticklabels: false});
      }
    }
    const note = {font: {size: s.panelTickFont}, showarrow: false, xref: "paper", yref: "paper"};
    columnNames.forEach((name, c) => layout.annotations.push(
      {...note, text: name, x: c * (width + across) + width / 2, xanchor: "center", y: 1, yanchor: "bottom"}));
    if (named) {
      rowNames.forEach((name, r) => layout.annotations.push(
        {...note, text: name, textangle: 90, x: right, xanchor: "left", y: 1 - r * (height + down) - height / 2,
         yanchor: "middle"}));
    }
    const out = laidOut(layout, titled(title, subtitle, words("queries_rows", {name: queryTitle}),
                                       words("keys_columns", {name: keyTitle})), 90 + s.panelHeight * rows);
    out.margin = {...out.margin, ...gridMargin(queryLabels, keyLabels, keyAngle)};
    return {data, layout: out};
  }

  // The top-k next tokens as horizontal bars labelled "piece  12.3%" beside the axis, the chosen one highlighted.
  function topKBar(pieces, probabilities, chosen, title) {
    const labels = pieces.map((piece, i) => `${piece}  ${percent(probabilities[i])}`);
    const trace = {type: "bar", orientation: "h", hovertemplate: "%{customdata}: %{x:.4f}<extra></extra>",
                   x: probabilities, y: range(pieces.length),
                   marker: {color: pieces.map((piece) => (piece === chosen ? "#d62728" : "#1f77b4"))},
                   customdata: pieces.map(escape)};
    const layout = laidOut({yaxis: {autorange: "reversed", ticklabelstandoff: 6, ...ticks(labels)},
                            xaxis: {range: [0, 1], title: {text: words("probability")}}}, title,
                           120 + 34 * pieces.length, false);
    return {data: [trace], layout};
  }

  // Where one decoding step looked in the source: one bar per source token.
  function sourceAttentionBar(weights, sourceLabels, title) {
    const trace = {type: "bar", x: range(sourceLabels.length), y: weights,
                   marker: {colorscale: s.colorscale, cmin: 0, cmax: 1, line: {color: "#444", width: 0.5},
                            color: weights},
                   customdata: sourceLabels.map(escape), hovertemplate: "%{customdata}: %{y:.4f}<extra></extra>"};
    const layout = laidOut({xaxis: {tickangle: slanted(sourceLabels), ...ticks(sourceLabels)},
                            yaxis: {range: [0, 1], title: {text: words("attention_axis")}}}, title, 320, false);
    return {data: [trace], layout};
  }

  // Numbers the server sent in fixed point (ui/views/translate.py, fixed_point): base64 of little-endian 16-bit
  // integers, each the number times 10^decimals.
  function fromFixedPoint(encoded, decimals) {
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)), view = new DataView(bytes.buffer);
    const scale = 10 ** decimals, values = new Float64Array(bytes.length / 2);
    for (let i = 0; i < values.length; i++) values[i] = view.getUint16(2 * i, true) / scale;
    return values;
  }

  // A map a chart was sent as its numbers (AttentionMap.for_page), as AttentionMap.figure draws it.
  function attentionMap({weights, decimals, rows, columns, options}) {
    const values = fromFixedPoint(weights, decimals);
    const matrix = rows.map((_, i) => Array.from(values.subarray(i * columns.length, (i + 1) * columns.length)));
    return attentionHeatmap(matrix, rows, columns, options);
  }

  return {attentionHeatmap, attentionGrid, topKBar, sourceAttentionBar, rowOutline, escape, fromFixedPoint,
          attentionMap};
})();
