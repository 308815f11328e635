// A view brought into sight and held there: the app's Show me and a click that opens another tab on a view
// (page.js), and the offline pack's Show me (pack/lessons.js). The view is brought to the top of the screen and
// outlined a moment. Its tab may still be opening and the charts above it still drawing, so it is held there: each
// time the page changes or grows and the view has moved, it is put back, until the visitor scrolls, types, clicks
// or touches, or the next view is held. No clock: a slow classroom computer's late charts are waited for as a fast
// one's. (A scroll alone does not end it: the browser scrolls by itself as the page above changes, when a tab opens
// or a panel closes.)
window.explorerSight = (() => {
  let releaseHeld = () => {};
  const VISITOR_INPUTS = ["wheel", "touchstart", "keydown", "mousedown", "pointerdown"];
  function hold(id, outlineMs) {
    releaseHeld();
    let placedAt = null;  // where the page put the view: the top of the screen, or lower where the page ends first
    const target = () => document.getElementById(id);
    const top = (element) => element.getBoundingClientRect().top;
    const putBack = () => {
      const element = target();
      if (!element || element.offsetParent === null) return;  // its tab is not open yet
      if (placedAt !== null && Math.abs(top(element) - placedAt) <= 2) return;  // still where it was put
      element.scrollIntoView({block: "start"});
      if (placedAt === null) {
        element.classList.add("lesson-focus");
        setTimeout(() => element.classList.remove("lesson-focus"), outlineMs);
      }
      placedAt = top(element);
    };
    const changes = new MutationObserver(putBack), sizes = new ResizeObserver(putBack);
    const release = () => {
      changes.disconnect();
      sizes.disconnect();
      VISITOR_INPUTS.forEach((type) => window.removeEventListener(type, release, {capture: true}));
    };
    // What can move the view: elements added or removed, shown or hidden, and anything that changes the page's size.
    changes.observe(document.body, {childList: true, subtree: true, attributeFilter: ["class", "style", "hidden"]});
    sizes.observe(document.body);
    VISITOR_INPUTS.forEach((type) => window.addEventListener(type, release, {passive: true, capture: true}));
    releaseHeld = release;
    putBack();
  }
  return {hold};
})();
