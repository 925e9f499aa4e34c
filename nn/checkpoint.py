"""Checkpoints: one safetensors file of plain arrays and JSON metadata, never pickle.

Inside the file: every model array under its state_dict name ("h.0.attn.qkv.weight"), the
optimizer's arrays under "optimizer/<name>" when one is given, and in the header's metadata
(safetensors keeps text only) two entries: "tensorgrad", one JSON object {"names": the
arrays' names in the order saved, "meta": the caller's metadata (config, tokenizer, step,
RNG states: anything JSON can hold; tuples come back as lists)}, and "crc32", a checksum of
that JSON and of every array's name, dtype, shape and bytes. safetensors has no checksum of
its own (the zip of tensorgrad 0.1 had one): without it a flipped bit in the weights would
load silently.

Any safetensors reader opens the file: `safetensors.numpy.load_file(path)`, or
`safetensors.torch.load_file(path)` in PyTorch. It is written to a temporary file and
renamed over the target, so a crash never leaves half a checkpoint, and it is read through
nn/tensorfile.py, which checks every size a file claims before taking memory for it.
nn.load also reads the .npz checkpoints of tensorgrad 0.1.
"""
import errno
import json
import os
import zlib

import numpy as np

from .tensorfile import CheckpointError, read_npz, read_safetensors, write_safetensors

OPTIMIZER = "optimizer/"
HEADER, CRC = "tensorgrad", "crc32"   # the metadata entries
NPZ_META = "__meta__"                 # tensorgrad 0.1: the JSON as a uint8 array in the .npz
ZIP_STARTS = (b"PK\x03\x04", b"PK\x05\x06")   # a zip's first member, or an empty zip's index

__all__ = ["CheckpointError", "save", "load"]


def save(path, model, optimizer=None, **meta):
    """Write model (and optimizer) state and `meta` to `path` atomically. Returns path.
    `optimizer` may be given by position or by name."""
    arrays = dict(model.state_dict())
    if optimizer is not None:
        arrays.update({OPTIMIZER + name: array for name, array in optimizer.state_dict().items()})
    _check_keys(meta)
    try:
        header = json.dumps({"names": list(arrays), "meta": meta})
    except TypeError as error:
        raise TypeError(f"save: metadata must be JSON-serializable: {error}") from None
    write_safetensors(path, arrays, {HEADER: header, CRC: _crc32(header, arrays)})
    return path


def load(path, optimizer=None):
    """Read a checkpoint: returns (model state {name: array}, meta dict); restores the
    optimizer's state into `optimizer` when given. Any damage is a CheckpointError."""
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint file here", str(path))
    with open(path, "rb") as file:
        zipped = file.read(4) in ZIP_STARTS
    arrays, meta = (_read_npz_checkpoint if zipped else _read_checkpoint)(path)
    state = {name: a for name, a in arrays.items() if not name.startswith(OPTIMIZER)}
    if optimizer is not None:
        saved = {name[len(OPTIMIZER):]: a for name, a in arrays.items() if name.startswith(OPTIMIZER)}
        if not saved:
            raise CheckpointError(f"{path}: has no optimizer state to restore")
        optimizer.load_state_dict(saved)
    return state, meta


def _read_checkpoint(path):
    """(arrays in the order saved, meta) of a safetensors checkpoint, its checksum verified."""
    arrays, metadata = read_safetensors(path)
    if HEADER not in metadata:
        raise CheckpointError(f"{path}: a safetensors file without tensorgrad's metadata: not a tensorgrad checkpoint "
                              "(a Hugging Face GPT-2 folder loads with nn.GPT.from_gpt2)")
    if metadata.get(CRC) != _crc32(metadata[HEADER], arrays):
        raise CheckpointError(f"{path}: corrupted: its contents do not match their checksum (crc32)")
    try:   # as save() wrote it, unless someone wrote a checksum of their own
        header = json.loads(metadata[HEADER])
        ordered = {name: arrays.pop(name) for name in header["names"]}
        meta = header["meta"]
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: its tensorgrad metadata is damaged ({type(error).__name__}: {error})") from None
    if arrays:
        raise CheckpointError(f"{path}: its tensorgrad metadata does not list the arrays {sorted(arrays)[:5]}")
    return ordered, meta


def _crc32(header, arrays):
    """The checksum of the metadata JSON and every array (name, dtype, shape, bytes), as 8 hex
    digits. zlib's CRC-32 catches every single-bit error, and all bursts up to 32 bits."""
    crc = zlib.crc32(header.encode("utf-8"))
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        crc = zlib.crc32(f"{name} {array.dtype.str} {array.shape}".encode("utf-8"), crc)
        crc = zlib.crc32(array.reshape(-1).view(np.uint8), crc)
    return f"{crc:08x}"


def _read_npz_checkpoint(path):
    """(arrays, meta) of an .npz checkpoint of tensorgrad 0.1: its arrays, and the JSON
    metadata in the uint8 array "__meta__"."""
    arrays = read_npz(path)
    if NPZ_META not in arrays:
        raise CheckpointError(f"{path}: has no '{NPZ_META}' entry: not a tensorgrad checkpoint")
    try:
        meta = json.loads(arrays.pop(NPZ_META).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: its metadata is damaged ({error})") from None
    return arrays, meta


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
