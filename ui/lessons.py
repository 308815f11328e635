"""Lessons for a class, above every tab: pick one, read it, and "Show me" sets the app up exactly as it needs;
beside it the glossary and a large-text switch for the projector."""

from __future__ import annotations

import json

import gradio as gr

from transformer.checkpoint import CheckpointError

from . import components, header
from .page import Page
from .services import Services
from .tabs import experiments, explain, translate
from .tabs import inside as inside_tab
from .views import lessons
from .views.translate import DEFAULT_TARGET_TOKENS
from .views.text import markdown_escape, source_label

# Gradio sizes text through its theme's variables: larger values on the page enlarge every label, box and
# paragraph at once; chart text is set by Plotly on each element, so it is overridden there.
LARGE_TEXT_CSS = """
body.large-text, body.large-text .gradio-container {
  --text-xxs: 16px; --text-xs: 16px; --text-sm: 17px; --text-md: 20px; --text-lg: 23px; --text-xl: 28px;
  --text-xxl: 34px;
  /* The theme resolves these from the sizes above where it declares them, so they are set here too. */
  --block-info-text-size: 17px; --block-label-text-size: 18px; --block-title-text-size: 20px;
  --body-text-size: 20px; --prose-text-size: 20px; --section-header-text-size: 20px; --input-text-size: 20px;
  --checkbox-label-text-size: 20px; --button-small-text-size: 18px; --button-medium-text-size: 20px;
  --button-large-text-size: 22px;
}
.lesson-focus { outline: 4px solid #b34700; outline-offset: 4px; border-radius: 4px; }
"""
TOGGLE_LARGE_TEXT = "(large) => { document.body.classList.toggle('large-text', large); window.largeCharts(large); }"
# Chart text is laid out by Plotly, which places titles, labels and margins for its font sizes: CSS that enlarged
# them afterwards made lines overlap. So in large text every chart is laid out again, its fonts at least 16 px and
# its margins grown to match; a chart drawn later (Gradio redraws on every update) gets the same as it is drawn.
LARGE_CHARTS_JS = """<script>
(() => {
  const SIZE = 17, TITLE = 23, GROW = 1.35;  // a title's second line is drawn at 70%: 16 px
  const enlarged = (div) => div.layout && div.layout.meta && div.layout.meta.explorerLarge;
  function enlarge(div) {
    const full = div._fullLayout;
    if (!full || !div.layout || enlarged(div) || !window.Plotly) return;
    const update = {"font.size": SIZE, "title.font.size": TITLE,
                    "meta": {explorerLarge: true, saved: JSON.parse(JSON.stringify(div.layout))}};
    for (const key of Object.keys(full)) {
      if (/^[xy]axis[0-9]*$/.test(key)) update[key + ".tickfont.size"] = SIZE - 1;
    }
    for (const side of ["l", "t"]) update["margin." + side] = Math.round(full.margin[side] * GROW);
    (full.annotations || []).forEach((_, i) => { update["annotations[" + i + "].font.size"] = SIZE - 1; });
    window.Plotly.relayout(div, update);
  }
  window.largeCharts = (large) => {
    window.explorerLarge = large;
    document.querySelectorAll(".js-plotly-plot").forEach((div) => {
      if (large) enlarge(div);
      else if (enlarged(div)) window.Plotly.react(div, div.data, div.layout.meta.saved);
    });
  };
  new MutationObserver(() => {
    if (window.explorerLarge) document.querySelectorAll(".js-plotly-plot").forEach(enlarge);
  }).observe(document.documentElement, {childList: true, subtree: true});
})();
</script>"""

