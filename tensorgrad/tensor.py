"""Tensor: a numpy array that remembers how it was made, and every differentiable op.

Each op computes its forward with numpy and hands make_op() one vector-Jacobian product
(vjp) per input: given g = dL/d(out), it returns dL/d(input). Beside the vjps stand their
rules: the local derivative of each input, written once, as a student reads it; the
chain-rule trace and the explorer page print them. A vjp may return its gradient in the
broadcast shape; backward sums it back to the input's shape (autograd.unbroadcast) in
one place.

The fused ops (softmax, log_softmax, gelu) compute in one node with a hand-derived
backward; inside `tg.composed()` each runs instead as its composition of primitive ops,
written beside it like the math.

Dtypes: python floats become float32 (speed); float64 arrays stay float64 (gradcheck);
python and numpy scalars take the tensor's dtype, so no op turns float32 into float64.
Integers follow PyTorch's rules: an integer tensor meets a float (or is divided, or goes
through exp, log, tanh...) as float32 (the table is in docs/engine.md).

More ops live beside this file, one function each with its vjps and rules: shape_ops.py
(squeeze, expand, tril...), math_ops.py (sin, clip, logsumexp...), pytorch.py (casts and
PyTorch's names); tensorgrad/__init__.py makes them Tensor methods too.
"""
import functools
import math
import warnings

import numpy as np

from . import autograd, devices, threads
from .autograd import modes
from .pytorch import torch_names
from .trace import trace_backward

DEFAULT_FLOAT = np.float32
_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}   # PyTorch's kinds: bool < integer < float < complex


def _as_array(data, dtype=None):
    """An ndarray for `data`; python floats (and lists of them) become float32. Only numbers
    (bool, integers, floats, complex) make a tensor: text, objects, dates are refused."""
    if isinstance(data, Tensor):
        data = data.data
    array = devices.array(data, dtype)
    if dtype is None and array.dtype == np.float64 and array is not data and not isinstance(data, np.generic):
        array = array.astype(DEFAULT_FLOAT)
    if array.dtype.kind not in "biufc":
        raise TypeError(f"a tensor holds numbers, got dtype {array.dtype} from {type(data).__name__} "
                        f"{repr(data)[:40]}: give numbers (floats, ints or bools)")
    return array


def _is_float(array):
    return array.dtype.kind in "fc"


def _floating(op):
    """An integer or bool tensor goes through `op` as float32: exp(2) is a float, as in PyTorch."""
    @functools.wraps(op)
    def on_floats(self, *args, **kwargs):
        if not _is_float(self.data):
            self = Tensor(self.data.astype(DEFAULT_FLOAT))
        return op(self, *args, **kwargs)
    return on_floats


