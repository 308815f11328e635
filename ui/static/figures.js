// The page's figures are the server's: each comes as a frame (ui/drawing/frames.py), a figure whose every rule of looks
// ui/drawing/figures.py decided, with holes where the page's numbers go (a map's weights, the step outlined, a step's
// candidates). Here a frame is filled, as ui/drawing/frames.py's ``filled`` fills it; a test in Chromium holds the two
// equal.
window.explorerFigures = (() => {
  const known = window.explorerPage.config.figures.known;  // parts every frame leaves to the page (figures.known)
  const sharedOf = new WeakMap();  // each frame's shared parts, written out once

  function put(part, values, shared) {
    if (Array.isArray(part)) return part.map((value) => put(value, values, shared));
    if (part === null || typeof part !== "object") return part;
    if ("$ref" in part) return shared[part.$ref];
    if ("$outer" in part) {
      const [rows, columns, joiner] = put(part.$outer, values, shared);
      return rows.map((row) => columns.map((column) => row + joiner + column));
    }
    if ("$panels" in part) return joined(put(part.$panels, values, shared), part.gap, part.apart);
    if ("$template" in part) {
      return part.$template.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
    }
    if ("$" in part) {
      const {$: name, plus, ...where} = part;
      let value = values[name];
      if (typeof value === "function") value = value(where);
      return plus === undefined ? value : value + plus;
    }
    return Object.fromEntries(Object.entries(part).map(([key, value]) => [key, put(value, values, shared)]));
  }

  // Panels laid out as one, ``apart`` rows and columns of ``gap`` between neighbours (ui/drawing/frames.py, Panels): a
  // grid drawn as one heatmap.
  function joined(panels, gap, [rowsApart, columnsApart]) {
    const lines = [], between = new Array(columnsApart).fill(gap);
    panels.forEach((row, r) => row[0].forEach((_, i) => {
      const line = row.flatMap((panel, c) => (c ? [...between, ...panel[i]] : [...panel[i]]));
      if (r && !i) for (let k = 0; k < rowsApart; k++) lines.push(new Array(line.length).fill(gap));
      lines.push(line);
    }));
    return lines;
  }

  // The figure a frame draws with ``values`` (or one part of it: "data" or "layout"). Mirrors
  // `ui/drawing/frames.py:filled`.
  function fill(frame, values = {}, part = null) {
    if (!sharedOf.has(frame)) sharedOf.set(frame, frame.shared.map((value) => put(value, {}, [])));
    const shared = sharedOf.get(frame);
    return put(part === null ? frame.figure : frame.figure[part], {...known, ...values}, shared);
  }

  // The holes of ``name`` a frame has (a grid's maps: which layer and head each panel shows).
  function holes(frame, name) {
    const found = [];
    const visit = (part) => {
      if (Array.isArray(part)) part.forEach(visit);
      else if (part !== null && typeof part === "object") {
        if (part.$ === name) found.push(part);
        else Object.values(part).forEach(visit);
      }
    };
    visit(frame.figure);
    return found;
  }

  // Numbers the server sent in fixed point (ui/views/translate.py, fixed_point): base64 of little-endian 16-bit
  // integers, each the number times 10^decimals.
  function fromFixedPoint(encoded, decimals) {
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)), view = new DataView(bytes.buffer);
    const scale = 10 ** decimals, values = new Float64Array(bytes.length / 2);
    for (let i = 0; i < values.length; i++) values[i] = view.getUint16(2 * i, true) / scale;
    return values;
  }

  // A map a chart was sent as its frame and numbers (AttentionMap.for_page).
  function attentionMap({frame, weights, decimals, rows, columns}) {
    const values = fromFixedPoint(weights, decimals);
    const matrix = Array.from({length: rows}, (_, i) => Array.from(values.subarray(i * columns, (i + 1) * columns)));
    return fill(frame, {map: () => matrix});
  }

  return {fill, holes, fromFixedPoint, attentionMap};
})();
