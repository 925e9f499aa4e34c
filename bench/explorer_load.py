"""How fast the backprop stepper page opens and steps in headless Chromium; and README's picture of it.

    python bench/explorer_load.py [--rounds 7] [--screenshot docs/figures/explorer.png]

The page of a 200-node graph (three transformer blocks run inside tg.composed(): 163 op
nodes, tensors of 4 to 256 numbers) is opened from file:// `rounds` times, alternating with
the same graph's plain SVG drawing (the peer: the picture alone), in one headless Chromium
(Debian's, driven by playwright). It prints the median time from navigation to the load
event of each (the page's includes its script drawing step 0), their ratio, the page's
size, and the time one step takes in the page (explorer.go, its drawing and side panel
redone). Exits 1 when the page passes the bar it was built to: under 1 s to load and
under 2 MB.

--screenshot PATH also writes README's tour picture: demos/chain_rule.py's page (micrograd's
neuron) at step 4 of 5, 1400 × 680 pixels.
"""
import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "demos")]
import nn  # noqa: E402
import tensorgrad as tg  # noqa: E402

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
LOAD_LIMIT_MS, SIZE_LIMIT = 1000, 2_000_000
LOADED = "() => performance.getEntriesByType('navigation')[0].loadEventEnd"


def two_hundred_nodes():
    """Three composed transformer blocks (8 channels, 2 heads) on 4 tokens: a loss whose
    graph has 200 nodes, kept by backward(retain_graph=True)."""
    nn.manual_seed(0)
    blocks = nn.Sequential(*(nn.TransformerBlock(dim=8, n_heads=2) for _ in range(3)))
    with tg.composed():
        loss = blocks(tg.randn(1, 4, 8, seed=0, requires_grad=True)).sum()
    loss.label = "loss"
    loss.backward(retain_graph=True)
    return loss


def launch(playwright):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium on the PATH (Debian: apt-get install chromium)")
    return playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)


def screenshot(browser, path):
    import chain_rule
    o = chain_rule.neuron(**chain_rule.make_leaves())
    o.backward(retain_graph=True)
    page = tg.render_graph(o, Path(tempfile.mkdtemp()) / "backprop.html")
    tab = browser.new_page(viewport={"width": 1400, "height": 680})
    tab.goto(page.as_uri())
    for _ in range(4):   # to [4] x1w1 = mul(x1, w1): the leaves' gradients half filled in
        tab.keyboard.press("ArrowRight")
    tab.screenshot(path=path)
    tab.close()
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="loads of each file")
    parser.add_argument("--screenshot", help="also write README's picture of the page here")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    loss = two_hundred_nodes()
    order = tg.backward_order(loss)
    folder = Path(tempfile.mkdtemp())
    files = {"page": tg.render_graph(loss, folder / "blocks.html", show_data=False, rankdir="TB"),
             "drawing": tg.render_graph(loss, folder / "blocks.svg", show_data=False, rankdir="TB", order=True)}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        loads = {name: [] for name in files}
        tab = browser.new_page(viewport={"width": 1400, "height": 800})
        for _ in range(args.rounds):
            for name, path in files.items():
                tab.goto(path.as_uri())
                loads[name].append(tab.evaluate(LOADED))
        tab.goto(files["page"].as_uri())
        steps = tab.evaluate("explorer.steps")
        per_step = tab.evaluate("""steps => { const start = performance.now();
            for (let k = 1; k <= steps; k++) explorer.go(k);
            return (performance.now() - start) / steps; }""", steps)
        if args.screenshot:
            screenshot(browser, args.screenshot)
        browser.close()

    page_ms, drawing_ms = (statistics.median(loads[name]) for name in ("page", "drawing"))
    size = files["page"].stat().st_size
    print(f"a graph of {len(order)} nodes ({steps} op nodes), in headless Chromium, median of {args.rounds} loads:")
    print(f"  the stepper page  {page_ms:7.1f} ms to load, {size / 1e6:.2f} MB, {per_step:.1f} ms a step")
    print(f"  its SVG drawing   {drawing_ms:7.1f} ms to load, {files['drawing'].stat().st_size / 1e6:.2f} MB")
    print(f"  page / drawing    {page_ms / drawing_ms:7.2f}")
    over = [what for what, bad in (("load time", page_ms > LOAD_LIMIT_MS), ("size", size > SIZE_LIMIT)) if bad]
    if over:
        print(f"over the bar (under {LOAD_LIMIT_MS} ms and {SIZE_LIMIT / 1e6:.0f} MB): {', '.join(over)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