class Tensor:
    """An ndarray `.data`, its gradient `.grad` (same shape and dtype, or None), and
    for an op's output: the op's name, its inputs and their vjps."""

    __slots__ = ("data", "grad", "requires_grad", "label", "_op", "_parents", "_vjps", "_rules",
                 "_scope", "__weakref__")
    __array_ufunc__ = None  # `ndarray + Tensor` calls Tensor.__radd__ instead of looping in numpy
    __hash__ = object.__hash__  # == compares elementwise, so hash by identity

    def __init__(self, data, requires_grad=False, dtype=None, label=None):
        data = _as_array(data, dtype)
        if requires_grad and data.dtype.kind != "f":
            raise TypeError(
                f"only floating-point tensors can require gradients, got dtype {data.dtype}: "
                "integer tensors (token ids, indices) never get gradients")
        self.data = data
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.label = label
        self._op = None       # name of the op that made this tensor; None for a leaf
        self._parents = ()    # the op's input tensors, in order
        self._vjps = None     # one function per input: dL/d(out) -> dL/d(input); or one for all
        self._rules = None    # the local derivative of each input, as a formula (text)
        self._scope = ()      # the scope() names open when the op ran

    # ---- attributes -------------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)
    op = property(lambda self: self._op, doc="name of the op that made this tensor; None for a leaf")
    parents = property(lambda self: self._parents, doc="the op's input tensors, in order; () for a leaf")
    vjps = property(lambda self: self._vjps,
                    doc="the op's vjps (one per input, or one for all), None for a leaf or once backward freed them")
    rules = property(lambda self: self._rules,
                     doc="the op's local-derivative rule for each input (text), or None")
    scope = property(lambda self: self._scope, doc="the scope() names open when the op ran, outermost first")

    device = property(lambda self: devices.of(self.data),
                      doc="where the data lives: 'cpu' (a numpy array) or 'cuda' (a CuPy array, on the GPU)")

    def item(self):
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def numel(self):
        """The number of elements (PyTorch's name for numpy's .size)."""
        return self.data.size

    def numpy(self):
        """The values as a numpy array: on the CPU the tensor's own (shared, not copied), from
        the GPU a copy on the host."""
        return devices.to(self.data, "cpu")

    def detach(self):
        """The same data, cut from the graph."""
        return Tensor(self.data)

    def __len__(self):
        return len(self.data)

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        """A 0-d integer tensor works where Python wants an int: data[i:i + 8], range(n)."""
        if self.ndim or self.dtype.kind not in "iu":
            raise TypeError(f"only a 0-d integer tensor can be used as an index, got shape "
                            f"{self.shape} and dtype {self.dtype}")
        return int(self.data)

    def __format__(self, spec):
        """f"{loss:.4f}" formats a 0-d tensor's number, as PyTorch does."""
        return format(self.item(), spec) if self.ndim == 0 else super().__format__(spec)

    def __iter__(self):
        """The tensors along the first axis (each one `self[i]`, in the graph)."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor: use .item() for its number")
        return (self[i] for i in range(len(self)))

    def __setitem__(self, index, value):
        """t[index] = value, in place, into a tensor that no gradient flows through: a leaf
        that needs none (a buffer of losses, a mask), or any leaf under no_grad() (initialising
        a parameter). Writing into an op's output, or into a leaf backward will differentiate
        by, would change values the graph has saved."""
        if self._parents or (self.requires_grad and modes.grad_enabled):
            made = f"the output of op '{self._op}'" if self._parents else "a tensor that requires grad"
            raise RuntimeError(f"setitem: cannot write into {made} (shape {self.shape}): backward "
                               "would use the changed values; write into a copy (t.detach() "
                               "made with tg.tensor), or, for a leaf, under tg.no_grad()")
        self.data[_index(index)] = value.data if isinstance(value, Tensor) else value

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", precision=4, threshold=20, prefix="tensor(")
        extras = [f"dtype={self.dtype}"] if self.dtype != DEFAULT_FLOAT else []
        if self.device != "cpu":
            extras.insert(0, f"device={self.device!r}")
        if self._op:
            extras.append(f"op={self._op}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        if self.label:
            extras.append(f"label={self.label!r}")
        return f"tensor({body}{''.join(', ' + e for e in extras)})"

    def backward(self, grad=None, retain_graph=False, trace=False, intermediate_grads=True):
        """Fill .grad of every tensor this one depends on (see autograd.backward).
        trace=True prints the chain rule at every node as backward applies it;
        intermediate_grads=False keeps only the leaves' gradients (less memory)."""
        if trace:
            return trace_backward(self, grad, retain_graph, intermediate_grads=intermediate_grads)
        autograd.backward(self, grad, retain_graph, intermediate_grads)

    def _lift(self, value):
        """`value` as a Tensor. A python or numpy scalar is "weak", as in PyTorch: it takes
        this tensor's dtype, unless it is of a higher kind (a float meeting an integer
        tensor is float32; an int meeting a bool tensor, int64)."""
        if isinstance(value, Tensor):
            return value
        if not isinstance(value, (bool, int, float, np.bool_, np.number)):
            return Tensor(value)
        scalar = np.asarray(value)
        if _RANK[scalar.dtype.kind] <= _RANK[self.data.dtype.kind]:
            scalar = scalar.astype(self.data.dtype)
        elif scalar.dtype.kind == "f":
            scalar = scalar.astype(DEFAULT_FLOAT)
        return Tensor(np.full((), scalar[()], like=self.data))   # made where this tensor lives

    # ---- arithmetic: a op b broadcasts like numpy ---------------------------------------
    def __add__(self, other):
        other = self._lift(other)
        return make_op("add", _broadcasting("add", np.add, self, other), (self, other),
                       vjps=(lambda g: g, lambda g: g),
                       rules=("d(a+b)/da = 1", "d(a+b)/db = 1"))

    def __sub__(self, other):
        other = self._lift(other)
        return make_op("sub", _broadcasting("sub", np.subtract, self, other), (self, other),
                       vjps=(lambda g: g, lambda g: -g),
                       rules=("d(a-b)/da = 1", "d(a-b)/db = -1"))

    def __mul__(self, other):
        other = self._lift(other)
        a, b = self.data, other.data
        return make_op("mul", _broadcasting("mul", np.multiply, self, other), (self, other),
                       vjps=(lambda g: g * b, lambda g: g * a),
                       rules=("d(a·b)/da = b", "d(a·b)/db = a"))

    def __truediv__(self, other):
        other = self._lift(other)
        a, b = self.data, other.data
        floats = None if _is_float(a) or _is_float(b) else DEFAULT_FLOAT   # int / int is a float
        out = _broadcasting("div", np.divide, self, other, floats)
        return make_op("div", out, (self, other),
                       vjps=(lambda g: g / b, lambda g: -g * out / b),   # a/b², as (a/b)/b: b² may underflow
                       rules=("d(a/b)/da = 1/b", "d(a/b)/db = -a/b²"))

    def __pow__(self, exponent):
        exponent = self._lift(exponent)
        a, b = self.data, exponent.data
        if not (_is_float(a) or _is_float(b)) and (b < 0).any():
            raise ValueError(f"pow: integers to negative integer powers are not allowed (a tensor of "
                             f"dtype {a.dtype} to the power {b.min()}): make the base a float, "
                             f"x.float() ** {b.min()}")
        out = _broadcasting("pow", np.power, self, exponent)

        def grad_exponent(g):
            # a^b·ln(a), taken as 0 at a = 0 for b >= 0 (a^b is constant 0 or 1 there); at
            # a = 0, b < 0 it is inf·(-inf) = -inf, the limit, as in PyTorch
            with np.errstate(divide="ignore", invalid="ignore"):
                return g * np.where((a == 0) & (b >= 0), 0, out * np.log(a, dtype=out.dtype))
        # d/da is taken as 0 where b = 0 (a^0 = 1 is constant, even at a = 0)
        return make_op("pow", out, (self, exponent),
                       vjps=(lambda g: g * np.where(b == 0, 0, b * a ** (b - 1)), grad_exponent),
                       rules=("d(a^b)/da = b·a^(b-1)", "d(a^b)/db = a^b·ln(a)"))

    def __neg__(self):
        return make_op("neg", -self.data, (self,), vjps=(lambda g: -g,), rules=("d(-a)/da = -1",))

    def __matmul__(self, other):
        """Batched matmul like np.matmul: (..., n, k) @ (..., k, m) -> (..., n, m);
        a 1-d operand is a row (on the left) or a column (on the right) vector."""
        other = self._lift(other)
        a = self.data[None, :] if self.ndim == 1 else self.data      # (1, k): a row vector
        b = other.data[:, None] if other.ndim == 1 else other.data   # (k, 1): a column vector
        if type(a) is not type(b):
            devices.same("matmul", a, b)
        try:
            out = _matmul(a, b)
        except ValueError:
            raise ValueError(
                f"matmul: shapes {self.shape} and {other.shape} do not match: the last axis of the left "
                "operand must equal the second-to-last of the right (the first if it is 1-d), and "
                "batch axes must broadcast") from None
        out_shape = out.shape

        def grad_a(g):
            grad = _matmul(g.reshape(out_shape), np.swapaxes(b, -1, -2))
            return grad[..., 0, :] if self.ndim == 1 else grad

        def grad_b(g):   # summed over the batch axes b was broadcast along
            g = g.reshape(out_shape)
            if b.ndim == 2 and a.ndim > 2:  # b met every row of a's batch: one 2-d matmul sums them
                rows = math.prod(a.shape[:-1])   # every row of every batch
                grad = a.reshape(rows, a.shape[-1]).T @ g.reshape(rows, g.shape[-1])
            else:
                grad = np.swapaxes(a, -1, -2) @ g
            return grad[..., 0] if other.ndim == 1 else grad

        if self.ndim == 1:
            out = out[..., 0, :]
        if other.ndim == 1:
            out = out[..., 0]
        return make_op("matmul", out, (self, other), vjps=(grad_a, grad_b),
                       rules=("dL/da = g @ bᵀ", "dL/db = aᵀ @ g"))

    def __radd__(self, other):
        return self._lift(other) + self

    def __rsub__(self, other):
        return self._lift(other) - self

    def __rmul__(self, other):
        return self._lift(other) * self

    def __rtruediv__(self, other):
        return self._lift(other) / self

    def __rpow__(self, other):
        return self._lift(other) ** self

    def __rmatmul__(self, other):
        return self._lift(other) @ self

    # comparisons give plain boolean tensors: they have no gradient
    def __lt__(self, other):
        return Tensor(self.data < self._lift(other).data)

    def __le__(self, other):
        return Tensor(self.data <= self._lift(other).data)

    def __gt__(self, other):
        return Tensor(self.data > self._lift(other).data)

    def __ge__(self, other):
        return Tensor(self.data >= self._lift(other).data)

    def __eq__(self, other):
        return Tensor(self.data == self._lift(other).data)

    def __ne__(self, other):
        return Tensor(self.data != self._lift(other).data)

    # ---- reductions: axis is None, an int or a tuple, as in numpy ------------------------
    @torch_names
    def sum(self, axis=None, keepdims=False):
        axes, shape = _axes("sum", axis, self.ndim), self.shape
        return make_op("sum", self.data.sum(axis=axes, keepdims=keepdims), (self,),
                       vjps=(lambda g: np.broadcast_to(_keep(g, axes, keepdims), shape),),
                       rules=("d(Σx)/dx_i = 1: g spread back over the summed axes",))

    @torch_names
    def mean(self, axis=None, keepdims=False):
        axes, shape = _axes("mean", axis, self.ndim), self.shape
        count = int(np.prod([shape[i] for i in axes]))
        dtype = None if _is_float(self.data) else DEFAULT_FLOAT   # the mean of integers is a float
        return make_op("mean", self.data.mean(axis=axes, keepdims=keepdims, dtype=dtype), (self,),
                       vjps=(lambda g: np.broadcast_to(_keep(g, axes, keepdims) / count, shape),),
                       rules=(f"d(mean x)/dx_i = 1/n, n = {count}",))

    @torch_names
    def max(self, axis=None, keepdims=False):
        return self._extreme("max", np.max, axis, keepdims)

    @torch_names
    def min(self, axis=None, keepdims=False):
        return self._extreme("min", np.min, axis, keepdims)

    def _extreme(self, op, reduce, axis, keepdims):
        axes = _axes(op, axis, self.ndim)
        if self.size == 0 and (axis is None or any(self.shape[a] == 0 for a in axes)):
            raise ValueError(f"{op}: cannot reduce over an empty axis of a tensor of shape {self.shape}")
        x, best = self.data, reduce(self.data, axis=axes, keepdims=True)

        def vjp(g):   # tied winners share the gradient equally
            winners = (x == best).astype(x.dtype)
            return _keep(g, axes, keepdims) * winners / winners.sum(axis=axes, keepdims=True)
        return make_op(op, best if keepdims else best.squeeze(axes), (self,), vjps=(vjp,),
                       rules=(f"d({op} x)/dx_i = 1 where x_i is the {op} (ties share it), else 0",))

    # ---- elementwise functions ----------------------------------------------------------
    @_floating
    def exp(self):
        out = np.exp(self.data)
        return make_op("exp", out, (self,), vjps=(lambda g: g * out,), rules=("d(e^x)/dx = e^x",))

    @_floating
    def log(self):
        x = self.data
        return make_op("log", np.log(x), (self,), vjps=(lambda g: g / x,), rules=("d(ln x)/dx = 1/x",))

    @_floating
    def sqrt(self):
        out = np.sqrt(self.data)
        return make_op("sqrt", out, (self,), vjps=(lambda g: g / (2 * out),), rules=("d(√x)/dx = 1/(2√x)",))

    def abs(self):
        x = self.data
        return make_op("abs", np.abs(x), (self,), vjps=(lambda g: g * np.sign(np.where(np.isnan(x), 0, x)),),
                       rules=("d|x|/dx = sign(x), 0 at 0",))   # and 0 at nan, as PyTorch

    @_floating
    def tanh(self):
        out = np.tanh(self.data)
        return make_op("tanh", out, (self,), vjps=(lambda g: g * (1 - out * out),),
                       rules=("d(tanh x)/dx = 1 - tanh²(x)",))

    @_floating
    def sigmoid(self):
        out = 0.5 * (1 + np.tanh(0.5 * self.data))   # = 1/(1+e^-x), without overflow in e^-x
        return make_op("sigmoid", out, (self,), vjps=(lambda g: g * out * (1 - out),),
                       rules=("dσ(x)/dx = σ(x)·(1 - σ(x))",))

    def relu(self):
        x = self.data
        return make_op("relu", np.maximum(x, 0), (self,), vjps=(lambda g: g * ~(x <= 0),),   # 1 at nan, as PyTorch
                       rules=("d relu(x)/dx = 1 if x > 0, else 0",))

    @_floating
    def gelu(self):
        """GELU, tanh approximation (GPT-2, nanoGPT): x/2·(1 + tanh(u)), u = c·(x + k·x³),
        c = √(2/π), k = 0.044715."""
        if modes.composed:   # the formula, op by op, with x = self
            return 0.5 * self * (1 + (np.sqrt(2 / np.pi) * (self + 0.044715 * self ** 3)).tanh())
        # fused: one node, computed in place in as few arrays as it can, since this op runs
        # on a transformer's largest activations and numpy updates an array in place faster
        # than it writes a new one; its rows go in cache-sized tiles, shared across the cores
        # (threads.by_rows)
        x = self.data if self.data.flags.c_contiguous else self.data.copy()   # rows() views it
        c, k = x.dtype.type(np.sqrt(2 / np.pi)), 0.044715
        buf, out = np.empty_like(x), np.empty_like(x)

        def forward(x, buf, out):                        # on a block of rows
            np.multiply(x, x, out=buf)                   # x·x: numpy's integer power is slow
            buf *= k * c
            buf += c
            buf *= x                                     # u = c·x·(1 + k·x²)
            np.tanh(buf, out=buf)
            buf += 1                                     # 1 + t, t = tanh(u)
            np.multiply(buf, x, out=out)
            out *= 0.5                                   # x/2·(1 + t)
        threads.by_rows(forward, *map(threads.rows, (x, buf, out)))

        def vjp(g):
            # d/dx = (1+t)/2 + x/2·(1 - t²)·du/dx = (1+t)/2·[1 + x·(1-t)·du/dx],
            # du/dx = c·(1 + 3k·x²), and 1 - t = 2 - (1+t)
            def backward(x, buf, g, grad):               # on a block of rows
                np.multiply(x, x, out=grad)
                grad *= 3 * k * c
                grad += c                                # du/dx
                grad *= x
                grad *= 2 - buf                          # x·(1-t)·du/dx
                grad += 1
                grad *= buf
                grad *= 0.5
                grad *= g
            grad = np.empty_like(x)
            threads.by_rows(backward, *map(threads.rows, (x, buf, g, grad)))
            return grad
        return make_op("gelu", out, (self,), vjps=(vjp,),
                       rules=("d gelu(x)/dx = (1+t)/2 + x/2·(1-t²)·c·(1+3k·x²), t = tanh(c·(x + k·x³))",))

    @_floating
    @torch_names
    def softmax(self, axis=-1):
        """e^x_i / Σ_j e^x_j along `axis`: each slice becomes a distribution."""
        axis = _axes("softmax", axis, self.ndim)
        # softmax(x - c) = softmax(x) for any constant c; with c = max(x), the largest
        # exponent is 0 and e^(x - c) cannot overflow
        shift = _kept_max(self.data, axis)
        if modes.composed:   # the formula, op by op
            e = (self - Tensor(shift)).exp()
            return e / e.sum(axis, keepdims=True)
        e = np.exp(self.data - shift)
        s = e / e.sum(axis=axis, keepdims=True)
        # d s_i / d x_j = s_i (delta_ij - s_j)  =>  vjp: s·(g - Σ_j g_j s_j)
        return make_op("softmax", s, (self,), vjps=(lambda g: s * (g - (g * s).sum(axis=axis, keepdims=True)),),
                       rules=("dL/dx = s·(g - Σ_j g_j·s_j), s = softmax(x)",))

    @_floating
    @torch_names
    def log_softmax(self, axis=-1):
        """x - log Σ_j e^x_j along `axis` (the log of softmax, without its underflow)."""
        axis = _axes("log_softmax", axis, self.ndim)
        shift = _kept_max(self.data, axis)   # a constant, as in softmax
        if modes.composed:   # the formula, op by op
            shifted = self - Tensor(shift)
            return shifted - shifted.exp().sum(axis, keepdims=True).log()
        shifted = self.data - shift
        out = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        # d out_i / d x_j = delta_ij - softmax_j  =>  vjp: g - softmax·Σ_i g_i
        return make_op("log_softmax", out, (self,),
                       vjps=(lambda g: g - np.exp(out) * g.sum(axis=axis, keepdims=True),),
                       rules=("dL/dx = g - softmax(x)·Σ_i g_i",))

    # ---- shape and indexing: these move values, so their vjps move gradients back --------
    def reshape(self, *shape):
        shape = _shape_arg(shape)
        in_shape = self.shape
        try:
            out = self.data.reshape(shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {in_shape} "
                             f"({self.size} elements) into {shape}") from None
        return make_op("reshape", out, (self,), vjps=(lambda g: g.reshape(in_shape),),
                       rules=("dL/dx = g, reshaped back to x's shape",))

    def transpose(self, *axes):
        """Permute axes like np.transpose; no axes reverses them."""
        pair = len(axes) == 2   # transpose(a, b), two numbers: PyTorch's spelling of a swap
        axes = _shape_arg(axes) or tuple(reversed(range(self.ndim)))
        if len(axes) != self.ndim or len({a % max(self.ndim, 1) for a in axes}) < self.ndim:
            swap = (f"; to swap two axes, as PyTorch's transpose(a, b) does, use swapaxes{axes}"
                    if len(axes) == 2 else "")
            raise ValueError(f"transpose: axes {axes} are not a permutation of the {self.ndim} axes "
                             f"of a tensor of shape {self.shape}{swap}")
        positive = _axes("transpose", axes, self.ndim)   # each axis in range
        if pair and positive == (0, 1):   # numpy's "keep both axes", PyTorch's "swap them"
            warnings.warn(f"transpose{axes} on a 2-d tensor keeps its axes (numpy's meaning: a permutation); "
                          f"to swap them, as PyTorch's transpose{axes} does, use swapaxes{axes} or .T", stacklevel=2)
        inverse = tuple(positive.index(i) for i in range(self.ndim))   # where each axis went
        return make_op("transpose", self.data.transpose(axes), (self,), vjps=(lambda g: g.transpose(inverse),),
                       rules=("dL/dx = g, its axes put back in x's order",))

    T = property(lambda self: self.transpose())

    def swapaxes(self, axis1, axis2):   # PyTorch's transpose(a, b)
        """Swap two axes (np.swapaxes): k.swapaxes(-2, -1) is kᵀ for each matrix of a batch."""
        (first,), (second,) = _axes("swapaxes", axis1, max(self.ndim, 1)), _axes("swapaxes", axis2, max(self.ndim, 1))
        axes = list(range(self.ndim))
        axes[first], axes[second] = second, first
        return self.transpose(axes)

    def __getitem__(self, index):
        """numpy basic and integer-array indexing (an int Tensor works as an index array)."""
        index = _index(index)
        try:
            out = self.data[index]
        except IndexError as error:
            raise IndexError(f"getitem: {error} (indexing a tensor of shape {self.shape})") from None
        repeats = any((isinstance(i, np.ndarray) or devices.on_gpu(i)) and i.dtype.kind in "iu"
                      for i in (index if isinstance(index, tuple) else (index,)))

        return make_op("getitem", out, (self,), vjps=(lambda g: autograd.Scatter(index, g, repeats),),
                       rules=("d x[i]/dx = 1 at each picked place, 0 elsewhere: g scattered back",))

    @torch_names
    def split(self, sections, axis=0):
        """np.split: `sections` equal parts, or a list of split points. Returns a list."""
        (axis,) = _axes("split", axis, self.ndim)
        length = self.shape[axis]
        if isinstance(sections, (int, np.integer)):
            if sections <= 0 or length % sections:
                raise ValueError(f"split: axis {axis} of length {length} (shape {self.shape}) "
                                 f"cannot be split into {sections} equal sections")
            points = [length // sections * i for i in range(1, sections)]
        else:
            points = list(sections)
        bounds = [0, *points, length]
        before = (slice(None),) * axis
        return [self[before + (slice(lo, hi),)] for lo, hi in zip(bounds, bounds[1:])]

    def masked_fill(self, mask, value):
        """`value` where the boolean `mask` is True, x elsewhere (mask broadcasts to x)."""
        mask = _bool_mask("masked_fill", mask)
        devices.same("masked_fill", mask, self.data)
        if _broadcast_shape(mask, self.data) != self.shape:
            raise ValueError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the "
                             f"tensor's shape {self.shape}")
        out = np.where(mask, self.dtype.type(value), self.data)
        return make_op("masked_fill", out, (self,), vjps=(lambda g: np.where(mask, 0, g),),
                       rules=("d/dx = 0 where filled (no longer x), 1 elsewhere",))


