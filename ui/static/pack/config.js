// The offline pack's page config, as the app's page receives its own (ui/build.py, page_config), so that the page's
// scripts (figures.js, charts.js, explorer.js) draw the same views here. The words come in the page's language from
// words.js (ui/locales, written into the pack): the language chosen on this page before, else the browser's, else
// English. The rest mirrors the Python it names; tests/pack/test_pack_browser.py holds each part equal to it.
(() => {
  const LANGUAGES = ["en", "de", "fr"];
  const saved = (() => { try { return localStorage.getItem("explorer-pack-language"); } catch (error) { return null; } })();
  const asked = new URLSearchParams(location.search).get("lang");
  const browser = (navigator.languages || [navigator.language || "en"]).map((tag) => tag.slice(0, 2).toLowerCase());
  const language = [asked, saved, ...browser].find((tag) => LANGUAGES.includes(tag)) || "en";
  const words = window.explorerPackWords[language];
  // Mirrors `ui/runtime/language.py`'s DECIMAL_MARK, PERCENT_SIGN and `ui/drawing/figures.py:SEPARATORS`.
  const marks = {en: {decimal: ".", percent: "%"}, de: {decimal: ",", percent: "\u00a0%", separators: ",."},
                 fr: {decimal: ",", percent: "\u202f%", separators: ",\u202f"}}[language];
  const axis = {gridcolor: "white", linecolor: "white", ticks: "", title: {standoff: 15}, zerolinecolor: "white",
                automargin: true, zerolinewidth: 2, ticklabeloverflow: "allow"};
  const blues = ["rgb(247,251,255)", "rgb(222,235,247)", "rgb(198,219,239)", "rgb(158,202,225)", "rgb(107,174,214)",
                 "rgb(66,146,198)", "rgb(33,113,181)", "rgb(8,81,156)", "rgb(8,48,107)"];
  const views = ["translate.view.one_head", "translate.view.layer_heads", "translate.view.model"]
    .map((key) => window.explorerPackWords.en[key]);
  const chartText = ["asText", "untitled", "more", "row", "column", "strongest", "cell", "series", "point", "values",
                     "value"];
  const snake = (name) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
  document.documentElement.lang = language;
  // Each chart drawn, now and later, handed to each hook (chart_text.js says it as text, display.js enlarges it),
  // as the app's page.js hands them.
  const chartHooks = [], everyChart = (hook) => document.querySelectorAll(".js-plotly-plot").forEach(hook);
  new MutationObserver(() => {
    if (chartHooks.length) everyChart((chart) => chartHooks.forEach((hook) => hook(chart)));
  }).observe(document.documentElement, {childList: true, subtree: true});
  window.explorerPage = {language, words, onChart(hook) { chartHooks.push(hook); everyChart(hook); }, config: {
    // Mirrors `ui/tabs/translate.py:page_settings`.
    explorer: {
      kinds: Object.fromEntries(["encoder", "decoder", "cross"].map((kind) => [kind, window.explorerPackWords.en[`map.kind.${kind}`]])),
      viewFigures: {[views[0]]: {heads: "map", mean: "map"}, [views[1]]: {heads: "layerHeads", mean: "map"},
                    [views[2]]: {heads: "everyHead", mean: "everyMean"}},
      charts: {topK: "topk-plot", stepAttention: "step-attention", heatmap: "attention-plot"},
      which: {oneHead: words["map.one_head"], meanOfHeads: words["map.mean_of_heads"]},
      words: {noTranslation: words["translate.step.none"], current: words["translate.piece.current"],
              forced: words["translate.piece.forced"],
              chartText: {decimalMark: marks.decimal,
                          ...Object.fromEntries(chartText.map((name) => [name, words[`translate.chart.${snake(name)}`]]))}},
    },
    // Mirrors `ui/drawing/figures.py:page_settings`.
    figures: {
      known: {template: {layout: {autotypenumbers: "strict", font: {color: "#2a3f5f"}, hovermode: "closest",
                                  hoverlabel: {align: "left"}, paper_bgcolor: "white", plot_bgcolor: "#E5ECF6",
                                  colorway: ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3",
                                             "#FF6692", "#B6E880", "#FF97FF", "#FECB52"],
                                  xaxis: axis, yaxis: axis, shapedefaults: {line: {color: "#2a3f5f"}},
                                  annotationdefaults: {arrowcolor: "#2a3f5f", arrowhead: 0, arrowwidth: 1}},
                         data: {bar: [{type: "bar", marker: {line: {color: "#E5ECF6", width: 0.5}}}],
                                heatmap: [{type: "heatmap", colorbar: {outlinewidth: 0, ticks: ""}}]}},
              colorscale: blues.map((colour, i) => [i / (blues.length - 1), colour])},
      mark: "#ff7f0e", hoverJoiner: " → ",
      toolBar: Object.fromEntries(Object.entries(window.explorerPackWords.en)
        .filter(([key]) => key.startsWith("figures.toolbar.")).map(([key, english]) => [english, words[key]])),
    },
    plotlyUrl: "runtime/plotly.min.js",
    packFrames: {words, marks},
  }};
})();
