"""The backprop stepper in a real browser: Debian's chromium, driven by playwright.

Each demo's page is opened from file:// and stepped through by key presses; at every step
the node applied and every gradient shown are checked against backward_order and the
tensors' .grad (to the 4 digits shown), then stepped back until the gradients are empty
again. No page may log an error or send a request. Screenshots go to pytest's tmp_path.

Without playwright or chromium these tests skip and say why; .ci/run installs both and sets
TENSORGRAD_REQUIRE_BROWSER=1, which turns that skip into a failure.
"""
import contextlib
import importlib.util
import os
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
def opened(browser, path):
    """A tab showing the page at `path`, recording its console errors, page errors, dialogs and
    every request other than the page itself (each one refused)."""
    tab = browser.new_page(viewport={"width": 1400, "height": 800})
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
        assert state["counter"] == f"backward step {k} of {len(ops)}"
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