TOGGLE_SAFE_COLOURS = "(safe) => window.safeColours(safe)"
# For students who do not see red and green (or blue and yellow) apart: every heatmap's scale becomes one that stays
# ordered for every kind of colour vision, cividis for weights and blue-orange for signed values (red-blue ones);
# the page's own colours come back when it is unticked. Charts drawn later get the same as they are drawn.
SAFE_COLOURS_JS = """<script>
(() => {
  const DIVERGING = [[0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#fdb863"], [1, "#b35806"]];
  const signed = (t) => t.zmid !== undefined || (t.zmin !== undefined && t.zmin < 0);
  const heatmaps = (div) => (div.data || []).map((t, i) => [t, i]).filter(([t]) => t.type === "heatmap");
  function recolour(div, safe) {
    const traces = heatmaps(div).filter(([t]) => safe !== Boolean(t.meta && t.meta.explorerSafe));
    if (!traces.length || !window.Plotly) return;
    const indices = traces.map(([, i]) => i);
    if (safe) {
      window.Plotly.restyle(div, {
        colorscale: traces.map(([t]) => signed(t) ? DIVERGING : "Cividis"), reversescale: traces.map(() => false),
        meta: traces.map(([t]) => ({explorerSafe: {colorscale: t.colorscale, reversescale: !!t.reversescale}}))},
        indices);
    } else {
      window.Plotly.restyle(div, {
        colorscale: traces.map(([t]) => t.meta.explorerSafe.colorscale),
        reversescale: traces.map(([t]) => t.meta.explorerSafe.reversescale), meta: traces.map(() => null)}, indices);
    }
  }
  window.safeColours = (safe) => {
    window.explorerSafe = safe;
    document.querySelectorAll(".js-plotly-plot").forEach((div) => recolour(div, safe));
  };
  new MutationObserver(() => {
    if (window.explorerSafe) document.querySelectorAll(".js-plotly-plot").forEach((div) => recolour(div, true));
  }).observe(document.documentElement, {childList: true, subtree: true});
})();
</script>"""


def layout(page: Page) -> None:
    with gr.Accordion("Lessons for a class", open=False, elem_id="lessons"):
        with gr.Row():
            lesson_choice = components.Dropdown(lessons.lesson_choices(), value=lessons.lesson_choices()[0],
                                                label="Lesson", scale=3)
            show_me = gr.Button("Show me", variant="primary", scale=1, elem_id="show-me")
            large_text = gr.Checkbox(False, label="Large text (projector)", scale=1, elem_id="large-text")
            safe_colours = gr.Checkbox(False, label="Colour-blind-safe colours", scale=1, elem_id="safe-colours")
        lesson_text = gr.Markdown(lessons.lesson_markdown(lessons.LESSONS[0]), elem_id="lesson-text")
        shown_lesson = gr.State(None)  # the lesson the last Show me set the page up for
        # The two runs a lesson compares, where it compares two: filled by Show me.
        with gr.Row(visible=False, elem_id="lesson-pair") as lesson_pair:
            with gr.Column():
                pair_left_caption = gr.Markdown()
                pair_left_plot = gr.Plot(show_label=False)
            with gr.Column():
                pair_right_caption = gr.Markdown()
                pair_right_plot = gr.Plot(show_label=False)
    with gr.Accordion("Glossary", open=False):
        gr.Markdown(lessons.GLOSSARY)
    page.add(lesson_choice=lesson_choice, show_me=show_me, large_text=large_text, safe_colours=safe_colours,
             lesson_text=lesson_text, shown_lesson=shown_lesson,
             lesson_pair=lesson_pair, pair_left_caption=pair_left_caption, pair_left_plot=pair_left_plot,
             pair_right_caption=pair_right_caption, pair_right_plot=pair_right_plot)


PAIR_OUTPUTS = ("lesson_pair", "pair_left_caption", "pair_left_plot", "pair_right_caption", "pair_right_plot")


def on_lesson_choice(lesson_choice) -> dict:
    """The lesson's text; another lesson's pair of runs is put away until its Show me."""
    return {"lesson_text": lessons.lesson_markdown(lessons.lesson_by_choice(lesson_choice)),
            "lesson_pair": gr.Row(visible=False)}


def after_show_me(lesson_choice, shown_lesson) -> dict:
    """A lesson chosen while Show me was setting up another: the chosen one's text, and the other's pair put
    away. (Cancelling Show me when a lesson is chosen lost a Show me pressed right after choosing: the choice's
    event can reach the server after the press.)"""
    return {} if lesson_choice == shown_lesson else on_lesson_choice(lesson_choice)


