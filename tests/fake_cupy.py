"""A fake CuPy for the tests: numpy inside, CuPy's manners outside.

Neither CI nor the dev machines have a GPU, so the tests stand this module in for `cupy`:

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)

Its `ndarray` keeps a numpy array (`_host`) and behaves like a CuPy array where tensorgrad's port
can go wrong:

- numpy hands it its ufuncs (NEP-13 `__array_ufunc__`, `np.add.at` too), its functions (NEP-18
  `__array_function__`) and `like=` (NEP-35), and gets a fake array back, as with CuPy;
- it refuses what CuPy refuses: an implicit copy to the host (`__array__` raises, so
  np.asarray(x), np.array(x), np.ascontiguousarray(x), np.require(x) fail), and numpy arrays,
  0-d ones included, among the operands (numpy and python scalars are fine);
- `flags` has c_contiguous, f_contiguous and owndata, and no `writeable`;
- every host<->device transfer is counted in `copies` (to_device, to_host, reset()).

The core is two functions: `_unwrap` (fake arrays -> the numpy arrays inside, numpy arrays
refused) and `_wrap` (numpy results -> fake arrays; an `out=` array comes back as itself).
"""
import builtins
import sys
import types
from collections import namedtuple

import numpy as np
from numpy import (bool_, complex64, complex128, dtype, e, finfo, float16, float32,  # noqa: F401
                   float64, iinfo, inf, int8, int16, int32, int64, nan, newaxis, pi, uint8)

__version__ = "14.2.0-fake"

IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")
MISSING = {"vecdot"}  # numpy routines CuPy 14.2 lacks: numpy's dispatch then raises TypeError
_SCALARS = (int, float, complex, np.generic)  # what CuPy takes beside its arrays (bool is an int)
_COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


