// Greedy and beam search in the offline pack, step by step as transformer/paper/decoding.py searches: the same
// length limits, the same tokens never generated, fairseq's beam search with the checkpoint's length penalty and
// rules. Each function below mirrors the Python function it names; tests/pack/test_pack_browser.py holds the tokens
// equal to `python -m transformer.translate` on Multi30K sentences.
// A search asks `next(prefixes)` for each prefix's next-token logits (one Float32Array of the vocabulary per
// prefix, and `cross(row)`: that row's cross-attention of every layer and head while choosing) and never sees the
// model. A watched search reports its leading hypothesis after each step, as transformer/paper/watching.py's
// SearchProgress: {tokens, logits, cross} of the step that chose its last token; it waits for the watch's promise,
// so that a page draws each step before the next is decided.
window.explorerSearch = (() => {
  // Mirrors `decoding.py:default_max_length`.
  const defaultMaxLength = (config, sourceLength) =>
    Math.max(1, Math.min(config.max_len - 1, Math.trunc(1.5 * sourceLength) + 10));
  // Mirrors `decoding.py:length_limits` for one sentence (and `_within_positions`).
  const lengthLimit = (config, sourceLength, maxLength) =>
    (maxLength ? Math.max(1, Math.min(Math.trunc(maxLength), config.max_len - 1))
      : defaultMaxLength(config, sourceLength));

  // Mirrors `decoding.py:never_generate`: padding and the start token are inputs, never a step's output.
  function neverGenerate(config, values) {
    values[config.pad_id] = -Infinity;
    if (config.start_id !== config.eos_id) values[config.start_id] = -Infinity;
    return values;
  }

  function logSoftmax(values) {
    let most = -Infinity;
    for (const value of values) if (value > most) most = value;
    let total = 0;
    for (const value of values) total += Math.exp(value - most);
    const shift = most + Math.log(total);
    return values.map((value) => value - shift);
  }

  // The index of the largest value, the first of equals (as torch.argmax).
  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // Mirrors `watching.py:progress_of`: what a step reports of the hypothesis decoded in `row`.
  const progressOf = (tokens, rows, row) => ({tokens, logits: rows[row], cross: rows.cross(row)});

  // Mirrors `decoding.py:greedy_search` for one sentence: the generated ids without eos, and whether eos ended them.
  async function greedy(next, config, sourceLength, maxLength, watch) {
    const limit = lengthLimit(config, sourceLength, maxLength), outputs = [];
    while (outputs.length < limit && outputs.at(-1) !== config.eos_id) {
      const rows = await next([[config.start_id, ...outputs]]);
      outputs.push(argmax(neverGenerate(config, Float64Array.from(rows[0]))));
      if (watch) await watch(progressOf([...outputs], rows, 0));
    }
    const ended = outputs.at(-1) === config.eos_id;
    return {tokens: ended ? outputs.slice(0, -1) : outputs, ended};
  }

  // Mirrors `decoding.py:length_scored`.
  const lengthScored = (logProb, tokens, lengthPenalty) => logProb / (tokens + 1) ** lengthPenalty;

  // Mirrors `decoding.py:_keep_best`.
  function keepBest(finished, hypothesis, k, earlyStopping) {
    if (finished.length < k) { finished.push(hypothesis); return true; }
    if (earlyStopping) return false;
    let worst = 0;
    for (let i = 1; i < k; i++) if (finished[i].score < finished[worst].score) worst = i;
    if (hypothesis.score <= finished[worst].score) return false;
    finished[worst] = hypothesis;
    return true;
  }

  // Mirrors `decoding.py:_can_improve`.
  function canImprove(finished, bestLive, length, k, lengthPenalty, earlyStopping) {
    if (finished.length < k) return true;
    return !earlyStopping && bestLive / length ** lengthPenalty > Math.min(...finished.map((h) => h.score));
  }

  // Mirrors `decoding.py:_step_log_probs` for one sentence's k beams (no forced token: a pack's models have none).
  function stepLogProbs(config, logits, atLimit, renormalize) {
    return logits.map((row) => {
      let values = Float64Array.from(row);
      values = neverGenerate(config, renormalize ? values : logSoftmax(values));
      if (atLimit) values = values.map((value, token) => (token === config.eos_id ? value : -Infinity));
      return renormalize ? logSoftmax(values) : values;
    });
  }

  // The `count` largest of `values` as [value, index], largest first, the lower index first among equals.
  function largest(values, count) {
    const top = [];
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      if (top.length === count && !(value > top[count - 1][0])) continue;
      let at = top.length;
      while (at > 0 && value > top[at - 1][0]) at--;
      top.splice(at, 0, [value, i]);
      if (top.length > count) top.pop();
    }
    return top;
  }

  // Mirrors `decoding.py:beam_search` for one sentence: its best hypothesis (ids without eos, and whether it ended).
  async function beam(next, config, sourceLength, maxLength, k, lengthPenalty, rules, watch) {
    const limit = lengthLimit(config, sourceLength, maxLength), eos = config.eos_id;
    let scores = Array.from({length: k}, (_, i) => (i === 0 ? 0 : -Infinity));
    let prefixes = Array.from({length: k}, () => [config.start_id]);
    const finished = [];
    let bestEnded = null;  // mirrors `watching.py:WatchedBeams`: the best ended hypothesis, and its report
    for (let step = 0; step <= limit; step++) {
      const rows = await next(prefixes);
      const logProbs = stepLogProbs(config, rows, step === limit, rules.renormalize);
      const vocabulary = logProbs[0].length, candidates = new Float64Array(k * vocabulary);
      logProbs.forEach((row, b) => row.forEach((value, token) => {
        candidates[b * vocabulary + token] = scores[b] + value;
      }));
      const top = largest(candidates, Math.min(2 * k, candidates.length))
        .map(([score, index]) => ({score, beam: Math.trunc(index / vocabulary), token: index % vocabulary}));
      top.slice(0, k).forEach((candidate) => {
        if (candidate.token !== eos || !Number.isFinite(candidate.score)) return;
        const tokens = prefixes[candidate.beam].slice(1);
        const score = lengthScored(candidate.score, tokens.length, lengthPenalty);
        const kept = keepBest(finished, {tokens, logProb: candidate.score, ended: step < limit, score}, k,
                              rules.early_stopping);
        if (kept && watch && (!bestEnded || score > bestEnded.score)) {
          bestEnded = {score, report: progressOf([...tokens, eos], rows, candidate.beam)};
        }
      });
      const live = largest(top.map((c) => (c.token === eos ? -Infinity : c.score)), k);
      scores = live.map(([score]) => score);
      const goingOn = step < limit && canImprove(finished, scores[0], step + 1, k, lengthPenalty, rules.early_stopping);
      if (watch) {  // mirrors `WatchedBeams.step`: the best live beam, unless an ended hypothesis scores better
        const best = top[live[0][1]], leading = [...prefixes[best.beam].slice(1), best.token];
        const liveWins = Number.isFinite(scores[0])
          && (!bestEnded || lengthScored(scores[0], leading.length, lengthPenalty) > bestEnded.score);
        const report = liveWins ? progressOf(leading, rows, best.beam) : bestEnded && bestEnded.report;
        if (report) await watch(report);
      }
      if (!goingOn) break;
      prefixes = live.map(([, col]) => [...prefixes[top[col].beam], top[col].token]);
    }
    const best = [...finished].sort((a, b) => b.score - a.score)[0];
    return {tokens: best.tokens, ended: best.ended};
  }

  return {greedy, beam, lengthLimit};
})();
