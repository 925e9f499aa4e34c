"""PyTorch's spellings, for a learner who comes from it: where PyTorch's name means what
numpy's does, tensorgrad takes both. The engine keeps numpy's names (axis, keepdims);
this file holds every alias in one place: dim= and keepdim= for axis= and keepdims=, and
tg.cuda.is_available(). The dtype names (tg.long, tg.float32...) are in dtypes.py; the
devices themselves in devices.py.

Where PyTorch's spelling would mean something else in numpy's sense, numpy's holds and
the error names numpy's spelling: x.transpose(a, b) is a permutation of all the axes, so
swapping two of them is x.swapaxes(a, b). docs/coming-from-pytorch.md has the table.
"""
import functools

from . import devices

# ---- keyword names: PyTorch's -> numpy's ------------------------------------------------
RENAMED = {"dim": "axis", "keepdim": "keepdims", "correction": "ddof", "diagonal": "k"}


def torch_names(function):
    """Let `function`, written with numpy's keyword names, take PyTorch's too (dim= for
    axis=, keepdim= for keepdims=, ...). Giving both spellings of one name is an error."""
    @functools.wraps(function)
    def accepting_torch_names(*args, **kwargs):
        for torch_name in RENAMED.keys() & kwargs.keys():
            numpy_name = RENAMED[torch_name]
            if numpy_name in kwargs:
                raise TypeError(f"{function.__name__}: got both {torch_name}= and {numpy_name}=, "
                                "which are one argument (PyTorch's name and numpy's)")
            kwargs[numpy_name] = kwargs.pop(torch_name)
        return function(*args, **kwargs)
    return accepting_torch_names


# ---- devices --------------------------------------------------------------------------
class cuda:
    """tg.cuda.is_available(), as PyTorch's: a script that picks its device with
    `'cuda' if torch.cuda.is_available() else 'cpu'` picks the GPU when CuPy sees one."""

    @staticmethod
    def is_available():
        return devices.is_available()

    @staticmethod
    def device_count():
        """How many GPUs tensorgrad can use: the first one, when there is one."""
        return int(devices.is_available())

