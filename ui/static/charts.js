// Every chart of the page is drawn here, with the one Plotly the page loads (ui/runtime/chart.py): a figure the server sent
// (a Chart's value) or one the page built (explorer.js), drawn with Plotly.react on the chart already shown, so a
// new figure redraws only what differs and nothing flashes.
window.explorerCharts = (() => {
  // Plotly.js (4.8 MB) is asked for when the first chart is laid out, once Gradio has shown the page (running it
  // sooner held the page back a second or two on a slow computer), beside the page's first translation; a chart
  // waits for it only if it comes later than the chart's figure.
  let loading = null;
  // Plotly's own words (its tool bar's tooltips) in the page's language, from the page's config.
  const language = document.documentElement.lang || "en";
  const speaking = (Plotly) => {
    if (language !== "en") {
      Plotly.register({moduleType: "locale", name: language,
                       dictionary: window.explorerPage.config.figures.toolBar, format: {}});
    }
    return Plotly;
  };
  const plotly = () => loading || (loading = new Promise((loaded, failed) => {
    if (window.Plotly) { loaded(speaking(window.Plotly)); return; }
    const script = document.createElement("script");
    script.src = window.explorerPage.config.plotlyUrl;
    script.onload = () => loaded(speaking(window.Plotly));
    script.onerror = () => failed(new Error(`Plotly.js did not load from ${script.src}`));
    document.head.append(script);
  }));
  const plot = (element) => element.querySelector(".page-chart");
  // Thousands of points (a head's queries and keys) come as WebGL traces, drawn many times faster than in SVG; a
  // browser without WebGL (Plotly would show an error there) draws them in SVG.
  const webgl = (() => {
    try { return !!document.createElement("canvas").getContext("webgl"); } catch (error) { return false; }
  })();
  const drawable = (trace) => (trace.type === "scattergl" && !webgl ? {...trace, type: "scatter"} : trace);
  // As wide as its box unless the figure says otherwise (then it scrolls sideways in its frame); room kept for
  // labels a figure's margins leave too little for.
  const ready = (figure) => {
    const layout = {...figure.layout, autosize: true};
    layout.margin = {...(layout.margin || {}), autoexpand: true};
    return [(figure.data || []).map(drawable), layout, {displaylogo: false, locale: language}];
  };
  // A chart as wide as its box follows the box's width, whatever changes it: the window, or the lesson panel
  // beside the page. Not Plotly's responsive option: it follows the window alone, and there drops the height of a
  // chart in a scrolling frame (the model view). Resized after the chart's drawing in progress, never during it.
  const frames = new ResizeObserver((entries) => entries.forEach(({target}) => {
    const box = plot(target);
    if (!box || !box._fullLayout || !box.followsItsBox) return;
    const resized = (drawing.get(box) || Promise.resolve()).then(() => {
      const width = box.isConnected ? box.getBoundingClientRect().width : 0;
      if (width > 0 && Math.abs(width - box._fullLayout.width) >= 1) return window.Plotly.relayout(box, {width});
      return undefined;
    }).catch((error) => console.error("A chart could not follow its box:", error));
    drawing.set(box, resized);
  }));
  // Drawn one at a time per chart, in the order asked: the last figure asked for is the one left shown.
  const drawing = new WeakMap();
  let pending = 0;  // figures asked for and not yet drawn
  const nextFrame = () => new Promise((next) => requestAnimationFrame(() => next()));
  function draw(element, figure, later = false) {
    const box = element && plot(element);
    if (!box) return Promise.resolve();
    pending += 1;
    const after = (drawing.get(box) || Promise.resolve()).then(later ? nextFrame : undefined);
    const done = after.then(() => (figure ? plotly() : window.Plotly)).then((Plotly) => {
      if (!figure) {  // an empty chart, as before any was drawn
        if (Plotly) Plotly.purge(box);
        const empty = document.createElement("div");
        empty.className = "page-chart";
        box.replaceWith(empty);
        return undefined;
      }
      box.followsItsBox = !figure.layout?.width;
      return Plotly.react(box, ...ready(figure));
    }).catch((error) => console.error("A chart could not be drawn:", error)).finally(() => { pending -= 1; });
    drawing.set(box, done);
    return done;
  }
  // A Chart's value as a figure: a figure as Gradio's Plot sends one ({type: "plotly", plot: its JSON}), or a map
  // sent as its numbers ({type: "attentionMap", ...}: ui/views/translate.py, AttentionMap), built here.
  function figureOf(value) {
    if (value && value.type === "attentionMap") return window.explorerFigures.attentionMap(value);
    return value && value.plot ? JSON.parse(value.plot) : null;
  }
  return {
    // A Chart's js_on_load: its value drawn now and whenever the server sends another.
    mount(element, props, watch) {
      plotly();
      frames.observe(element);
      draw(element, figureOf(props.value));
      watch("value", () => draw(element, figureOf(props.value)));
    },
    figureOf,
    // A chart of the page's own, by its element's id; with nextFrame, once the browser has shown what it drew.
    drawById(id, figure, {nextFrame: later = false} = {}) { return draw(document.getElementById(id), figure, later); },
    pending() { return pending; },
  };
})();
