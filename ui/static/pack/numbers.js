// A translation's numbers as the Translate tab's page draws them (ui/static/explorer.js), made in the page for the
// offline pack: mirrors `ui/views/explorer.py:page_numbers` with every map and every frame at once (each kind's
// one-head map, a layer's heads and the model view; the step view's candidates and captions), the frames made by
// ui/static/pack/frames.js. A translation here is what
// engine.js inspects: {source_pieces, target_pieces, predicted_pieces, token_probs, top_pieces, top_probs,
// attention: {encoder, decoder, cross}}, each map a Float32Array per layer (heads x queries x keys).
window.explorerPackNumbers = (() => {
  const WEIGHT_DECIMALS = 4;  // mirrors `ui/views/translate.py:WEIGHT_DECIMALS`
  const KINDS = ["encoder", "decoder", "cross"];
  const frames = () => window.explorerPackFrames;
  const {words} = window.explorerPage.config.packFrames;
  let sent = 0;

  // One cell's mean over the heads, in float32 arithmetic as torch takes it.
  function meanOfHeads(weights, heads, cells, cell) {
    let total = 0;
    for (let head = 0; head < heads; head++) total = Math.fround(total + weights[head * cells + cell]);
    return Math.fround(total / heads);
  }

  // Mirrors `translate.py:fixed_point` of `map_block`: every head's map and then their mean (float32 arithmetic,
  // as torch's mean over the heads), times 10^4, rounded half to even, as little-endian 16-bit integers in base64.
  function mapBlock(weights, heads, cells) {
    const fixed = new Uint16Array((heads + 1) * cells), scale = 10 ** WEIGHT_DECIMALS;
    const rounded = (value) => frames().roundHalfEven(value * scale);
    for (let cell = 0; cell < cells; cell++) {
      for (let head = 0; head < heads; head++) fixed[head * cells + cell] = rounded(weights[head * cells + cell]);
      fixed[heads * cells + cell] = rounded(meanOfHeads(weights, heads, cells, cell));
    }
    const bytes = new Uint8Array(fixed.length * 2), view = new DataView(bytes.buffer);
    fixed.forEach((value, i) => view.setUint16(2 * i, value, true));
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(text);
  }

  // Mirrors `translate.py:attention_axes`: each kind's row and column labels.
  const axes = (translation, kind) => [kind === "encoder" ? translation.source_pieces : translation.predicted_pieces,
                                       kind === "decoder" ? translation.target_pieces : translation.source_pieces];

  const markdownEscape = (piece) => {  // mirrors `ui/views/text.py:markdown_escape`
    let escaped = piece.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
    for (const mark of "\\`*_{}[]()#+-.!|~") escaped = escaped.replaceAll(mark, `\\${mark}`);
    return escaped;
  };

  // Mirrors `translate.py:step_caption` (without a source share: the pack computes no ALTI+).
  const caption = (translation, index) => words["translate.step.caption"].replace(/\{(\w+)\}/g, (_, name) => String({
    step: index + 1, steps: translation.predicted_pieces.length,
    piece: markdownEscape(translation.predicted_pieces[index]),
    probability: frames().percent(translation.token_probs[index])}[name]));

  // Mirrors `explorer.py:page_numbers` with every block and every frame sent.
  function pageNumbers(translation) {
    const heads = translation.attention.cross[0].length / (translation.predicted_pieces.length *
                                                            translation.source_pieces.length);
    const maps = {}, mapFrames = {};
    for (const kind of KINDS) {
      const [rows, columns] = axes(translation, kind), [rowTitle, columnTitle] = frames().axesTitles(kind);
      maps[kind] = {layers: translation.attention[kind].length, rows, columns, rowTitle, columnTitle,
                    blocks: translation.attention[kind].map((layer) => mapBlock(layer, heads, rows.length * columns.length))};
      const layers = translation.attention[kind].length;
      mapFrames[kind] = {map: frames().heatmapFrame(kind, rows, columns),
                         ...Object.fromEntries(["layerHeads", "everyHead", "everyMean"].map((figure) =>
                           [figure, frames().gridFrame(kind, figure, rows, columns, layers, heads)]))};
    }
    const steps = translation.predicted_pieces.map((piece, index) => ({
      ...frames().candidates(translation.top_pieces[index], translation.top_probs[index], piece),
      caption: caption(translation, index)}));
    sent += 1;
    return {sent, heads, decimals: WEIGHT_DECIMALS, source: [...translation.source_pieces],
            produced: [...translation.predicted_pieces], forced: 0, maps, steps, frames: mapFrames,
            candidatesFrame: frames().candidatesFrame(translation.top_pieces[0].length),
            sourcesFrame: frames().sourcesFrame(translation.source_pieces)};
  }

  // Mirrors `translate.py:shown_weights` of `one_map`: one head's map (head null: the mean of the heads, in float32
  // as torch takes it), rounded to the decimals the page shows.
  function oneMap(layerWeights, heads, rows, columns, head) {
    const cells = rows * columns, scale = 10 ** WEIGHT_DECIMALS;
    const round = (value) => frames().roundHalfEven(value * scale) / scale;
    const value = (cell) => (head === null ? meanOfHeads(layerWeights, heads, cells, cell)
                                           : layerWeights[(head - 1) * cells + cell]);
    return Array.from({length: rows}, (_, i) => Array.from({length: columns}, (_, j) => round(value(i * columns + j))));
  }

  // Mirrors `translate.py:forced_figures`: the probability of each token of a forced target, and its
  // cross-attention at `layer` (default: the last) and `head` (null: the mean of the heads).
  function forcedFigures(translation, layer = null, head = null) {
    const probabilities = frames().tokenProbabilities(translation.predicted_pieces, translation.token_probs,
      words["translate.forced.probability.title"].replace("{log_prob}", frames().fixed2(translation.log_prob)));
    return [window.explorerFigures.fill({figure: probabilities, shared: []}),
            crossMap(translation, layer, head, words["translate.forced.attention.title"])];
  }

  // Mirrors `translate.py:map_of` of the cross-attention, drawn: one head's map at `layer` (null: the last), or the
  // mean of the heads (head null), under `title`, with no step's row marked.
  function crossMap(translation, layer = null, head = null, title = words["map.kind.cross"]) {
    const rows = translation.predicted_pieces, columns = translation.source_pieces;
    const layers = translation.attention.cross.length, heads = translation.attention.cross[0].length / (rows.length * columns.length);
    const {within} = window.explorer.rules;
    const shownLayer = layer === null ? layers : within(layer, layers), shownHead = head === null ? null : within(head, heads);
    const which = (shownHead === null ? words["map.mean_of_heads"] : words["map.one_head"])
      .replace(/\{(\w+)\}/g, (_, name) => String({layer: shownLayer, head: shownHead, heads}[name]));
    const frame = frames().heatmapFrame("cross", rows, columns, title, false);
    const matrix = oneMap(translation.attention.cross[shownLayer - 1], heads, rows.length, columns.length, shownHead);
    return window.explorerFigures.fill(frame, {map: () => matrix, which});
  }

  // Mirrors `ui/views/live.py:live_numbers`: one step of a search under way, as explorer.js's `live` draws it, at
  // `layer` and `head` (0: the mean of the heads); `sent` numbers the translation it will be.
  function liveNumbers(report, layer, head, sent) {
    const {weights, layers, heads} = report.cross, sources = report.source.length;
    const {within} = window.explorer.rules;
    const shownLayer = within(layer, layers), shownHead = head === 0 ? null : within(head, heads);
    const layerWeights = weights.subarray((shownLayer - 1) * heads * sources, shownLayer * heads * sources);
    const attention = Array.from({length: sources}, (_, j) => frames().roundHalfEven(10 ** WEIGHT_DECIMALS * (
      shownHead === null ? meanOfHeads(layerWeights, heads, sources, j) : layerWeights[(shownHead - 1) * sources + j]))
      / 10 ** WEIGHT_DECIMALS);
    const produced = report.produced, step = produced.length;
    const key = report.beamSize <= 1 ? "translate.live.caption" : "translate.live.caption_beam";
    const caption = words[key].replace(/\{(\w+)\}/g, (_, name) => String({
      step, piece: markdownEscape(produced.at(-1)), beams: report.beamSize,
      probability: frames().percent(report.top.probability(report.tokens.at(-1)))}[name]));
    return {sent, step, produced, forced: 0,
            candidates: frames().candidates(report.pieces(report.top.ids), report.top.probs, produced.at(-1)),
            candidatesFrame: frames().candidatesFrame(report.top.ids.length), sourcesFrame: frames().sourcesFrame(report.source),
            layer: shownLayer, head: shownHead === null ? 0 : shownHead, heads, attention, caption};
  }

  return {pageNumbers, mapBlock, forcedFigures, crossMap, liveNumbers, upcoming: () => sent + 1};
})();
