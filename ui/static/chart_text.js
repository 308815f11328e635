// Every chart as text, from the numbers Plotly holds, for a student who cannot see it: the chart becomes a figure
// whose label says what is strongest in it (for a heatmap, each row's two largest cells, named as its hover text
// names them; for a line or bar, its last, highest and lowest points), and "Chart as text" under it opens the whole
// matrix or every point as a table. Its words, and the decimal mark of its numbers, are the page's language's (the
// config: translate.page_settings, words.chartText).
(() => {
  const TOP = 2, MOST_ROWS = 60, MOST_COLUMNS = 60, MOST_POINTS = 200, LABEL_LINES = 6;
  const words = window.explorerPage.config.explorer.words.chartText;
  const joiner = window.explorerPage.config.figures.hoverJoiner;  // ui/drawing/figures.py, HOVER_JOINER
  const filled = (template, values) => template.replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
  const plain = (html) => {
    const d = document.createElement("div"); d.innerHTML = String(html ?? ""); return d.textContent;
  };
  const number = (v) => (typeof v === "number"
    ? (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)).replace(".", words.decimalMark) : String(v));
  function names(t, i, j) {  // a cell's row and column, as its hover text names them (a grid's: and its panel)
    const hover = t.text && t.text[i] && t.text[i][j];
    if (typeof hover === "string" && hover.includes(joiner)) {
      const [row, rest] = plain(hover.replace(/<br>/g, "\n")).split(joiner);
      return [row.replace(/\n/g, ", "), rest.split("\n")[0]];
    }
    return [filled(words.row, {label: t.y ? plain(t.y[i]) : i}),
            filled(words.column, {label: t.x ? plain(t.x[j]) : j})];
  }
  function heatmapLines(t) {
    return t.z.slice(0, MOST_ROWS).map((row, i) => {
      const strongest = row.map((v, j) => [v, j]).filter(([v]) => typeof v === "number")
        .sort((a, b) => Math.abs(b[0]) - Math.abs(a[0])).slice(0, TOP);
      if (!strongest.length) return "";
      return filled(words.strongest, {
        row: names(t, i, strongest[0][1])[0],
        cells: strongest.map(([v, j]) => filled(words.cell, {column: names(t, i, j)[1], value: number(v)}))
          .join(", ")});
    }).filter(Boolean);
  }
  function points(t) {  // a line's or bar's labels (the names its hover shows, where it has them) and values
    const horizontal = t.orientation === "h";
    const values = Array.from((horizontal ? t.x : t.y) || [], Number);
    const positions = (horizontal ? t.y : t.x) || values.map((_, k) => k);
    const named = (k) => (t.customdata && t.customdata[k] !== undefined ? t.customdata[k] : positions[k]);
    return [values.map((_, k) => plain(named(k))), values];
  }
  function seriesLine(t) {
    const [labels, values] = points(t);
    if (!values.length) return "";
    const at = (k) => filled(words.point, {label: labels[k], value: number(values[k])});
    const top = values.indexOf(Math.max(...values)), bottom = values.indexOf(Math.min(...values));
    return filled(words.series, {name: plain(t.name) || words.values, count: values.length,
                                 last: at(values.length - 1), highest: at(top), lowest: at(bottom)});
  }
  function cell(tag, text, scope) {
    const c = document.createElement(tag); c.textContent = text; if (scope) c.setAttribute("scope", scope); return c;
  }
  function table(t) {
    const tab = document.createElement("table"), head = tab.createTHead().insertRow();
    if (t.type === "heatmap") {
      const rows = t.z.slice(0, MOST_ROWS), columns = Math.min(MOST_COLUMNS, (rows[0] || []).length);
      head.append(cell("th", "", "col"));
      for (let j = 0; j < columns; j++) head.append(cell("th", names(t, 0, j)[1], "col"));
      const body = tab.createTBody();
      rows.forEach((row, i) => {
        const tr = body.insertRow(); tr.append(cell("th", names(t, i, 0)[0], "row"));
        row.slice(0, columns).forEach((v) => tr.append(cell("td", typeof v === "number" ? number(v) : "")));
      });
    } else {
      head.append(cell("th", "", "col"), cell("th", plain(t.name) || words.value, "col"));
      const body = tab.createTBody(), [labels, values] = points(t);
      values.slice(0, MOST_POINTS).forEach((v, k) => {
        const tr = body.insertRow(); tr.append(cell("th", labels[k], "row"), cell("td", number(v)));
      });
    }
    return tab;
  }
  // A grid drawn as one heatmap (its meta.panel: each panel's queries and keys, and the rows and columns apart;
  // ui/drawing/frames.py, grid_panel) read as its panels, each a heatmap of its own; any other trace as it is.
  function panels(t) {
    const grid = t.type === "heatmap" && t.meta && t.meta.panel;
    if (!grid) return [t];
    const {queries: rows, keys: columns, rowsApart, columnsApart} = grid, found = [];
    for (let top = 0; top < t.z.length; top += rows + rowsApart) {
      for (let left = 0; left < (t.z[0] || []).length; left += columns + columnsApart) {
        const cut = (m) => m && m.slice(top, top + rows).map((line) => line.slice(left, left + columns));
        found.push({type: "heatmap", z: cut(t.z), text: cut(t.text)});
      }
    }
    return found;
  }
  function describe(div) {
    if (!div.data || div.__described === div.data) return;
    div.__described = div.data;
    const shown = div.data.filter((t) => (t.type === "heatmap" && t.z) ||
                                         ((t.type === "scatter" || t.type === "bar") && (t.y || t.x))).flatMap(panels);
    const heading = div.layout && div.layout.title;
    const title = plain(String((heading && (heading.text ?? heading)) || "").replace(/<br>/g, ". ")).trim() ||
      words.untitled;
    const lines = shown.flatMap((t) => (t.type === "heatmap" ? heatmapLines(t) : [seriesLine(t)])).filter(Boolean);
    div.setAttribute("role", "figure");  // not "img": its tool buttons stay reachable
    div.setAttribute("aria-label", [title, ...lines.slice(0, LABEL_LINES)].join(". ") +
      (lines.length > LABEL_LINES ? ". " + words.more : ""));
    let box = div.parentElement.querySelector(":scope > details.chart-text");
    if (!box) {
      box = document.createElement("details"); box.className = "chart-text";
      box.append(cell("summary", words.asText)); div.after(box);
      box.addEventListener("toggle", () => tabulate(box));
    }
    box.traces = shown;
    box.replaceChildren(box.querySelector("summary"), ...lines.map((line) => cell("p", line)));
    tabulate(box);
  }
  function tabulate(box) {  // tables are built when they are first opened: a step or view click draws no table
    if (box.open && box.tabled !== box.traces) {
      box.tabled = box.traces;
      box.append(...box.traces.map(table));
    }
  }
  window.explorerPage.onChart(describe);
})();
