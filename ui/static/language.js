// The language a page is built in (ui/runtime/language.py), told to the browser before Gradio starts: Gradio
// writes its own words (a message's title, a status) and the document's lang in the browser's language, so
// without this a French page in a German browser would say "Fehler", and a screen reader would read French
// words as German. The server puts this script first in the page's head, its language in data-language.
(() => {
  const language = document.currentScript.dataset.language;
  for (const name of ["language", "languages"]) {
    Object.defineProperty(navigator, name, {get: () => (name === "language" ? language : [language])});
  }
  document.documentElement.lang = language;
})();
