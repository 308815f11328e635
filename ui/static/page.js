// The page's shared runtime: the settings Python sends (window.explorerConfig, one JSON object), one watch over
// the charts the page draws, and what every tab shares: roles for empty placeholders, a click on a heatmap's row,
// and a lesson's view held in sight with the lesson beside it.
window.explorerPage = (() => {
  const config = window.explorerConfig;
  // The colour that marks what a lesson or a step points at, for the page's styles (page.css) as for its figures.
  document.documentElement.style.setProperty("--explorer-mark", config.figures.mark);
  const chartHooks = [];
  const everyChart = (hook) => document.querySelectorAll(".js-plotly-plot").forEach(hook);

  // One observer for the whole page: each change of its elements gives every chart to every hook (each hook
  // skips a chart it has already seen as it is). Gradio draws an empty plot, image or text as
  // <div aria-label="Empty value"> with no role, which ARIA does not allow (axe: aria-prohibited-attr): each gets
  // the role of the picture it stands in for. A status that answers a visitor's action (config.liveRegions) is
  // read out as it changes.
  const liveRegions = config.liveRegions.map((selector) => `${selector}:not([aria-live])`).join(",");
  new MutationObserver(() => {
    document.querySelectorAll(".empty[aria-label]:not([role])").forEach((el) => el.setAttribute("role", "img"));
    document.querySelectorAll(liveRegions).forEach((el) => el.setAttribute("aria-live", "polite"));
    if (chartHooks.length) everyChart((chart) => chartHooks.forEach((hook) => hook(chart)));
  }).observe(document.documentElement, {childList: true, subtree: true});

  // gr.Plot has no click event: Plotly's own, on the chart, is caught. A click on a cell of a heatmap under
  // picker.charts sets the slider picker.slider to its row (rows count from 1), as if the number had been typed,
  // and scrolls to picker.shownNext; with picker.rowsMeta, only on traces with that meta (rows that are steps).
  const pickRows = (picker, chart) => {
    if (chart.pickingRows || !chart.on) return;
    chart.pickingRows = true;
    chart.on("plotly_click", (clicked) => {
      const point = clicked.points && clicked.points[0];
      if (!point) return;
      // A grid drawn as one heatmap (ui/drawing/figures.py, grid_json) names its panels' size and spacing in its meta.
      const grid = point.data.meta && point.data.meta.panel, said = grid ? point.data.meta.rows : point.data.meta;
      if (picker.rowsMeta !== null && said !== picker.rowsMeta) return;
      const index = Array.isArray(point.pointNumber) ? point.pointNumber[0] : point.y;
      const row = (grid ? index % (grid.queries + grid.rowsApart) : index) + 1;
      const box = document.querySelector(picker.slider + " input[type=number]");
      if (!box || box.disabled || row > Number(box.max)) return;
      box.value = row;
      box.dispatchEvent(new Event("input", {bubbles: true}));
      box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
      document.getElementById(picker.shownNext).scrollIntoView({behavior: "smooth", block: "start"});
    });
  };
  // A click on a point of a chart under picker.charts that carries customdata (a cell of the Corpus tab's heads
  // map, a point of its picture of queries and keys) puts that customdata, as JSON, in the hidden box picker.box
  // and submits it: the server opens what it names.
  const pickPoints = (picker, chart) => {
    if (chart.pickingPoints || !chart.on) return;
    chart.pickingPoints = true;
    chart.on("plotly_click", (clicked) => {
      const point = clicked.points && clicked.points[0];
      const box = document.querySelector(picker.box + " textarea, " + picker.box + " input");
      if (!point || point.customdata === undefined || !box) return;
      box.value = JSON.stringify(point.customdata);
      box.dispatchEvent(new Event("input", {bubbles: true}));
      box.dispatchEvent(new KeyboardEvent("keypress", {key: "Enter", bubbles: true}));  // a textbox submits on it
    });
  };
  document.addEventListener("pointerover", (event) => {
    const under = (selector) => event.target.closest && event.target.closest(
      selector.split(",").map((one) => one.trim() + " .js-plotly-plot").join(", "));
    for (const picker of config.rowPickers) {
      const chart = under(picker.charts);
      if (chart) pickRows(picker, chart);
    }
    for (const picker of config.pointPickers) {
      const chart = under(picker.charts);
      if (chart) pickPoints(picker, chart);
    }
  }, true);

  // After Show me, and after a click that opens another tab on a view (Page.brings_into_sight), the view a lesson
  // is about or the click set is brought into sight and held there (sight.js).
  const holdInSight = (id) => window.explorerSight.hold(id, config.lessons.outlineMs);

  // Beside that view, the lesson's questions and what to look for: Show me scrolls the lesson's own text out of
  // sight, and a teacher asks while the class looks at the chart. A panel at the side of the screen (at the bottom
  // of a narrow one; the page makes room for it), kept while the visitor scrolls, until Hide or another lesson.
  const putLessonBeside = ({title, questions, lookFor}) => {
    const parts = config.lessons.parts;
    let panel = document.getElementById("lesson-beside");
    if (!panel) {
      panel = document.createElement("aside");
      panel.id = "lesson-beside";
      panel.setAttribute("aria-label", parts.beside);
      document.body.append(panel);
    }
    const element = (tag, text, className) => {
      const made = document.createElement(tag);
      if (text !== undefined) made.textContent = text;
      if (className) made.className = className;
      return made;
    };
    const asked = element("ul");
    questions.forEach((question) => asked.append(element("li", question)));
    const look = element("p");
    look.append(element("strong", parts.lookFor), ` ${lookFor}`);
    const hide = element("button", parts.hide, "lesson-beside-hide");
    hide.type = "button";
    hide.addEventListener("click", () => {
      putLessonAway();
      document.body.classList.remove("lesson-beside-open");  // Hide gives the page its room back
    });
    panel.replaceChildren(element("h2", title), element("p", parts.ask, "lesson-beside-ask"), asked, look, hide);
    panel.hidden = false;
    markNarrow();
    document.body.classList.add("lesson-beside-open");
  };
  const narrow = window.matchMedia("(max-width: 899px)");
  const markNarrow = () => document.body.classList.toggle("narrow-screen", narrow.matches);
  narrow.addEventListener("change", markNarrow);
  // Another lesson chosen puts the panel away and keeps its room until the next Show me or Hide: were the page to
  // widen as the choice lands, the Show me button would move under a pointer on its way to it, and a press be
  // lost (a mousedown on the button, its mouseup beside it).
  const putLessonAway = () => {
    const panel = document.getElementById("lesson-beside");
    if (panel) panel.hidden = true;
  };

  return {
    config,
    // An event's function called by name (ui/runtime/page.py, Page.in_browser): the values Gradio sends in the
    // order of ``inputs`` go in as one object by their names; the object it returns comes back in the order of
    // ``outputs``, a name it left out an error rather than an emptied component.
    byName(fn, called, inputs, outputs, values) {
      const made = fn(Object.fromEntries(inputs.map((name, i) => [name, values[i]]))) || {};
      return outputs.map((name) => {
        if (!(name in made)) throw new Error(`${called} set no ${name}`);
        return made[name];
      });
    },
    // hook(chart) for every chart drawn now and later
    onChart(hook) { chartHooks.push(hook); everyChart(hook); },
    showLesson(choice) {
      const lesson = config.lessons.byChoice[choice];
      if (!lesson) return;
      putLessonBeside(lesson);
      holdInSight(lesson.focus);
    },
    putLessonAway,
    holdInSight,
    // The tab on screen draws the views that wait for it, as opening it does: its hidden redraw button
    // (Page.add_redraw_buttons) is pressed. After a model switch, which draws the Translate tab alone.
    // The shown tab is the page's visible_tab (ui/build.py), which opening a tab sets.
    redrawShownTab() {
      const shown = document.querySelector("#visible-tab textarea, #visible-tab input");
      const redraw = shown && document.querySelector(`#redraw-${CSS.escape(shown.value)}`);
      if (redraw) redraw.click();
    },
  };
})();