def make_op(op, data, inputs, vjps, rules=None):
    """The Tensor that op `op` computed from `inputs`: how every op joins the graph, and
    how new ops are made (nn's fused layers, a learner's own).

    data: the forward's result, computed with numpy.
    vjps: how backward sends g = dL/d(out) back to the inputs: a tuple of one function per
        input, g -> dL/d(that input); or, for an op whose inputs' gradients share work,
        one function g -> a tuple of every input's gradient (None for an input that needs
        none). A gradient comes in the input's shape, or in the shape the input was
        broadcast to (backward sums it down); any other shape is an error. A vjp may
        return g itself, a view, or an autograd.Scatter (as getitem's does), but must not
        write into g, which may be shared, nor into what the forward saved: both come
        read-only, and a write is an error naming the op.
    rules: the local derivative for each input, as a formula ("d(a·b)/da = b"); the
        chain-rule trace and the explorer page show it.
    Without grad mode, or when no input needs a gradient, no graph is kept.
    """
    if type(data) is not np.ndarray:   # a number (numpy's 0-d arithmetic makes one), a list, a CuPy array
        data = devices.array(data)
    if modes.anomaly:
        autograd.check_finite(op, data, "the output (forward)", inputs)
    out = Tensor.__new__(Tensor)
    out.data = data
    out.grad = None
    out.label = None
    out._scope = modes.scope
    out.requires_grad = modes.grad_enabled and any(t.requires_grad for t in inputs)
    if out.requires_grad:   # remember how it was made, for backward
        out._op, out._parents, out._vjps, out._rules = op, tuple(inputs), vjps, rules
    else:
        out._op, out._parents, out._vjps, out._rules = None, (), None, None
    if modes.replay is not None:   # gradcheck re-running a function (see gradcheck.py)
        modes.replay(op, out, inputs)
    return out


