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
  const term = name => /\s/.test(name) ? `(${name})` : name;   // "(z = x @ W).grad", not "z = x @ W.grad"

  // A view as the page shows it: a number, a matrix (a row per index of the leading axes), or
  // for a big tensor its shape, mean, std, norm and a heatmap of block means.
  function arrayElement(view) {
    if (!view) return el("span", "none", "empty");
    const box = el("div", "array");
    if (view.summary) {
      const [mean, std, norm] = view.summary.map(fmt);
      box.append(el("div", "summary", `${shapeText(view.shape)}: mean ${mean}, std ${std}, norm ${norm}`),
                 heatmap(view.heat));
      return box;
    }
    if (view.shape.length === 0) return el("span", "scalar", fmt(view.values[0]));
    const columns = view.shape[view.shape.length - 1] || 1, table = el("table", "matrix");
    for (let start = 0; start < view.values.length; start += columns) {
      const row = table.insertRow();
      view.values.slice(start, start + columns).forEach(v => { row.insertCell().textContent = fmt(v); });
    }
    box.append(table);
    return box;
  }

  function heatmap(heat) {   // red positive, blue negative, white 0; scaled by the largest |value|
    const cell = Math.max(3, Math.min(12, Math.floor(400 / heat.cols))), canvas = el("canvas", "heat");
    canvas.width = heat.cols * cell;
    canvas.height = heat.rows * cell;
    const context = canvas.getContext("2d");
    const largest = Math.max(1e-30, ...heat.values.filter(Number.isFinite).map(Math.abs));
    heat.values.forEach((v, i) => {
      const t = Number.isFinite(v) ? Math.abs(v) / largest : 1, fade = Math.round(255 * (1 - t));
      context.fillStyle = Number.isNaN(v) ? "#8c959f" : v >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
      context.fillRect((i % heat.cols) * cell, Math.floor(i / heat.cols) * cell, cell, cell);
    });
    canvas.title = "block means: red > 0, blue < 0";
    return canvas;
  }

  function equation(...parts) {   // arrays, and text between them: a × b = c
    const row = el("div", "equation");
    parts.forEach(part => row.append(typeof part === "string" ? el("span", "operator", part) : arrayElement(part)));
    return row;
  }

  // ---- the side panel: what backward does at this step ----
  function panel(k) {
    const box = document.getElementById("panel");
    box.replaceChildren();
    if (k === 0) {
      const root = term(nodes[0].name);
      box.append(el("h2", "", "before backward"),
                 el("p", "", `Every gradient is empty. Backward starts at ${root} with ${root}.grad = ` +
                    `d${root}/d${root} (1 for a single number) and visits the ${steps.length} op nodes in the order ` +
                    "of their numbers; at each it adds upstream gradient × local derivative into each input's grad."),
                 el("p", "note", "Step with → and ←, Home and End, or the buttons; click a node to go to its step."));
      return;
    }
    const s = steps[k - 1], node = nodes[s.order - 1], upstream = gradView(node.order, k);
    const inputs = s.inputs.map(e => e.order === null ? e.name : nodes[e.order - 1].name).join(", ");
    box.append(el("h2", "", `[${node.order}] ${node.name} = ${node.op}(${inputs})`),
               el("p", "facts", `op ${node.op} · label ${node.label === null ? "none" : node.label} · ` +
                  `${shapeText(node.shape)} ${node.dtype}`),
               el("div", "what", "value"), arrayElement(node.value),
               el("div", "what", `upstream gradient ${term(node.name)}.grad = d${term(nodes[0].name)}/d${term(node.name)}`),
               arrayElement(upstream));
    s.inputs.forEach((edge, index) => box.append(...inputParts(node, edge, index, k)));
    if (k === steps.length) {   // as the trace ends: every leaf's gradient
      box.append(el("h3", "", "backward is done: the leaves' gradients"));
      nodes.filter(n => n.op === null).forEach(n => box.append(el("div", "what", `[${n.order}] ${n.name}.grad`),
                                                               arrayElement(gradView(n.order, k))));
    }
  }

  function inputParts(node, edge, index, k) {
    const parts = [el("h3", "", `input ${index + 1}: ${edge.order === null ? "" : `[${edge.order}] `}${edge.name}, ` +
                      `shape ${shapeText(edge.shape)}`)];
    if (edge.rule) parts.push(el("span", "rule", `${node.op}: ${edge.rule}`));
    if (edge.order === null) {
      parts.push(el("p", "none", "a constant: it needs no gradient"));
      return parts;
    }
    const out = term(node.name), input = term(edge.name), local = edge.local;
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
        parts.push(el("p", "note", `the upstream gradient's ${rows} numbers, as one row, @ the ${rows} × ${columns} ` +
                      `Jacobian = the ${columns} numbers of the contribution, in ${shapeText(edge.shape)}`));
      }
      parts.push(equation(gradView(node.order, k), sign, local.view, "=", contribution));
    } else {
      parts.push(el("p", "note", `the ${shapeText(node.shape)} → ${shapeText(edge.shape)} Jacobian is too big to ` +
                    "show: the rule above gives the product directly"),
                 equation(gradView(node.order, k), `${sign} d${out}/d${input} =`, contribution));
    }
    const list = arrivals.get(edge.order), done = list.filter(a => a.step <= k).length;
    parts.push(el("div", "what", `${input}.grad after this step` +
                  (list.length > 1 ? ` (${done} of the ${list.length} contributions it receives have arrived)` : "")),
               arrayElement(gradView(edge.order, k)));
    return parts;
  }

  // ---- the drawing: highlight the step, fill in the gradients drawn in the value boxes ----
  const svg = document.querySelector("#drawing svg");
  const drawn = new Map();   // node name in the drawing (v3, op3, box1) -> its <g>
  for (const g of svg.querySelectorAll("g.node")) drawn.set(g.querySelector("title").textContent, g);
  const edgesInto = new Map();   // head's name -> the <g> of each edge into it
  for (const g of svg.querySelectorAll("g.edge")) {
    const head = g.querySelector("title").textContent.split("->")[1];
    edgesInto.set(head, (edgesInto.get(head) || []).concat([g]));
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
    const target = drawn.get(node.drawn[0]);
    if (target) target.scrollIntoView({ block: "center", inline: "center" });   // the step with what is around it
  }

  // ---- moving: buttons, keys, clicks; window.explorer for scripts and tests ----
  function go(k) {
    step = Math.max(0, Math.min(steps.length, Math.round(Number(k)) || 0));
    document.getElementById("counter").textContent =
      step === 0 ? `before backward (0 of ${steps.length} steps)` : `backward step ${step} of ${steps.length}`;
    document.getElementById("first").disabled = document.getElementById("back").disabled = step === 0;
    document.getElementById("next").disabled = document.getElementById("last").disabled = step === steps.length;
    drawing(step);
    panel(step);
    return step;
  }

  document.getElementById("title").textContent = data.title;
  for (const text of [data.problem, ...data.notes]) {
    if (text) document.getElementById("banners").append(el("div", "banner", text));
  }
  const moves = { first: () => 0, back: () => step - 1, next: () => step + 1, last: () => steps.length };
  const keys = { Home: "first", ArrowLeft: "back", ArrowRight: "next", End: "last" };
  Object.entries(moves).forEach(([id, to]) => document.getElementById(id).addEventListener("click", () => go(to())));
  document.addEventListener("keydown", event => {
    if (!keys[event.key] || event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    go(moves[keys[event.key]]());
  });
  function zoom(fit) {
    document.getElementById("drawing").classList.toggle("fit", fit);
    document.getElementById("zoom").textContent = fit ? "full size" : "fit";
  }
  document.getElementById("zoom").addEventListener("click", () => zoom(!document.getElementById("drawing").classList.contains("fit")));
  // fitted at first when that keeps the text at least 60% of its size
  zoom(svg.width.baseVal.value <= document.getElementById("drawing").clientWidth / 0.6);
  drawn.forEach((g, name) => g.addEventListener("click", () => {
    const order = Number(name.replace(/^(op|v)/, ""));
    if (stepOf.has(order)) go(stepOf.get(order));
  }));

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
  go(0);
})();