def pair_views(services: Services, lesson: lessons.Lesson, max_length: int | None) -> dict:
    """The lesson's two runs side by side, or nothing shown for a lesson of one run."""
    try:
        runs = lessons.side_by_side(lesson, services.registry.get, services.registry.names(), max_length)
    except CheckpointError as error:  # set_up has loaded the lesson's own model; the pair's other one may be missing
        return {"lesson_pair": gr.Row(visible=True), "pair_left_plot": None, "pair_right_caption": "",
                "pair_left_caption": f"This comparison cannot be shown on this server: {markdown_escape(str(error))}.",
                "pair_right_plot": None}
    if not runs:
        return {"lesson_pair": gr.Row(visible=False)}
    (left_caption, left_plot), (right_caption, right_plot) = runs
    return {"lesson_pair": gr.Row(visible=True), "pair_left_caption": left_caption, "pair_left_plot": left_plot,
            "pair_right_caption": right_caption, "pair_right_plot": right_plot}


def set_up(services: Services, lesson_choice) -> dict:
    """The lesson's model, sentence, decoding and view, translated, on the lesson's tab, at its step."""
    lesson = lessons.lesson_by_choice(lesson_choice)
    checkpoint = services.registry.get(lesson.model)
    shown = lessons.selector_values(lesson)
    views = translate.translation_views(checkpoint, lesson.sentence, shown["decoding"], max(2, lesson.beam),
                                        DEFAULT_TARGET_TOKENS, shown["kind"], lesson.view, lesson.layer,
                                        shown["head"], shown["average"], step=lesson.step)
    settings = header.model_settings(checkpoint, lesson.layer, shown["head"])
    settings["head"] = gr.Slider(settings["head"].minimum, settings["head"].maximum, step=1, value=shown["head"],
                                 interactive=not shown["average"])
    training_there = lesson.tab != "train" or services.training
    return {"model": lesson.model, **settings, **views, **pair_views(services, lesson, DEFAULT_TARGET_TOKENS),
            "text": gr.Textbox(value=lesson.sentence, label=source_label(checkpoint)),
            "decoding": shown["decoding"],
            "beam_size": gr.Slider(value=max(2, lesson.beam), interactive=lesson.beam > 1,
                                   info=translate.beam_info(checkpoint)),
            "kind": shown["kind"], "view": lesson.view, "average": shown["average"],
            # Where training is off (a public Space) the Train tab is not there: the lesson is read where it stands.
            "tabs": gr.Tabs(selected=lesson.tab if training_there else "translate"),
            **(lesson.extra if training_there else {})}


def after_set_up(services: Services, result: dict, lesson_choice, defaults: dict) -> dict:
    """What the lesson opens on that the other tabs' answers to a new translation reset: the Inside tab's query,
    and the result the lesson is about (``Lesson.action``), computed with the controls' defaults."""
    lesson = lessons.lesson_by_choice(lesson_choice)
    translation = result["translation_state"]
    shown = lessons.selector_values(lesson)
    if lesson.query is not None:
        result.update(inside_tab.on_opened(services, lesson.model, translation, result["tabs_waiting"],
                                           shown["kind"], lesson.layer, shown["head"], lesson.query, lesson.step,
                                           1.0, 0, 1.0))
        result.update(inside_tab.looking_at(services.registry.get(lesson.model), translation, shown["kind"],
                                            shown["head"], lesson.step))
    comparison = [defaults[name] for name in ("experiment_kind", "experiment_layer", "experiment_head",
                                              "experiment_measure")]
    if lesson.action == "positions":
        result.update(experiments.on_positions(services, lesson.model, translation, *comparison),
                      word_order_section=gr.Accordion(open=True))
    elif lesson.action == "importance":
        result.update(experiments.on_importance(services, lesson.model, translation))
    elif lesson.action == "attribution":
        result.update(explain.on_attribute(services, lesson.model, translation, defaults["explain_method"],
                                           defaults["explain_steps"], defaults["explain_layer"],
                                           defaults["explain_head"]))
    return result


# Show me returns every control to its default but these: the model and lesson chosen, the page's own settings,
# and the Train tab's (which shape no view: a lesson that trains sets its own through Lesson.extra).
KEPT = {"model", "lesson_choice", "large_text", "safe_colours", "hub_id", "train_data", "train_preset",
        "train_steps", "train_minutes", "train_upload"}
