// The Mini App's login: Telegram's initData (from Telegram.WebApp when its script is there, else from the
// URL fragment Telegram opens the page with: #tgWebAppData=…) goes to /tg/auth, which sets the session
// cookie. Our own file, no framework: the page's CSP allows no inline script and no other origin.
(function () {
  "use strict";
  var status = document.getElementById("tg-status");
  function say(text) { status.textContent = text; }
  function initData() {
    var tg = window.Telegram && window.Telegram.WebApp;
    if (tg && tg.initData) { return tg.initData; }
    var hash = window.location.hash.slice(1);
    return hash ? (new URLSearchParams(hash).get("tgWebAppData") || "") : "";
  }
  if (status.getAttribute("data-enabled") !== "yes") {
    say("Telegram login is not set up on this server (macupos serve --local with TELEGRAM_BOT_TOKEN).");
    return;
  }
  var data = initData();
  if (!data) {
    say("Open this page from the bot: send /memory in Telegram and tap the button.");
    return;
  }
  if (window.top !== window.self) {
    // Telegram Web shows Mini Apps in a frame of another site: a SameSite=Strict cookie is never sent
    // there. A new tab (a click, so no popup blocker) logs in at the top level with the same data.
    say("Telegram Web shows this page in a frame.");
    var open = document.getElementById("tg-open");
    document.getElementById("tg-open-link").href = "/tg" + window.location.hash;
    open.hidden = false;
    return;
  }
  // The login data is a credential for an hour: keep it out of the history and the address bar.
  if (window.history && window.history.replaceState) {
    window.history.replaceState(null, "", window.location.pathname);
  }
  var body = "init_data=" + encodeURIComponent(data);
  fetch("/tg/auth", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: body
  }).then(function (response) {
    return response.json().then(function (answer) { return { ok: response.ok, answer: answer }; });
  }).then(function (result) {
    if (result.ok && typeof result.answer.next === "string" && result.answer.next.charAt(0) === "/" && result.answer.next.charAt(1) !== "/") {
      window.location.replace(result.answer.next);
    } else {
      say("Telegram login refused: " + (result.answer.error || "unknown reason"));
    }
  }).catch(function () {
    say("Could not reach the server to log in; try again.");
  });
})();
