"""The engine and nn on the GPU (issue 38), tested without one: tests/fake_cupy.py stands in
for CuPy (numpy inside; it refuses implicit host copies and numpy operands, as CuPy does, and
counts the copies between host and device).

Every op runs twice, once on "cpu" (numpy) and once on "cuda" (the fake), from the same
numbers: the values and every gradient must agree, and the cuda results must stay on the
device. Then the device API (PyTorch's: device=, t.device, t.to, t.numpy(), tg.cuda), the
errors (mixed devices, no CuPy), a GPT training step equal to the CPU's with few copies,
Module.to with its optimizer, and checkpoints across devices.
"""
import re
import sys

import numpy as np
import pytest
import safetensors.numpy

import fake_cupy
import nn
import tensorgrad as tg
from nn import functional as F
from nn import optim

RTOL = {np.float32: 1e-5, np.float64: 1e-12}
DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
INSTALL = 'pip install "tensorgrad[cuda]"'


@pytest.fixture
def cupy(monkeypatch):
    """The fake CuPy installed as `cupy` for this test, its copy counter at zero."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    fake_cupy.copies.reset()
    return fake_cupy


@pytest.fixture
def no_cupy(monkeypatch):
    """No CuPy: `import cupy` raises ImportError, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "cupy", None)


def host(array):
    """An array's values on the host, for comparing (a device array read by its counted copy)."""
    return array.get() if isinstance(array, fake_cupy.ndarray) else array


