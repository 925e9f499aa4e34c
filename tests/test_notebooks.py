"""The notebooks (notebooks/**/*.ipynb) run top to bottom under nbclient (any cell error fails
the test), and are committed without outputs, so what a reader sees is what the code makes
today. Each is checked for what it must show (MUST_SHOW): the lab's inline steppers and
drawings; the lecture's timing guide, its sections in the article's order, a "predict, then
run" question before the cell that answers it in every section, and a figure in every section,
in English and in Korean, the Korean lecture cell by cell the English one."""
import json
import os
import re
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("**/*.ipynb"))

# the lecture: sections "## 0." to "## 8.", each in the timing table at the top, 90 minutes in all,
# in the article's order: a word of each section's heading (order), softmax (§2) before √d (§3),
# which explains itself with softmax's saturation, and §8's limits with scale among them
LECTURE = dict(steppers=0, svg=False, sections=list(range(9)), minutes=90)
MUST_SHOW = {
    # the neuron's backward and attention's, to step through inline; the graphs drawn as SVG
    "backprop_to_attention.ipynb": dict(steppers=2, svg=True, sections=None, hangul=False),
    "attention_lecture.ipynb": dict(LECTURE, prompt="**Predict, then run.**", minutes_column="minutes",
                                    hangul=False, order={2: "softmax", 3: "√d", 8: "scale"}),
    "ko/attention_lecture.ipynb": dict(LECTURE, prompt="**예측한 뒤 실행.**", minutes_column="분", hangul=True,
                                       order={2: "softmax", 3: "√d", 8: "규모"}),
}
LECTURES = [path for path in NOTEBOOKS if MUST_SHOW.get(path.relative_to(FOLDER).as_posix(), {}).get("sections")]


def must_show(path):
    return MUST_SHOW[path.relative_to(FOLDER).as_posix()]


def source(cell):
    return "".join(cell["source"])


def sections(cells):
    """{number: the cells from its "## <number>." heading to the next "## " heading}."""
    found, current = {}, None
    for cell in cells:
        heading = re.match(r"## (\d+)\.", source(cell)) if cell["cell_type"] == "markdown" else None
        if heading:
            current = found.setdefault(int(heading.group(1)), [])
        elif cell["cell_type"] == "markdown" and source(cell).startswith("## "):
            current = None
        if current is not None:
            current.append(cell)
    return found


def test_every_notebook_says_what_it_must_show():
    assert {path.relative_to(FOLDER).as_posix() for path in NOTEBOOKS} == set(MUST_SHOW)
    assert len(LECTURES) == 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.relative_to(FOLDER).as_posix())
def test_a_notebook_is_committed_without_outputs(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for number, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"cell {number} has outputs"


@pytest.mark.parametrize("path", LECTURES, ids=lambda path: path.relative_to(FOLDER).as_posix())
def test_a_lecture_opens_with_its_timing_guide(path):
    """A markdown table in the first cell: a row per section (its number first), the minutes
    in the column named minutes_column, adding up to the class's length."""
    show = must_show(path)
    lines = [line for line in source(json.loads(path.read_text(encoding="utf-8"))["cells"][0]).splitlines()
             if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    rows = [row for row in rows if row[0].isdigit()]
    minutes = [int(row[header.index(show["minutes_column"])]) for row in rows]
    assert [int(row[0]) for row in rows] == show["sections"], rows
    assert sum(minutes) == show["minutes"], minutes
    assert all(row[-1] for row in rows), "a section without its question in the timing table"


@pytest.mark.parametrize("path", LECTURES, ids=lambda path: path.relative_to(FOLDER).as_posix())
def test_every_section_asks_before_it_runs(path):
    """Each section has a "predict, then run" question, and each question is followed at once
    by the code cell that answers it."""
    show = must_show(path)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = sections(cells)
    assert sorted(found) == show["sections"]
    for number, section in found.items():
        prompts = [i for i, cell in enumerate(section) if show["prompt"] in source(cell)]
        assert prompts, f"section {number} asks no question ({show['prompt']})"
        for i in prompts:
            assert i + 1 < len(section) and section[i + 1]["cell_type"] == "code", \
                f"section {number}: the question {source(section[i])[:60]!r} is not followed by the cell that answers it"


@pytest.mark.parametrize("path", LECTURES, ids=lambda path: path.relative_to(FOLDER).as_posix())
def test_a_lecture_goes_in_the_articles_order(path):
    show = must_show(path)
    found = sections(json.loads(path.read_text(encoding="utf-8"))["cells"])
    for number, word in show["order"].items():
        heading = source(found[number][0]).splitlines()[0]
        assert word in heading.lower(), f"section {number} is {heading!r}: the article's order has {word} there"


def test_the_korean_lecture_is_the_english_one_cell_by_cell():
    """The same cells in the same order and sections: each code cell of a section draws as many
    figures, checks as many claims and prints as often as its English twin (only its words are
    Korean; the setup cell before §0 also finds a Korean font)."""
    english, korean = (json.loads((FOLDER / name).read_text(encoding="utf-8"))["cells"]
                       for name in ("attention_lecture.ipynb", "ko/attention_lecture.ipynb"))
    assert [cell["cell_type"] for cell in english] == [cell["cell_type"] for cell in korean]
    assert {n: len(cells) for n, cells in sections(english).items()} == \
        {n: len(cells) for n, cells in sections(korean).items()}
    for a, b in zip(sum(sections(english).values(), []), sum(sections(korean).values(), [])):
        if a["cell_type"] == "code":
            for word in ("plt.show()", "assert ", "print("):
                assert source(a).count(word) == source(b).count(word), f"cell {a['id']}: {word} differs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.relative_to(FOLDER).as_posix())
def test_a_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")   # the notebooks draw their pictures with it
    show = must_show(path)
    if show["hangul"]:
        pytest.importorskip("koreanize_matplotlib")   # the Korean font its figures' Hangul needs
    # their matrices are small: one BLAS thread each, so a busy machine's cores are not fought over
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    # a checkout on the PYTHONPATH, as the demos' tests run them: the lectures import demos/ from it
    # even when the project is installed as a copy (pip install .) and the kernel starts in tmp_path
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(FOLDER.parent), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()   # raises CellExecutionError, naming the cell, on any error
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert any("image/png" in output.get("data", {}) for output in outputs)
    assert any("image/svg+xml" in output.get("data", {}) for output in outputs) == show["svg"]
    steppers = [output for output in outputs if "window.explorer" in output.get("data", {}).get("text/html", "")]
    assert len(steppers) == show["steppers"]
    streams = "".join(output.get("text", "") for output in outputs if output.get("output_type") == "stream")
    assert "missing from font" not in streams, "a figure drew a glyph its font lacks (an empty box)"
    if show["sections"]:
        for number, section in sections(notebook.cells).items():
            assert any("image/png" in output.get("data", {}) for cell in section if cell.cell_type == "code"
                       for output in cell.outputs), f"section {number} shows no figure"
