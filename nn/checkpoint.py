"""Checkpoints: one .npz of plain arrays, never pickle.

Inside the file: every model parameter under its dotted name, the optimizer's arrays
under "optimizer/<name>" when one is given, and the metadata (config, tokenizer, step,
RNG states: anything JSON can hold; tuples come back as lists) as UTF-8 JSON bytes in a
uint8 array "__meta__".
It is written to a temporary file in the same folder and renamed over the target, so a
crash never leaves half a checkpoint, and loaded with allow_pickle=False, so a file
cannot run code.
"""
import errno
import json
import os
import zipfile

import numpy as np

from .atomic import write_atomically

META = "__meta__"
OPTIMIZER = "optimizer/"


class CheckpointError(ValueError):
    """The file is not a readable tensorgrad checkpoint."""


def save(path, model, optimizer=None, /, **meta):
    """Write model (and optimizer) state and `meta` to `path` atomically. Returns path."""
    arrays = dict(model.state_dict())
    if optimizer is not None:
        arrays.update({OPTIMIZER + name: array for name, array in optimizer.state_dict().items()})
    _check_keys(meta)
    try:
        arrays[META] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    except TypeError as error:
        raise TypeError(f"save: metadata must be JSON-serializable: {error}") from None

    def write_npz(file):   # the .npz layout: a zip holding one .npy file per array
        with zipfile.ZipFile(file, "w") as archive:
            for name, array in arrays.items():
                with archive.open(name + ".npy", "w") as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
    write_atomically(path, write_npz)
    return path


def load(path, optimizer=None):
    """Read a checkpoint: returns (model state {name: array}, meta dict); restores the
    optimizer's state into `optimizer` when given. Any damage is a CheckpointError."""
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint file here", str(path))
    if not zipfile.is_zipfile(path):  # also catches truncation: the zip index sits at the end
        raise CheckpointError(f"{path}: not a checkpoint (an .npz zip archive), or truncated")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except ValueError as error:  # numpy's refusal of object arrays (which need pickle)
        raise CheckpointError(f"{path}: holds pickled objects, which a checkpoint never does; "
                              f"refusing to load it ({error})") from None
    except (OSError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile, KeyError) as error:
        # zipfile reports a damaged archive in many ways (bad CRC, "encrypted", unknown method...)
        raise CheckpointError(f"{path}: corrupted ({type(error).__name__}: {error})") from None
    strays = [name for name, value in arrays.items() if not isinstance(value, np.ndarray)]
    if strays:
        raise CheckpointError(f"{path}: entries {strays} are not numpy arrays: not a tensorgrad checkpoint")
    if META not in arrays:
        raise CheckpointError(f"{path}: has no '{META}' entry: not a tensorgrad checkpoint")
    try:
        meta = json.loads(arrays.pop(META).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: its metadata is damaged ({error})") from None
    state = {name: a for name, a in arrays.items() if not name.startswith(OPTIMIZER)}
    if optimizer is not None:
        saved = {name[len(OPTIMIZER):]: a for name, a in arrays.items() if name.startswith(OPTIMIZER)}
        if not saved:
            raise CheckpointError(f"{path}: has no optimizer state to restore")
        optimizer.load_state_dict(saved)
    return state, meta


def _check_keys(meta, where="meta"):
    """JSON turns a dict's non-string keys into strings, so the metadata would not come back
    as it was saved: refuse them up front."""
    if isinstance(meta, dict):
        for key, value in meta.items():
            if not isinstance(key, str):
                raise TypeError(f"save: {where} has the key {key!r}; metadata keys must be strings "
                                "(JSON would turn it into a string)")
            _check_keys(value, f"{where}[{key!r}]")
    elif isinstance(meta, (list, tuple)):
        for i, value in enumerate(meta):
            _check_keys(value, f"{where}[{i}]")