# ---- functions of several tensors -----------------------------------------------------
@torch_names
def cat(tensors, axis=0):
    """Join tensors along an existing axis (np.concatenate)."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    shapes = [t.shape for t in tensors]
    if not tensors or not all(shapes):
        raise ValueError(f"cat: needs one or more tensors of at least one axis, got shapes {shapes}: "
                         "zero-dimensional tensors cannot be concatenated, stack them (tg.stack)")
    (axis,) = _axes("cat", axis, len(shapes[0]))
    if len({shape[:axis] + shape[axis + 1:] for shape in shapes}) > 1:
        raise ValueError(f"cat: shapes {shapes} cannot be joined along axis {axis}: all axes but "
                         "that one must match")
    devices.same("cat", *(t.data for t in tensors))
    out = np.concatenate([t.data for t in tensors], axis=axis, dtype=_result_dtype(*tensors))
    ends = np.cumsum([t.shape[axis] for t in tensors])
    pieces = [(slice(None),) * axis + (slice(end - t.shape[axis], end),) for t, end in zip(tensors, ends)]
    return make_op("cat", out, tensors, vjps=tuple((lambda g, piece=piece: g[piece]) for piece in pieces),
                   rules=("dL/d(input) = g's slice where that input went",) * len(tensors))


@torch_names
def stack(tensors, axis=0):
    """Join tensors along a new axis: cat of each with a size-1 axis inserted."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    if len({t.shape for t in tensors}) > 1:
        raise ValueError(f"stack: all tensors must have the same shape, got {[t.shape for t in tensors]}")
    (axis,) = _axes("stack", axis, tensors[0].ndim + 1)
    devices.same("stack", *(t.data for t in tensors))
    return cat([t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in tensors], axis)