class _Copies:
    """The host<->device transfers made so far (what a profiler would show on a GPU)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.to_device = self.to_host = 0

    def __repr__(self):
        return f"copies(to_device={self.to_device}, to_host={self.to_host})"


copies = _Copies()
Flags = namedtuple("Flags", "c_contiguous f_contiguous owndata")  # read-only, no `writeable`


def _refuse(x):
    raise TypeError(f"Unsupported type {type(x)}")


def _unwrap(obj, sources):
    """obj with each fake array replaced by the numpy array inside (and noted in `sources`);
    a numpy array anywhere in it is refused, as CuPy refuses it."""
    if isinstance(obj, ndarray):
        sources.append(obj)
        return obj._host
    if isinstance(obj, np.ndarray):
        _refuse(obj)
    if type(obj) in (list, tuple):
        return type(obj)(_unwrap(x, sources) for x in obj)
    if type(obj) is dict:
        return {k: _unwrap(v, sources) for k, v in obj.items()}
    return obj


def _wrap(obj, sources=()):
    """A numpy result as fake arrays: one of the arrays passed in (an `out=`) as that fake array,
    a view of one with it as base, a numpy scalar as a 0-d array (CuPy's reductions give those)."""
    if isinstance(obj, np.ndarray):
        for fake in sources:
            if obj is fake._host:
                return fake
        viewed = [f for f in sources if obj.base is not None and np.may_share_memory(obj, f._host)]
        base = None if not viewed else viewed[0] if viewed[0]._base is None else viewed[0]._base
        return ndarray._of(obj, base)
    if isinstance(obj, np.generic):
        return ndarray._of(np.asarray(obj))
    if type(obj) in (list, tuple):
        return type(obj)(_wrap(x, sources) for x in obj)
    return obj


def _call(func, args, kwargs):
    """func (a numpy routine or method) run on the arrays inside; its results as fake arrays."""
    sources = []
    args, kwargs = _unwrap(args, sources), _unwrap(kwargs, sources)
    return _wrap(func(*args, **kwargs), sources)


def _index(key):
    """A getitem/setitem (or ufunc.at) index for the array inside. A numpy index array or a list
    is copied to the device first, as CuPy does, and that copy is counted."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, ndarray):
        return key._host
    if isinstance(key, (np.ndarray, list)):
        copies.to_device += 1
        return np.array(key)
    return key


def _ufunc(ufunc, method, inputs, kwargs):
    """ufunc.method (`__call__`, `at`, `reduce`, ...) as CuPy runs it: fake arrays and scalars
    only; a numpy array operand raises TypeError, except a 0-d one in a comparison (CuPy turns
    that into a scalar); the indices of `at` and `reduceat` are an index (see _index)."""
    if ufunc.__name__ in MISSING:
        return NotImplemented
    if method in ("at", "reduceat") and len(inputs) > 1:
        sources = []
        array, rest = _unwrap(inputs[0], sources), _unwrap(inputs[2:], sources)
        result = getattr(ufunc, method)(array, _index(inputs[1]), *rest, **_unwrap(kwargs, sources))
        return _wrap(result, sources)
    if method == "__call__":
        if ufunc.__name__ in _COMPARISONS:
            inputs = tuple(x.item() if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in inputs)
        out = kwargs.get("out", ())
        for x in inputs:
            if not isinstance(x, (ndarray, *_SCALARS)):
                _refuse(x)
        for x in out if isinstance(out, tuple) else (out,):
            if not isinstance(x, ndarray) and x is not None:
                _refuse(x)
    return _call(getattr(ufunc, method), inputs, kwargs)


class ndarray:
    """A CuPy array stand-in: a numpy array inside (`_host`), reached only through numpy's
    dispatch, the methods below and the counted copies (get, tolist, item, bool, float, ...)."""

    __slots__ = ("_host", "_base", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, order="C"):  # CuPy's: uninitialised device memory
        self._host, self._base = np.empty(shape, dtype, order=order), None

    @classmethod
    def _of(cls, host, base=None):
        array = cls.__new__(cls)
        array._host, array._base = host, base
        return array

    # attributes
    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    ndim = property(lambda self: self._host.ndim)
    size = property(lambda self: self._host.size)
    itemsize = property(lambda self: self._host.itemsize)
    nbytes = property(lambda self: self._host.nbytes)
    strides = property(lambda self: self._host.strides)
    base = property(lambda self: self._base)
    T = property(lambda self: self if self.ndim < 2 else self.transpose())
    device = property(lambda self: _Device(0))

    @property
    def flags(self):
        f = self._host.flags
        return Flags(f.c_contiguous, f.f_contiguous, self._base is None)

    # numpy's dispatch
    def __array__(self, dtype=None, copy=None):
        raise TypeError(IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ in MISSING or not builtins.all(issubclass(t, (ndarray, np.ndarray)) for t in types):
            return NotImplemented
        if func.__name__ in _CONVERTERS:  # np.asarray(..., like=x) and the like: CuPy's own
            return _CONVERTERS[func.__name__](*args, **kwargs)
        return _call(func, args, kwargs)

    # the copies to the host, each counted
    def get(self, stream=None, order="C", out=None):
        copies.to_host += 1
        if out is None:
            return np.array(self._host, order=order, copy=True)
        out[...] = self._host
        return out

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if (arr.shape, arr.dtype) != (self.shape, self.dtype):
            raise ValueError(f"Shape or dtype mismatch: {arr.shape} {arr.dtype}")
        copies.to_device += 1
        self._host[...] = arr

    def item(self):
        return self.get().item()

    def tolist(self):
        return self.get().tolist()

    def tobytes(self, order="C"):
        return self.get().tobytes(order)

    __bool__ = lambda self: bool(self.get())                             # noqa: E731
    __int__ = lambda self: int(self.get())                               # noqa: E731
    __float__ = lambda self: float(self.get())                           # noqa: E731
    __complex__ = lambda self: complex(self.get())                       # noqa: E731
    __repr__ = lambda self: repr(self.get())                             # noqa: E731
    __str__ = lambda self: str(self.get())                               # noqa: E731
    __format__ = lambda self, spec: format(self.get(), spec)             # noqa: E731

    # the container
    def __len__(self):
        return len(self._host)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key):
        return _wrap(self._host[_index(key)], [self])

    def __setitem__(self, key, value):
        key = _index(key)
        if isinstance(value, (np.ndarray, list)) and np.ndim(value) > 0:
            parts = key if isinstance(key, tuple) else (key,)
            if not builtins.any(isinstance(k, np.ndarray) for k in parts):  # basic index: CuPy fills
                raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
            copies.to_device += 1                                  # advanced: CuPy copies it in
        elif isinstance(value, np.ndarray):
            value = value.item()
        self._host[key] = value._host if isinstance(value, ndarray) else value

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return _wrap(self._host.astype(dtype, order=order, copy=copy), [self])

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()


_METHODS = ("reshape transpose swapaxes squeeze copy view sum mean max min var std prod argmax "
            "argmin cumsum any all clip fill ravel flatten repeat dot take nonzero argsort sort "
            "round conj diagonal")


def _method(name):
    def method(self, *args, **kwargs):
        return _call(getattr(np.ndarray, name), (self, *args), kwargs)
    method.__name__ = name
    return method


def _operator(ufunc, reflected=False, inplace=False):
    def operator(self, other):
        if inplace:
            return ufunc(self, other, out=(self,))
        # CuPy's _should_use_rop: leave it to `other` when it opts out of numpy's ufuncs (like
        # tensorgrad's Tensor, `__array_ufunc__ = None`) or outranks us in __array_priority__
        if (getattr(other, "__array_ufunc__", 0) is None or not hasattr(other, "__array_ufunc__")
                and getattr(other, "__array_priority__", 0) > ndarray.__array_priority__):
            return NotImplemented
        return ufunc(other, self) if reflected else ufunc(self, other)
    return operator


for _name in _METHODS.split():
    setattr(ndarray, _name, _method(_name))
for _name, _uf in dict(add=np.add, sub=np.subtract, mul=np.multiply, truediv=np.true_divide,
                       floordiv=np.floor_divide, mod=np.remainder, pow=np.power, matmul=np.matmul,
                       and_=np.bitwise_and, or_=np.bitwise_or, xor=np.bitwise_xor).items():
    _name = _name.rstrip("_")
    setattr(ndarray, f"__{_name}__", _operator(_uf))
    setattr(ndarray, f"__r{_name}__", _operator(_uf, reflected=True))
    setattr(ndarray, f"__i{_name}__", _operator(_uf, inplace=True))
for _name, _uf in dict(eq=np.equal, ne=np.not_equal, lt=np.less, le=np.less_equal, gt=np.greater,
                       ge=np.greater_equal).items():
    setattr(ndarray, f"__{_name}__", _operator(_uf))
for _name, _uf in dict(neg=np.negative, pos=np.positive, abs=np.absolute, invert=np.invert).items():
    setattr(ndarray, f"__{_name}__", lambda self, _uf=_uf: _uf(self))
ndarray.__hash__ = None  # like CuPy's (and numpy's) arrays


# ------------------------------------------------------------------ the module's functions
def array(obj, dtype=None, copy=True, **kwargs):
    """A new device array: from a fake array, a copy on the device; from anything else (a numpy
    array, a list, a scalar), a host-to-device copy, counted."""
    if isinstance(obj, ndarray):
        return obj.astype(dtype if dtype is not None else obj.dtype, copy=bool(copy))
    kwargs.pop("device", None)
    copies.to_device += 1
    return ndarray._of(np.array(obj, dtype=dtype, copy=True, **kwargs))


def asarray(obj, dtype=None, **kwargs):
    """obj on the device: a fake array itself (cast if dtype says so), anything else copied in
    (counted)."""
    return array(obj, dtype, copy=False, **kwargs) if isinstance(obj, ndarray) else array(obj, dtype, **kwargs)


def asnumpy(a, stream=None, order="C", out=None):
    """The host copy of a fake array (counted); a numpy array or anything else as numpy's."""
    return a.get(stream, order, out) if isinstance(a, ndarray) else np.asarray(a, order=order)


def get_array_module(*args):
    return sys.modules[__name__] if builtins.any(isinstance(a, ndarray) for a in args) else np


def is_available():
    return True


_CONVERTERS = {"array": array, "asarray": asarray, "asanyarray": asarray}


class _Routine:
    """cupy.<name>: numpy's routine of that name run on the arrays inside, with CuPy's refusals.
    For a ufunc its methods too: cupy.add.at(x, indices, values), cupy.add.reduce(x)."""

    def __init__(self, func):
        self._func, self.__name__ = func, func.__name__

    def __call__(self, *args, **kwargs):
        if isinstance(self._func, np.ufunc):
            return _ufunc(self._func, "__call__", args, kwargs)
        return _call(self._func, args, kwargs)

    def __getattr__(self, method):
        if method not in ("at", "reduce", "reduceat", "accumulate", "outer"):
            raise AttributeError(method)
        return lambda *args, **kwargs: _ufunc(self._func, method, args, kwargs)


_ROUTINES = """
empty zeros ones full arange linspace eye identity empty_like zeros_like ones_like full_like
ascontiguousarray copy copyto concatenate stack vstack hstack split array_split where reshape
transpose swapaxes moveaxis squeeze expand_dims broadcast_to tril triu flip take take_along_axis
argsort sort argwhere flatnonzero nonzero diff outer tensordot einsum dot matmul sum prod mean var
std max min amax amin argmax argmin cumsum any all clip isfinite isnan isinf nan_to_num allclose
array_equal result_type add subtract multiply divide true_divide floor_divide power negative
absolute abs sign square exp log log1p expm1 sqrt tanh sin cos maximum minimum equal not_equal
less less_equal greater greater_equal logical_and logical_or logical_not floor ceil round repeat tile
"""
for _name in _ROUTINES.split():
    globals()[_name] = _Routine(getattr(np, _name))


class _Generator:
    """cupy.random's generators: numpy's own, the numbers made on the device (no copy)."""

    def __init__(self, seed=None, kind=np.random.default_rng):
        self._rng = kind(seed)

    def __getattr__(self, name):
        method = getattr(self._rng, name)
        return lambda *args, **kwargs: _call(method, args, kwargs)


class _Device:
    def __init__(self, device=0):
        self.id = device

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass

    def __eq__(self, other):
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


random = types.SimpleNamespace(default_rng=_Generator,
                               RandomState=lambda seed=None: _Generator(seed, np.random.RandomState))
cuda = types.SimpleNamespace(is_available=is_available, Device=_Device,
                             runtime=types.SimpleNamespace(getDeviceCount=lambda: 1,
                                                           deviceSynchronize=lambda: None))
