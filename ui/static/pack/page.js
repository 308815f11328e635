// The offline pack's page: loads a translator with its progress shown, translates the sentence typed, and draws
// its views with the app's own scripts (explorer.js fills the frames of frames.js with the numbers of numbers.js).
// Says in the page what went wrong (a file the pack lacks, a browser without WebAssembly), in the page's language.
(() => {
  const MAX_INPUT_CHARS = 1000;  // mirrors `ui/views/text.py:MAX_INPUT_CHARS`: a longer sentence is cut there
  const $ = (id) => document.getElementById(id);
  const {words, language} = window.explorerPage;
  const say = (key, values = {}) => words[key].replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  const pack = window.explorerPack, explorer = window.explorer;
  const VIEWS = ["translate.view.one_head", "translate.view.layer_heads", "translate.view.model"];
  let contents = null, shown = null;  // the pack's contents; the translation whose views are shown
  let loading = null, loaded = null;  // the translator being loaded; the one loaded last
  // What starts a translation waits while one is loading or translating: `busy` counts each control's jobs under
  // way. A translator loading leaves the translator list free (a keyboard's arrows choose as they move).
  const STARTERS = ["translate", "model", "show-me"], LOADING = ["translate", "show-me"];
  const jobs = Object.fromEntries(STARTERS.map((id) => [id, 0]));
  function busy(more, controls = STARTERS) {
    controls.forEach((id) => {
      jobs[id] += more ? 1 : -1;
      $(id).disabled = jobs[id] > 0;
    });
  }

  document.title = say("pack.title");
  document.querySelectorAll("[data-words]").forEach((element) => { element.textContent = say(element.dataset.words); });
  $("progress").setAttribute("aria-label", say("pack.loading_label"));
  $("language").value = language;
  // A language switch reloads the page in that language: what was typed and chosen comes back with it.
  const KEPT = ["source", "own", "model", "lesson"], KEPT_CHECKED = ["large-text", "safe-colours"];
  $("language").addEventListener("change", () => {
    try {
      localStorage.setItem("explorer-pack-language", $("language").value);
      sessionStorage.setItem("explorer-pack-kept", JSON.stringify({
        ...Object.fromEntries(KEPT.map((id) => [id, $(id).value])),
        ...Object.fromEntries(KEPT_CHECKED.map((id) => [id, $(id).checked])), lessonsOpen: $("lessons").open,
        decoding: document.querySelector("input[name=decoding]:checked").value}));
    } catch (error) { /* private mode: the page starts afresh */ }
    const address = new URL(location.href);
    address.searchParams.set("lang", $("language").value);
    location.replace(address);
  });
  $("large-text").addEventListener("change", () => window.explorerDisplay.largeText($("large-text").checked));
  $("safe-colours").addEventListener("change", () => window.explorerDisplay.safeColours($("safe-colours").checked));
  // Radio buttons whose values are the app's (English words, as its radios send them), labelled in the page's language.
  function radios(fieldset, name, choices, checked) {
    fieldset.append(...choices.map(([value, words]) => {
      const label = document.createElement("label"), input = document.createElement("input");
      Object.assign(input, {type: "radio", name, value, checked: value === checked});
      label.append(input, ` ${words}`);
      return label;
    }));
  }
  radios($("kinds"), "kind", Object.keys(window.explorerPage.config.explorer.kinds).map((kind) => [kind, say(`map.kind.${kind}`)]),
         "cross");
  const english = (key) => window.explorerPackWords.en[key];
  radios($("views"), "view", VIEWS.map((key) => [english(key), say(key)]), english(VIEWS[0]));

  const problem = (error) => {
    $("problem").textContent = !error ? "" : error.file ? say("pack.missing", {file: error.file})
      : error.noWebAssembly ? say("pack.no_webassembly") : error.message || String(error);
  };

  function tokens(list, pieces) {
    list.replaceChildren(...pieces.map((piece) => Object.assign(document.createElement("li"), {textContent: piece})));
  }

  // A step's caption, written in Markdown for the app: bold and escaped characters, as text.
  function caption(markdown) {
    const parts = markdown.split("**");
    $("caption").replaceChildren(...parts.map((part, i) => {
      const text = part.replace(/\\(.)/g, "$1").replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&");
      return i % 2 ? Object.assign(document.createElement("strong"), {textContent: text}) : document.createTextNode(text);
    }));
  }

  function revealed(pieces) {
    $("revealed").replaceChildren(...pieces.map(({token, class_or_confidence: mark}) => {
      const span = Object.assign(document.createElement("span"), {textContent: token});
      if (mark) { span.className = "current"; span.title = mark; }
      return span;
    }));
  }

  const chosen = (name) => document.querySelector(`input[name=${name}]:checked`).value;
  const selectors = () => ({kind: chosen("kind"), view: chosen("view"),
                            layer: Number($("layer").value), head: Number($("head").value),
                            average: $("average").checked, step: Number($("step").value), maps_wanted: ""});

  function stepShown({step, revealed: pieces, step_caption: text}) {
    $("step").value = step;
    revealed(pieces);
    caption(text);
  }

  function showViews(translation) {
    const numbers = window.explorerPackNumbers.pageNumbers(translation);
    shown = numbers;
    $("step").max = numbers.steps.length;
    $("layer").max = Math.max(...Object.values(numbers.maps).map((maps) => maps.layers));
    $("head").max = numbers.heads;
    stepShown(explorer.show({...selectors(), page_numbers: numbers, step: 1}));
  }

  const moveStep = (move) => { if (shown) stepShown(explorer.step(selectors(), move)); };
  $("previous").addEventListener("click", () => moveStep(-1));
  $("next").addEventListener("click", () => moveStep(1));
  $("step").addEventListener("change", () => moveStep(0));
  const select = () => {
    if (!shown) return;
    const chosen = explorer.select(selectors());
    $("layer").value = chosen.layer;
    $("head").value = chosen.head;
  };
  ["layer", "head", "average"].forEach((id) => $(id).addEventListener("change", select));
  $("kinds").addEventListener("change", select);
  $("views").addEventListener("change", select);
  // A click on a cell of a map whose rows are steps goes to that step, as in the app (page.js, pickRows).
  window.explorerPage.onChart((chart) => {
    if (chart.closest("#attention-plot") && !chart.stepsPicked && chart.on) {
      chart.stepsPicked = true;
      chart.on("plotly_click", ({points}) => {
        const point = points && points[0];
        if (!point || point.data.meta !== "rows are steps") return;
        $("step").value = point.y + 1;
        moveStep(0);
        $("step-view").scrollIntoView({block: "start"});
      });
    }
  });

  // Forced decoding: the translation typed scored token by token, and where the model looked while reading it.
  const [forcedTitle, ...forcedIntro] = words["translate.forced.intro"].split("\n");
  $("forced-title").textContent = forcedTitle.replace(/^#+\s*/, "");
  $("forced-intro").textContent = forcedIntro.join(" ");
  let forced = null;  // the forced translation shown
  function forcedHeads(heads) {
    $("forced-head").replaceChildren(
      Object.assign(document.createElement("option"), {value: "", textContent: say("translate.mean_of_heads")}),
      ...Array.from({length: heads}, (_, h) => Object.assign(document.createElement("option"), {value: h + 1, textContent: h + 1})));
  }
  function drawForced(both) {
    if (!forced) return;
    const head = $("forced-head").value ? Number($("forced-head").value) : null;
    const [probabilities, attention] = window.explorerPackNumbers.forcedFigures(forced, Number($("forced-layer").value), head);
    if (both) window.explorerCharts.drawById("forced-probability", probabilities);
    window.explorerCharts.drawById("forced-attention", attention);
  }
  async function score() {
    problem(null);
    const own = $("own").value.slice(0, MAX_INPUT_CHARS);
    if (!own.trim()) { problem(new Error(say("translate.forced.empty"))); return; }
    $("score").disabled = true;
    try {
      const result = await pack.forced($("source").value.slice(0, MAX_INPUT_CHARS), own, {model: $("model").value});
      if (!result) { problem(new Error(say("translate.empty"))); return; }
      forced = result;
      const layers = result.attention.cross.length;
      $("forced-layer").max = layers;
      if (!$("forced-layer").dataset.chosen) $("forced-layer").value = layers;
      drawForced(true);
    } catch (error) {
      problem(error);
    } finally {
      $("score").disabled = false;
    }
  }
  $("score").addEventListener("click", score);
  $("source").addEventListener("keydown", (event) => {  // as in the app: Enter translates, Shift+Enter a new line
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("form").requestSubmit(); }
  });
  $("own").addEventListener("keydown", (event) => { if (event.key === "Enter") { event.preventDefault(); score(); } });
  $("forced-layer").addEventListener("change", () => { $("forced-layer").dataset.chosen = "1"; drawForced(false); });
  $("forced-head").addEventListener("change", () => drawForced(false));

  // The positional encoding's views, drawn when the section first comes into sight and as its numbers change.
  function drawPositions() {
    const [matrix, lines, dots, drawn] = window.explorerPackPositions.views($("pe-d-model").value, $("pe-length").value,
                                                                            $("pe-dimensions").value);
    $("pe-d-model").value = drawn.dModel;  // the numbers drawn, as the app's sliders hold them
    $("pe-length").value = drawn.length;
    [["pe-matrix", matrix], ["pe-lines", lines], ["pe-dots", dots]].forEach(([id, figure]) => window.explorerCharts.drawById(id, figure));
  }
  ["pe-d-model", "pe-length", "pe-dimensions"].forEach((id) => $(id).addEventListener("change", drawPositions));
  new IntersectionObserver((entries, observer) => {
    if (entries.some((entry) => entry.isIntersecting)) { observer.disconnect(); drawPositions(); }
  }).observe($("positions"));

  async function load(name) {
    const entry = contents.models[name], sizes = contents.sizes;
    const files = [...(pack.runtimeStarted() ? [] : contents.runtime.wasm), entry.manifest, entry.encoder, entry.decoder,
                   ...entry.weights];
    const total = files.reduce((sum, file) => sum + (sizes[file] || 0), 0);
    let done = 0;
    busy(true, LOADING);
    $("progress").hidden = false;
    const progress = () => {
      $("progress").value = total ? done / total : 1;
      $("status").textContent = say("pack.loading", {model: name, done: (done / 1e6).toFixed(1), total: (total / 1e6).toFixed(1)});
    };
    progress();
    try {
      const model = await pack.model(name, (file) => { done += sizes[file] || 0; progress(); });
      forcedHeads(model.config.n_heads);
      $("forced-layer").max = model.config.n_decoder_layers;
      $("forced-layer").value = model.config.n_decoder_layers;
      $("status").textContent = say("pack.ready", {model: name});
      $("progress").hidden = true;
      loaded = name;
    } finally {
      busy(false, LOADING);
    }
  }

  // Another translator chosen: what the last one showed is cleared, and this one loaded.
  function switchModel(name) {
    $("model").value = name;
    clearShown();
    loading = load(name);
    return loading;
  }

  // A step of the search under way, drawn as it is decided (explorer.js's `live`), then a frame for the browser
  // to show it before the next step is decided.
  function drawStep(report) {
    const head = $("average").checked ? 0 : Number($("head").value);
    const value = window.explorerPackNumbers.liveNumbers(report, Number($("layer").value), head,
                                                         window.explorerPackNumbers.upcoming());
    const drawn = explorer.live({live_step: value});
    revealed(drawn.revealed);
    caption(drawn.step_caption);
    $("step").value = value.step;
    $("translation").textContent = `${report.text}…`;
    return new Promise((shown) => requestAnimationFrame(() => shown()));
  }

  // Mirrors the notes of `ui/views/translate.py:run_translation` that the pack can say (no language guess, no Stop).
  const LONG_SOURCE_PIECES = 64;  // mirrors `translate.py:LONG_SOURCE_PIECES`
  function translationNotes(translation) {
    const notes = [], unknownPiece = "<unk>";
    if (translation.truncated) notes.push(say("translate.note.truncated", {positions: contents.models[$("model").value].maxLen}));
    const unknown = translation.source_pieces.filter((piece) => piece === unknownPiece).length;
    const content = translation.source_pieces.slice(0, -1).filter((piece) => piece !== "▁");
    if (unknown && unknown >= content.length / 2) {
      notes.push(say(unknown === content.length ? "translate.note.unknown_all" : "translate.note.unknown_most"));
    } else if (unknown) {
      notes.push(say("translate.note.unknown_some", {unknown}));
    }
    if (translation.ended && !translation.text.trim()) notes.push(say("translate.note.empty"));
    if (!translation.ended) notes.push(say("translate.note.stopped"));
    if (translation.source_pieces.length > LONG_SOURCE_PIECES && !translation.truncated) {
      notes.push(say("translate.note.long", {pieces: translation.source_pieces.length}));
    }
    return notes.map((note) => note.replaceAll("`", ""));
  }

  // What a translation showed, cleared: another translator's numbers are not this one's.
  function clearShown() {
    shown = null;
    forced = null;
    stepShown(explorer.show({...selectors(), page_numbers: null}));
    ["translation", "notes"].forEach((id) => { $(id).textContent = ""; });
    ["source-tokens", "target-tokens"].forEach((id) => $(id).replaceChildren());
    ["forced-probability", "forced-attention"].forEach((id) => window.explorerCharts.drawById(id, null));
  }

  // The sentence typed translated and its views drawn; whether it was (a problem is said in the page). `beam`: the
  // beam size a lesson sets, else the one chosen (0: the model's own).
  async function translateShown(beam = null) {
    problem(null);
    let text = $("source").value;
    const notes = [];
    if (text.length > MAX_INPUT_CHARS) {
      text = text.slice(0, MAX_INPUT_CHARS);
      notes.push(say("translate.note.cut", {limit: MAX_INPUT_CHARS}));
    }
    beam ??= document.querySelector("input[name=decoding]:checked").value === "beam" ? 0 : 1;
    try {
      const translation = await pack.translation(text, {model: $("model").value, beam, watch: drawStep});
      if (!translation) { problem(new Error(say("translate.empty"))); $("translation").textContent = ""; return false; }
      $("translation").textContent = translation.text;
      tokens($("source-tokens"), translation.source_pieces);
      tokens($("target-tokens"), translation.target_pieces);
      notes.push(...translationNotes(translation));
      $("notes").textContent = notes.join(" ");
      showViews(translation);
      return true;
    } catch (error) {
      problem(error);
      return false;
    }
  }

  async function translate(event) {
    event.preventDefault();
    const focused = document.activeElement;
    busy(true);
    try {
      await translateShown();
    } finally {
      busy(false);
      if (focused && document.activeElement === document.body) focused.focus();  // a disabled button lost it
    }
  }

  function restoreKept() {
    let kept = null;
    try { kept = JSON.parse(sessionStorage.getItem("explorer-pack-kept") || "null"); } catch (error) { kept = null; }
    if (!kept) return;
    for (const id of KEPT) {
      const value = kept[id], element = $(id);
      if (typeof value !== "string") continue;
      if (element.options && ![...element.options].some((option) => option.value === value)) continue;
      element.value = value;
      element.dispatchEvent(new Event("change"));  // the lessons panel shows the lesson kept
    }
    const decoding = document.querySelector(`input[name=decoding][value="${kept.decoding}"]`);
    if (decoding) decoding.checked = true;
    for (const id of KEPT_CHECKED) {
      if (kept[id] !== true) continue;
      $(id).checked = true;
      $(id).dispatchEvent(new Event("change"));
    }
    if (kept.lessonsOpen && !$("lessons").hidden) $("lessons").open = true;
  }

  async function start() {
    if (typeof WebAssembly !== "object") { problem({noWebAssembly: true}); $("loading").hidden = true; return; }
    try {
      contents = await pack.pack();
      $("model").replaceChildren(...Object.entries(contents.models).map(([name, entry]) => Object.assign(
        document.createElement("option"), {value: name, textContent: `${name} (${entry.languages.source} → ${entry.languages.target})`})));
      $("made").textContent = say("pack.made", {commit: contents.made.commit.slice(0, 12), date: contents.made.date});
      restoreKept();
      $("needs-app").textContent = say("pack.needs_app");
      if (contents.appUrl) {
        $("needs-app").append(" ", Object.assign(document.createElement("a"), {href: contents.appUrl, textContent: contents.appUrl}));
      }
      $("model").addEventListener("change", () => switchModel($("model").value).catch(problem));
      $("form").addEventListener("submit", translate);
      $("status").textContent = say("pack.starting");
      loading = load($("model").value || contents.defaultModel);
      await loading;
    } catch (error) {
      problem(error);
      $("loading").hidden = true;
    }
  }

  // What a lesson's Show me sets (ui/views/pack_lessons.py:show_me), translated, at its step: the page as the app's
  // Show me leaves its Translate tab, forced decoding cleared. Whether it was translated.
  async function setUp({model, sentence, decoding, beam, kind, view, layer, head, average, step}) {
    await loading?.catch(() => {});  // a translator that failed to load is loaded again below
    busy(true);
    try {
      if (loaded !== model || $("model").value !== model) await switchModel(model);
      clearShown();
      $("source").value = sentence;
      $("own").value = "";
      document.querySelector(`input[name=decoding][value=${decoding}]`).checked = true;
      document.querySelector(`input[name=kind][value=${kind}]`).checked = true;
      document.querySelector(`input[name=view][value="${view}"]`).checked = true;
      $("layer").value = layer;
      $("head").value = head;
      $("average").checked = average;
      if (!await translateShown(beam)) return false;
      $("step").value = step;
      moveStep(0);
      select();
      return true;
    } finally {
      busy(false);
    }
  }
  window.explorerPackPage = {setUp, problem};

  start();
})();