def where(condition, a, b):
    """a where the boolean `condition` is True, else b (all three broadcast)."""
    condition = _bool_mask("where", condition)
    a, b = _pair(a, b)
    devices.same("where", condition, a.data, b.data)
    if _broadcast_shape(condition, a.data, b.data) is None:
        raise ValueError(f"where: condition {condition.shape}, a {a.shape} and b {b.shape} "
                         "cannot be broadcast together")
    dtype = _result_dtype(a, b)
    return make_op("where", np.where(condition, a.data.astype(dtype), b.data.astype(dtype)), (a, b),
                   vjps=(lambda g: np.where(condition, g, 0), lambda g: np.where(condition, 0, g)),
                   rules=("d/da = 1 where condition, else 0", "d/db = 1 where not condition, else 0"))


def maximum(a, b):
    """Elementwise max of a and b; where they tie, each gets half the gradient."""
    return pick_elementwise("maximum", np.maximum, np.less, a, b,
                            rules=("d max(a,b)/da = 1 if a > b, 1/2 on a tie, else 0",
                                   "d max(a,b)/db = 1 if b > a, 1/2 on a tie, else 0"))


def pick_elementwise(op, pick, beaten, a, b, rules):
    """pick(a, b) elementwise (np.maximum, np.minimum): the gradient goes to the value picked,
    half to each on a tie; `beaten(a, b)` says where a is not picked. A nan is never beaten,
    so where one side is nan both get g, as in PyTorch."""
    a, b = _pair(a, b)
    out = _broadcasting(op, pick, a, b)
    tie = 0.5 * (a.data == b.data)
    a_share = (1 - tie - beaten(a.data, b.data)).astype(out.dtype)
    b_share = (1 - tie - beaten(b.data, a.data)).astype(out.dtype)
    return make_op(op, out, (a, b), vjps=(lambda g: g * a_share, lambda g: g * b_share), rules=rules)


