"""Figures for slides: the demos' figures drawn at the size of a 16:9 slide, their text large
enough to read there (save_figure refuses smaller), Korean text drawn where a Korean font is at
hand, and a drawing too long for a slide arranged from its parts (arrange_drawings)."""
import importlib.util
import os
import re
import warnings


# Every figure is drawn at the size of a 16:9 slide, 13.33 x 7.5 inches, and saved at 144 dots
# per inch: 1920 x 1080 pixels, so a point on the figure is a point on the slide. No text
# on it may be smaller than SMALLEST points (save_figure refuses smaller).
SLIDE = (40 / 3, 7.5)
DPI = 144
SMALLEST = 12
STYLE = {"font.size": 14, "axes.titlesize": 15, "axes.labelsize": 14, "xtick.labelsize": 12,
         "ytick.labelsize": 12, "legend.fontsize": 12, "figure.titlesize": 16,
         "figure.figsize": SLIDE, "figure.constrained_layout.use": True}
HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")   # jamo, compatibility jamo, syllables
KOREAN_FONTS = ("NanumGothic", "Noto Sans CJK KR", "Malgun Gothic", "Apple SD Gothic Neo", "AppleGothic")


def pyplot(hangul=False):
    """matplotlib.pyplot on a file-only backend, in the slide style (STYLE), or None when
    matplotlib is not installed. hangul=True: the figure will carry Korean text; without a
    Korean font (use_korean_font) it says once what to install, instead of matplotlib's
    warning for every missing glyph, and the Hangul draws as empty boxes."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update(STYLE)
    if not use_korean_font(plt) and hangul:
        print('(no Korean font: the Hangul in the figure draws as empty boxes; `pip install ".[plots]"` '
              "installs one, koreanize-matplotlib's NanumGothic)")
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
    return plt


def use_korean_font(plt):
    """Draw Hangul if a Korean font is at hand; True if so. matplotlib's DejaVu Sans has no
    Hangul. The plots extra installs koreanize-matplotlib, which ships NanumGothic: we register
    that font file with matplotlib (without importing the package, which would also make
    NanumGothic the font of every figure, and which imports distutils, gone from Python 3.12);
    a Korean font the system already has serves as well. DejaVu Sans stays first and the
    Korean font is the fallback for the glyphs it lacks, so a figure without Korean looks the
    same either way."""
    from matplotlib import font_manager
    package = importlib.util.find_spec("koreanize_matplotlib")
    font = package and os.path.join(package.submodule_search_locations[0], "fonts", "NanumGothic.ttf")
    if font and os.path.exists(font):
        font_manager.fontManager.addfont(font)
    installed = {font.name for font in font_manager.fontManager.ttflist}
    korean = next((name for name in KOREAN_FONTS if name in installed), None)
    if korean:
        plt.rcParams["font.family"] = ["DejaVu Sans", korean]
    return korean is not None


def small_text(fig):
    """[(size in points on the slide, text)] of the figure's visible text smaller than
    SMALLEST once the figure is fitted onto a 16:9 slide (a smaller figure is scaled up)."""
    from matplotlib.text import Text
    scale = min(SLIDE[0] / fig.get_figwidth(), SLIDE[1] / fig.get_figheight())
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return sorted({(round(t.get_fontsize() * scale, 1), t.get_text()) for t in texts
                   if t.get_fontsize() * scale < SMALLEST - 0.05})


def save_figure(fig, out, name):
    """Write fig to <out>/<name>.png at DPI and close it. Returns the path. Refuses (ValueError)
    a figure with text too small to read on a slide."""
    small = small_text(fig)
    if small:
        raise ValueError(f"save_figure: {name}.png would have {len(small)} text(s) under {SMALLEST} pt on a "
                         f"1920 px wide slide, e.g. {small[:3]}: raise their fontsize")
    path = os.path.join(out, f"{name}.png")
    fig.savefig(path, dpi=DPI)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def arrange_drawings(parts, path, side_by_side=False, dpi=96):
    """A drawing too long for a slide, cut into parts: each part's PNG (as tg.render_graph
    wrote it) under its title, one under the other (or side by side), in one PNG at path,
    which is returned (None without matplotlib). The drawings keep their pixels (Graphviz
    draws 96 to the inch); a title's text is 20 pt at that scale, above the drawings' 16 pt."""
    plt = pyplot()
    if plt is None:
        return None
    images = [plt.imread(str(png)) for _, png in parts]
    title, gap = 50, 40 * side_by_side                      # pixels
    sizes = [(image.shape[1], image.shape[0] + title) for image in images]
    if side_by_side:
        width, height = sum(w for w, _ in sizes) + gap * (len(parts) - 1), max(h for _, h in sizes)
    else:
        width, height = max(w for w, _ in sizes), sum(h for _, h in sizes)
    fig = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout=None)
    left, top = 0, height                                   # the next part's top left corner
    for (text, _), image, (w, h) in zip(parts, images, sizes):
        fig.text((left + 10) / width, (top - title / 2) / height, text, fontsize=20, va="center")
        fig.figimage(image, xo=left, yo=top - h)           # pixel for pixel, from its lower left corner
        left, top = (left + w + gap, top) if side_by_side else (left, top - h)
    fig.savefig(path, dpi=dpi, facecolor="white")
    plt.close(fig)
    from PIL import Image   # matplotlib's own dependency: a 64-colour palette keeps the PNG small
    Image.open(path).convert("RGB").quantize(colors=64).save(path, optimize=True)
    return path
