"""The small PyTorch conveniences on a Tensor behave as PyTorch's: tolist, item, numel,
device, len, f"{loss:.4f}" on a 0-d tensor, a 0-d integer tensor as a Python index,
iteration over the first axis (in the graph: gradients flow back through it), item
assignment into a tensor that needs no grad, and no_grad as a block and as a decorator."""
from pathlib import Path

import numpy as np
import pytest

import tensorgrad as tg

from .torch_compare import DELIBERATE_DIFFERENCES, compare, torch

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("data", [[[1.5, 2.0], [3.0, -4.25]], 2.5, [1, 2, 3], [True, False], [[]]], ids=repr)
def test_tolist_item_numel_len_match_torch(data):
    ours, theirs = tg.tensor(data), torch.tensor(data)
    assert ours.tolist() == theirs.tolist()
    assert ours.numel() == theirs.numel() and ours.ndim == theirs.ndim and ours.shape == tuple(theirs.shape)
    if ours.ndim:
        assert len(ours) == len(theirs)
    else:
        assert ours.item() == theirs.item() and type(ours.item()) is type(theirs.item())


def test_device_is_the_cpu():
    assert tg.zeros(2).device == "cpu" == str(torch.zeros(2).device)


@pytest.mark.parametrize("spec", [".4f", ".2e", "8.3f", "g"])
def test_a_0d_tensor_formats_as_its_number(spec):
    value = 1.2345678
    ours, theirs = tg.tensor(value, dtype=tg.float64), torch.tensor(value, dtype=torch.float64)
    assert format(ours, spec) == format(theirs, spec) == format(value, spec)
    assert f"{tg.tensor(3):d}" == "3" == f"{torch.tensor(3):d}"


def test_a_0d_integer_tensor_is_a_python_index():
    data = list(range(20))
    i = tg.tensor(4)
    assert data[i:i + 8] == data[4:12] and data[i] == 4 and list(range(tg.tensor(3))) == [0, 1, 2]
    assert np.arange(10)[tg.tensor(7)] == 7


def test_iteration_gives_the_rows_and_gradients_flow_back():
    x = np.arange(6.0).reshape(3, 2)
    compare(lambda x: tg.stack([row * (i + 1) for i, row in enumerate(x)]),
            lambda x: torch.stack([row * (i + 1) for i, row in enumerate(x)]), x)
    assert [r.shape for r in tg.zeros(2, 3)] == [tuple(r.shape) for r in torch.zeros(2, 3)]


def test_item_assignment_as_torch():
    ours, theirs = tg.zeros(3, 4), torch.zeros(3, 4)
    for index, value in [((0, 1), 2.5), (slice(1, None), 7.0), ((Ellipsis, -1), -1.0)]:
        ours[index] = value
        theirs[index] = value
    ours[tg.tensor(2)] = tg.tensor([1.0, 2.0, 3.0, 4.0])
    theirs[torch.tensor(2)] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(ours.data, theirs.numpy())


def test_no_grad_as_a_block_and_as_a_decorator():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.no_grad():
        assert not (x * 2).requires_grad

    @tg.no_grad()
    def doubled(t):
        return t * 2
    assert not doubled(x).requires_grad and (x * 2).requires_grad


def test_item_assignment_is_refused_where_a_gradient_flows_through():
    """No version counters here (PyTorch checks writes at backward with them): a write into an
    op's output, or into a leaf that requires grad outside no_grad(), is refused at once,
    naming the way out; under no_grad() a leaf can be written, as an init does."""
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="setitem: cannot write into a tensor that requires grad.*no_grad"):
        w[0] = 5.0
    y = w * 2
    with pytest.raises(RuntimeError, match="setitem: cannot write into the output of op 'mul'"):
        y[0] = 5.0
    with tg.no_grad():
        w[0] = 5.0
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [10.0, 4.0])


def test_every_deliberate_difference_has_its_row_in_the_engine_docs():
    """docs/engine.md's table "Where tensorgrad differs from PyTorch" names each entry's test."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "engine.md").read_text(encoding="utf-8")
    table = page.split("## Where tensorgrad differs from PyTorch", 1)[1]
    missing = [name for name in DELIBERATE_DIFFERENCES if f"`{name}`" not in table]
    assert not missing, f"docs/engine.md's table has no row for {missing}"