# ---- helpers --------------------------------------------------------------------------
def _broadcasting(op, numpy_fn, a, b, dtype=None):
    """numpy_fn(a.data, b.data) in `dtype`, or in PyTorch's promoted one where a's and b's
    differ; an error names the op and the shapes when they don't broadcast."""
    if type(a.data) is not type(b.data):
        devices.same(op, a.data, b.data)
    if dtype is None and a.data.dtype != b.data.dtype:
        dtype = _result_dtype(a, b)
    try:
        return numpy_fn(a.data, b.data) if dtype is None else numpy_fn(a.data, b.data, dtype=dtype)
    except ValueError as error:
        if _broadcast_shape(a.data, b.data) is not None:
            raise ValueError(f"{op}: {error} (shapes {a.shape} and {b.shape})") from None
        raise ValueError(f"{op}: shapes {a.shape} and {b.shape} cannot be broadcast together "
                         "(numpy rule: aligned from the last axis, sizes must match or be 1)") from None


def _result_dtype(*tensors):
    """PyTorch's type promotion: the highest kind present wins (bool < integer < float), and
    among the tensors of that kind, numpy's rule (int32 and int64 give int64), where a 0-d
    tensor gives way to one with axes, as a scalar does (float32 x times a 0-d float64 is
    float32). numpy alone would make int64 with float32 a float64."""
    top = max(_RANK[t.data.dtype.kind] for t in tensors)
    leaders = [t for t in tensors if _RANK[t.data.dtype.kind] == top]
    leaders = [t for t in leaders if t.ndim] or leaders
    return np.result_type(*(t.data.dtype for t in leaders))


