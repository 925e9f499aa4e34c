"""The backprop stepper in a real browser: Debian's chromium, driven by playwright.

Each demo's page is opened from file:// and stepped through by key presses; at every step
the node applied and every gradient shown are checked against backward_order and the
tensors' .grad (to the 4 digits shown), then stepped back until the gradients are empty
again. On a projector's screen (1280 x 720, 1024 x 768), read from the back of a room: the
node of every step is on screen, clear of the map, its text and the page's at least 16 px;
the counter names the node highlighted; no matrix in the side panel is cut off; before
backward a small graph is shown whole, and so is it by "whole graph". The lab notebook's
attention drawing fits a notebook's width. No page may log an error or send a request.
Screenshots go to pytest's tmp_path (the projector tests print their paths: look at them).

Without playwright or chromium these tests skip and say why; .ci/run installs both and sets
TENSORGRAD_REQUIRE_BROWSER=1, which turns that skip into a failure.
"""
import contextlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import tensorgrad as tg

REPO = Path(__file__).resolve().parent.parent
DEMOS = REPO / "demos"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
STATE = """nodes => ({step: explorer.step, steps: explorer.steps, current: explorer.current(),
  grads: Array.from({length: nodes}, (_, i) => explorer.grad(i + 1)),
  counter: document.getElementById("counter").textContent,
  highlighted: [...document.querySelectorAll("g.node.current > title")].map(t => t.textContent)})"""


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    why = None
    if importlib.util.find_spec("playwright") is None:
        why = "playwright is not installed (pip install playwright; its own browser download is not needed)"
    elif chromium() is None:
        why = "no browser: chromium is not installed (Debian: apt-get install chromium)"
    if why:
        if os.environ.get("TENSORGRAD_REQUIRE_BROWSER"):
            pytest.fail(f"TENSORGRAD_REQUIRE_BROWSER is set, but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@contextlib.contextmanager
def opened(browser, path, size=(1400, 800)):
    """A tab of `size` pixels showing the page at `path`, recording its console errors, page
    errors, dialogs and every request other than the page itself (each one refused)."""
    tab = browser.new_page(viewport={"width": size[0], "height": size[1]})
    url = Path(path).resolve().as_uri()
    tab.errors, tab.requests = [], []
    tab.on("console", lambda message: message.type == "error" and tab.errors.append(message.text))
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.on("dialog", lambda dialog: (tab.errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    tab.on("request", lambda request: request.url != url and tab.requests.append(request.url))
    tab.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    tab.goto(url)
    try:
        yield tab
    finally:
        tab.close()


def demo_module(name, monkeypatch):
    monkeypatch.syspath_prepend(str(DEMOS))   # backprop_graph imports _common
    spec = importlib.util.spec_from_file_location(f"demo_{name}", DEMOS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def backward_kept(root):
    if root.grad is None:
        root.backward(retain_graph=True)
    return root


# each demo: the page it writes, and the graph it explores, rebuilt here to compare with
PAGES = {
    "chain_rule": ("backprop.html", lambda demo: backward_kept(demo.neuron(**demo.make_leaves()))),
    "tensor_chain_rule": ("backprop.html", lambda demo: backward_kept(demo.forward(*demo.make_inputs())[1])),
    "backprop_graph": ("block_composed.html",
                       lambda demo: demo.graph_of(demo.block, demo.block_input(), composed=True)[0]),
}


def check(tab, k, ops, number, expected):
    """The page at step k shows the k-th op node and the gradients summed by then."""
    state = tab.evaluate(STATE, len(number))
    assert state["step"] == k and state["steps"] == len(ops)
    if k == 0:
        assert state["current"] is None and state["counter"].startswith("before backward")
    else:
        node = ops[k - 1]
        assert state["current"] == {"order": number[id(node)], "op": node.op, "label": node.label}
        assert state["counter"] == f"node [{number[id(node)]}] · op {k} of {len(ops)}"   # the drawing's number
        assert f"op{number[id(node)]}" in state["highlighted"]
    for n, shown in enumerate(state["grads"], 1):
        if expected[n] is None:
            assert shown is None, (k, n)
        else:
            assert shown is not None and np.allclose(shown, np.ravel(expected[n]), rtol=1e-3, atol=1e-12), (k, n)


@pytest.mark.parametrize("name", PAGES)
def test_each_demos_page_steps_through_backward_by_keys(name, browser, graph_demo, tmp_path, monkeypatch,
                                                       backward_steps):
    stdout, out = graph_demo(name)
    page_file, rebuild = PAGES[name]
    page = out / page_file
    assert f"wrote {page}" in stdout
    root = rebuild(demo_module(name, monkeypatch))
    order = tg.backward_order(root)
    number = {id(node): n for n, node in enumerate(order, 1)}
    ops = [node for node in order if node.op]
    expected = backward_steps(root)
    assert all(np.array_equal(expected[-1][number[id(node)]], node.grad) or
               np.allclose(expected[-1][number[id(node)]], node.grad, rtol=1e-6) for node in order)

    with opened(browser, page) as tab:
        check(tab, 0, ops, number, expected[0])
        tab.screenshot(path=tmp_path / f"{name}_step0.png")
        for k in range(1, len(ops) + 1):
            tab.keyboard.press("ArrowRight")
            check(tab, k, ops, number, expected[k])
            if k == len(ops) // 2:
                tab.screenshot(path=tmp_path / f"{name}_step{k}.png")
        tab.keyboard.press("ArrowRight")   # past the end: stays done
        check(tab, len(ops), ops, number, expected[-1])
        tab.screenshot(path=tmp_path / f"{name}_done.png")
        for k in range(len(ops) - 1, -1, -1):
            tab.keyboard.press("ArrowLeft")
            check(tab, k, ops, number, expected[k])
        tab.keyboard.press("End")
        check(tab, len(ops), ops, number, expected[-1])
        tab.keyboard.press("Home")
        check(tab, 0, ops, number, expected[0])
        tab.click("#next")
        check(tab, 1, ops, number, expected[1])
        assert tab.errors == [] and tab.requests == []
    assert all((tmp_path / f"{name}_{shot}.png").stat().st_size > 10_000 for shot in ("step0", "done"))


def test_labels_show_as_text_and_no_other_script_runs(browser, tmp_path):
    x = tg.tensor([[1.0, -2.0]], requires_grad=True, label="<script>alert(1)</script>")
    y = (x * 3.0).sum()
    y.label = '"}{<b>'
    y.backward(retain_graph=True)
    page = tg.render_graph(y, tmp_path / "labels.html")
    with opened(browser, page) as tab:
        tab.keyboard.press("End")
        panel = tab.text_content("#panel")
        assert "<script>alert(1)</script>" in panel and '"}{<b>' in tab.text_content("h1")
        assert tab.evaluate("document.querySelectorAll('b').length") == 0
        assert tab.evaluate("document.scripts.length") == 2   # the data block and the stepper
        assert '"}{<b>' in tab.text_content("#drawing") and "<script>alert(1)</script>" in tab.text_content("#drawing")
        assert tab.errors == [] and tab.requests == []
        # the page's policy stops any script but the stepper, even one put in from outside
        ran = tab.evaluate("""() => { const s = document.createElement("script");
            s.textContent = "window.injected = true"; document.body.append(s); return window.injected === true; }""")
        assert ran is False and any("Content Security Policy" in error for error in tab.errors)


def test_a_200_node_page_is_small_and_steps_through(browser, tmp_path, monkeypatch):
    """Three composed transformer blocks: 200 nodes. Its load time is measured by
    bench/explorer_load.py (timings stay out of tests)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from explorer_load import two_hundred_nodes
    loss = two_hundred_nodes()
    order = tg.backward_order(loss)
    assert len(order) == 200
    page = tg.render_graph(loss, tmp_path / "blocks.html", show_data=False, rankdir="TB")
    assert page.stat().st_size < 2_000_000
    steps = sum(1 for node in order if node.op)
    with opened(browser, page) as tab:
        assert tab.evaluate("explorer.steps") == steps
        for k in range(1, 11):
            tab.keyboard.press("ArrowRight")
            assert tab.evaluate("explorer.step") == k
        visited = tab.evaluate("""steps => { const seen = [];
            for (let k = 11; k <= steps; k++) seen.push(explorer.go(k) === k && explorer.current().order);
            return seen; }""", steps)
        assert visited == [number for number, node in enumerate(order, 1) if node.op][10:]
        assert np.allclose(tab.evaluate("explorer.grad(1)"), 1.0)
        last_leaf = len(order)
        assert np.allclose(tab.evaluate(f"explorer.grad({last_leaf})"), np.ravel(order[-1].grad), rtol=1e-3)
        tab.keyboard.press("Home")
        assert tab.evaluate(f"explorer.grad({last_leaf})") is None
        assert tab.errors == [] and tab.requests == []


def test_the_jupyter_frame_runs_the_same_stepper(browser):
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, label="x")
    loss = (x @ x).tanh().sum()
    loss.backward(retain_graph=True)
    tab = browser.new_page()
    errors = []
    tab.on("console", lambda message: message.type == "error" and errors.append(message.text))
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        tab.set_content(tg.explore(loss)._repr_html_())
        frame = tab.frame_locator("iframe")
        frame.locator("#next").click()
        inner = tab.frames[1]
        assert inner.evaluate("explorer.step") == 1 and inner.evaluate("explorer.current().op") == "sum"
        inner.locator("body").press("End")
        assert inner.evaluate("explorer.step") == 3
        assert np.allclose(inner.evaluate("explorer.grad(4)"), np.ravel(x.grad), rtol=1e-3)
        assert tab.evaluate("typeof window.explorer") == "undefined"   # the notebook's window is untouched
        assert errors == []
    finally:
        tab.close()


@pytest.mark.parametrize("when", ["before backward", "after a freeing backward"])
def test_a_page_without_the_kept_graph_says_so_and_still_steps(when, browser, tmp_path):
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, label="x")
    loss = (x * x).tanh().sum()
    loss.label = "loss"
    if when != "before backward":
        loss.backward()
    page = tg.render_graph(loss, tmp_path / "page.html")
    with opened(browser, page) as tab:
        assert ("before backward" if when == "before backward" else "freed") in tab.text_content("#banners")
        assert "loss.backward(retain_graph=True)" in tab.text_content("#banners")
        def shown(order):   # None before backward; after it, each gradient once complete
            grad = tab.evaluate(f"explorer.grad({order})")
            return grad if grad is None else np.asarray(grad)
        tab.keyboard.press("ArrowRight")   # [1] sum applied: tanh's gradient is complete
        assert (shown(2) is None) if when == "before backward" else np.allclose(shown(2), 1.0)
        tab.keyboard.press("End")
        assert tab.evaluate("explorer.step") == 3 and "not shown" in tab.text_content("#panel")
        assert (shown(4) is None) if when == "before backward" else np.allclose(shown(4), np.ravel(x.grad), rtol=1e-3)
        assert tab.errors == [] and tab.requests == []


# ---- on a projector ---------------------------------------------------------------------
PROJECTORS = {"1280x720": (1280, 720), "1024x768": (1024, 768)}
ON_SCREEN = """() => {
  const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const order = explorer.step === 0 ? 1 : explorer.current().order;
  const own = [...document.querySelectorAll("#drawing > svg:first-child g.node")].filter(g =>
    g.classList.contains("current") || ["op" + order, "v" + order].includes(g.querySelector("title").textContent));
  const texts = own.flatMap(g => [...g.querySelectorAll("text")])
    .filter(t => t.getAttribute("visibility") !== "hidden");
  const px = t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;   // its font size on screen
  return {pane: rect(document.getElementById("drawing")), map: rect(document.getElementById("minimap")),
          boxes: own.map(rect), text: Math.min(...texts.map(px)),
          covers: [...document.querySelectorAll("g.fold")].map(rect)};
}"""
# The page around the drawing: the counter and what it highlights, the smallest text of the
# header and the side panel, and the matrices wider than the panel's room (cut off).
AROUND = """() => {
  const panel = document.getElementById("panel"), style = getComputedStyle(panel);
  const room = panel.getBoundingClientRect().left + panel.clientLeft + panel.clientWidth - parseFloat(style.paddingRight);
  const texts = [...document.querySelectorAll("header *, #panel *")].filter(e => e.getClientRects().length &&
    [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim()));
  const smallest = texts.map(e => [parseFloat(getComputedStyle(e).fontSize), e.textContent.trim().slice(0, 40)])
    .sort((a, b) => a[0] - b[0])[0];
  return {counter: document.getElementById("counter").textContent, order: explorer.step && explorer.current().order,
          highlighted: [...document.querySelectorAll("g.node.current > title")].map(t => t.textContent),
          smallest, matrices: document.querySelectorAll("#panel table.matrix").length,
          cut: [...document.querySelectorAll("#panel .array")].filter(a => a.scrollWidth > a.clientWidth + 1).length +
               [...document.querySelectorAll("#panel table.matrix, #panel canvas")].filter(t =>
                 t.getBoundingClientRect().right > room + 0.5).length};
}"""
WHOLE = """() => {
  const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const texts = [...document.querySelectorAll("#drawing > svg:first-child g.node text")];
  return {pane: rect(document.getElementById("drawing")), graph: rect(document.querySelector("#drawing g.graph")),
          text: Math.min(...texts.map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)),
          map: getComputedStyle(document.getElementById("minimap")).display,
          panel: getComputedStyle(document.getElementById("panel")).display};
}"""
READABLE = 16   # px: text read from the back of a room, on the current step's node and around it


def overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(box, frame):
    return frame[0] - 0.5 <= box[0] and box[2] <= frame[2] + 0.5 and frame[1] - 0.5 <= box[1] and box[3] <= frame[3] + 0.5


def assert_on_screen(tab, where):
    """The node of this step (before backward: the root), its op and value box, lies whole in
    the drawing's pane, not under the map or a folded scope, its text at least 16 px.
    Measured after two animation frames: a frame laid out late (the notebook's) moves the
    camera in its ResizeObserver's callback, which runs before the next frame is painted."""
    tab.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    seen = tab.evaluate(ON_SCREEN)
    assert seen["boxes"], where
    for box in seen["boxes"]:
        assert inside(box, seen["pane"]), (where, box, seen["pane"])
        assert not overlap(box, seen["map"]) and not any(overlap(box, cover) for cover in seen["covers"]), where
    assert seen["text"] >= READABLE - 0.01, (where, seen["text"])


def assert_readable_around(tab, where):
    """The counter names the node the drawing highlights by its number ("node [7] · op 5 of
    5" with op7 and v7 red), the header's and the panel's text is at least 16 px, and every
    matrix and heatmap in the panel fits it (shortened, never cut off)."""
    seen = tab.evaluate(AROUND)
    if seen["order"]:
        assert re.match(r"node \[(\d+)\] · op \d+ of \d+$", seen["counter"]).group(1) == str(seen["order"]), where
        assert {re.sub(r"^(op|v)", "", name) for name in seen["highlighted"]} == {str(seen["order"])}, where
    assert seen["smallest"][0] >= READABLE, (where, seen["smallest"])
    assert seen["cut"] == 0, (where, seen)
    return seen


@pytest.mark.parametrize("size", PROJECTORS)
@pytest.mark.parametrize("name", PAGES)
def test_on_a_projector_every_steps_node_is_on_screen_and_readable(name, size, browser, graph_demo, tmp_path):
    _, out = graph_demo(name)
    with opened(browser, out / PAGES[name][0], PROJECTORS[size]) as tab:
        steps, matrices = tab.evaluate("explorer.steps"), 0
        for k in range(steps + 1):
            if k:
                tab.keyboard.press("ArrowRight")
            assert tab.evaluate("explorer.step") == k
            assert_on_screen(tab, (name, size, k))
            matrices += assert_readable_around(tab, (name, size, k))["matrices"]
            assert "label none" not in tab.text_content("#panel")
            if k == 0 and name == "chain_rule":   # a small graph: before backward, all of it, and no map over it
                whole = tab.evaluate(WHOLE)
                assert inside(whole["graph"], whole["pane"]) and whole["map"] == "none", whole
            if k in (0, steps // 2, steps):
                shot = tmp_path / f"{name}_{size}_step{k}.png"
                tab.screenshot(path=shot)
                print(f"screenshot: {shot}")
        assert matrices > 0 or name == "chain_rule"   # the panels' matrices were measured
        assert tab.errors == [] and tab.requests == []


def test_on_a_projector_the_whole_graph_and_the_map_keep_the_text_readable(browser, graph_demo, tmp_path):
    """The neuron's page at 1024 x 768: `whole graph` shows all of it in the page's width, its
    text at least 16 px (a click on a node goes back to following the steps); the map hides by
    its button or the key m, and comes back."""
    _, out = graph_demo("chain_rule")
    with opened(browser, out / PAGES["chain_rule"][0], PROJECTORS["1024x768"]) as tab:
        tab.keyboard.press("ArrowRight")
        map_shown = "getComputedStyle(document.getElementById('minimap')).display !== 'none'"
        assert tab.evaluate(map_shown)
        assert_on_screen(tab, "map shown")
        tab.keyboard.press("m")
        assert not tab.evaluate(map_shown) and tab.get_attribute("#map", "aria-pressed") == "false"
        assert_on_screen(tab, "map hidden")
        tab.click("#map")
        assert tab.evaluate(map_shown) and tab.get_attribute("#map", "aria-pressed") == "true"
        tab.click("#whole")
        tab.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        whole = tab.evaluate(WHOLE)
        assert inside(whole["graph"], whole["pane"]) and whole["pane"][2] - whole["pane"][0] == 1024, whole
        assert whole["text"] >= READABLE and whole["map"] == "none" and whole["panel"] == "none", whole
        shot = tmp_path / "chain_rule_1024x768_whole.png"
        tab.screenshot(path=shot)
        print(f"screenshot: {shot}")
        tab.locator("#drawing g.node", has=tab.locator("title", has_text=re.compile("^op3$"))).click()
        assert tab.evaluate("explorer.current().order") == 3 and tab.text_content("#whole") == "whole graph"
        assert_on_screen(tab, "after the whole graph")
        assert_readable_around(tab, "after the whole graph")
        assert tab.errors == [] and tab.requests == []


def page_data(path):
    text = Path(path).read_text(encoding="utf-8")
    return json.loads(re.search(r'id="explorer-data">(.*?)</script>', text, re.S).group(1))


def step_of(data, name):
    """The step (1-based) that applies the node called `name`."""
    order = next(node["order"] for node in data["nodes"] if node["name"] == name)
    return next(k for k, step in enumerate(data["steps"], 1) if step["order"] == order)


def test_the_blocks_page_shows_heads_apart_and_never_contradicts_itself(browser, graph_demo, tmp_path):
    _, out = graph_demo("backprop_graph")
    page = out / "block_composed.html"
    data = page_data(page)
    with opened(browser, page, PROJECTORS["1280x720"]) as tab:
        # q @ kᵀ: its (1, 2, 4, 4) value is two 4 x 4 matrices, one per head, each captioned
        tab.evaluate(f"explorer.go({step_of(data, 'attn.scores › q @ kᵀ')})")
        value = tab.evaluate("""() => [...document.querySelector("#panel .array").querySelectorAll("figure")].map(f =>
            [f.querySelector("figcaption").textContent, [...f.querySelectorAll("tr")].map(r => r.cells.length)])""")
        assert value == [["[0, 0, :, :]", [4, 4, 4, 4]], ["[0, 1, :, :]", [4, 4, 4, 4]]]
        tab.screenshot(path=tmp_path / "heads.png")
        # the output projection's (1, 4, 8) value is wider than the panel: its middle columns are
        # one column of "…", said under it; a click shows every column in a box that scrolls, and
        # a click again shortens it
        tab.evaluate(f"explorer.go({step_of(data, 'attn.proj › … @ weight')})")
        shortened = """() => { const t = document.querySelector("#panel .array table.matrix"), a = t.closest(".array");
            return [t.classList.contains("shortened"), [...t.rows[0].cells].filter(c => !c.hidden).length,
                    a.scrollWidth > a.clientWidth, getComputedStyle(a).overflowX, t.nextSibling.textContent]; }"""
        kept, cells, scrolls, overflow, note = tab.evaluate(shortened)
        assert kept and cells < 8 + 1 and not scrolls and note.startswith(f"… stands for {8 - (cells - 1)} of the 8")
        tab.click("#panel table.matrix")
        kept, cells, scrolls, overflow, note = tab.evaluate(shortened)
        assert not kept and cells == 8 and scrolls and overflow == "scroll" and "scroll sideways" in note
        tab.click("#panel table.matrix")
        assert tab.evaluate(shortened)[0]
        # ffn.fc's bias add: an all-ones local derivative of 128 numbers is said, not painted
        tab.evaluate(f"explorer.go({step_of(data, 'ffn.fc › ln2(…) @ weight + bias')})")
        assert "all 128 = 1" in tab.text_content("#panel")
        for k in range(1, len(data["steps"]) + 1):
            tab.evaluate(f"explorer.go({k})")
            panel = tab.evaluate("""() => ({text: document.getElementById("panel").textContent,
              operators: [...document.querySelectorAll("#panel .operator")].map(o => o.textContent),
              colours: [...document.querySelectorAll("#panel .heatmap")].map(map => {
                const seen = new Set();
                for (const c of map.querySelectorAll("canvas")) {
                  const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                  for (let i = 0; i < pixels.length; i += 4) seen.add(pixels.slice(i, i + 3).join());
                }
                return seen.size; })})""")
            assert not any(operator.startswith("× d") for operator in panel["operators"]), k
            hidden = panel["text"].count("too many to show")
            assert hidden == sum(operator.endswith("rule →") for operator in panel["operators"]), k
            assert all(colours > 1 for colours in panel["colours"]), k   # a heatmap of one colour says nothing
        assert tab.errors == [] and tab.requests == []


def test_finished_scopes_fold_by_a_click_on_them_or_from_the_list(browser, graph_demo, tmp_path, monkeypatch):
    _, out = graph_demo("backprop_graph")
    page = out / "block_composed.html"
    data = page_data(page)
    ops = [node for node in tg.backward_order(PAGES["backprop_graph"][1](demo_module("backprop_graph", monkeypatch)))
           if node.op]
    in_scope = lambda name: [k for k, node in enumerate(ops, 1) if node._scope[:1] == (name,)]   # its steps
    ffn_done = max(in_scope("ffn"))
    covers = "() => [...document.querySelectorAll('g.fold text')].map(t => t.textContent)"
    with opened(browser, page, PROJECTORS["1024x768"]) as tab:
        tab.evaluate(f"explorer.go({ffn_done + 1})")
        tab.evaluate("""() => [...document.querySelectorAll("g.cluster")].find(g => g.querySelector("text")
            .textContent === "ffn").dispatchEvent(new MouseEvent("click", {bubbles: true}))""")
        assert tab.evaluate(covers) == [f"ffn ✓ folded ({len(in_scope('ffn'))} ops)"]
        cover, frame = tab.evaluate("""() => [document.querySelector("g.fold rect"), [...document.querySelectorAll(
            "g.cluster")].find(g => g.querySelector("text").textContent === "ffn").querySelector("path")]
            .map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })""")
        assert np.allclose(cover, frame, atol=2)   # the cover lies over the scope's frame
        tab.click("#scopes summary")
        listed = tab.evaluate("""() => [...document.querySelectorAll("#scope-list label")].map(l =>
            [l.textContent.trim(), l.querySelector("input").checked])""")
        assert ["ffn done", True] in [[re.sub(r"\s+", " ", text), on] for text, on in listed]
        tab.screenshot(path=tmp_path / "ffn_folded.png")
        tab.click("#map")   # the map hides, and comes back
        assert tab.evaluate("getComputedStyle(document.getElementById('minimap')).display") == "none"
        tab.click("#map")
        tab.evaluate("document.querySelector('g.fold').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        assert tab.evaluate(covers) == []
        tab.check("#auto-fold")   # every scope folds once backward is through it, and opens again going back
        for k in range(len(data["steps"]) + 1):
            tab.evaluate(f"explorer.go({k})")
            assert_on_screen(tab, ("auto-fold", k))
        assert f"ln2 ✓ folded ({len(in_scope('ln2'))} ops)" in tab.evaluate(covers)
        tab.screenshot(path=tmp_path / "folded_at_the_end.png")
        tab.evaluate("explorer.go(0)")
        assert tab.evaluate(covers) == []
        assert tab.errors == [] and tab.requests == []


# How a notebook's frame comes on screen. A frame whose page is busy, or whose output is hidden
# (a notebook in a background tab), may run its script before it is laid out: its drawing has no
# size then, and it is measured once shown. The CPU is throttled through Chromium's DevTools.
FRAME_ARRIVALS = {"as it loads": ("", 1), "on a 4x slower CPU": ("", 4),
                  "loaded hidden, then shown": ("display: none", 1),
                  "loaded 0 px wide, then sized": ("width: 0; overflow: hidden", 1)}


@pytest.mark.parametrize("arrival", FRAME_ARRIVALS)
def test_the_notebooks_stepper_starts_with_the_root_on_screen(arrival, browser, tmp_path):
    """As the notebook shows attention's backward: in its frame, in a 1024 x 768 window, the
    root on screen at step 0 and the scopes each with their ops, however the frame arrived."""
    from nn import functional as F
    q, k, v = (tg.randn(1, 4, 8, seed=seed, dtype=np.float64, requires_grad=True) for seed in (3, 4, 5))
    q.label, k.label, v.label = "q", "k", "v"
    with tg.composed():
        loss = (F.scaled_dot_product_attention(q, k, v, causal=True) ** 2).sum()
    loss.backward(retain_graph=True)
    cell_style, slowdown = FRAME_ARRIVALS[arrival]
    tab = browser.new_page(viewport={"width": 1024, "height": 768})
    try:
        if slowdown > 1:
            tab.context.new_cdp_session(tab).send("Emulation.setCPUThrottlingRate", {"rate": slowdown})
        tab.set_content(f'<div id="cell" style="{cell_style}">{tg.explore(loss, show_data=False)._repr_html_()}</div>')
        inner = tab.frames[1]
        inner.wait_for_function("window.explorer !== undefined")
        tab.evaluate("document.getElementById('cell').removeAttribute('style')")
        assert_on_screen(inner, (arrival, "step 0"))
        scopes = inner.evaluate("""() => [...document.querySelectorAll("#scope-list label")].map(l =>
            l.textContent.trim().replace(/\\s+/g, " "))""")
        assert len(scopes) == 4 and all(re.fullmatch(r"\w+ [1-9]\d* ops?", scope) for scope in scopes), scopes
        shot = tmp_path / "notebook_frame_step0.png"
        tab.screenshot(path=shot)
        print(f"screenshot: {shot}")
        inner.locator("body").press("ArrowRight")
        assert_on_screen(inner, (arrival, "step 1"))
    finally:
        tab.close()


# A notebook's output column in a 1024 px window: about 800 px in Jupyter Notebook 6, 850 to
# 900 in JupyterLab and Notebook 7. Both shrink a wider SVG to it (max-width: 100%), and its
# text with it.
NOTEBOOK_COLUMN = 800


def notebook_drawing(notebook, call):
    """The drawing the lab notebook's cell ending in `call`... shows: its code cells run up to
    that one, whose last line is the drawing. Returns the SVG a Jupyter cell shows of it."""
    namespace = {}
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        code = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        *lines, last = code.rstrip().split("\n")
        if last.startswith(call):
            exec("\n".join(lines), namespace)
            return eval(last, namespace)._repr_image_svg_xml()
        exec(code, namespace)
    raise AssertionError(f"no cell of {notebook.name} ends in {call}")


def test_the_notebooks_attention_drawing_fits_a_notebooks_width(browser, tmp_path):
    """The lab notebook's composed attention (one row of 5,592 px, left to right, before):
    at its own size as wide as a notebook's column at most, its text at least 16 px there."""
    svg = notebook_drawing(REPO / "notebooks" / "backprop_to_attention.ipynb", "tg.draw_graph(out,")
    width = float(re.search(r'<svg width="([\d.]+)pt"', svg).group(1)) * 4 / 3   # pt -> CSS px
    page = tmp_path / "notebook_output.html"
    page.write_text(f'<!DOCTYPE html><meta charset="utf-8"><style>body {{ margin: 0 }} .output {{ width: '
                    f'{NOTEBOOK_COLUMN}px }} .output svg {{ max-width: 100%; height: auto }}</style>'
                    f'<div class="output">{svg[svg.index("<svg"):]}</div>', encoding="utf-8")
    with opened(browser, page, PROJECTORS["1024x768"]) as tab:
        shown = tab.evaluate("""() => { const svg = document.querySelector(".output svg");
            return [svg.getBoundingClientRect().width, Math.min(...[...svg.querySelectorAll("text")].map(t =>
                parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))]; }""")
        tab.screenshot(path=tmp_path / "notebook_attention.png", clip={"x": 0, "y": 0, "width": 1024, "height": 768})
        print(f"screenshot: {tmp_path / 'notebook_attention.png'}; {width:.0f} px wide, its text {shown[1]:.1f} px")
        assert width <= NOTEBOOK_COLUMN and shown[0] <= NOTEBOOK_COLUMN, (width, shown)
        assert shown[1] >= READABLE, shown
        assert tab.errors == []
