// The offline pack's page: loads a translator with its progress shown, translates the sentence typed, and says in
// the page what went wrong (a file the pack lacks, a browser without WebAssembly). The numbers come from
// engine.js (window.explorerPack).
(() => {
  const MAX_INPUT_CHARS = 1000;  // mirrors `ui/views/text.py:MAX_INPUT_CHARS`: a longer sentence is cut there
  const $ = (id) => document.getElementById(id);
  const pack = window.explorerPack;
  let contents = null;

  const problem = (error) => { $("problem").textContent = error.message || String(error); };

  function tokens(list, pieces) {
    list.replaceChildren(...pieces.map((piece) => Object.assign(document.createElement("li"), {textContent: piece})));
  }

  async function load(name) {
    const entry = contents.models[name], files = [entry.manifest, entry.encoder, entry.decoder, ...entry.weights];
    const startFiles = contents.runtime.wasm;
    const sizes = contents.sizes, total = [...startFiles, ...files].reduce((sum, file) => sum + (sizes[file] || 0), 0);
    let done = 0;
    $("translate").disabled = true;
    $("loading").hidden = false;
    const shown = () => {
      $("progress").value = done / total;
      $("status").textContent = `Loading the ${name} translator: ${(done / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB`;
    };
    shown();
    await pack.model(name, (file) => { done += sizes[file] || 0; shown(); });
    $("status").textContent = `The ${name} translator is ready.`;
    $("progress").value = 1;
    $("translate").disabled = false;
  }

  async function translate(event) {
    event.preventDefault();
    problem("");
    let text = $("source").value;
    const notes = [];
    if (text.length > MAX_INPUT_CHARS) {
      text = text.slice(0, MAX_INPUT_CHARS);
      notes.push(`The input was cut to its first ${MAX_INPUT_CHARS} characters.`);
    }
    const beam = document.querySelector("input[name=decoding]:checked").value === "beam" ? 0 : 1;
    $("translate").disabled = true;
    try {
      const result = await pack.translate(text, {model: $("model").value, beam, withTruncated: true,
        watch: (sofar) => { $("translation").textContent = `${sofar.length} tokens…`; }});
      $("translation").textContent = result.translation;
      tokens($("source-tokens"), result.source_tokens);
      tokens($("target-tokens"), result.target_tokens);
      if (result.truncated) notes.push("The sentence is longer than the model's positions; only its beginning was translated.");
      $("notes").textContent = notes.join(" ");
    } catch (error) {
      problem(error);
    } finally {
      $("translate").disabled = false;
    }
  }

  async function start() {
    if (typeof WebAssembly !== "object") {
      problem(new Error("This browser cannot run WebAssembly, which the pack needs: open it in a recent Chrome, Edge, Firefox or Safari."));
      return;
    }
    try {
      contents = await pack.pack();
      $("model").replaceChildren(...Object.entries(contents.models).map(([name, entry]) => Object.assign(
        document.createElement("option"), {value: name, textContent: `${name} (${entry.languages.source} → ${entry.languages.target})`})));
      $("made").textContent = `Made from commit ${contents.made.commit.slice(0, 12)} on ${contents.made.date}.`;
      $("model").addEventListener("change", () => load($("model").value).catch(problem));
      $("form").addEventListener("submit", translate);
      await load(contents.defaultModel);
    } catch (error) {
      problem(error);
      $("loading").hidden = true;
    }
  }

  start();
})();
