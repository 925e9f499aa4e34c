"""Figures a teacher can put on a slide, and Hangul in figures and drawings.

README's figures (docs/figures/) are wide enough for a 1920 px slide and shaped for one;
the demos' figures refuse text too small to read there (demos/_common.py: save_figure);
the heads figure names what a head does from its weights; Korean text draws with the plots
extra (it brings a Korean font) and, without one, the demo says so once instead of warning for
every glyph."""
import os
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tensorgrad as tg

ROOT = Path(__file__).resolve().parents[1]
FIGURES = sorted((ROOT / "docs" / "figures").glob("*.png"))
sys.path.insert(0, str(ROOT / "demos"))


def png_size(path):
    """(width, height) from a PNG's header: the IHDR chunk right after the 8-byte signature."""
    header = path.read_bytes()[:24]
    assert header.startswith(b"\x89PNG\r\n\x1a\n") and header[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def python(script, tmp_path):
    """Run a python snippet from the repository root, as the demos run, and return it done."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


def test_readme_shows_every_figure_in_docs_figures():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert FIGURES and all(f"docs/figures/{path.name}" in readme for path in FIGURES)


@pytest.mark.parametrize("path", FIGURES, ids=lambda path: path.name)
def test_a_readme_figure_fits_a_slide(path):
    width, height = png_size(path)
    assert width >= 1200, f"{path.name} is {width} px wide: a 1920 px slide would blow it up blurred"
    assert 4 / 3 <= width / height <= 2.4, (f"{path.name} is {width} x {height} px ({width / height:.2f}:1): "
                                            "a slide wants between 4:3 and 2.4:1")


# ---- the demos' figures ---------------------------------------------------------------------
def test_a_figure_with_text_too_small_for_a_slide_is_refused(tmp_path):
    pytest.importorskip("matplotlib")
    import _common
    from matplotlib.figure import Figure
    fig = Figure(figsize=_common.SLIDE)
    fig.add_subplot().set_title("fine", fontsize=14)
    assert _common.small_text(fig) == []
    fig.text(0.5, 0.5, "tiny", fontsize=9)
    assert _common.small_text(fig) == [(9.0, "tiny")]
    with pytest.raises(ValueError, match=r"under 12 pt .*'tiny'"):
        _common.save_figure(fig, str(tmp_path), "small")
    assert not (tmp_path / "small.png").exists()
    half = Figure(figsize=(_common.SLIDE[0] / 2, _common.SLIDE[1] / 2))   # shown twice as large on a slide
    half.text(0.5, 0.5, "fine at twice the size", fontsize=7)
    assert _common.small_text(half) == []


def test_the_heads_figure_names_what_a_head_does_from_its_weights():
    from attention_heads import profile
    sentence = "the cat sat on the mat"
    T = len(sentence)

    def rows(weights):   # each row i a distribution over 0..i
        w = np.tril(weights) + 1e-3 * np.tril(np.ones((T, T)))
        return w / w.sum(1, keepdims=True)

    previous = rows(np.eye(T, k=-1))
    first = rows(np.tile(np.eye(T)[0], (T, 1)))
    spaces = rows(np.tile([c == " " for c in sentence], (T, 1)).astype(float))
    spread = rows(np.ones((T, T)))
    assert profile(previous, sentence)["pattern"] == "previous character"
    assert profile(previous, sentence)["pattern_weight"] > 0.9
    assert profile(first, sentence)["pattern"] == "first character"
    assert profile(spaces, sentence)["pattern"] == "spaces"
    assert profile(spread, sentence)["pattern"] == "far"        # no place holds over half its weight
    assert profile(spread, sentence)["pattern_weight"] is None


def context_demo(tmp_path, *flags, without_ko=False):
    """demos/attention_context.py run as a user runs it, writing to tmp_path; without_ko: as
    if koreanize-matplotlib were not installed (find_spec answers None for it)."""
    hide = ("import importlib.util; find = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'koreanize_matplotlib' else find(name, *a)\n")
    argv = ["demos/attention_context.py", *flags, "--out", str(tmp_path)]
    run = (f"import runpy, sys; sys.argv = {argv!r}\n"
           "sys.path.insert(0, 'demos'); runpy.run_path('demos/attention_context.py', run_name='__main__')\n")
    return python((hide if without_ko else "") + run, tmp_path)


# ---- Hangul ---------------------------------------------------------------------------------
def test_the_plots_extra_brings_the_korean_font_and_ko_stays_its_alias():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11 on
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(requirement.startswith("koreanize-matplotlib") for requirement in extras["plots"]), extras["plots"]
    assert extras["ko"] == ["tensorgrad[plots]"]


def rendered(text, family):
    """The dark pixels (a boolean array) of `text` drawn alone at 48 pt by Agg in `family` (a
    list of font names: matplotlib draws each character in the first that has it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(1, 1), dpi=100)
    fig.text(0.5, 0.5, text, fontsize=48, family=family, ha="center", va="center")
    canvas = FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "Glyph ... missing from font(s)": the box is what we look for
        canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., 0] < 128