def assert_close(got, expected, dtype, what=""):
    expected = np.asarray(expected)
    rtol = RTOL[np.dtype(dtype).type]
    scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
    np.testing.assert_allclose(host(got), expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def assert_on(t, device):
    """t (a Tensor) and its gradient, if any, live on `device`."""
    kind = fake_cupy.ndarray if device == "cuda" else np.ndarray
    assert t.device == device and type(t.data) is kind, (t.device, type(t.data))
    if t.grad is not None:
        assert type(t.grad) is kind, f"the gradient of a {device} tensor is a {type(t.grad)}"
        assert t.grad.dtype == t.dtype and t.grad.shape == t.shape


# ---- the ops on both devices -------------------------------------------------------------------------
_rng = np.random.default_rng(38)


def N(*shape):   # normal
    return _rng.standard_normal(shape)


def P(*shape):   # positive, in [0.5, 2): log, sqrt, divisors, bases of pow
    return _rng.uniform(0.5, 2.0, shape)


def A(*shape):   # |x| in [0.3, 2), either sign: away from relu's kink
    return _rng.uniform(0.3, 2.0, shape) * _rng.choice([-1.0, 1.0], shape)


def B(*shape):   # a boolean mask
    return _rng.random(shape) < 0.5


def ids(*values):
    return np.array(values, dtype=np.int64)


# name: (host arrays, fn of the tensors made from them). Float arrays become leaves that require
# grad (in the dtype under test); integer and bool arrays become tensors on the same device.
OPS = {
    "add": ([N(3, 4), N(4)], lambda a, b: a + b + 1.0),
    "sub": ([N(3, 1), N(4)], lambda a, b: a - b - 2.0 - (1.0 - a)),
    "mul": ([N(2, 3), N(2, 3)], lambda a, b: a * b * 2.0),
    "div": ([N(3, 4), P(3, 4)], lambda a, b: a / b + 1.0 / b + a / 4.0),
    "pow": ([P(3, 4), N(3, 4)], lambda a, b: a ** 3 + a ** b + 2.0 ** b + a ** 0.5),
    "neg": ([N(3, 4)], lambda a: -a),
    "exp": ([N(3, 4)], lambda a: a.exp()),
    "log": ([P(3, 4)], lambda a: a.log()),
    "sqrt": ([P(3, 4)], lambda a: a.sqrt()),
    "abs": ([A(3, 4)], lambda a: a.abs()),
    "tanh": ([N(3, 4)], lambda a: a.tanh()),
    "relu": ([A(3, 4)], lambda a: a.relu()),
    "sigmoid": ([N(3, 4)], lambda a: a.sigmoid()),
    "sum over axes": ([N(2, 3, 4)], lambda a: a.sum(axis=(0, 2))),
    "sum keepdims": ([N(2, 3, 4)], lambda a: a.sum(axis=1, keepdims=True)),
    "sum all": ([N(2, 3, 4)], lambda a: a.sum()),
    "mean": ([N(2, 3, 4)], lambda a: a.mean(axis=-1) + a.mean()),
    "max over an axis": ([N(2, 3, 4)], lambda a: a.max(axis=1)),
    "max all": ([N(3, 4)], lambda a: a.max()),
    "min": ([N(3, 4)], lambda a: a.min(axis=0)),
    "reshape": ([N(2, 3, 4)], lambda a: a.reshape(4, -1) * a.reshape(6, 4).T.reshape(4, 6)),
    "transpose": ([N(2, 3, 4)], lambda a: a.transpose(2, 0, 1) + a.transpose().swapaxes(1, 2)),
    "swapaxes": ([N(2, 3, 4)], lambda a: a.swapaxes(0, 2)),
    "getitem basic": ([N(4, 5)], lambda a: a[1:, ::2] + a[0, 1] + a[-1, ::2]),
    "getitem integer array": ([N(5, 3), ids(4, 0, 4, 2)], lambda a, i: a[i]),
    "getitem by a host index": ([N(5, 3)], lambda a: a[np.array([4, 0, 4])] + a[[1, 1, 2]]),
    "getitem rows and columns": ([N(4, 5), ids(0, 3, 3), ids(1, 1, 4)], lambda a, i, j: a[i, j]),
    "embedding rows": ([N(6, 4), ids([1, 5, 1], [0, 5, 5])], lambda w, i: w[i]),
    "matmul batched": ([N(2, 3, 4), N(4, 5)], lambda a, b: a @ b),
    "matmul both batched": ([N(2, 3, 4), N(2, 4, 2)], lambda a, b: a @ b),
    "matmul vectors": ([N(4), N(4, 3)], lambda a, b: a @ b @ b.T @ a),
    "softmax": ([N(2, 3, 5)], lambda a: a.softmax(axis=-1) + F.softmax(a, axis=1)),
    "log_softmax": ([N(2, 3, 5)], lambda a: a.log_softmax(axis=-1)),
    "gelu": ([N(3, 4)], lambda a: a.gelu()),
    "cat": ([N(2, 3), N(2, 2)], lambda a, b: tg.cat([a, b, a], axis=1)),
    "stack": ([N(2, 3), N(2, 3)], lambda a, b: tg.stack([a, b], axis=1)),
    "where": ([B(3, 4), N(3, 4), N(4)], lambda c, a, b: tg.where(c, a, b)),
    "maximum": ([N(3, 4), N(3, 4)], lambda a, b: tg.maximum(a, b) + tg.maximum(a, 0.0)),
    "masked_fill": ([N(3, 4), B(3, 4)], lambda a, m: a.masked_fill(m, -2.0)),
    "var": ([N(3, 4)], lambda a: a.var(axis=1)),
    "std": ([N(3, 4)], lambda a: a.std(axis=0)),
    "logsumexp": ([N(3, 4)], lambda a: tg.logsumexp(a, axis=-1)),
    "cross_entropy": ([N(2, 3, 5), ids([0, 4, 2], [1, 1, 3])], lambda logits, t: F.cross_entropy(logits, t)),
    "layer_norm": ([N(2, 3, 4), P(4), N(4)], lambda x, w, b: F.layer_norm(x, w, b)),
    "linear": ([N(2, 3, 4), N(4, 5), N(5)], lambda x, w, b: F.linear(x, w, b)),
    "attention": ([N(2, 2, 4, 3), N(2, 2, 4, 3), N(2, 2, 4, 3)],
                  lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=True)),
}
FUSED = ["softmax", "log_softmax", "gelu", "cross_entropy", "layer_norm", "linear", "attention"]


def leaves(arrays, device, dtype):
    """Tensors on `device` from host arrays: floats in `dtype` requiring grad, ids and masks as they are."""
    return [tg.tensor(a.astype(dtype), device=device, requires_grad=True) if a.dtype.kind == "f"
            else tg.tensor(a, device=device) for a in arrays]


