// The offline pack's translator: the pack's models run in the browser (onnxruntime-web, WebAssembly) from the
// graphs and weights `python -m transformer.pack` wrote, their text segmented by tokenizers.js as SentencePiece
// segments it, searched by search.js, then inspected in one teacher-forced pass as
// transformer/paper/translation.py:inspect_together inspects a translation.
//
// Every file of the pack arrives as a script (a page opened from disk may not fetch its own files):
// `explorerPackFiles.arrived(name, content)`, where content is text, or base64 for bytes. `window.explorerPack`
// is the API (README, "The offline pack"):
//   explorerPack.translate(text, {beam, maxLength, model}) -> Promise of what `python -m transformer.translate
//   --json` prints for the sentence, with the model's decoding defaults.
window.explorerPackFiles = (() => {
  const waiting = new Map(), arrivedFiles = new Map();
  const arrived = (name, content) => {
    arrivedFiles.set(name, content);
    if (waiting.has(name)) waiting.get(name).resolve(content);
  };
  // A file's content, its script added to the page the first time it is asked for. A file the pack lacks (or a
  // script that names another file) is an error that names it.
  function file(name) {
    if (arrivedFiles.has(name)) return Promise.resolve(arrivedFiles.get(name));
    if (!waiting.has(name)) {
      let resolve, reject;
      const promise = new Promise((yes, no) => { resolve = yes; reject = no; });
      waiting.set(name, {promise, resolve});
      const script = document.createElement("script");
      script.src = `${name}.js`;
      script.onload = () => { if (!arrivedFiles.has(name)) reject(new PackFileMissing(name)); };
      script.onerror = () => reject(new PackFileMissing(name));
      document.head.append(script);
    }
    return waiting.get(name).promise;
  }
  // A file's content, let go of once taken: the parts of the weights and the WebAssembly are needed once, as bytes,
  // and their text would hold tens of megabytes more.
  async function take(name) {
    const content = await file(name);
    arrivedFiles.delete(name);
    waiting.delete(name);
    return content;
  }
  return {arrived, file, take};
})();

class PackFileMissing extends Error {
  constructor(name) {
    super(`This pack lacks the file ${name}.js: copy the whole folder again.`);
    this.file = `${name}.js`;
  }
}

