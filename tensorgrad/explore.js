// The backprop stepper: backward one op node at a time, from the numbers explore.py computed.
// Every label and number goes in with textContent, never as markup: a label stays text.
"use strict";
(function () {
  // ---- the data: nodes[order - 1] in backward order; steps[k - 1] applies one op node ----
  const numeric = new Set(["values", "summary"]);   // arrays of numbers; "Infinity", "NaN" become numbers
  const data = JSON.parse(document.getElementById("explorer-data").textContent,
                          (key, value) => numeric.has(key) ? value.map(Number) : value);
  const nodes = data.nodes, steps = data.steps;
  const stepOf = new Map(steps.map((s, i) => [s.order, i + 1]));   // a node's order -> the step applying it
  const arrivals = new Map(nodes.map(n => [n.order, []]));         // a node's order -> the edges into its grad
  steps.forEach((s, i) => s.inputs.forEach(edge => {
    if (edge.order !== null) arrivals.get(edge.order).push({ step: i + 1, edge });
  }));
  let step = 0;

  // The gradient of a node after step k, as a view ({shape, values | summary, heat}), or null:
  // the root's is backward's seed from step 1 on; any other node's is the sum of the
  // contributions of the steps done so far, the `after` of the latest one.
  function gradView(order, k) {
    if (order === 1) return k >= 1 ? data.seed : null;
    let view = null;
    for (const { step: s, edge } of arrivals.get(order)) if (s <= k) view = edge.after;
    return view;
  }

  // "empty", "partial" (some of the contributions it receives have arrived) or "complete"
  function gradState(order, k) {
    if (order === 1) return k >= 1 && data.seed ? "complete" : "empty";
    const list = arrivals.get(order), arrived = list.filter(a => a.step <= k).length;
    return arrived === 0 ? "empty" : arrived === list.length ? "complete" : "partial";
  }

  // ---- small builders: elements with text, numbers, matrices, heatmaps ----
  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmt(v) {   // 4 significant digits, as the trace prints
    if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e5 || a < 1e-4) return v.toExponential(3).replace(/\.?0+e/, "e");
    return String(Number(v.toPrecision(4)));
  }

  const shapeText = shape => "(" + shape.join(", ") + (shape.length === 1 ? ",)" : ")");
  // a node in a formula: its label when that is one word, else its number ("x1.grad", "[27].grad")
  const ref = order => /^[\p{L}\p{N}_.]+$/u.test(nodes[order - 1].label || " ") ? nodes[order - 1].label : `[${order}]`;
  const product = list => list.reduce((a, b) => a * b, 1);
  const numbers = n => `${n.toLocaleString("en")} number${n === 1 ? "" : "s"}`;

  // The matrices of a tensor of 3 or more axes: one per index of its leading axes, each
  // captioned with that index as numpy writes the slice ("[0, 1, :, :]": for nn's attention,
  // batch 0, head 1), so a (1, 2, 4, 4) tensor reads as two 4 × 4 matrices, not one 8 × 4.
  function slices(shape, count, each) {
    const lead = shape.slice(0, -2), box = el("div", "slices");
    for (let i = 0; i < count; i++) {
      const index = lead.map((_, axis) => Math.floor(i / product(lead.slice(axis + 1))) % lead[axis]);
      const figure = el("figure", "slice");
      figure.append(el("figcaption", "", `[${index.join(", ")}, :, :]`), each(i));
      box.append(figure);
    }
    return box;
  }

  function matrix(values, columns) {
    const table = el("table", "matrix");
    for (let start = 0; start < values.length; start += columns) {
      const row = table.insertRow();
      values.slice(start, start + columns).forEach(v => { row.insertCell().textContent = fmt(v); });
    }
    return table;
  }

  // A view as the page shows it: a number; a matrix (a row per index of the axis before the
  // last), one per slice of the leading axes; an array whose numbers are all one value as that
  // value, not a wall of it; a big tensor as its shape, mean, std, norm and a heatmap.
  function arrayElement(view) {
    if (!view) return el("span", "none", "empty");
    const box = el("div", "array"), size = product(view.shape);
    const constant = view.summary ? view.summary[1] <= 1e-6 * Math.abs(view.summary[0])   // std 0, to rounding
                                  : size > 16 && view.values.every(v => v === view.values[0]);
    if (constant) {   // not a heatmap of one colour: its scale is that value, whatever it is
      const value = view.summary ? view.summary[0] : view.values[0];
      box.append(el("span", "constant", `all ${size} = ${fmt(value)}`), el("div", "note", shapeText(view.shape)));
      return box;
    }
    if (view.summary) {
      const [mean, std, norm] = view.summary.map(fmt);
      box.append(el("div", "summary", `${shapeText(view.shape)}: mean ${mean}, std ${std}, norm ${norm}`), heatmap(view));
      return box;
    }
    if (view.shape.length === 0) return el("span", "scalar", fmt(view.values[0]));
    const columns = view.shape[view.shape.length - 1] || 1;
    const block = view.shape.length > 2 ? columns * view.shape[view.shape.length - 2] : view.values.length;
    box.append(view.shape.length > 2 && block > 0 && view.values.length > block
      ? slices(view.shape, view.values.length / block, i => matrix(view.values.slice(i * block, (i + 1) * block), columns))
      : matrix(view.values, columns));
    return box;
  }

  // Block means on a canvas: red > 0, blue < 0, white 0, scaled by the largest |mean|, the
  // scale written under it. One canvas per slice when each row is one index of the leading axes.
  function heatmap(view) {
    const heat = view.heat, shape = view.shape;
    const largest = Math.max(1e-30, ...heat.values.filter(Number.isFinite).map(Math.abs));
    const cell = Math.max(3, Math.min(12, Math.floor(360 / heat.cols)));
    const draw = (first, rows) => {
      const canvas = el("canvas", "heat"), context = canvas.getContext("2d");
      canvas.width = heat.cols * cell;
      canvas.height = rows * cell;
      heat.values.slice(first * heat.cols, (first + rows) * heat.cols).forEach((v, i) => {
        const t = Number.isFinite(v) ? Math.abs(v) / largest : 1, fade = Math.round(255 * (1 - t));
        context.fillStyle = Number.isNaN(v) ? "#8c959f" : v >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
        context.fillRect((i % heat.cols) * cell, Math.floor(i / heat.cols) * cell, cell, cell);
      });
      return canvas;
    };
    const rows = shape[shape.length - 2], unaveraged = shape.length > 2 && heat.rows === product(shape.slice(0, -1));
    const box = el("div", "heatmap");
    box.append(unaveraged ? slices(shape, heat.rows / rows, i => draw(i * rows, rows)) : draw(0, heat.rows),
               el("div", "note", `block means: blue ${fmt(-largest)} · white 0 · red ${fmt(largest)}`));
    return box;
  }

  function equation(...parts) {   // arrays, and text between them: a × b = c
    const row = el("div", "equation");
    parts.forEach(part => row.append(typeof part === "string" ? el("span", "operator", part) : arrayElement(part)));
    return row;
  }

  // A matrix wider than the panel keeps its first and last columns around a column of "…", as
  // numpy prints a long array, and says so under it; a click shows every column, in a box that
  // scrolls (a click again shortens it). Measured where it stands: the panel's width decides.
  function fitMatrices(box) {
    if (box.clientWidth === 0) return;   // hidden (the whole graph on screen): fitted when shown again
    const style = getComputedStyle(box);
    const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const sum = list => list.reduce((a, b) => a + b, 0);
    for (const table of box.querySelectorAll("table.matrix")) {
      const n = table.rows[0].cells.length, widths = [...table.rows[0].cells].map(c => c.getBoundingClientRect().width);
      const frame = table.getBoundingClientRect().width - sum(widths);   // the brackets
      if (frame + sum(widths) <= room || n < 2) continue;
      const probe = table.rows[0].insertCell();
      probe.className = "left-out";
      probe.textContent = "…";
      const dots = probe.getBoundingClientRect().width;
      probe.remove();
      let kept = n - 1;
      const width = k => frame + dots + sum(widths.slice(0, Math.ceil(k / 2))) + sum(widths.slice(n - Math.floor(k / 2)));
      while (kept > 1 && width(kept) > room) kept--;
      const first = Math.ceil(kept / 2), last = n - Math.floor(kept / 2);   // columns first .. last - 1 left out
      const note = el("div", "note"), holder = table.closest(".array");
      const shorten = on => {
        for (const row of table.rows) {
          [...row.cells].forEach((cell, i) => { cell.hidden = on && i >= first && i < last; });
          if (!on) row.querySelector(".left-out").remove();
          else Object.assign(row.insertCell(first), { className: "left-out", textContent: "…" });
        }
        table.classList.toggle("shortened", on);
        holder.classList.toggle("every-column", !on);
        note.textContent = on ? `… stands for ${last - first} of the ${n} columns; a click shows them all`
                              : `every column: scroll sideways; a click shortens it again`;
      };
      shorten(true);
      table.after(note);
      table.addEventListener("click", () => shorten(!table.classList.contains("shortened")));
    }
  }

  // ---- the side panel: what backward does at this step ----
  function panel(k) {
    const box = document.getElementById("panel");
    box.replaceChildren();
    if (k === 0) {
      const root = ref(1);
      box.append(el("h2", "", "before backward"),
                 el("p", "", `Every gradient is empty. Backward starts at [1] ${nodes[0].name} with ${root}.grad = ` +
                    `d${root}/d${root} (1 for a single number) and visits the ${steps.length} op nodes in the order ` +
                    "of their numbers; at each it adds upstream gradient × local derivative into each input's grad."),
                 el("p", "note", "Step with → and ←, Home and End, or the buttons; click a node to go to its step. " +
                    "The drawing follows the step; drag it or use the map to look around, + and − to zoom, " +
                    "and fold a scope once backward is through it by a click on its frame."));
      return;
    }
    const s = steps[k - 1], node = nodes[s.order - 1], upstream = gradView(node.order, k);
    const inputs = s.inputs.map(e => e.order === null ? e.name : `[${e.order}]`).join(", ");
    box.append(el("h2", "", `[${node.order}] ${node.name}`),
               el("p", "facts", `= ${node.op}(${inputs}) · ${shapeText(node.shape)} ${node.dtype}` +
                  (scopeOf(node) ? ` · in ${scopeOf(node).name}` : "")),
               el("div", "what", "value"), arrayElement(node.value),
               el("div", "what", `upstream gradient ${ref(node.order)}.grad = d${ref(1)}/d${ref(node.order)}`),
               arrayElement(upstream));
    s.inputs.forEach((edge, index) => box.append(...inputParts(node, edge, index, k)));
    if (k === steps.length) {   // as the trace ends: every leaf's gradient
      box.append(el("h3", "", "backward is done: the leaves' gradients"));
      nodes.filter(n => n.op === null).forEach(n => box.append(el("div", "what", `[${n.order}] ${n.name}: its grad`),
                                                               arrayElement(gradView(n.order, k))));
    }
    fitMatrices(box);
  }

  function inputParts(node, edge, index, k) {
    const parts = [el("h3", "", `input ${index + 1}: ${edge.order === null ? "" : `[${edge.order}] `}${edge.name}, ` +
                      `shape ${shapeText(edge.shape)}`)];
    if (edge.rule) parts.push(el("span", "rule", `${node.op}: ${edge.rule}`));
    if (edge.order === null) {
      parts.push(el("p", "none", "a constant: it needs no gradient"));
      return parts;
    }
    const out = ref(node.order), input = ref(edge.order), local = edge.local;
    const contribution = edge.contribution === "same" ? edge.after : edge.contribution;
    const sign = { elementwise: "·", jacobian: "@" }[local && local.kind] || "×";   // as the trace writes them
    parts.push(el("div", "chain", `${input}.grad += ${out}.grad ${sign} d${out}/d${input}` +
                  (local && local.kind === "elementwise" ? " (elementwise)" : "") +
                  (local && local.kind === "jacobian" ? ` (Jacobian, ${local.view.shape.join(" × ")})` : "")));
    if (data.problem) {
      parts.push(el("p", "none", "the numbers of this edge are not shown: see the note above"));
    } else if (local) {
      if (local.kind === "jacobian") {
        const [rows, columns] = local.view.shape;
        parts.push(el("p", "note", `the upstream gradient's ${numbers(rows)}, as one row, @ the ${rows} × ${columns} ` +
                      `Jacobian = the ${numbers(columns)} of the contribution, in ${shapeText(edge.shape)}`));
      }
      parts.push(equation(gradView(node.order, k), sign, local.view, "=", contribution));
    } else {   // no matrix to show: say so once, and show what is computed instead
      const size = product(node.shape) * product(edge.shape);
      parts.push(el("p", "note", `d${out}/d${input} would be a ${shapeText(node.shape)} → ${shapeText(edge.shape)} ` +
                    `Jacobian of ${numbers(size)}, too many to show; backward never builds it. ` +
                    `The rule above turns the upstream gradient into the contribution directly:`),
                 equation(gradView(node.order, k), `→ ${node.op}'s rule →`, contribution));
    }
    const list = arrivals.get(edge.order), done = list.filter(a => a.step <= k).length;
    parts.push(el("div", "what", `${input}.grad after this step` +
                  (list.length > 1 ? ` (${done} of the ${list.length} contributions it receives have arrived)` : "")),
               arrayElement(gradView(edge.order, k)));
    return parts;
  }

  // ---- the drawing: highlight the step, fill in the gradients drawn in the value boxes ----
  const SVG = "http://www.w3.org/2000/svg";
  const pane = document.getElementById("drawing"), svg = pane.querySelector("svg");
  const graph = svg.querySelector("g.graph");
  const drawn = new Map();   // node name in the drawing (v3, op3, box1) -> its <g>
  for (const g of svg.querySelectorAll("g.node")) drawn.set(g.querySelector("title").textContent, g);
  const edgesInto = new Map(), around = new Map();   // head's name -> its edges' <g>; a name -> the names it is joined to
  for (const g of svg.querySelectorAll("g.edge")) {
    const [tail, head] = g.querySelector("title").textContent.split("->");
    edgesInto.set(head, (edgesInto.get(head) || []).concat([g]));
    around.set(tail, (around.get(tail) || []).concat([head]));
    around.set(head, (around.get(head) || []).concat([tail]));
  }
  // the grad lines of each value box: from its last text that starts with "grad" to the end
  const gradLines = new Map(nodes.map(n => {
    const texts = drawn.has("v" + n.order) ? [...drawn.get("v" + n.order).querySelectorAll("text")] : [];
    const first = texts.map(t => t.textContent.startsWith("grad")).lastIndexOf(true);
    return [n.order, first < 0 ? [] : texts.slice(first).map(t => ({ text: t, drawn: t.textContent }))];
  }));

  const drawnState = new Map();   // a node's order -> the state its grad lines show now
  function drawing(k) {
    for (const g of svg.querySelectorAll(".current, .receiving")) g.classList.remove("current", "receiving");
    nodes.forEach(n => {
      const applied = stepOf.has(n.order) && stepOf.get(n.order) <= k;
      if (drawn.has("op" + n.order)) drawn.get("op" + n.order).classList.toggle("applied", applied);
      const lines = gradLines.get(n.order), state = gradState(n.order, k);
      if (!lines.length || data.seed === null || drawnState.get(n.order) === state) return;   // before backward: as drawn
      drawnState.set(n.order, state);
      lines.forEach((line, i) => {
        line.text.textContent = state === "complete" || i > 0 ? line.drawn :
          state === "empty" ? "grad —" : "grad …";   // not reached yet; being summed
        line.text.classList.toggle("pending", state !== "complete");
        line.text.setAttribute("visibility", state === "complete" || i === 0 ? "visible" : "hidden");
      });
    });
    if (k === 0) return;
    const s = steps[k - 1], node = nodes[s.order - 1];
    node.drawn.forEach(name => drawn.has(name) && drawn.get(name).classList.add("current"));
    (edgesInto.get("op" + node.order) || []).concat(edgesInto.get("v" + node.order) || [])
      .forEach(g => g.classList.add("current"));
    s.inputs.forEach(e => e.order !== null && nodes[e.order - 1].drawn.forEach(
      name => drawn.has(name) && !drawn.get(name).classList.contains("current") && drawn.get(name).classList.add("receiving")));
  }

  // ---- the view: the drawing is laid out once (Graphviz); the page moves a camera over it.
  // Each step centres the node it applies (before backward: the root) with the nodes joined to
  // it, at a scale that keeps the text readable from the back of a room: at least MIN screen
  // pixels per point of the drawing (its 16 pt labels become 16 px), at most NATURAL (the
  // drawing's own size). Before backward a graph that fits whole at that scale is shown whole.
  // What does not fit is a drag, a wheel or a click on the map away.
  const MIN = 1, NATURAL = 4 / 3, MARGIN = 24;   // pixels per point; screen pixels around what is shown
  const whole = (({ x, y, width, height }) => ({ x, y, w: width, h: height }))(svg.viewBox.baseVal);
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  const toDrawing = graph.transform.baseVal.consolidate(), boxes = new Map();   // a node's coordinates -> the drawing's
  function boxOf(element) {   // where an element of the drawing lies, in its coordinates: found once (see measure)
    if (!boxes.has(element)) {
      const b = element.getBBox(), m = toDrawing ? toDrawing.matrix : new DOMMatrix();
      boxes.set(element, { x: b.x * m.a + m.e, y: b.y * m.d + m.f, w: b.width * m.a, h: b.height * m.d });
    }
    return boxes.get(element);
  }
  const union = list => {
    const x = Math.min(...list.map(b => b.x)), y = Math.min(...list.map(b => b.y));
    return { x, y, w: Math.max(...list.map(b => b.x + b.w)) - x, h: Math.max(...list.map(b => b.y + b.h)) - y };
  };
  const camera = { x: whole.x + whole.w / 2, y: whole.y + whole.h / 2, scale: 1, zoom: 1, overview: false };
  const paneSize = () => pane.getBoundingClientRect();   // not clientWidth: whole pixels would shrink the scale a little

  function show() {   // the camera as the drawing's viewBox, and as the rectangle on the map
    const { width: paneWidth, height: paneHeight } = paneSize();
    const width = paneWidth / camera.scale, height = paneHeight / camera.scale;
    svg.setAttribute("viewBox", `${camera.x - width / 2} ${camera.y - height / 2} ${width} ${height}`);
    // the map only while some of the drawing is off screen: else it would just cover some of it
    pane.classList.toggle("all-seen", Math.abs(camera.x - whole.x - whole.w / 2) <= (width - whole.w) / 2 + 0.5 &&
                                      Math.abs(camera.y - whole.y - whole.h / 2) <= (height - whole.h) / 2 + 0.5);
    seen.setAttribute("x", camera.x - width / 2);
    seen.setAttribute("y", camera.y - height / 2);
    seen.setAttribute("width", width);
    seen.setAttribute("height", height);
  }

  // The node of step k (the root before backward) as boxes: itself, and it with its neighbours.
  function focus(k) {
    const node = k === 0 ? nodes[0] : nodes[steps[k - 1].order - 1];
    const names = node.drawn.filter(name => drawn.has(name));
    const near = names.flatMap(name => around.get(name) || []).filter(name => drawn.has(name));
    return { own: union(names.map(name => boxOf(drawn.get(name)))),
             near: union([...names, ...near].map(name => boxOf(drawn.get(name)))) };
  }

  function follow(k) {
    if (!measure()) return;   // not laid out yet: the ResizeObserver calls again once it is
    sizeMap();
    const { width: paneWidth, height: paneHeight } = paneSize();
    const { own, near } = focus(k), width = paneWidth - 2 * MARGIN, height = paneHeight - 2 * MARGIN;
    const fitsWhole = Math.min((paneWidth - MARGIN) / whole.w, (paneHeight - MARGIN) / whole.h);   // half the margin
    if (camera.overview || k === 0 && fitsWhole * camera.zoom >= MIN) {   // all of it, centred
      camera.scale = camera.overview ? Math.min(paneWidth / whole.w, paneHeight / whole.h)
                                     : Math.min(NATURAL, fitsWhole) * camera.zoom;
      [camera.x, camera.y] = [whole.x + whole.w / 2, whole.y + whole.h / 2];
    } else {
      const fits = Math.min(width / near.w, height / near.h);
      camera.scale = Math.max(MIN, Math.min(NATURAL, fits)) * camera.zoom;
      // centre the neighbourhood, then slide so the node itself is whole on screen (when it fits)
      const slide = (centre, low, size, room) => size > room ? low + size / 2 :
        Math.min(Math.max(centre, low + size - room / 2), low + room / 2);
      camera.x = slide(near.x + near.w / 2, own.x, own.w, width / camera.scale);
      camera.y = slide(near.y + near.h / 2, own.y, own.h, height / camera.scale);
      // no empty margin beyond the drawing's edge while there is more of it to show
      const keep = (centre, low, size, room) => size <= room ? low + size / 2 :
        Math.min(Math.max(centre, low + room / 2), low + size - room / 2);
      camera.x = keep(camera.x, whole.x, whole.w, paneWidth / camera.scale);
      camera.y = keep(camera.y, whole.y, whole.h, paneHeight / camera.scale);
      dodgeMap(own);
    }
    show();
    const { x, y, w, h } = own, mark = Math.max(w, h, whole.w / 40, whole.h / 40);   // seen on the map at any size
    here.setAttribute("x", x + w / 2 - mark / 2);
    here.setAttribute("y", y + h / 2 - mark / 2);
    here.setAttribute("width", mark);
    here.setAttribute("height", mark);
  }

  // the map in the corner covers part of the drawing: move the camera so it does not cover the node
  function dodgeMap(own) {
    if (pane.classList.contains("no-map")) return;
    const frame = paneSize();   // the map's place from its size and corner (it may be hidden just now)
    const left = (own.x - camera.x) * camera.scale + frame.width / 2, right = left + own.w * camera.scale;
    const top = (own.y - camera.y) * camera.scale + frame.height / 2, bottom = top + own.h * camera.scale;
    const mapLeft = frame.width - 8 - parseFloat(minimap.style.width);
    const mapTop = frame.height - 8 - parseFloat(minimap.style.height);
    if (right <= mapLeft - 8 || bottom <= mapTop - 8) return;
    const byX = right - mapLeft + 8, byY = bottom - mapTop + 8;   // how far the node must move left, or up
    if (byX <= left - 8 && (byX <= byY || byY > top - 8)) camera.x += byX / camera.scale;
    else if (byY <= top - 8) camera.y += byY / camera.scale;
  }

  // the map: the whole drawing, small, in the corner (an SVG <use> of the drawing itself, so
  // it shows what the drawing shows), the part on screen as a rectangle and the step's node marked
  const minimap = document.createElementNS(SVG, "svg");
  minimap.id = "minimap";
  minimap.setAttribute("viewBox", `${whole.x} ${whole.y} ${whole.w} ${whole.h}`);
  minimap.setAttribute("role", "img");
  minimap.setAttribute("aria-label", "the whole graph; a click shows that part");
  const picture = document.createElementNS(SVG, "use"), seen = document.createElementNS(SVG, "rect");
  const here = document.createElementNS(SVG, "rect");
  picture.setAttribute("href", "#" + graph.id);
  seen.setAttribute("class", "seen");
  here.setAttribute("class", "here");
  minimap.append(picture, seen, here);
  pane.append(minimap);
  function sizeMap() {   // the drawing's shape, at most 200 px, 30% of the pane wide and 40% of it high
    const scale = Math.min(200 / whole.w, 0.4 * paneSize().height / whole.h, 0.3 * paneSize().width / whole.w);
    minimap.style.width = `${Math.max(24, whole.w * scale)}px`;
    minimap.style.height = `${Math.max(24, whole.h * scale)}px`;
  }
  minimap.addEventListener("click", event => {
    const box = minimap.getBoundingClientRect(), scale = Math.min(box.width / whole.w, box.height / whole.h);
    camera.x = whole.x + whole.w / 2 + (event.clientX - box.left - box.width / 2) / scale;
    camera.y = whole.y + whole.h / 2 + (event.clientY - box.top - box.height / 2) / scale;
    show();
  });

  // dragging and the wheel move the camera; ctrl + wheel, and + and −, zoom
  let dragged = null, moved = 0;
  pane.addEventListener("pointerdown", event => {
    if (event.button !== 0 || minimap.contains(event.target)) return;
    dragged = { x: event.clientX, y: event.clientY };
    moved = 0;
  });
  window.addEventListener("pointermove", event => {
    if (!dragged) return;
    camera.x -= (event.clientX - dragged.x) / camera.scale;
    camera.y -= (event.clientY - dragged.y) / camera.scale;
    moved += Math.abs(event.clientX - dragged.x) + Math.abs(event.clientY - dragged.y);
    dragged = { x: event.clientX, y: event.clientY };
    if (moved > 4) pane.classList.add("dragging");
    show();
  });
  window.addEventListener("pointerup", () => { dragged = null; pane.classList.remove("dragging"); });
  pane.addEventListener("click", event => { if (moved > 4) event.stopPropagation(); }, true);   // a drag is not a click
  pane.addEventListener("wheel", event => {
    event.preventDefault();
    if (event.ctrlKey) return zoomBy(event.deltaY < 0 ? 1.25 : 0.8);
    camera.x += event.deltaX / camera.scale;
    camera.y += event.deltaY / camera.scale;
    show();
  }, { passive: false });
  function zoomBy(factor) {
    camera.zoom = Math.max(0.25, Math.min(4, camera.zoom * factor));
    if (camera.overview) {
      overview(false);
      go(step);   // the panel is back: its matrices are fitted to it
    } else follow(step);
  }
  function overview(on) {   // the whole graph: the drawing alone, the panel out of its way
    camera.overview = on;
    document.getElementById("whole").textContent = on ? "follow the step" : "whole graph";
    document.querySelector("main").classList.toggle("overview", on);
  }

  // ---- scopes: each cluster of the drawing, folded into a plain box once backward is through
  // it (a click on its frame, or the list), so what is left to do stands out. The layout stays:
  // a folded scope keeps its place, its inside covered. Found by measure, from the boxes.
  let scopes = [];
  const inside = (inner, outer) => inner.x + inner.w / 2 > outer.x && inner.x + inner.w / 2 < outer.x + outer.w &&
                                   inner.y + inner.h / 2 > outer.y && inner.y + inner.h / 2 < outer.y + outer.h;
  const findScopes = () => [...svg.querySelectorAll("g.cluster")].map(g => {
    // its frame, the outline Graphviz draws: not the group, whose label's box may reach past it
    // (by the font's ascent, before the font is loaded) over a node drawn just above the scope
    const outline = g.querySelector("path, polygon") || g;
    const scope = { g, name: g.querySelector("text").textContent, box: boxOf(outline), folded: false };
    scope.orders = nodes.filter(n => n.drawn.some(name => drawn.has(name) && inside(boxOf(drawn.get(name)), scope.box)))
                        .map(n => n.order);
    scope.ops = scope.orders.filter(order => stepOf.has(order)).length;
    scope.cover = document.createElementNS(SVG, "g");
    scope.cover.setAttribute("class", "fold");
    const frame = document.createElementNS(SVG, "rect"), label = document.createElementNS(SVG, "text");
    const { x, y, width, height } = outline.getBBox();   // in the coordinates of the group the cover goes in
    Object.entries({ x, y, width, height, rx: 6 }).forEach(([key, value]) => frame.setAttribute(key, value));
    label.setAttribute("x", x + width / 2);
    label.setAttribute("y", y + 26);
    label.textContent = `${scope.name} ✓ folded (${scope.ops} op${scope.ops === 1 ? "" : "s"})`;
    scope.cover.append(frame, label);
    scope.cover.addEventListener("click", () => fold(scope, false));
    scope.g.addEventListener("click", () => fold(scope, true));
    return scope;
  });

  // The drawing is measured (its boxes, and from them the scopes) once, when it is laid out:
  // when the pane has a size. A notebook's frame may run this script before that, while the
  // notebook's page is busy or the output is hidden; every box would then measure 0 × 0 at
  // 0, 0, and kept, those boxes would aim the camera at the drawing's corner for good.
  let measured = false;
  function measure() {   // true once the drawing is measured
    if (!measured && pane.clientWidth > 0 && pane.clientHeight > 0) {
      measured = true;
      scopes = findScopes();
      document.getElementById("scopes").hidden = scopes.length === 0;
    }
    return measured;
  }
  const scopeOf = node => scopes.filter(scope => scope.orders.includes(node.order))   // the innermost scope around it
    .sort((a, b) => a.box.w * a.box.h - b.box.w * b.box.h)[0];
  const done = (scope, k) => scope.orders.every(order => !stepOf.has(order) || stepOf.get(order) <= k);

  function fold(scope, on) {
    scope.folded = on;
    if (on) graph.append(scope.cover);   // last: above the nodes and edges it covers
    else scope.cover.remove();
    for (const other of scopes) {   // an outer scope's cover goes above the inner ones
      if (other.folded && other !== scope && inside(scope.box, other.box)) graph.append(other.cover);
    }
    scopeList();
  }

  function scopeList() {
    const list = document.getElementById("scope-list");
    list.replaceChildren();
    scopes.forEach(scope => {
      const item = el("label", "scope"), box = el("input");
      box.type = "checkbox";
      box.checked = scope.folded;
      box.addEventListener("change", () => fold(scope, box.checked));
      const depth = scopes.filter(other => other !== scope && inside(scope.box, other.box)).length;
      item.style.paddingLeft = `${depth * 14}px`;
      item.append(box, el("span", "", ` ${scope.name} `),
                  el("span", "note", done(scope, step) ? "done" : `${scope.ops} op${scope.ops === 1 ? "" : "s"}`));
      list.append(item);
    });
  }

  function scopesAt(k) {   // the step's own node is never hidden; with "fold when done", done scopes fold
    const node = k === 0 ? nodes[0] : nodes[steps[k - 1].order - 1];
    const auto = document.getElementById("auto-fold").checked;
    scopes.forEach(scope => {
      const holds = scope.orders.includes(node.order);
      if (scope.folded && (holds || auto && !done(scope, k))) fold(scope, false);
      else if (!scope.folded && auto && done(scope, k) && !holds) fold(scope, true);
    });
    scopeList();
  }

  // ---- moving: buttons, keys, clicks; window.explorer for scripts and tests ----
  function go(k) {
    step = Math.max(0, Math.min(steps.length, Math.round(Number(k)) || 0));
    // the counter names the node by the number the drawing shows, [7], and then how far along the op nodes it is
    document.getElementById("counter").textContent = step === 0 ? `before backward · ${steps.length} ops` :
      `node [${steps[step - 1].order}] · op ${step} of ${steps.length}`;
    document.querySelector("main").classList.toggle("before", step === 0);   // the drawing has the page's width
    document.getElementById("first").disabled = document.getElementById("back").disabled = step === 0;
    document.getElementById("next").disabled = document.getElementById("last").disabled = step === steps.length;
    drawing(step);
    follow(step);   // first: it measures the drawing, and so finds the scopes, once it can
    scopesAt(step);
    panel(step);
    return step;
  }

  document.getElementById("title").textContent = data.title;
  for (const text of [data.problem, ...data.notes]) {
    if (text) document.getElementById("banners").append(el("div", "banner", text));
  }
  const moves = { first: () => 0, back: () => step - 1, next: () => step + 1, last: () => steps.length };
  const keys = { Home: "first", ArrowLeft: "back", ArrowRight: "next", End: "last" };
  const zooms = { "+": 1.25, "=": 1.25, "-": 0.8 };
  Object.entries(moves).forEach(([id, to]) => document.getElementById(id).addEventListener("click", () => go(to())));
  document.addEventListener("keydown", event => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (keys[event.key]) go(moves[keys[event.key]]());
    else if (zooms[event.key]) zoomBy(zooms[event.key]);
    else if (event.key === "m" || event.key === "M") toggleMap();
    else return;
    event.preventDefault();
  });
  document.getElementById("zoom-in").addEventListener("click", () => zoomBy(1.25));
  document.getElementById("zoom-out").addEventListener("click", () => zoomBy(0.8));
  document.getElementById("whole").addEventListener("click", () => { overview(!camera.overview); go(step); });
  function toggleMap() {   // the map button, or the key m
    const hidden = pane.classList.toggle("no-map");
    document.getElementById("map").setAttribute("aria-pressed", String(!hidden));
    follow(step);
  }
  document.getElementById("map").addEventListener("click", toggleMap);
  document.getElementById("auto-fold").addEventListener("change", () => scopesAt(step));
  drawn.forEach((g, name) => g.addEventListener("click", () => {   // its step, close up
    const order = Number(name.replace(/^(op|v)/, ""));
    if (!stepOf.has(order)) return;
    overview(false);
    go(stepOf.get(order));
  }));
  let panelWidth = 0;
  new ResizeObserver(() => {   // a window resized, a frame laid out (the first time: see measure)
    sizeMap();
    const width = document.getElementById("panel").clientWidth, widened = width !== panelWidth;
    panelWidth = width;
    if (!measured && measure()) go(step);   // measured only now: the scopes and the panel's facts come too
    else if (measured) follow(step);
    if (measured && widened) panel(step);   // its matrices fitted to its new width
  }).observe(pane);

  window.explorer = Object.freeze({
    steps: steps.length,
    get step() { return step; },
    go,
    current: () => step === 0 ? null : (({ order, op, label }) => ({ order, op, label }))(nodes[steps[step - 1].order - 1]),
    grad: order => {
      if (!arrivals.has(order)) throw new RangeError(`explorer.grad(${order}): order must be 1 to ${nodes.length}`);
      const view = gradView(order, step);
      return view ? (view.values || view.summary).slice() : null;
    },
  });
  sizeMap();
  go(0);
})();