def forward_backward(fn, arrays, device, dtype):
    """fn's output on leaves made on `device`, after backward of a weighted sum of it (fixed,
    distinct weights: every element of every gradient differs). Returns (output, leaves)."""
    xs = leaves(arrays, device, dtype)
    out = fn(*xs)
    weights = np.linspace(-1.0, 2.0, out.size).reshape(out.shape).astype(out.dtype)
    (out * tg.tensor(weights, device=device)).sum().backward()
    return out, xs


def assert_twins(fn, arrays, dtype):
    """fn on cpu and on cuda: the same value and gradients, each on its own device."""
    out_cpu, xs_cpu = forward_backward(fn, arrays, "cpu", dtype)
    out_cuda, xs_cuda = forward_backward(fn, arrays, "cuda", dtype)
    assert_on(out_cpu, "cpu")
    assert_on(out_cuda, "cuda")
    assert (out_cuda.shape, out_cuda.dtype) == (out_cpu.shape, out_cpu.dtype)
    assert_close(out_cuda.data, out_cpu.data, dtype, "the output")
    for n, (x_cpu, x_cuda) in enumerate(zip(xs_cpu, xs_cuda)):
        assert_on(x_cpu, "cpu")
        assert_on(x_cuda, "cuda")
        if x_cpu.requires_grad:
            assert x_cuda.grad is not None, f"input {n} got no gradient on cuda"
            assert_close(x_cuda.grad, x_cpu.grad, dtype, f"the gradient of input {n}")
        else:
            assert x_cuda.grad is None


@DTYPES
@pytest.mark.parametrize("name", OPS)
def test_each_op_gives_the_cpus_value_and_gradients_on_cuda(cupy, name, dtype):
    assert_twins(OPS[name][1], OPS[name][0], dtype)


@DTYPES
@pytest.mark.parametrize("name", FUSED)
def test_the_composed_twins_of_the_fused_ops_run_on_cuda(cupy, name, dtype):
    with tg.composed():
        assert_twins(OPS[name][1], OPS[name][0], dtype)


def test_gradients_accumulate_on_cuda_as_on_the_cpu(cupy):
    """A tensor used twice, an intermediate's gradient kept, and a second backward added in:
    no gradient array is shared with another tensor's and then added into."""
    grads = {}
    for device in ("cpu", "cuda"):
        x = tg.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
        y = x + x
        z = y * tg.tensor([1.0, 2.0, 3.0], device=device)
        loss = (z + y).sum()
        loss.backward(retain_graph=True)
        first = host(x.grad).copy()
        loss.backward()
        assert_on(x, device)
        assert_on(y, device)
        grads[device] = first, host(x.grad), host(y.grad), host(z.grad)
    for got, expected in zip(grads["cuda"], grads["cpu"]):
        assert np.array_equal(got, expected)
    assert np.array_equal(grads["cuda"][1], [8.0, 12.0, 16.0])   # twice 2 * (w + 1)


def test_no_grad_on_cuda_builds_no_graph(cupy):
    x = tg.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
    with tg.no_grad():
        y = (x * 2.0).exp().sum()
    assert y.device == "cuda" and not y.requires_grad and y.parents == ()
    assert y.item() == pytest.approx(float(np.exp([2.0, 4.0, 6.0]).sum()), rel=1e-6)


def test_python_scalars_mix_with_cuda_tensors_without_a_copy_to_the_device(cupy):
    x = tg.tensor([1.0, 2.0, 4.0], device="cuda", requires_grad=True)
    cupy.copies.reset()
    y = (x * 2.0 + 1 - x / 4 + 3.0 / x + (2.0 - x) ** 2 + 0.5 * x.masked_fill(x > 1.5, 0.0)).sum()
    y.backward()
    assert (cupy.copies.to_device, cupy.copies.to_host) == (0, 0)
    assert_on(y, "cuda")
    assert_on(x, "cuda")
    v = np.array([1.0, 2.0, 4.0])
    expected = (v * 2 + 1 - v / 4 + 3 / v + (2 - v) ** 2 + 0.5 * np.where(v > 1.5, 0, v)).sum()
    assert y.item() == pytest.approx(expected, rel=1e-6)
    expected_grad = 2 - 1 / 4 - 3 / v ** 2 - 2 * (2 - v) + 0.5 * (v <= 1.5)
    assert_close(x.grad, expected_grad, np.float32)


