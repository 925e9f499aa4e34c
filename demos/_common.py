"""Pieces shared by the demos: the attention-article experiments' reports (demos/attention_*.py),
figures for slides for them and for the drawings (arrange_drawings), and loading a model.

Each experiment measures one claim and reports it the same way: a short table on stdout, the
conclusion the numbers support, a text copy of the table, and a PNG figure when
matplotlib is installed. The two demos that need a trained character model train a small
one here, on text every Python installation has: the docstrings of its standard library,
or read one with load_model: a train_chargpt.py checkpoint, or a Hugging Face GPT-2 folder
(ours exported, or GPT-2's own).
"""
import argparse
import importlib.util
import os
import re
import time
import warnings

import numpy as np


# ---- command line and output ---------------------------------------------------------------
def parse_args(name, description, add_arguments=None):
    """`--out DIR` (default out/<name>/) and `--quick` (a tiny configuration for smoke tests)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=os.path.join("out", name),
                        help=f"folder for the figure and the table (default: out/{name}/)")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny configuration that runs in seconds (for the smoke test)")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.quick:
        print("--quick: a tiny configuration that checks the demo runs; its numbers are not evidence")
    return args


def table(headers, rows):
    """A plain-text table: one header line, a rule, then the rows (cells already strings)."""
    cells = [list(map(str, headers))] + [list(map(str, row)) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def write_report(out, name, title, text, conclusion):
    """Print the table and the conclusion, and save both to <out>/<name>.txt. Returns the path."""
    report = f"{title}\n\n{text}\n\nConclusion: {conclusion}\n"
    print(f"\n{text}\n\nConclusion: {conclusion}")
    path = os.path.join(out, f"{name}.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write(report)
    return path


# ---- figures for slides -------------------------------------------------------------------
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


def finish(paths, started):
    """The closing lines: where the files are and how long it took."""
    for path in paths:
        if path:
            print(f"wrote {path}")
    if len([p for p in paths if p]) == 1:
        print("(matplotlib is not installed: no figure; `pip install matplotlib` to draw one)")
    print(f"done in {time.perf_counter() - started:.1f} s")


# ---- numbers ---------------------------------------------------------------------------------
def power_law_exponent(x, y):
    """The slope of log y against log x by least squares: y ~ c x^slope."""
    slope, _ = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(slope)


# ---- a small character model, trained on the spot ----------------------------------------------
def local_text(source=None):
    """(text, description): `source` as nn.data.load_corpus reads it (a file's path, or
    "shakespeare"), else the docstrings of this Python's standard library
    (nn.data.fallback_corpus: every installation has them, nothing to download)."""
    from nn import data
    if source:
        return data.load_corpus(source)
    text = data.fallback_corpus()
    return text, f"the docstrings of this Python's standard library ({len(text):,} characters)"


def train_char_model(corpus, steps, block_size, batch_size, n_layer, n_head, n_embd, pos="learned",
                     model_block_size=None, lr=2e-3, seed=0, label="training"):
    """A GPT trained by train.fit (AdamW, warmup, cosine decay, clipping) on windows of
    `block_size` characters of corpus.train (an nn.data.CharData). model_block_size, when
    larger, gives the model a longer position table than it ever trains on. Returns (model,
    final loss)."""
    import nn
    import train
    nn.manual_seed(seed)
    model = nn.GPT(corpus.tokenizer.vocab_size, model_block_size or block_size, n_layer, n_head, n_embd,
                   pos=pos)
    return train.fit(model, corpus.train, steps, block_size, batch_size, lr=lr, seed=seed, label=label)


# ---- a trained model from disk ----------------------------------------------------------------
def load_model(path):
    """(model, tokenizer, meta) from a checkpoint of demos/train_chargpt.py, or from a Hugging
    Face GPT-2 folder (nn.GPT.from_gpt2; meta is empty). A folder's tokenizer is the character
    vocabulary nn.export.to_gpt2 writes, or else its tokenizer.json read by the `tokenizers`
    library (GPT-2's byte-level BPE)."""
    import nn
    import train
    if not os.path.isdir(path):
        return train.run.load_checkpoint(path)
    model = nn.GPT.from_gpt2(path)
    nn.checkpoint.check_logits(path, model)
    tokenizer = nn.export.char_tokenizer(path) or SubwordTokenizer(os.path.join(path, nn.export.TOKENIZER))
    if tokenizer.vocab_size > model.config["vocab_size"]:   # fewer is fine: a vocabulary padded, as nanoGPT pads
        raise nn.CheckpointError(f"{path}: its tokenizer has {tokenizer.vocab_size} tokens but the model's "
                                 f"vocabulary is {model.config['vocab_size']}: the tokenizer is another model's")
    return model, tokenizer, {}


class SubwordTokenizer:
    """A tokenizer.json of the `tokenizers` library with CharTokenizer's encode and decode.
    vocab_size counts to its largest id (an id past the model's vocabulary must show there),
    and the file is read as every file here is (a regular file, at most MAX_JSON_BYTES)."""

    def __init__(self, path):
        import nn
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SystemExit(f"{path}: reading this tokenizer needs the tokenizers library: pip install tokenizers")
        if not os.path.lexists(path):
            raise FileNotFoundError(f"{os.path.dirname(path)} has no {os.path.basename(path)}: no tokenizer")
        with nn.atomic.open_regular(path) as file:
            text = file.read(nn.tensorfile.MAX_JSON_BYTES + 1)
        if len(text) > nn.tensorfile.MAX_JSON_BYTES:
            raise nn.CheckpointError(f"{path}: more than {nn.tensorfile.MAX_JSON_BYTES:,} bytes: larger than any "
                                     "tokenizer")
        try:
            self._tokenizer = Tokenizer.from_str(text.decode("utf-8"))
        except Exception as error:   # the library raises a bare Exception for a file it cannot parse
            raise nn.CheckpointError(f"{path}: the tokenizers library cannot read it: {error}") from error
        self.vocab_size = 1 + max(self._tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)

    def encode(self, text):
        return np.array(self._tokenizer.encode(text).ids, dtype=np.int64)

    def decode(self, ids):
        return self._tokenizer.decode([int(i) for i in ids])
