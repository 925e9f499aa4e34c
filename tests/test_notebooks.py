"""The lab's notebooks run top to bottom under nbclient (any cell error fails the test), and
are committed without outputs, so what a reader sees is what the code makes today."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert [path.name for path in NOTEBOOKS] == ["backprop_to_attention.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_a_notebook_is_committed_without_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    for number, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"cell {number} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_a_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")   # the notebook draws its pictures with it
    # its matrices are small: one BLAS thread each, so a busy machine's cores are not fought over
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()   # raises CellExecutionError, naming the cell, on any error
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert any("image/svg+xml" in output.get("data", {}) for output in outputs)   # the graphs were drawn
    assert any("image/png" in output.get("data", {}) for output in outputs)       # and the heads
    steppers = [output for output in outputs if "window.explorer" in output.get("data", {}).get("text/html", "")]
    assert len(steppers) == 2   # the neuron's backward and attention's, to step through inline