# ---- the device API ------------------------------------------------------------------------------------
CREATORS = {
    "tensor": lambda device: tg.tensor([[1.0, 2.5], [3.0, -4.0]], device=device),
    "tensor of ints": lambda device: tg.tensor([3, 1, 2], device=device),
    "tensor float64": lambda device: tg.tensor(np.arange(4.0), dtype=tg.float64, device=device),
    "zeros": lambda device: tg.zeros(2, 3, device=device),
    "ones": lambda device: tg.ones((2, 3), dtype=tg.float64, device=device),
    "full": lambda device: tg.full((2, 3), 1.5, device=device),
    "arange": lambda device: tg.arange(5, device=device),
    "arange of floats": lambda device: tg.arange(0.0, 2.0, 0.5, device=device),
    "randn": lambda device: tg.randn(2, 3, seed=7, device=device),
}


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
@pytest.mark.parametrize("name", CREATORS)
def test_every_creation_function_takes_the_device(cupy, name, device):
    on_cpu, on_cuda = CREATORS[name]("cpu"), CREATORS[name](device)
    assert_on(on_cpu, "cpu")
    assert_on(on_cuda, "cuda")
    assert on_cuda.dtype == on_cpu.dtype and on_cuda.shape == on_cpu.shape
    assert np.array_equal(on_cuda.numpy(), on_cpu.numpy())
    assert tg.tensor([1.0], device=None).device == "cpu"


@pytest.mark.parametrize("name", ["zeros", "ones", "full", "arange", "arange of floats"])
def test_filled_tensors_are_made_on_the_device_without_a_copy(cupy, name):
    CREATORS[name]("cuda")
    assert (cupy.copies.to_device, cupy.copies.to_host) == (0, 0)


def test_requires_grad_with_a_device(cupy):
    for t in (tg.tensor([1.0, 2.0], device="cuda", requires_grad=True),
              tg.zeros(2, device="cuda", requires_grad=True), tg.randn(2, device="cuda", requires_grad=True)):
        assert t.requires_grad and t.device == "cuda"


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:1", "mps", "", "CUDA"])
@pytest.mark.parametrize("make", [
    lambda d: tg.tensor([1.0], device=d), lambda d: tg.zeros(2, device=d), lambda d: tg.ones(2, device=d),
    lambda d: tg.randn(2, device=d), lambda d: tg.arange(3, device=d), lambda d: tg.full((2,), 1.0, device=d),
], ids=["tensor", "zeros", "ones", "randn", "arange", "full"])
def test_an_unknown_device_is_a_value_error_naming_it(cupy, make, device):
    with pytest.raises(ValueError) as error:
        make(device)
    assert repr(device) in str(error.value)


def test_device_and_numpy(cupy):
    values = np.array([[1.0, -2.0], [3.5, 4.0]], np.float32)
    on_cpu, on_cuda = tg.tensor(values), tg.tensor(values, device="cuda")
    assert on_cpu.device == "cpu" and on_cuda.device == "cuda"
    assert isinstance(on_cuda.device, str) and type(on_cuda.data) is fake_cupy.ndarray
    assert on_cpu.numpy() is on_cpu.data   # the cpu tensor's own array, shared
    cupy.copies.reset()
    copy = on_cuda.numpy()
    assert type(copy) is np.ndarray and np.array_equal(copy, values) and copy.dtype == np.float32
    assert (cupy.copies.to_device, cupy.copies.to_host) == (0, 1)
    copy[0, 0] = 99.0   # a copy: the device's numbers are untouched
    assert on_cuda.numpy()[0, 0] == 1.0
    assert on_cuda[1, 0].item() == 3.5 and type(on_cuda.sum().item()) is float
    assert on_cuda.sum().item() == pytest.approx(6.5)
    assert on_cuda.tolist() == values.tolist()


def test_repr_of_a_cuda_tensor_shows_its_values(cupy):
    text = repr(tg.tensor([1.5, -2.0], device="cuda"))
    assert "1.5" in text and "-2." in text and "cuda" in text


def test_to_cuda_is_differentiable_back_to_the_cpu(cupy):
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to("cuda")
    assert y.device == "cuda" and type(y.data) is fake_cupy.ndarray
    (y * y).sum().backward()
    assert type(x.grad) is np.ndarray and np.array_equal(x.grad, [2.0, -4.0, 6.0])


