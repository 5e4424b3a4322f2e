// The review queue from the keyboard: "/" the filter, j/k the next/previous card, y keep, d forget (the
// server's confirm step still asks), x select for the bulk form, c correct; on the confirm step Escape
// cancels. Keys typed into a field, or with Ctrl/Alt/Meta, are left alone. Our own file: the CSP allows
// no inline script.
(function () {
  "use strict";
  var cards = Array.prototype.slice.call(document.querySelectorAll("article.card.review"));
  var current = -1;

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function select(i) {
    if (!cards.length) { return; }
    i = Math.max(0, Math.min(cards.length - 1, i));
    if (current >= 0 && cards[current]) { cards[current].classList.remove("current"); }
    current = i;
    var card = cards[i];
    card.classList.add("current");
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "start" });
  }

  function click(selector) {
    if (current < 0) { return; }
    var el = cards[current].querySelector(selector);
    if (el) { el.click(); }
  }

  // Opened at a card (#h-…, after a change): that card is the current one.
  if (window.location.hash.indexOf("#h-") === 0) {
    var id = decodeURIComponent(window.location.hash.slice(1));
    for (var n = 0; n < cards.length; n++) {
      if (cards[n].id === id) { current = n; cards[n].classList.add("current"); break; }
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.altKey || event.metaKey || event.defaultPrevented) { return; }
    if (event.key === "Escape") {
      var cancel = document.getElementById("cancel-forget");
      if (cancel) { event.preventDefault(); cancel.click(); return; }
      if (typing(event.target)) { event.target.blur(); }
      return;
    }
    if (typing(event.target)) { return; }
    var handled = true;
    switch (event.key) {
      case "/": var filter = document.getElementById("filter"); if (filter) { filter.focus(); filter.select(); } break;
      case "j": select(current + 1); break;
      case "k": select(current < 0 ? 0 : current - 1); break;
      case "y": click("button.keep"); break;
      case "d": click("button.forget"); break;
      case "x": click("input[type=checkbox]"); break;
      case "c": if (current >= 0) { var box = cards[current].querySelector("textarea"); if (box) { box.focus(); } } break;
      default: handled = false;
    }
    if (handled) { event.preventDefault(); }
  });
})();