window.explorerPack = (() => {
  const files = window.explorerPackFiles;
  let contents = null, runtime = null;
  const models = new Map();

  function bytesOf(base64) {
    const text = atob(base64), bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // A file written in parts (each under the 10 MB a static host takes without large-file storage), as bytes.
  async function parts(names, progress) {
    const chunks = [];
    for (const name of names) {
      chunks.push(bytesOf(await files.take(name)));
      if (progress) progress(name);
    }
    const whole = new Uint8Array(chunks.reduce((total, chunk) => total + chunk.length, 0));
    let at = 0;
    for (const chunk of chunks) { whole.set(chunk, at); at += chunk.length; }
    return whole;
  }

  async function pack() {
    return contents || (contents = await files.file("contents"));
  }

  // onnxruntime-web, its WebAssembly given as bytes and its module glue as a data: URL: a page opened from disk
  // may not load either as a file.
  async function startRuntime(progress) {
    if (runtime) return runtime;
    if (typeof WebAssembly !== "object") throw new Error("This browser cannot run WebAssembly, which the pack needs.");
    const {runtime: runtimeFiles} = await pack();
    const glue = await files.file(runtimeFiles.glue);
    const wasm = await gunzip(await parts(runtimeFiles.wasm, progress));
    const ort = window.ort;
    ort.env.wasm.numThreads = 1;  // threads need a cross-origin-isolated page, which a file is not
    ort.env.wasm.wasmBinary = wasm.buffer;
    ort.env.wasm.wasmPaths = {mjs: `data:text/javascript;charset=utf-8,${encodeURIComponent(glue)}`};
    const module = await import(`data:text/javascript;charset=utf-8,${encodeURIComponent(await files.file(runtimeFiles.tokenizers))}`);
    runtime = {ort, Tokenizer: module.Tokenizer};
    return runtime;
  }

  // One of the pack's models, loaded once: its manifest, tokenizer and two sessions over one weights file.
  async function model(name, progress) {
    const {models: listed, defaultModel} = await pack();
    name = name || defaultModel;
    if (!listed[name]) throw new Error(`This pack has no model called ${name}; it has ${Object.keys(listed).join(", ")}.`);
    if (!models.has(name)) models.set(name, loadModel(name, listed[name], progress));
    try {
      return await models.get(name);
    } catch (error) {
      models.delete(name);  // asked again, it is loaded again
      throw error;
    }
  }

  async function loadModel(name, entry, progress) {
    const {ort, Tokenizer} = await startRuntime(progress);
    const manifest = await files.file(entry.manifest);
    const weights = await parts(entry.weights, progress);
    const session = async (file) => ort.InferenceSession.create(bytesOf(await files.take(file)), {
      executionProviders: ["wasm"], externalData: [{path: manifest.weightsFile, data: weights}]});
    const [encoder, decoder] = [await session(entry.encoder), await session(entry.decoder)];
    const tokenizer = new Tokenizer(manifest.tokenizer, {});
    return {name, ...manifest, encoder, decoder, tokenizer, ort};
  }

  const int64 = (ort, rows) => new ort.Tensor("int64", BigInt64Array.from(rows.flat(), BigInt),
                                               [rows.length, rows[0].length]);

  // A word model's ids, as SentencePiece cuts normalised text: a word starts at each ▁, and a run of unknown words
  // is one unknown piece.
  function wordIds(m, text) {
    const unknown = m.tokenizer.model.unk_token_id, ids = [];
    m.words ||= new Map(m.tokenizer.model.vocab.map((piece, id) => [piece, id]));
    for (const word of m.tokenizer.normalizer(text).match(/▁[^▁]*|[^▁]+/gu) || []) {
      const id = m.words.get(word) ?? unknown;
      if (!(id === unknown && ids.at(-1) === unknown)) ids.push(id);
    }
    return ids;
  }

  // Mirrors `Tokenizer.encode` without eos: a text's piece ids.
  const segment = (m, text) => (m.segmenting === "word" ? wordIds(m, text)
    : m.tokenizer.encode(text, {add_special_tokens: false}).ids);

  // Mirrors `sentences.py:encode_source`: the source ids ending in eos, cut to the model's positions.
  function encodeSource(m, text) {
    const ids = [...segment(m, text), m.config.eos_id];
    if (ids.length <= m.config.max_len) return {ids, truncated: false};
    return {ids: [...ids.slice(0, m.config.max_len - 1), m.config.eos_id], truncated: true};
  }

  // Mirrors `Tokenizer.decode`: the pieces of the ids that are not special, as SentencePiece joins them.
  function decodeText(m, ids) {
    const special = new Set(m.specialIds);
    const text = ids.filter((id) => !special.has(id)).map((id) => m.pieces[id]).join("").replaceAll("▁", " ");
    return m.addsWordStart && text.startsWith(" ") ? text.slice(1) : text;
  }

  // One row of a (layers, rows, heads, queries, keys) output, cut to `queries` x `keys`: a Float32Array per layer,
  // heads x queries x keys.
  function maps(tensor, row, queries, keys) {
    const [layers, rows, heads, allQueries, allKeys] = tensor.dims, data = tensor.data;
    return Array.from({length: layers}, (_, l) => {
      const layer = new Float32Array(heads * queries * keys);
      for (let h = 0; h < heads; h++) {
        for (let q = 0; q < queries; q++) {
          const from = (((l * rows + row) * heads + h) * allQueries + q) * allKeys;
          layer.set(data.subarray(from, from + keys), (h * queries + q) * keys);
        }
      }
      return layer;
    });
  }

  // A map per layer as [layer][head][query][key], rounded as `translation.py:_rounded` rounds.
  function nested(layers, queries, keys) {
    const round = (value) => Math.round(value * 1e6) / 1e6;
    return layers.map((layer) => Array.from({length: layer.length / (queries * keys)}, (_, h) =>
      Array.from({length: queries}, (_, q) => Array.from({length: keys}, (_, k) =>
        round(layer[(h * queries + q) * keys + k])))));
  }

  async function encode(m, ids) {
    const {ort} = m, source = int64(ort, [ids]);
    const out = await m.encoder.run({source});
    return {source, memory: out.memory, attention: out.encoder_attention};
  }

  // Each prefix's next-token logits: the decoder over the whole prefixes (the same length), projecting the last.
  function nextLogits(m, encoded, ids) {
    return async (prefixes) => {
      const {ort} = m, rows = prefixes.length, [, keys, width] = encoded.memory.dims;
      const memory = new Float32Array(rows * keys * width), source = [];
      for (let r = 0; r < rows; r++) { memory.set(encoded.memory.data, r * keys * width); source.push(ids); }
      const out = await m.decoder.run({
        target: int64(ort, prefixes), memory: new ort.Tensor("float32", memory, [rows, keys, width]),
        source: int64(ort, source),
        projected: new ort.Tensor("int64", BigInt64Array.of(BigInt(prefixes[0].length - 1)), [1])});
      const vocabulary = out.logits.dims[2], [layers, , heads, queries, sources] = out.cross_attention.dims;
      const found = prefixes.map((_, r) => out.logits.data.subarray(r * vocabulary, (r + 1) * vocabulary));
      // A row's cross-attention at its newest position, (layers, heads, source): what a step looked at.
      found.cross = (r) => {
        const row = new Float32Array(layers * heads * sources);
        for (let l = 0; l < layers; l++) {
          for (let h = 0; h < heads; h++) {
            const from = ((((l * rows + r) * heads + h) * queries) + queries - 1) * sources;
            row.set(out.cross_attention.data.subarray(from, from + sources), (l * heads + h) * sources);
          }
        }
        return {weights: row, layers, heads};
      };
      return found;
    };
  }

  const TOP_K = 5;  // the candidates each step shows (translation.py's top_k; watching.py's TOP_CANDIDATES)

  // A step's most probable tokens under `logits` and their probabilities, the lower id first among equals.
  function topCandidates(logits) {
    let most = -Infinity;
    for (const value of logits) if (value > most) most = value;
    let total = 0;
    for (const value of logits) total += Math.exp(value - most);
    const probability = (token) => Math.exp(logits[token] - most) / total;
    const ids = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b).slice(0, TOP_K);
    return {ids, probs: ids.map(probability), probability};
  }

  // Mirrors `translation.py:inspect_together` for one sentence: every number the views show.
  async function inspect(m, encoded, sourceIds, {tokens, ended}) {
    const {ort} = m, body = tokens.slice(0, m.config.max_len - 1), done = ended || !body.length;
    const inputs = [m.config.start_id, ...(done ? body : body.slice(0, -1))];
    const predicted = done ? [...body, m.config.eos_id] : [...body];
    const out = await m.decoder.run({
      target: int64(ort, [inputs]), memory: encoded.memory, source: encoded.source,
      projected: new ort.Tensor("int64", BigInt64Array.from(inputs.keys(), BigInt), [inputs.length])});
    const vocabulary = out.logits.dims[2], tokenProbs = [], topIds = [], topProbs = [];
    predicted.forEach((id, position) => {
      const top = topCandidates(out.logits.data.subarray(position * vocabulary, (position + 1) * vocabulary));
      tokenProbs.push(top.probability(id));
      topIds.push(top.ids);
      topProbs.push(top.probs);
    });
    const pieces = (ids) => ids.map((id) => m.pieces[id]);
    return {
      source_ids: sourceIds, source_pieces: pieces(sourceIds), target_ids: inputs, target_pieces: pieces(inputs),
      predicted_ids: predicted, predicted_pieces: pieces(predicted), text: decodeText(m, body), ended: done,
      token_probs: tokenProbs, top_ids: topIds, top_pieces: topIds.map(pieces), top_probs: topProbs,
      attention: {encoder: maps(encoded.attention, 0, sourceIds.length, sourceIds.length),
                  decoder: maps(out.decoder_attention, 0, inputs.length, inputs.length),
                  cross: maps(out.cross_attention, 0, inputs.length, sourceIds.length)},
    };
  }

  const empty = (source) => ({source, translation: "", source_tokens: [], target_tokens: [],
                              attention: {encoder: [], decoder: [], cross: []}});

  // A sentence translated and inspected, as the app's `checkpoint.translate` does: the numbers of every view, and
  // whether the sentence was cut to the model's positions. Null for a blank one.
  async function translation(text, options = {}) {
    const m = await model(options.model);
    if (!String(text).trim()) return null;
    const {ids, truncated} = encodeSource(m, String(text));
    const encoded = await encode(m, ids);
    const next = nextLogits(m, encoded, ids), search = window.explorerSearch;
    const beamSize = options.beam || m.decoding.beam_size;
    // A watch sees each step's report with what it needs to draw it: the pieces, the source's and the beam.
    const pieces = (list) => list.map((id) => m.pieces[id]);
    const watch = options.watch && ((report) => options.watch({
      ...report, produced: pieces(report.tokens), top: topCandidates(report.logits), source: pieces(ids), beamSize,
      pieces, text: decodeText(m, report.tokens)}));
    const searched = beamSize <= 1
      ? await search.greedy(next, m.config, ids.length, options.maxLength, watch)
      : await search.beam(next, m.config, ids.length, options.maxLength, beamSize, m.decoding.length_penalty,
                          m.decoding.rules, watch);
    return {...await inspect(m, encoded, ids, searched), source_text: String(text), truncated};
  }

  // Mirrors `translation.py:forced_decode` of a target typed as text: the numbers of the source read with it, the
  // probability the model gives each of its tokens among them. Null for a blank source or target.
  async function forced(source, target, options = {}) {
    const m = await model(options.model);
    if (!String(source).trim() || !String(target).trim()) return null;
    const {ids, truncated} = encodeSource(m, String(source));
    const body = segment(m, String(target));
    const result = await inspect(m, await encode(m, ids), ids, {tokens: body, ended: true});
    const logProb = result.token_probs.reduce((sum, p) => sum + Math.log(Math.max(p, 1e-30)), 0);
    return {...result, log_prob: logProb, source_text: String(source), truncated};
  }

  // Mirrors `Translation.to_json`: what `python -m transformer.translate --json` prints.
  async function translateText(text, options = {}) {
    const result = await translation(text, options);
    if (!result) return empty(String(text));
    const {source_pieces: source, target_pieces: target} = result;
    return {source: String(text), translation: result.text, source_tokens: source, target_tokens: target,
            attention: {encoder: nested(result.attention.encoder, source.length, source.length),
                        decoder: nested(result.attention.decoder, target.length, target.length),
                        cross: nested(result.attention.cross, target.length, source.length)}};
  }

  return {translate: translateText, translation, forced, model, pack, runtimeStarted: () => runtime !== null,
          PackFileMissing};
})();
