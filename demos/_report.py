"""How each attention-article experiment (demos/attention_*.py) reports what it measured: its
command line (--out, --quick), a short table on stdout, the conclusion the numbers support, a
text copy of both, the exponent of a power law fitted to its numbers, and its closing lines."""
import argparse
import os
import time

import numpy as np


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


def finish(paths, started):
    """The closing lines: where the files are and how long it took."""
    for path in paths:
        if path:
            print(f"wrote {path}")
    if len([p for p in paths if p]) == 1:
        print("(matplotlib is not installed: no figure; `pip install matplotlib` to draw one)")
    print(f"done in {time.perf_counter() - started:.1f} s")


def power_law_exponent(x, y):
    """The slope of log y against log x by least squares: y ~ c x^slope."""
    slope, _ = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(slope)