def test_to_cpu_is_differentiable_back_to_cuda(cupy):
    x = tg.tensor([1.0, -2.0, 3.0], device="cuda", requires_grad=True)
    y = x.cpu()
    assert y.device == "cpu" and type(y.data) is np.ndarray
    (y ** 3).sum().backward()
    assert_on(x, "cuda")
    assert np.array_equal(host(x.grad), [3.0, 12.0, 27.0])


@DTYPES
def test_a_round_trip_through_both_devices_keeps_the_gradient(cupy, dtype):
    values = np.array([0.5, -1.0, 2.0])
    x = tg.tensor(values, dtype=dtype, requires_grad=True)
    y = (x.cuda().tanh() * 3.0).to("cpu").exp()
    loss = (y.cuda() * tg.tensor([1.0, 2.0, 3.0], dtype=dtype, device="cuda")).sum()
    loss.backward()
    assert_on(x, "cpu")
    t = np.tanh(values)
    assert_close(x.grad, np.array([1.0, 2.0, 3.0]) * np.exp(3 * t) * 3 * (1 - t * t), dtype)


def test_to_the_same_device_is_the_tensor_itself(cupy):
    x, g = tg.tensor([1.0, 2.0], requires_grad=True), tg.tensor([1.0, 2.0], device="cuda")
    assert x.to("cpu") is x and x.cpu() is x and x.to(device="cpu") is x
    assert g.to("cuda") is g and g.to("cuda:0") is g and g.cuda() is g


def test_to_a_dtype_still_casts_on_either_device(cupy):
    g = tg.tensor([1.0, 2.5], device="cuda", requires_grad=True)
    d = g.to(tg.float64)
    assert d.device == "cuda" and d.dtype == np.float64 and type(d.data) is fake_cupy.ndarray
    both = tg.tensor([1.0, 2.5]).to("cuda", tg.float64)
    assert both.device == "cuda" and both.dtype == np.float64
    assert tg.tensor([1, 2], device="cuda").float().dtype == np.float32
    (d * d).sum().backward()
    assert_on(g, "cuda")
    assert np.array_equal(host(g.grad), [2.0, 5.0]) and g.grad.dtype == np.float32


def test_cuda_is_available_with_cupy(cupy):
    assert tg.cuda.is_available() is True and tg.cuda.device_count() == 1


def test_cuda_is_not_available_without_cupy(no_cupy):
    assert tg.cuda.is_available() is False and tg.cuda.device_count() == 0


def assert_install_line(error):
    message = str(error.value)
    assert "\n" not in message.strip(), f"more than one line: {message!r}"
    assert "CuPy" in message and INSTALL in message, message


@pytest.mark.parametrize("ask", {
    "zeros": lambda: tg.zeros(2, device="cuda"),
    "tensor": lambda: tg.tensor([1.0], device="cuda:0"),
    "randn": lambda: tg.randn(2, device="cuda"),
    "to": lambda: tg.tensor([1.0]).to("cuda"),
    "cuda()": lambda: tg.tensor([1.0], requires_grad=True).cuda(),
    "module.to": lambda: nn.Linear(2, 3).to("cuda"),
}.items(), ids=lambda item: item[0])
def test_asking_for_cuda_without_cupy_says_how_to_install_it_in_one_line(no_cupy, ask):
    with pytest.raises(RuntimeError) as error:
        ask[1]()
    assert_install_line(error)


def test_the_cpu_works_as_before_without_cupy(no_cupy):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.device == "cpu" and x.to("cpu") is x and np.array_equal(x.grad, [2.0, 4.0])
    model = nn.Linear(2, 3)
    assert model.to("cpu") is model


# ---- mixing devices ------------------------------------------------------------------------------------
MIXED = {   # (the op named in the error, fn of a cpu tensor and a cuda tensor of the same shape)
    "add": ("add", lambda c, g: c + g),
    "add reflected": ("add", lambda c, g: g + c),
    "sub": ("sub", lambda c, g: c - g),
    "mul": ("mul", lambda c, g: g * c),
    "div": ("div", lambda c, g: c / g),
    "matmul": ("matmul", lambda c, g: c.reshape(2, 2) @ g.reshape(2, 2)),
    "matmul reflected": ("matmul", lambda c, g: g.reshape(2, 2) @ c.reshape(2, 2)),
    "where": ("where", lambda c, g: tg.where(c > 0, g, g)),
    "where values": ("where", lambda c, g: tg.where(g > 0, c, g)),
    "cat": ("cat", lambda c, g: tg.cat([c, g])),
    "stack": ("stack", lambda c, g: tg.stack([g, c])),
    "maximum": ("maximum", lambda c, g: tg.maximum(c, g)),
    "masked_fill": ("masked_fill", lambda c, g: g.masked_fill(c > 0, 0.0)),
}


