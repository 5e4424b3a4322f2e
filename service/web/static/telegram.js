// Every page of a Telegram login (base.html loads this when Login.via is "telegram"; tg.html always):
// Telegram's theme colours on our CSS variables, and Telegram's BackButton going back in history.
//
// Telegram's SDK (telegram-web-app.js) lives on telegram.org, which the CSP does not allow, so this speaks
// Telegram's documented protocol itself (core.telegram.org/api/web-events, /api/bots/webapps): events go out
// through window.TelegramWebviewProxy.postEvent (the apps) or window.parent.postMessage (Telegram Web's
// frame); events come in through window.Telegram.WebView.receiveEvent (the apps) or a message from the
// parent frame. Where the SDK is present anyway (window.Telegram.WebApp), its objects are used instead.
//
// The theme arrives once, in the fragment of the first page (#tgWebAppThemeParams=…) or as
// Telegram.WebApp.themeParams, and later pages of the same login have no fragment: it is kept in
// sessionStorage (this tab only) and applied here, synchronously in <head>, before the first paint.
(function () {
  "use strict";
  var THEME = "macupos.tg.theme";
  var DEPTH = "macupos.tg.depth";
  var WEB_ORIGIN = "https://web.telegram.org";
  var root = document.documentElement;
  var sdk = window.Telegram && window.Telegram.WebApp;

  function store(key, value) {
    try { window.sessionStorage.setItem(key, value); } catch (e) { /* storage off: this page only */ }
  }
  function load(key) {
    try { return window.sessionStorage.getItem(key); } catch (e) { return null; }
  }

  // -- theme --------------------------------------------------------------------------------------
  // Telegram's theme keys → our variables (static/app.css lists what each variable is for).
  var MAP = {
    "--bg": ["secondary_bg_color", "bg_color"],
    "--card": ["section_bg_color", "bg_color"],
    "--fg": ["text_color"],
    "--muted": ["subtitle_text_color", "hint_color"],
    "--control": ["hint_color"],
    "--line": ["section_separator_color"],
    "--link": ["link_color", "accent_text_color"],
    "--focus": ["link_color", "button_color"],
    "--button": ["button_color"],
    "--on-button": ["button_text_color"],
    "--danger": ["destructive_text_color"]
  };
  var COLOUR = /^#[0-9a-fA-F]{6}$/;  // the fragment is anyone's to write: colours only, nothing else

  function clean(params) {
    var out = {};
    if (!params || typeof params !== "object") { return out; }
    Object.keys(params).forEach(function (key) {
      if (/^[a-z_]{1,40}$/.test(key) && typeof params[key] === "string" && COLOUR.test(params[key])) {
        out[key] = params[key];
      }
    });
    return out;
  }

  function luminance(hex) {
    var c = [1, 3, 5].map(function (i) {
      var v = parseInt(hex.substr(i, 2), 16) / 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }

  function apply(params) {
    var names = Object.keys(params);
    if (!names.length) { return; }
    Object.keys(MAP).forEach(function (variable) {
      var key = MAP[variable].filter(function (k) { return params[k]; })[0];
      // The CSSOM, not a style attribute: the CSP's style-src 'self' allows this.
      if (key) { root.style.setProperty(variable, params[key]); }
    });
    var bg = params.bg_color || params.secondary_bg_color;
    if (bg) {
      // Our own colours for what Telegram does not give (errors, a destructive button) follow its scheme.
      var scheme = luminance(bg) < 0.2 ? "dark" : "light";
      root.setAttribute("data-theme", scheme);
      root.style.colorScheme = scheme;
    }
  }

  function fromFragment() {
    var hash = window.location.hash.slice(1);
    if (!hash) { return null; }
    var raw = new URLSearchParams(hash).get("tgWebAppThemeParams");
    if (!raw) { return null; }
    try { return JSON.parse(raw); } catch (e) { return null; }
  }

  function remember(params) {
    var theme = clean(params);
    if (Object.keys(theme).length) {
      store(THEME, JSON.stringify(theme));
      apply(theme);
    }
  }

  var given = (sdk && sdk.themeParams && Object.keys(sdk.themeParams).length) ? sdk.themeParams : fromFragment();
  if (given) {
    remember(given);
  } else {
    var kept = load(THEME);
    if (kept) {
      try { apply(clean(JSON.parse(kept))); } catch (e) { /* a broken entry: our own colours */ }
    }
  }

  // -- talking to Telegram --------------------------------------------------------------------------
  function postEvent(type, data) {
    var proxy = window.TelegramWebviewProxy;
    if (proxy && typeof proxy.postEvent === "function") {
      proxy.postEvent(type, JSON.stringify(data));
    } else if (window.parent !== window) {
      window.parent.postMessage(JSON.stringify({ eventType: type, eventData: data }), WEB_ORIGIN);
    }
  }

  var handlers = {};
  function receive(type, data) {
    if (Object.prototype.hasOwnProperty.call(handlers, type)) { handlers[type](data); }
  }
  if (!sdk) {
    window.Telegram = window.Telegram || {};
    var view = window.Telegram.WebView = window.Telegram.WebView || {};
    var previous = view.receiveEvent;
    view.receiveEvent = function (type, data) {
      receive(type, data);
      if (typeof previous === "function") { previous(type, data); }
    };
    window.addEventListener("message", function (event) {
      if (event.source !== window.parent || event.origin !== WEB_ORIGIN || typeof event.data !== "string") { return; }
      try {
        var message = JSON.parse(event.data);
        receive(message.eventType, message.eventData);
      } catch (e) { /* not Telegram's */ }
    });
  }
  handlers.theme_changed = function (data) { if (data && data.theme_params) { remember(data.theme_params); } };

  // -- the BackButton -------------------------------------------------------------------------------
  // Each history entry of this tab carries its depth (0: the first page after the login). The button shows
  // on every page deeper than the first and goes back; a reload or a return by Back keeps the entry's depth.
  function depth() {
    var state = window.history.state;
    if (state && typeof state.macuposDepth === "number") { return state.macuposDepth; }
    var last = parseInt(load(DEPTH) || "-1", 10);
    var here = isNaN(last) ? 0 : last + 1;
    var next = {};
    if (state && typeof state === "object") { Object.keys(state).forEach(function (k) { next[k] = state[k]; }); }
    next.macuposDepth = here;
    try { window.history.replaceState(next, ""); } catch (e) { /* no history: the first page */ }
    return here;
  }

  function back() { window.history.back(); }

  function showBack() {
    if (window.location.pathname === "/tg") {
      store(DEPTH, "-1");  // the login page: the page it opens is the first
      return;
    }
    var here = depth();
    store(DEPTH, String(here));
    if (sdk && sdk.BackButton) {
      if (here > 0) { sdk.BackButton.show(); } else { sdk.BackButton.hide(); }
    } else {
      postEvent("web_app_setup_back_button", { is_visible: here > 0 });
    }
  }

  if (sdk && sdk.BackButton) {
    sdk.BackButton.onClick(back);
  } else {
    handlers.back_button_pressed = back;
  }
  showBack();
  // A page restored from the back-forward cache runs no script again: set the button for it.
  window.addEventListener("pageshow", function (event) { if (event.persisted) { showBack(); } });
  if (sdk && typeof sdk.ready === "function") { sdk.ready(); } else { postEvent("web_app_ready", {}); }
})();