CONTROLS = (gr.Slider, gr.Radio, gr.Checkbox, gr.CheckboxGroup, gr.Dropdown, gr.Number)


def control_defaults(components: dict) -> dict:
    """Every control that changes what a view draws, at the value the page was built with."""
    return {name: component.value for name, component in components.items()
            if isinstance(component, CONTROLS) and name not in KEPT}


def scroll_to_focus_js() -> str:
    """After Show me, the view the lesson is about scrolled to the top of the screen and outlined a moment. The tab
    it lives on may still be drawing, and charts above it may grow as they draw, so the view is looked for and held
    at the top until the page settles (3 s after it appears, and 1.5 s after the last time it had moved, at most 20
    s), or until the visitor scrolls, types or clicks themselves."""
    focus = json.dumps({choice: lesson.focus for choice, lesson in zip(lessons.lesson_choices(), lessons.LESSONS)})
    return f"""(choice) => {{
  const id = {focus}[choice], inputs = ["wheel", "touchstart", "keydown", "mousedown"];
  let visitorMoved = false, outlined = false, deadline = performance.now() + 15000, cap = deadline;
  const stop = () => {{ visitorMoved = true; }};
  inputs.forEach((type) => window.addEventListener(type, stop, {{passive: true, capture: true}}));
  const hold = () => {{
    const element = document.getElementById(id), shown = element && element.offsetParent !== null;
    if (shown && !visitorMoved) {{
      if (Math.abs(element.getBoundingClientRect().top) > 2) {{
        element.scrollIntoView({{block: "start"}});
        if (outlined) deadline = Math.min(cap, Math.max(deadline, performance.now() + 1500));
      }}
      if (!outlined) {{
        outlined = true;
        deadline = performance.now() + 3000;
        cap = performance.now() + 20000;
        element.classList.add("lesson-focus");
        setTimeout(() => element.classList.remove("lesson-focus"), 3000);
      }}
    }}
    if (!visitorMoved && performance.now() < deadline) setTimeout(hold, 100);
    else inputs.forEach((type) => window.removeEventListener(type, stop, {{capture: true}}));
  }};
  hold();
}}"""


def wire(page: Page) -> None:
    """After every tab has declared what a model switch and a translation change in it."""
    c = page.components
    prepared = page.model_changed(page.translated(set_up))
    defaults = control_defaults(page.components)

    def on_show_me(services: Services, lesson_choice, visible_tab) -> dict:
        set_up_views = prepared(services, lesson_choice, visible_tab)  # the lesson's tab drawn, the others wait
        return {**after_set_up(services, {**defaults, **set_up_views}, lesson_choice, defaults),
                "shown_lesson": lesson_choice}

    extras = [name for lesson in lessons.LESSONS for name in lesson.extra if name in page.components]
    outputs = ["model", "model_status", "layer", "head", "beam_size", "text", "decoding", "kind", "view", "average",
               *defaults, *PAIR_OUTPUTS,
               *translate.TRANSLATION_OUTPUTS, *page.translation_outputs(), *page.model_outputs(), "tabs", *extras,
               *inside_tab.HEAD_OUTPUTS, "inside_kind", "inside_head", "lens_step", "lens_plot", "temperature_plot",
               *experiments.COMPARISON_OUTPUTS, "importance_plot", "importance_summary", "word_order_section",
               *explain.ATTRIBUTION_OUTPUTS, "shown_lesson"]
    showing = page.on(c["show_me"].click, on_show_me, outputs, cancels=page.sentence_work)
    showing.then(None, [c["lesson_choice"]], None, js=scroll_to_focus_js())
    page.then(showing, after_show_me, ["lesson_text", "lesson_pair"], show_progress="hidden")
    page.on(c["lesson_choice"].input, on_lesson_choice, ["lesson_text", "lesson_pair"], show_progress="hidden")
    c["large_text"].change(None, c["large_text"], None, js=TOGGLE_LARGE_TEXT)
    c["safe_colours"].change(None, c["safe_colours"], None, js=TOGGLE_SAFE_COLOURS)
