// The facts graph, live: drag to pan, pinch / Ctrl+wheel / the buttons / + and - to zoom, a node opens its
// memory. Our own file under the pages' CSP (script-src 'self'): nothing inline, no style attribute; every
// label is hostile text and goes in by textContent only. Without this script (or if the data does not come)
// the page keeps /facts/graph.svg as a picture.
"use strict";
(() => {
  const box = document.getElementById("graph-box");
  if (!box || !box.dataset.src || !window.fetch) return;
  const NS = "http://www.w3.org/2000/svg";
  const MIN_ZOOM = 0.4;
  const MAX_ZOOM = 8;
  const DOT = 9; // a node's radius; its target (HIT) is 44 px across
  const HIT = 22;
  const DRAG = 6; // px a pointer moves before a press is a drag, not a tap

  function make(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (parent) parent.appendChild(node);
    return node;
  }

  const r1 = (n) => Math.round(n * 10) / 10;

  // The box takes its size first ("live"), so the layout is asked for its shape.
  box.classList.add("live");
  const aspect = Math.min(4, Math.max(0.25, box.clientWidth / Math.max(1, box.clientHeight)));
  const url = box.dataset.src + (box.dataset.src.includes("?") ? "&" : "?") + "aspect=" + aspect.toFixed(2);
  fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(String(r.status)))))
    .then(start)
    .catch(() => box.classList.remove("live")); // the picture stays

  function start(data) {
    const img = box.querySelector("img");
    const svg = make("svg", { class: "graph-live", id: "graph-live", role: "group" });
    svg.setAttribute("aria-label", `facts graph: ${data.nodes.length} nodes, ${data.edges.length} edges`);
    let view = null;
    let W = 0;
    let H = 0;
    let k = 1;
    let tx = 0;
    let ty = 0;

    function apply() {
      view.setAttribute("transform", `translate(${r1(tx)} ${r1(ty)}) scale(${Math.round(k * 1000) / 1000})`);
      // Edge labels only where they have room: a wide box, or zoomed in.
      svg.classList.toggle("show-edge-labels", W >= 600 || k >= 1.5);
    }

    function draw() {
      W = box.clientWidth;
      H = box.clientHeight;
      svg.replaceChildren();
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`); // one unit a CSS pixel: 13px labels are 13 px at zoom 1
      const marker = make("marker", {
        id: "graph-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
        orient: "auto-start-reverse",
      }, make("defs", {}, svg));
      make("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }, marker);
      view = make("g", { class: "view" }, svg);
      const edges = make("g", { class: "edges" }, view);
      const edgeLabels = make("g", { class: "edge-labels" }, view);
      const nodes = make("g", { class: "nodes" }, view);
      // Room for a node's target at the sides (a label there runs inwards), for its label at the bottom.
      const mx = HIT;
      const top = HIT;
      const bottom = 36;
      const at = new Map();
      for (const n of data.nodes) at.set(n.key, [mx + n.x * (W - 2 * mx), top + n.y * (H - top - bottom)]);
      for (const e of data.edges) {
        const a = at.get(e.source);
        const b = at.get(e.target);
        if (!a || !b || e.source === e.target) continue;
        const dx = b[0] - a[0];
        const dy = b[1] - a[1];
        const d = Math.hypot(dx, dy) || 1;
        const gap = DOT + 2;
        make("line", {
          class: "edge", x1: r1(a[0] + (dx / d) * gap), y1: r1(a[1] + (dy / d) * gap),
          x2: r1(b[0] - (dx / d) * gap), y2: r1(b[1] - (dy / d) * gap), "marker-end": "url(#graph-arrow)",
        }, edges);
        const label = make("text", { class: "edge-label", x: r1((a[0] + b[0]) / 2), y: r1((a[1] + b[1]) / 2 - 4) }, edgeLabels);
        label.textContent = e.label;
      }
      for (const n of data.nodes) {
        const [x, y] = at.get(n.key);
        const link = make("a", { class: n.concept ? "node concept" : "node fact", href: n.href }, nodes);
        link.dataset.key = n.key;
        const title = make("title", {}, link);
        title.textContent = n.concept ? `${n.label}: the memories about it` : `${n.label}: memory ${n.key}`;
        make("circle", { class: "hit", cx: r1(x), cy: r1(y), r: HIT }, link);
        make("circle", { class: "dot", cx: r1(x), cy: r1(y), r: DOT }, link);
        placeLabel(make("text", { class: "label" }, link), n, x, y);
      }
      apply();
    }

    // A label goes where the layout says (outwards from its part's middle) and is cut to the room the box
    // leaves it there; its whole text is the node's title and its memory's row.
    function placeLabel(label, n, x, y) {
      let side = n.side || "below";
      const cell = (n.room || 1) * (W - 2 * HIT) - 6; // the width of its part's cell, in px
      // Beside a node, as far as the box's side, but not much past its own cell into the next one's.
      const right = Math.min(W - x - DOT - 10, 0.75 * cell);
      const left = Math.min(x - DOT - 10, 0.75 * cell);
      if ((side === "right" && right < 40) || (side === "left" && left < 40)) side = "below";
      const at = {
        right: [x + DOT + 4, y + 4.5, right],
        left: [x - DOT - 4, y + 4.5, left],
        above: [x, y - DOT - 6, Math.min(cell, 2 * Math.min(x, W - x) - 8)],
        below: [x, y + DOT + 15, Math.min(cell, 2 * Math.min(x, W - x) - 8)],
      }[side] || [x, y + DOT + 15, Math.min(cell, 2 * Math.min(x, W - x) - 8)];
      label.setAttribute("class", "label " + side);
      label.setAttribute("x", r1(at[0]));
      label.setAttribute("y", r1(at[1]));
      let text = n.label;
      label.textContent = text;
      while (text.length > 4 && label.getComputedTextLength() > at[2]) {
        text = text.slice(0, -2);
        label.textContent = text + "…";
      }
    }

    function zoomAt(px, py, factor) {
      const next = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, k * factor));
      const f = next / k;
      tx = px - (px - tx) * f;
      ty = py - (py - ty) * f;
      k = next;
      apply();
    }

    function local(ev) {
      const rect = svg.getBoundingClientRect();
      return [((ev.clientX - rect.left) * W) / (rect.width || 1), ((ev.clientY - rect.top) * H) / (rect.height || 1)];
    }

    // Pointers: one drags the view, two pinch it. A press that moved is no tap: its click opens nothing.
    const pointers = new Map();
    let pressedAt = null;
    let moved = false;
    svg.addEventListener("pointerdown", (ev) => {
      if (ev.pointerType === "mouse" && ev.button !== 0) return;
      if (pointers.size === 0) {
        moved = false;
        pressedAt = local(ev);
      }
      pointers.set(ev.pointerId, local(ev));
    });
    svg.addEventListener("pointermove", (ev) => {
      if (!pointers.has(ev.pointerId)) return;
      const p = local(ev);
      if (pointers.size === 1) {
        if (!moved) {
          if (Math.hypot(p[0] - pressedAt[0], p[1] - pressedAt[1]) < DRAG) return;
          moved = true;
          svg.setPointerCapture(ev.pointerId); // only now: a tap's click still reaches its node
          svg.classList.add("dragging");
        }
        const last = pointers.get(ev.pointerId);
        tx += p[0] - last[0];
        ty += p[1] - last[1];
        pointers.set(ev.pointerId, p);
        apply();
      } else if (pointers.size === 2) {
        const [a, b] = [...pointers.values()];
        pointers.set(ev.pointerId, p);
        const [a2, b2] = [...pointers.values()];
        const before = Math.hypot(a[0] - b[0], a[1] - b[1]) || 1;
        const after = Math.hypot(a2[0] - b2[0], a2[1] - b2[1]) || 1;
        moved = true;
        tx += (a2[0] + b2[0] - a[0] - b[0]) / 2;
        ty += (a2[1] + b2[1] - a[1] - b[1]) / 2;
        zoomAt((a2[0] + b2[0]) / 2, (a2[1] + b2[1]) / 2, after / before);
      }
    });
    const release = (ev) => {
      pointers.delete(ev.pointerId);
      if (pointers.size === 0) svg.classList.remove("dragging");
    };
    svg.addEventListener("pointerup", release);
    svg.addEventListener("pointercancel", release);
    svg.addEventListener("click", (ev) => {
      if (moved) {
        ev.preventDefault();
        ev.stopPropagation();
        moved = false;
      }
    }, true);
    svg.addEventListener("dragstart", (ev) => ev.preventDefault());
    // A wheel scrolls the page; with Ctrl (a trackpad's pinch sends that too) it zooms the graph.
    svg.addEventListener("wheel", (ev) => {
      if (!ev.ctrlKey && !ev.metaKey) return;
      ev.preventDefault();
      const [px, py] = local(ev);
      zoomAt(px, py, Math.exp(-ev.deltaY * 0.002));
    }, { passive: false });

    const reset = () => {
      k = 1;
      tx = 0;
      ty = 0;
      apply();
    };
    const tools = document.createElement("div");
    tools.className = "graph-tools";
    for (const [text, name, act] of [
      ["+", "Zoom in", () => zoomAt(W / 2, H / 2, 1.4)],
      ["−", "Zoom out", () => zoomAt(W / 2, H / 2, 1 / 1.4)],
      ["Reset", "Reset the view", reset],
    ]) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "small";
      button.textContent = text;
      button.setAttribute("aria-label", name);
      button.dataset.act = name === "Reset the view" ? "reset" : name === "Zoom in" ? "in" : "out";
      button.addEventListener("click", act);
      tools.appendChild(button);
    }
    box.addEventListener("keydown", (ev) => {
      if (ev.target instanceof HTMLButtonElement && (ev.key === "Enter" || ev.key === " ")) return;
      const step = 40;
      const keys = {
        "+": () => zoomAt(W / 2, H / 2, 1.25), "=": () => zoomAt(W / 2, H / 2, 1.25),
        "-": () => zoomAt(W / 2, H / 2, 0.8), "0": reset,
        ArrowLeft: () => { tx += step; apply(); }, ArrowRight: () => { tx -= step; apply(); },
        ArrowUp: () => { ty += step; apply(); }, ArrowDown: () => { ty -= step; apply(); },
      };
      const act = keys[ev.key];
      if (!act || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      ev.preventDefault();
      act();
    });

    const hint = document.createElement("p");
    hint.className = "hint";
    hint.id = "graph-hint";
    hint.textContent = "Drag to move; pinch, Ctrl+wheel or + and − to zoom; a node opens its memory.";
    if (img) img.hidden = true;
    box.append(svg);
    // The tools and the hint below the box, not over it: no node hides under a button.
    const bar = document.createElement("div");
    bar.className = "graph-bar";
    bar.append(tools, hint);
    box.after(bar);
    draw();
    let pending = false;
    window.addEventListener("resize", () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        if (box.clientWidth !== W || box.clientHeight !== H) draw();
      });
    });
  }
})();
