"""The gradient health log's file (out/chargpt.health.csv): one row per measured step and
parameter or block, written whole (atomically) and read back as input on --resume."""
import csv
import io

from nn.atomic import open_regular, write_atomically

COLUMNS = ("step", "name", "grad_norm", "update_ratio", "residual_std", "gelu_tail_fraction")


def write_csv(rows, path):
    """The rows as CSV: a header of COLUMNS, numbers to 6 significant digits, an empty
    cell where a column does not apply."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(row[c]) for c in COLUMNS])
    write_atomically(path, lambda file: file.write(text.getvalue().encode()))


def _cell(value):
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def read_csv(path, max_bytes=None):
    """The rows of a CSV that HealthLog wrote (numbers as floats, the step an int), read as
    input: a regular file (nn.atomic.open_regular: a FIFO is refused, without waiting) of at
    most max_bytes bytes (None: any size), UTF-8 text of COLUMNS. Anything else is a ValueError
    naming the file (its text cut short: a damaged cell can be megabytes)."""
    with open_regular(path) as file:
        data = file.read(-1 if max_bytes is None else max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{path}: more than {max_bytes:,} bytes, more than a gradient health log of a run here "
                         "can be")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: the gradient health log is damaged (byte {error.start} is not UTF-8)") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        columns = tuple(reader.fieldnames or ())
        rows = [_row(row) for row in reader] if columns == COLUMNS else None
    except (ValueError, csv.Error) as error:   # a row cut short, a cell that is not a number, one too large
        line = reader.line_num + isinstance(error, csv.Error)   # csv counts a line once it has read it whole
        raise ValueError(f"{path}: line {line} of the gradient health log is damaged ({str(error)[:200]})") from None
    if rows is None:
        raise ValueError(f"{path}: not a gradient health log: its columns are {str(list(columns))[:200]}, expected "
                         f"{list(COLUMNS)}")
    return rows


def _row(row):
    """One row of the log, its numbers read (ValueError unless each cell is one, where it must be)."""
    if None in row or None in row.values():   # more cells than columns, or fewer
        raise ValueError(f"{len(COLUMNS)} cells expected")
    return {"step": int(row["step"]), "name": row["name"],
            **{c: float(row[c]) if row[c] else None for c in COLUMNS[2:]}}