@pytest.mark.parametrize("name", MIXED)
def test_an_op_mixing_devices_names_the_op_and_both_devices(cupy, name):
    op, fn = MIXED[name]
    c = tg.tensor([1.0, -2.0, 3.0, 4.0], requires_grad=True)
    g = tg.tensor([0.5, 1.0, -1.0, 2.0], device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError) as error:
        fn(c, g)
    message = str(error.value)
    assert re.search(rf"\b{op}\b", message) and re.search(r"\bcpu\b", message) and re.search(r"\bcuda\b", message), \
        message


def test_linear_with_weights_on_another_device_is_refused(cupy):
    layer = nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match=r"cpu.*cuda|cuda.*cpu"):
        layer(tg.ones(2, 4, device="cuda"))


# ---- the drawings and the trace ------------------------------------------------------------------------
def small_graph(device):
    x = tg.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True, label="x")
    w = tg.tensor([[0.5, 1.0], [2.0, -1.0], [0.25, 3.0]], device=device, requires_grad=True, label="w")
    return ((x @ w).tanh() * 2.0).sum()


def test_the_trace_of_a_cuda_graph_reads_the_values_it_prints(cupy, capsys):
    small_graph("cpu").backward(trace=True)
    on_cpu = capsys.readouterr().out
    small_graph("cuda").backward(trace=True)
    on_cuda = capsys.readouterr().out
    assert on_cuda == on_cpu and len(on_cuda.splitlines()) > 3


def test_a_cuda_graph_draws_as_the_same_cpu_graph(cupy):
    pytest.importorskip("graphviz")
    drawings = []
    for device in ("cpu", "cuda"):
        loss = small_graph(device)
        loss.backward(retain_graph=True)
        drawings.append(tg.draw_graph(loss).source)
    assert drawings[1] == drawings[0] and "tanh" in drawings[1]


def test_the_stepper_page_of_a_cuda_graph_is_the_same_cpu_graphs(cupy):
    pages = []
    for device in ("cpu", "cuda"):
        loss = small_graph(device)
        loss.backward(retain_graph=True)
        pages.append(tg.explore(loss)._repr_html_())
    assert pages[1] == pages[0]


# ---- a GPT on cuda: its training step is the CPU's ---------------------------------------------------
def small_gpt(seed=0, **options):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.0, **options)


def batch(step, rows=3):
    rng = np.random.default_rng(100 + step)
    return rng.integers(0, 11, (rows, 8)), rng.integers(0, 11, (rows, 8))


def train_step(model, optimizer, arrays, device, clip=1.0):
    """One step as the main job takes it; the batch comes in with .to(device), the loss goes
    out with .item()."""
    idx, targets = (tg.tensor(a).to(device) for a in arrays)
    _, loss = model(idx, targets)
    optimizer.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), clip)
    optimizer.step()
    return loss.item()


def assert_same_parameters(model, twin, lr=1e-2):
    """The parameters of two models trained alike, equal to rtol 1e-5, and to lr / 100 where
    they are near 0: the gradient of the attention's key bias is 0 in exact arithmetic
    (softmax ignores what is added to all of a row's scores), so what it gets is roundoff,
    which Adam scales up to a step of up to lr times g / eps: roundoff that differs with the
    order of a sum (threads' tiles on the CPU, none on the GPU) moves it differently."""
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_allclose(host(p.data), host(q.data), rtol=1e-5, atol=lr / 100, err_msg=name)


@pytest.mark.parametrize("options", [{}, {"pos": "sinusoidal", "tie_weights": True}],
                         ids=["learned", "sinusoidal-tied"])
