"""Pieces shared by the demos, one job to a module, all importable from here:

    _report.py    how an experiment reports: its flags (--out, --quick), a table, the
                  conclusion, a text copy, a power law's exponent, its closing lines
    _figures.py   figures for slides: the slide's size and type, Korean text, save_figure,
                  and a drawing too long for a slide arranged from its parts
    _models.py    the character models a demo uses: trained on the spot, or read from disk

    from _common import parse_args, table, write_report, pyplot, save_figure, finish
"""
from _figures import (DPI, HANGUL, KOREAN_FONTS, SLIDE, SMALLEST, STYLE, arrange_drawings, pyplot, save_figure,
                      small_text, use_korean_font)
from _models import SubwordTokenizer, load_model, local_text, train_char_model
from _report import finish, parse_args, power_law_exponent, table, write_report

__all__ = ["DPI", "HANGUL", "KOREAN_FONTS", "SLIDE", "SMALLEST", "STYLE", "arrange_drawings", "pyplot", "save_figure",
           "small_text", "use_korean_font", "SubwordTokenizer", "load_model", "local_text", "train_char_model",
           "finish", "parse_args", "power_law_exponent", "table", "write_report"]
