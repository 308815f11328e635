// The offline pack's lessons panel: the lessons whose views the pack draws, as `python -m transformer.pack` wrote
// them (ui/views/pack_lessons.py): Show me sets the page up as the app's Show me sets its Translate tab, the
// question's answer is the one its model computed when the pack was made, and the glossary. Every word comes
// written out in the page's language; this script only puts them in as text.
(() => {
  const $ = (id) => document.getElementById(id);
  const {lessons, words: byLanguage, outlineMs} = window.explorerPackLessons;
  const words = byLanguage[window.explorerPage.language];
  if (!words) return;  // a pack made without the app's lessons
  const byKey = Object.fromEntries(lessons.map((lesson) => [lesson.key, lesson]));
  const element = (tag, properties = {}) => Object.assign(document.createElement(tag), properties);

  $("lessons").hidden = $("glossary").hidden = false;
  $("lessons-title").textContent = words.panel["lessons.panel"];
  $("lesson-label").textContent = words.panel["lessons.lesson"];
  $("show-me").textContent = words.panel["lessons.show_me"];
  $("lesson-ask-title").textContent = words.parts.ask;
  $("lesson-look-title").textContent = words.parts.lookFor;
  $("question-intro").textContent = words.panel["pack.lessons.predict"];
  $("reveal").textContent = words.panel["class.teacher.reveal"];
  $("glossary-title").textContent = words.panel["lessons.glossary_title"];
  $("glossary-lines").replaceChildren(...words.glossary.map((runs) => {
    const paragraph = element("p");
    paragraph.append(...runs.map(({text, strong}) => (strong ? element("strong", {textContent: text}) : text)));
    return paragraph;
  }));
  $("lessons-need-app").textContent = words.needsApp.length ? words.panel["pack.lessons.needs_app"] : "";
  window.explorerPack.pack().then(({appUrl}) => {  // the address --app-url gave, for the lessons the pack lacks
    if (words.needsApp.length && appUrl) {
      $("lessons-need-app").append(" ", element("a", {href: appUrl, textContent: appUrl}));
    }
  }, () => {});  // a pack that cannot open says so in the page (page.js)
  $("lessons-app-only").replaceChildren(...words.needsApp.map((title) => element("li", {textContent: title})));
  $("lesson").replaceChildren(...lessons.map(({key}) => element("option", {value: key,
                                                                          textContent: words.lessons[key].title})));
  $("lesson-chosen").hidden = !lessons.length;

  // The chosen lesson's text and question; another lesson's pair is put away until its Show me.
  function chosen() {
    const lesson = byKey[$("lesson").value], said = words.lessons[lesson.key], question = said.question;
    $("lesson-title").textContent = said.title;
    $("lesson-explanation").textContent = said.explanation;
    $("lesson-ask").replaceChildren(...said.ask.map((asked) => element("li", {textContent: asked})));
    $("lesson-look-for").textContent = said.lookFor;
    $("question-text").textContent = question.text;
    $("question-choices").replaceChildren(...question.choices.map((choice, i) => {
      const label = element("label");
      label.append(element("input", {type: "radio", name: "guess", value: String(i)}), ` ${choice}`);
      return label;
    }));
    $("question-answer").textContent = "";
    $("lesson-pair").hidden = true;
  }
  $("lesson").addEventListener("change", chosen);

  $("reveal").addEventListener("click", () => {
    const lesson = byKey[$("lesson").value], question = words.lessons[lesson.key].question;
    $("question-choices").querySelectorAll("label").forEach((label, i) => {
      label.classList.toggle("right", i === lesson.answer);
    });
    $("question-answer").textContent = `${question.modelAnswer} ${question.answer}`;
  });

  const stillChosen = (lesson) => $("lesson").value === lesson.key;

  // The two runs a lesson compares, side by side: each translated by its own model as the lesson decodes, its
  // cross-attention at the lesson's layer and head, as `ui/views/lessons.py:drawn` draws them. A run whose
  // translator is not loaded yet says so while it loads.
  async function drawPair(lesson) {
    const said = words.lessons[lesson.key];
    $("lesson-pair").hidden = false;
    for (const [i, run] of lesson.pair.entries()) {
      const side = i ? "right" : "left", caption = $(`pair-${side}-caption`);
      caption.replaceChildren(element("strong", {textContent: said.pair[i]}), element("br"), `${run.sentence} → …`);
      window.explorerCharts.drawById(`pair-${side}-plot`, null);
      const translation = await window.explorerPack.translation(run.sentence, {model: run.model, beam: lesson.beam});
      if (!stillChosen(lesson)) return;
      caption.lastChild.textContent = `${run.sentence} → ${translation.text}`;
      window.explorerCharts.drawById(`pair-${side}-plot`,
                                     window.explorerPackNumbers.crossMap(translation, run.layer, run.head));
    }
  }

  // After Show me, the view the lesson is about is held in sight as the app holds it (sight.js), and takes the
  // keyboard's focus.
  function bringIntoSight(view) {
    window.explorerSight.hold(view.id, outlineMs);
    view.tabIndex = -1;
    view.focus({preventScroll: true});
  }

  async function showMe() {
    const lesson = byKey[$("lesson").value];
    try {
      if (!await window.explorerPackPage.setUp(lesson) || !stillChosen(lesson)) return;  // another lesson chosen
      if (lesson.pair.length) await drawPair(lesson);
      if (stillChosen(lesson)) bringIntoSight($(lesson.focus));
    } catch (error) {
      window.explorerPackPage.problem(error);
    }
  }
  $("show-me").addEventListener("click", showMe);
  if (lessons.length) chosen();
})();
