"""The docs site builds with `mkdocs build --strict`: a broken link, a missing anchor, a page
missing from disk or left out of the nav fails it (mkdocs.yml's validation settings), and so
fails this test.

Without mkdocs and mkdocs-material (the docs extra: pip install ".[docs]") these tests skip
and say why; .ci/run installs the extra and sets TENSORGRAD_REQUIRE_DOCS=1, which turns that
skip into a failure. The site is written under tmp_path only."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def mkdocs():
    """A function that builds the site of a mkdocs.yml into a folder: (return code, output)."""
    for module, package in (("mkdocs", "mkdocs"), ("material", "mkdocs-material")):
        if importlib.util.find_spec(module) is None:
            why = f'{package} is not installed (pip install ".[docs]")'
            if os.environ.get("TENSORGRAD_REQUIRE_DOCS"):
                pytest.fail(f"TENSORGRAD_REQUIRE_DOCS is set, but {why}")
            pytest.skip(why)

    def build(config, site):
        done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                               "-d", str(site)], cwd=site.parent, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
        return done.returncode, done.stdout + done.stderr
    return build


def test_the_docs_site_builds_strict(mkdocs, tmp_path):
    status, output = mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert status == 0, output
    for page in (ROOT / "docs").glob("*.md"):
        html = tmp_path / "site" / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert html.exists(), f"{page.name} was not built"


BREAKAGES = {   # what is broken: (the page it goes in, the text, what the build says of it)
    "a link to a page that is not there": ("lab.md", "[gone](no-such-page.md)", "no-such-page.md"),
    "a link to a heading that is not there": ("lab.md", "[gone](engine.md#no-such-heading)", "#no-such-heading"),
    "a figure that is not there": ("lab.md", "![gone](figures/no-such-figure.png)", "figures/no-such-figure.png"),
    "a page left out of the nav": ("left-out.md", "# Left out", "left-out.md"),
}
MISSING_NAV_PAGE = "no-such-nav-page.md"   # and a nav entry whose page is missing


def test_a_broken_link_or_a_page_left_out_fails_the_build(mkdocs, tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert config.rstrip().splitlines()[-1].startswith("  - "), "mkdocs.yml should end with its nav"
    (tmp_path / "mkdocs.yml").write_text(config.rstrip() + f"\n  - Gone: {MISSING_NAV_PAGE}\n", encoding="utf-8")
    for page, text, _ in BREAKAGES.values():
        with open(tmp_path / "docs" / page, "a", encoding="utf-8") as file:
            file.write(f"\n{text}\n")
    status, output = mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert status != 0, f"the strict build passed a broken site\n{output}"
    warnings = [line for line in output.splitlines() if "WARNING" in line or line.startswith("  - ")]
    for breakage, (_, _, named) in BREAKAGES.items():
        assert any(named in line for line in warnings), f"{breakage}: no warning names it\n{output}"
    assert any(MISSING_NAV_PAGE in line for line in warnings), f"a nav entry's missing page: no warning\n{output}"
