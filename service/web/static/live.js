// Live Review and Sessions: the page's #live element names its event stream (service/web/live.py). When
// items arrive after the page was drawn, it shows "N new — show" (a link to the list's first page) and,
// on Review, the waiting count; nothing is inserted under the reader's finger. EventSource reconnects by
// itself when the server ends a stream (each lives under a minute); "end" (logged out) stops it.
(function () {
  "use strict";
  var bar = document.getElementById("live");
  if (!bar || !window.EventSource) { return; }
  var count = document.getElementById("live-count");
  var total = document.getElementById("total");
  var kind = bar.getAttribute("data-kind");
  var source = new EventSource(bar.getAttribute("data-events"));
  bar.setAttribute("data-state", "connecting");
  source.addEventListener("open", function () { bar.setAttribute("data-state", "open"); });
  source.addEventListener(kind, function (event) {
    var data;
    try { data = JSON.parse(event.data); } catch (e) { return; }
    var fresh = Number(data["new"]) || 0;
    if (total && typeof data.pending === "number") { total.textContent = String(data.pending); }
    count.textContent = kind === "sessions" && fresh > 20 ? "20+" : String(fresh);
    bar.hidden = fresh < 1;
    bar.setAttribute("data-new", String(fresh));
  });
  source.addEventListener("end", function () {
    source.close();
    bar.setAttribute("data-state", "closed");
  });
  window.addEventListener("pagehide", function () { source.close(); });
})();
