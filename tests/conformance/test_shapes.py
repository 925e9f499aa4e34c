"""Ops that move values without computing new ones (reshape, view, transpose, permute, .T,
swapaxes, squeeze, unsqueeze, expand, flatten, indexing, cat, stack, split, gather, tril,
triu, masked_fill) put every value where PyTorch does and send every gradient back to where
it came from (summed where a value was used twice: expand, repeated indices, gather), on
any shape from 0-d to 4-d, empty axes included, negative axes and PyTorch's keyword names,
and on tensors of any dtype (float, integer, bool: the dtype kept)."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st
from hypothesis.extra import numpy as hnp

import tensorgrad as tg

from .torch_compare import DTYPES_ALL, FLOATS, arrays, compare, edge_values, shapes, torch

pytestmark = pytest.mark.torch


@st.composite
def any_array(draw, shape_strategy=None, dtypes=DTYPES_ALL):
    """An array of any dtype (floats get gradients, the others are moved as they are)."""
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    return draw(arrays(dtype, shapes() if shape_strategy is None else shape_strategy), label="x")


@st.composite
def same_size_shape(draw, shape):
    """Another shape with as many elements: neighbouring axes merged, axes of 1 added, and
    (when that is unambiguous: no zero-size tensor) one axis left to -1."""
    sides = list(shape)
    while len(sides) > 1 and draw(st.booleans()):
        i = draw(st.integers(0, len(sides) - 2))
        sides[i:i + 2] = [sides[i] * sides[i + 1]]
    for _ in range(draw(st.integers(0, 2))):
        sides.insert(draw(st.integers(0, len(sides))), 1)
    if sides and 0 not in shape and draw(st.booleans()):
        sides[draw(st.integers(0, len(sides) - 1))] = -1
    return tuple(sides)


@pytest.mark.parametrize("method", ["reshape", "view"])
@given(data=st.data())
def test_reshape_and_view_match_torch(method, data):
    x = data.draw(any_array())
    new_shape = data.draw(same_size_shape(x.shape), label="new shape")
    as_tuple = data.draw(st.booleans(), label="shape as one tuple") or new_shape == ()
    args = (new_shape,) if as_tuple else new_shape
    compare(lambda x: getattr(x, method)(*args), lambda x: getattr(x, method)(*args), x)


@given(data=st.data())
def test_reshape_function_form(data):
    x = data.draw(any_array())
    new_shape = data.draw(same_size_shape(x.shape), label="new shape")
    compare(lambda x: tg.reshape(x, new_shape), lambda x: torch.reshape(x, new_shape), x)


@st.composite
def permutation(draw, ndim):
    """A permutation of the axes, each written as itself or as its negative alias."""
    order = draw(st.permutations(range(ndim)))
    return tuple(a - ndim if draw(st.booleans()) else a for a in order)


@given(data=st.data())
def test_transpose_permute_match_torch_permute(data):
    """transpose(*axes) is numpy's (a permutation, as PyTorch's permute): see
    DELIBERATE_DIFFERENCES["transpose_takes_a_permutation"]."""
    x = data.draw(any_array())
    axes = data.draw(permutation(x.ndim), label="axes")
    compare(lambda x: x.transpose(axes), lambda x: x.permute(axes), x)
    compare(lambda x: tg.permute(x, axes), lambda x: torch.permute(x, axes), x)
    if axes:   # spelled out, one argument per axis
        compare(lambda x: x.transpose(*axes), lambda x: x.permute(*axes), x)
        compare(lambda x: x.permute(*axes), lambda x: x.permute(*axes), x)


@given(data=st.data())
def test_transpose_without_axes_and_T_reverse_the_axes(data):
    x = data.draw(any_array())
    reverse = tuple(reversed(range(x.ndim)))
    compare(lambda x: x.transpose(), lambda x: x.permute(reverse), x)
    compare(lambda x: x.T, lambda x: x.permute(reverse), x)
    if x.ndim <= 2:   # PyTorch's .T is for matrices
        compare(lambda x: x.T, lambda x: x.T, x)


@given(data=st.data())
def test_swapaxes_matches_torch(data):
    x = data.draw(any_array(shapes(min_dims=1)))
    a, b = data.draw(st.tuples(*[st.integers(-x.ndim, x.ndim - 1)] * 2), label="axes")
    compare(lambda x: x.swapaxes(a, b), lambda x: x.swapaxes(a, b), x)
    compare(lambda x: tg.swapaxes(x, a, b), lambda x: torch.swapaxes(x, a, b), x)


@given(data=st.data())
def test_squeeze_matches_torch(data):
    x = data.draw(any_array(shapes(max_side=2)))
    ones = [a for a, n in enumerate(x.shape) if n == 1]
    compare(lambda x: x.squeeze(), lambda x: x.squeeze(), x)
    compare(lambda x: tg.squeeze(x), lambda x: torch.squeeze(x), x)
    if ones:
        axis = data.draw(st.sampled_from(ones), label="axis")
        negative = axis - x.ndim
        compare(lambda x: x.squeeze(axis), lambda x: x.squeeze(axis), x)
        compare(lambda x: x.squeeze(dim=negative), lambda x: x.squeeze(dim=negative), x)
        some = tuple(data.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True), label="axes"))
        compare(lambda x: x.squeeze(axis=some), lambda x: x.squeeze(some), x)


@given(data=st.data())
def test_unsqueeze_matches_torch(data):
    x = data.draw(any_array())
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim), label="axis")
    compare(lambda x: x.unsqueeze(axis), lambda x: x.unsqueeze(axis), x)
    compare(lambda x: x.unsqueeze(dim=axis), lambda x: x.unsqueeze(dim=axis), x)
    compare(lambda x: tg.unsqueeze(x, axis), lambda x: torch.unsqueeze(x, axis), x)


@st.composite
def expanded_sizes(draw, shape):
    """Sizes x can be expanded to: new leading axes, axes of 1 stretched, -1 for 'keep'."""
    leading = draw(st.lists(st.integers(0, 3), max_size=2))
    sizes = [draw(st.sampled_from([n, -1] + ([0, 2, 3] if n == 1 else []))) for n in shape]
    return tuple(leading) + tuple(sizes)


@given(data=st.data())
def test_expand_matches_torch(data):
    """Each value is used by every copy: its gradient is their sum."""
    x = data.draw(any_array(shapes(max_dims=3, max_side=3)))
    sizes = data.draw(expanded_sizes(x.shape), label="sizes")
    compare(lambda x: x.expand(sizes), lambda x: x.expand(sizes), x)
    if sizes:   # spelled out, one argument per axis
        compare(lambda x: x.expand(*sizes), lambda x: x.expand(*sizes), x)


@given(data=st.data())
def test_flatten_matches_torch(data):
    x = data.draw(any_array())
    axes = st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)
    start, end = data.draw(axes, label="start_dim"), data.draw(axes, label="end_dim")
    assume(x.ndim == 0 or start % x.ndim <= end % x.ndim)
    compare(lambda x: x.flatten(), lambda x: x.flatten(), x)
    compare(lambda x: x.flatten(start, end), lambda x: x.flatten(start, end), x)
    compare(lambda x: x.flatten(start_dim=start, end_dim=end), lambda x: x.flatten(start_dim=start, end_dim=end), x)
    compare(lambda x: tg.flatten(x, start, end), lambda x: torch.flatten(x, start, end), x)


def test_contiguous_is_the_tensor_itself():
    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    assert x.contiguous() is x
    assert x.T.contiguous().shape == (3, 2)


# ---- indexing -----------------------------------------------------------------------------
def no_negative_steps(index):
    """PyTorch refuses slices with negative steps (DELIBERATE_DIFFERENCES["negative_step_slices_work"])."""
    parts = index if isinstance(index, tuple) else (index,)
    return not any(isinstance(p, slice) and p.step is not None and p.step < 0 for p in parts)


@given(data=st.data())
def test_basic_indexing_matches_torch(data):
    x = data.draw(any_array(shapes(max_side=4)))
    index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True).filter(no_negative_steps),
                      label="index")
    compare(lambda x: x[index], lambda x: x[index], x)


@given(data=st.data())
def test_integer_array_indexing_matches_torch_and_accumulates_repeats(data):
    x = data.draw(any_array(shapes(min_dims=1, min_side=1)))
    index = data.draw(hnp.integer_array_indices(x.shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2)),
                      label="index")
    as_tensors = data.draw(st.booleans(), label="indices as tensors")
    ours_index = tuple(tg.tensor(i) for i in index) if as_tensors else index
    compare(lambda x: x[ours_index], lambda x: x[tuple(torch.tensor(i) for i in index)], x)


@given(data=st.data())
def test_an_index_array_beside_slices_matches_torch(data):
    x = data.draw(any_array(shapes(min_dims=2, min_side=1, max_side=3)))
    index_shapes = hnp.array_shapes(min_dims=1, max_dims=2, max_side=3)
    rows = data.draw(hnp.arrays(np.int64, index_shapes, elements=st.integers(-x.shape[1], x.shape[1] - 1)),
                     label="index on axis 1")
    compare(lambda x: x[:, rows], lambda x: x[:, torch.tensor(rows)], x)
    last = data.draw(hnp.arrays(np.int64, index_shapes, elements=st.integers(-x.shape[-1], x.shape[-1] - 1)),
                     label="index on the last axis")
    compare(lambda x: x[..., last], lambda x: x[..., torch.tensor(last)], x)


@given(data=st.data())
def test_boolean_mask_indexing_matches_torch(data):
    x = data.draw(any_array(shapes(min_dims=1)))
    mask = data.draw(arrays(np.bool_, x.shape), label="mask")
    compare(lambda x: x[mask], lambda x: x[torch.tensor(mask)], x)
    compare(lambda x: x[tg.tensor(mask)], lambda x: x[torch.tensor(mask)], x)


def test_indexing_with_a_0d_integer_tensor():
    x = np.arange(12.0).reshape(3, 4)
    i = tg.tensor(2)
    compare(lambda x: x[i], lambda x: x[torch.tensor(2)], x)
    compare(lambda x: x[1:i + 1], lambda x: x[1:torch.tensor(3)], x)


# ---- joining and splitting ---------------------------------------------------------------
@given(data=st.data())
def test_cat_matches_torch(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="lengths along the axis")
    dtypes = data.draw(st.lists(st.sampled_from(DTYPES_ALL), min_size=len(lengths), max_size=len(lengths)))
    parts = [data.draw(arrays(d, shape[:axis % len(shape)] + (n,) + shape[axis % len(shape) + 1:]))
             for d, n in zip(dtypes, lengths)]
    compare(lambda *p: tg.cat(list(p), axis), lambda *p: torch.cat(p, axis), *parts)
    compare(lambda *p: tg.cat(p, dim=axis), lambda *p: torch.cat(p, dim=axis), *parts)


@given(data=st.data())
def test_stack_matches_torch(data):
    shape = data.draw(shapes(max_dims=3), label="shape")
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    count = data.draw(st.integers(1, 3), label="how many")
    dtypes = data.draw(st.lists(st.sampled_from(DTYPES_ALL), min_size=count, max_size=count))
    parts = [data.draw(arrays(d, shape)) for d in dtypes]
    compare(lambda *p: tg.stack(list(p), axis), lambda *p: torch.stack(p, axis), *parts)
    compare(lambda *p: tg.stack(p, dim=axis), lambda *p: torch.stack(p, dim=axis), *parts)


@given(data=st.data())
def test_split_matches_torch_tensor_split(data):
    """split(n) makes n equal sections, split([i, j]) cuts at i and j: PyTorch's tensor_split
    (DELIBERATE_DIFFERENCES["split_by_a_count_makes_that_many_sections"])."""
    x = data.draw(any_array(shapes(min_dims=1, max_side=6)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    length = x.shape[axis]
    counts = [n for n in range(1, 7) if length % n == 0]
    if counts:
        n = data.draw(st.sampled_from(counts), label="sections")
        compare(lambda x: x.split(n, axis), lambda x: torch.tensor_split(x, n, axis), x)
        compare(lambda x: x.split(n, dim=axis), lambda x: torch.tensor_split(x, n, dim=axis), x)
    points = sorted(data.draw(st.lists(st.integers(0, length), max_size=3), label="points"))
    compare(lambda x: x.split(points, axis=axis), lambda x: torch.tensor_split(x, points, dim=axis), x)


@given(data=st.data())
def test_gather_matches_torch_and_accumulates_repeats(data):
    x = data.draw(any_array(shapes(min_dims=1, min_side=1, max_side=3)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    index_shape = list(x.shape)
    index_shape[axis] = data.draw(st.integers(0, 4), label="picks along the axis")
    index = data.draw(hnp.arrays(np.int64, tuple(index_shape), elements=st.integers(0, x.shape[axis] - 1)),
                      label="index")
    compare(lambda x: x.gather(axis, index), lambda x: x.gather(axis, torch.tensor(index)), x)
    compare(lambda x: x.gather(dim=axis, index=tg.tensor(index)), lambda x: x.gather(axis, torch.tensor(index)), x)
    compare(lambda x: tg.gather(x, axis, index), lambda x: torch.gather(x, axis, torch.tensor(index)), x)


@pytest.mark.parametrize("name", ["tril", "triu"])
@given(data=st.data())
def test_tril_and_triu_match_torch(name, data):
    x = data.draw(any_array(shapes(min_dims=2)))
    k = data.draw(st.integers(-4, 4), label="k")
    compare(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), x)
    compare(lambda x: getattr(x, name)(k), lambda x: getattr(x, name)(k), x)
    compare(lambda x: getattr(x, name)(k=k), lambda x: getattr(x, name)(diagonal=k), x)
    compare(lambda x: getattr(x, name)(diagonal=k), lambda x: getattr(x, name)(diagonal=k), x)
    compare(lambda x: getattr(tg, name)(x, k), lambda x: getattr(torch, name)(x, k), x)


@given(data=st.data())
def test_masked_fill_matches_torch(data):
    x = data.draw(any_array(shapes(max_dims=3), dtypes=FLOATS))
    mask_shape = data.draw(hnp.broadcastable_shapes(x.shape, max_dims=x.ndim, min_side=0).filter(
        lambda shape: np.broadcast_shapes(shape, x.shape) == x.shape), label="mask shape")   # the mask fits x
    mask = data.draw(arrays(np.bool_, mask_shape), label="mask")
    value = data.draw(st.sampled_from([0.0, -1.5, 2, float("-inf"), float("nan")]), label="value")
    compare(lambda x: x.masked_fill(mask, value), lambda x: x.masked_fill(torch.tensor(mask), value), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_shape_ops_carry_awkward_values_and_their_gradients(dtype):
    x = edge_values(dtype)[:12].reshape(3, 4)
    compare(lambda x: x.T.reshape(-1)[::2], lambda x: x.T.reshape(-1)[::2], x)
    compare(lambda x: tg.cat([x, x[:1]]).tril(), lambda x: torch.cat([x, x[:1]]).tril(), x)