def _kept_max(x, axes):
    """x's max over `axes`, kept as axes of size 1; -inf where there is nothing to take the max
    of (an empty x), as PyTorch's softmax of nothing."""
    if x.size:
        return np.max(x, axis=axes, keepdims=True)
    return np.full([1 if a in axes else n for a, n in enumerate(x.shape)], -np.inf, x.dtype, like=x)


def _broadcast_shape(*arrays):
    """The shape numpy broadcasting gives these arrays, or None when they don't broadcast."""
    try:
        return np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:
        return None


def _matmul(x, y):
    """x @ y; as one 2-d matmul when y is a matrix shared by every row of a batched x,
    which BLAS runs much faster than numpy's loop over the batch."""
    if y.ndim == 2 and x.ndim > 2:
        return (x.reshape(math.prod(x.shape[:-1]), x.shape[-1]) @ y).reshape(*x.shape[:-1], y.shape[-1])
    return x @ y


def _pair(a, b):
    """Two Tensors from a and b, where a scalar takes the other's dtype."""
    if isinstance(a, Tensor):
        return a, a._lift(b)
    if isinstance(b, Tensor):
        return b._lift(a), b
    return Tensor(a), Tensor(b)


def _shape_arg(shape):
    """(2, 3) from f(2, 3), f((2, 3)) or f([2, 3])."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _axes(op, axis, ndim):
    """`axis` (None, int or tuple) as a tuple of non-negative axes, checked against ndim.
    A 0-d tensor takes axis 0 or -1 as PyTorch does, and reduces over no axis."""
    axes = tuple(range(ndim)) if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    valid = max(ndim, 1)
    for a in axes:
        if not -valid <= a < valid:
            raise np.exceptions.AxisError(f"{op}: axis {a} is out of range for a tensor with {ndim} axes "
                                          f"(expected an axis in [{-valid}, {valid - 1}])")
    positive = tuple(a % ndim for a in axes) if ndim else ()
    if len(set(positive)) < len(positive):
        raise ValueError(f"{op}: axes {axis} name one axis twice")
    return positive


def _keep(g, axes, keepdims):
    """The reduced gradient with its reduced axes put back as size 1, ready to broadcast."""
    return g if keepdims else np.expand_dims(g, axes)


def _index(index):
    """An index for numpy: Tensors become their arrays, lists become arrays."""
    if isinstance(index, tuple):
        return tuple(map(_index_part, index))
    return _index_part(index)


def _index_part(part):
    if isinstance(part, Tensor):
        return part.data
    if isinstance(part, list):
        return np.asarray(part)
    return part


def _bool_mask(op, mask):
    mask = _as_array(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: the mask must be a boolean array (for instance x > 0), got dtype "
                        f"{mask.dtype}; a float mask would be silently read as 'nonzero'")
    return mask