def test_a_gpt_trains_on_cuda_as_on_the_cpu(cupy, options):
    on_cpu, on_cuda = small_gpt(**options), small_gpt(**options)
    assert on_cuda.to("cuda") is on_cuda
    opt_cpu = optim.AdamW(on_cpu.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    opt_cuda = optim.AdamW(on_cuda.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    losses = [(train_step(on_cpu, opt_cpu, batch(s), "cpu", clip=0.5),
               train_step(on_cuda, opt_cuda, batch(s), "cuda", clip=0.5)) for s in range(3)]
    for loss_cpu, loss_cuda in losses:
        assert isinstance(loss_cuda, float) and loss_cuda == pytest.approx(loss_cpu, rel=1e-5)
    assert losses[2][1] < losses[0][1]   # it learns
    for p in on_cuda.parameters():
        assert_on(p, "cuda")
    assert_same_parameters(on_cuda, on_cpu)
    logits, loss = on_cuda(tg.tensor(batch(9)[0], device="cuda"))
    assert loss is None and logits.device == "cuda"
    assert_close(logits.data, on_cpu(batch(9)[0])[0].data, np.float32)


def test_a_gpt_samples_on_cuda_as_on_the_cpu(cupy):
    on_cpu, on_cuda = small_gpt(), small_gpt().to("cuda")
    prompt = np.array([[1, 2, 3]])
    expected = on_cpu.generate(prompt, 6, top_k=5, seed=3)
    got = on_cuda.generate(tg.tensor(prompt, device="cuda"), 6, top_k=5, seed=3)
    assert np.array_equal(host(got), expected)


def test_a_training_step_copies_only_the_batch_in_and_the_loss_out(cupy, capsys):
    """Two arrays go in (the batch); five numbers come back, each a question the step must ask:
    whether a token id, a position or a target is out of range (an embedding or a loss reading
    past its table would not say so on a GPU), the gradient norm (to clip by it) and the loss.
    Nothing is read per parameter or per layer: a read slipped in there fails this."""
    model = small_gpt().to("cuda")
    optimizer = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    train_step(model, optimizer, batch(0), "cuda")   # warm-up: scratch arrays, masks made once
    counts = {}
    idx, targets = batch(1)
    cupy.copies.reset()
    x, y = tg.tensor(idx).to("cuda"), tg.tensor(targets).to("cuda")
    counts["batch in"] = repr(cupy.copies)
    _, loss = model(x, y)
    counts["forward"] = repr(cupy.copies)
    optimizer.zero_grad()
    loss.backward()
    counts["backward"] = repr(cupy.copies)
    optim.clip_grad_norm(model.parameters(), 1.0)
    counts["clip"] = repr(cupy.copies)
    optimizer.step()
    counts["step"] = repr(cupy.copies)
    loss.item()
    counts["loss out"] = repr(cupy.copies)
    with capsys.disabled():
        print(f"\ncopies in one training step, running totals: {counts}")
    assert (cupy.copies.to_device, cupy.copies.to_host) == (2, 5), counts


# ---- Module.to and the optimizer ---------------------------------------------------------------------
class WithBuffers(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 2)
        self.register_buffer("scale", tg.tensor([1.0, 2.0]))
        self.register_buffer("positions", tg.tensor([0, 1, 2]))
        self.register_buffer("scratch", tg.zeros(2), persistent=False)

    def forward(self, x):
        return self.lin(x) * self.scale + self.scratch


def test_the_optimizer_splits_its_work_across_threads_on_the_cpu_only(cupy, monkeypatch):
    """threads.py's split is the CPU's: on a GPU the optimizer updates its parameters in turn,
    and each update is one call over the whole parameter (no tiles)."""
    model = WithBuffers()
    split = []
    monkeypatch.setattr(tg.threads, "split", lambda work, sizes: split.append(len(sizes)) or work(0, len(sizes)))
    for device in ("cpu", "cuda"):
        model.to(device)
        optimizer = optim.AdamW(model.parameters(), lr=1e-2)
        model(tg.ones(4, 3, device=device)).sum().backward()
        split.clear()
        optimizer.step()
        assert bool(split) == (device == "cpu"), (device, split)


def test_module_to_moves_parameters_and_buffers_in_place(cupy):
    model = WithBuffers()
    params, buffers = list(model.parameters()), list(model.buffers())
    before = {name: t.numpy().copy() for name, t in [*model.named_parameters(), *model.named_buffers()]}
    assert len(buffers) == 3
    assert model.to("cuda") is model
    assert list(model.parameters()) == params and all(a is b for a, b in zip(model.parameters(), params))
    assert all(a is b for a, b in zip(model.buffers(), buffers))
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        assert_on(t, "cuda")
        assert t.numpy().dtype == before[name].dtype and np.array_equal(t.numpy(), before[name]), name
    out = model(tg.ones(4, 3, device="cuda"))
    assert out.device == "cuda"
    out.sum().backward()
    for p in params:
        assert_on(p, "cuda")
    assert model.to("cpu") is model
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        assert_on(t, "cpu")
        assert np.array_equal(t.data, before[name]), name
    assert model.to("cuda:0") is model and all(p.device == "cuda" for p in model.parameters())


@pytest.mark.parametrize("first, then", [("cpu", "cuda"), ("cuda", "cpu")])
def test_an_optimizer_follows_its_parameters_to_another_device(cupy, first, then):
    moved, twin = small_gpt().to(first), small_gpt()
    opt_moved = optim.AdamW(moved.parameters(), lr=1e-2, weight_decay=0.1)
    opt_twin = optim.AdamW(twin.parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(2):
        assert train_step(moved, opt_moved, batch(step), first) == pytest.approx(
            train_step(twin, opt_twin, batch(step), "cpu"), rel=1e-5)
    assert moved.to(then) is moved
    for step in range(2, 4):
        assert train_step(moved, opt_moved, batch(step), then) == pytest.approx(
            train_step(twin, opt_twin, batch(step), "cpu"), rel=1e-5)
    kind = fake_cupy.ndarray if then == "cuda" else np.ndarray
    assert all(type(m) is kind for m in opt_moved.m + opt_moved.v), "AdamW's moments stayed behind"
    for p in moved.parameters():
        assert_on(p, then)
    assert_same_parameters(moved, twin)
    state, expected = opt_moved.state_dict(), opt_twin.state_dict()
    assert state.keys() == expected.keys()
    for name in expected:
        assert type(state[name]) is np.ndarray, f"state_dict()[{name!r}] is not a host array"
        assert_close(state[name], expected[name], np.float32, name)


# ---- checkpoints across devices ----------------------------------------------------------------------
def trained_on(device, steps=2):
    model = small_gpt().to(device)
    optimizer = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(steps):
        train_step(model, optimizer, batch(step), device)
    return model, optimizer


@pytest.mark.parametrize("saved_on, loaded_on", [("cuda", "cpu"), ("cpu", "cuda"), ("cuda", "cuda")])
def test_a_checkpoint_moves_between_devices_with_its_optimizer(cupy, tmp_path, saved_on, loaded_on):
    model, optimizer = trained_on(saved_on)
    path = nn.save(tmp_path / "ck.safetensors", model, optimizer, step=2)
    arrays = safetensors.numpy.load_file(path)   # host arrays in the file, as from a cpu run
    for name, p in model.named_parameters():
        assert np.array_equal(arrays[name], p.numpy()), name
    for i, m in enumerate(optimizer.m):
        assert np.array_equal(arrays[f"optimizer/m.{i}"], host(m))

    fresh = small_gpt(seed=1).to(loaded_on)   # other weights: the load must replace them all
    fresh_opt = optim.AdamW(fresh.parameters(), lr=1e-2, weight_decay=0.1)
    state, meta = nn.load(path, optimizer=fresh_opt)
    fresh.load_state_dict(state)
    assert meta["step"] == 2
    for (name, p), (_, q) in zip(model.named_parameters(), fresh.named_parameters()):
        assert_on(q, loaded_on)
        assert np.array_equal(q.numpy(), p.numpy()), name
    for kind in ("m", "v"):
        for a, b in zip(getattr(optimizer, kind), getattr(fresh_opt, kind)):
            assert type(b) is (fake_cupy.ndarray if loaded_on == "cuda" else np.ndarray)
            assert np.array_equal(host(b), host(a))
    assert np.array_equal(fresh_opt.updates, optimizer.updates)
    # and both go on as one
    assert train_step(fresh, fresh_opt, batch(5), loaded_on) == pytest.approx(
        train_step(model, optimizer, batch(5), saved_on), rel=1e-5)
    assert_same_parameters(fresh, model)