def test_with_the_plots_extra_hangul_draws_as_glyphs_not_the_missing_glyph_box():
    """A missing Hangul glyph draws as one box for every syllable (.notdef, or since matplotlib
    3.10 the Last Resort font's box of the Hangul block), so two different syllables drawn
    alike are a box, and drawn differently are glyphs."""
    pytest.importorskip("koreanize_matplotlib")
    import matplotlib
    from matplotlib import font_manager
    import _common
    assert (rendered("배", ["DejaVu Sans"]) == rendered("가", ["DejaVu Sans"])).all()   # the box: no Hangul there
    with matplotlib.rc_context():   # use_korean_font sets rcParams: leave them as found
        import matplotlib.pyplot as plt
        assert _common.use_korean_font(plt), "no Korean font found, though koreanize-matplotlib is installed"
        family = list(plt.rcParams["font.family"])
    boat, other = rendered("배", family), rendered("가", family)
    assert boat.any() and not (boat == other).all(), f"Hangul in {family} draws as the missing-glyph box"
    fonts = [font_manager.get_font(font_manager.findfont(font_manager.FontProperties(family=name),
                                                         fallback_to_default=False)) for name in family]
    assert [font.family_name for font in fonts if font.get_char_index(ord("배"))] == [family[-1]]


def test_with_the_plots_extra_a_figure_draws_hangul_without_missing_glyphs(tmp_path):
    pytest.importorskip("koreanize_matplotlib")
    done = python(
        "import sys, warnings; sys.path.insert(0, 'demos'); import _common\n"
        "plt = _common.pyplot(hangul=True)\n"
        "fig, ax = plt.subplots()\n"
        "ax.set_title('나는 배를 탔다 / 나는 배가 아프다'); ax.set_xticks([0, 1], ['배', 'bank'])\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    fig.savefig({str(tmp_path / 'hangul.png')!r})\n"
        "print('warnings:', [str(w.message) for w in caught])\n", tmp_path)
    assert "warnings: []" in done.stdout and "no Korean font" not in done.stdout, done.stdout
    assert "Glyph" not in done.stderr


def test_without_a_korean_font_a_demo_says_once_what_to_install(tmp_path):
    pytest.importorskip("matplotlib")
    done = context_demo(tmp_path, "--quick", without_ko=True)
    assert done.stdout.count('pip install ".[plots]"') == 1
    assert "Glyph" not in done.stderr and (tmp_path / "attention_context.png").exists()


def test_a_drawing_with_hangul_names_fonts_that_have_it():
    boat = tg.tensor([1.0, 2.0], requires_grad=True, label="배")
    latin = tg.tensor([1.0, 2.0], requires_grad=True, label="bank")
    korean, english = tg.draw_graph((boat * 2).sum()).source, tg.draw_graph((latin * 2).sum()).source
    assert 'fontname="Arial, NanumGothic' in korean and "Noto Sans CJK KR" in korean
    # Latin text keeps Arial alone: graphviz-pure measures a list of fonts with narrower widths
    assert "fontname=Arial" in english and "NanumGothic" not in english
