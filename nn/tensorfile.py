"""Files of tensors, read as untrusted input; safetensors files written atomically.

Two formats come in: safetensors (tensorgrad's checkpoints, and Hugging Face's
model.safetensors) and the .npz checkpoints of tensorgrad 0.1. A file may be damaged,
truncated, or made to mislead, so what its bytes claim is checked here, in one place,
before any memory is taken for it: a header must fit inside the file, each tensor's bytes
must lie inside the data and be exactly as many as its dtype and shape need, and together
they must cover the data with no gap and no overlap. Nothing in a file is ever executed
(no pickle). Every refusal is a CheckpointError naming the file and what is wrong.
Writing streams the header and then each array's bytes (write_safetensors); reading, once
the header has passed, is a seek and a read into each array, so the checks and the offsets
they checked are the ones used. Neither needs the safetensors package: the tests prove that
it reads what is written here, and that Hugging Face's files are read here.

Every JSON text read as input (a safetensors header, a checkpoint's metadata, a GPT-2
folder's config.json, tokenizer.json and shard index) goes through parse_json or read_json:
limited in size (MAX_JSON_BYTES) and nesting (MAX_JSON_DEPTH), no name repeated in an
object. And a tensor read to be a weight passes check_finite: a NaN or an infinity in a file
is refused by name, not sampled from or trained on.

A safetensors file is 8 bytes (little-endian u64 n), n bytes of JSON header
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__":
{str: str}}, then the data; offsets count from the start of the data.
"""
import json
import math
import os
import struct
import zipfile

import numpy as np

from .atomic import open_regular, write_atomically

MAX_HEADER_BYTES = 100_000_000   # safetensors' own limit: a header is names and numbers, not data
MAX_JSON_BYTES = MAX_HEADER_BYTES   # any JSON file read: GPT-2's tokenizer.json, the largest, is 1.4 MB
MAX_JSON_DEPTH = 32   # ours nest 2 to 5 deep; Python's parser would hit its recursion limit near 1,000
MAX_NDIM = 32         # numpy 1's limit on a shape's length (numpy 2's is 64)
MAX_BYTES = np.iinfo(np.intp).max   # numpy's limit on an array's size times its item size
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
          "U8": np.uint8, "BOOL": np.bool_}   # the safetensors dtypes numpy has
CODES = {np.dtype(dtype): code for code, dtype in DTYPES.items()}   # and back: numpy's dtype -> its code


class CheckpointError(ValueError):
    """The file is not a readable checkpoint: damaged, truncated or foreign."""


# ---- safetensors ---------------------------------------------------------------------------
def write_safetensors(path, arrays, metadata):
    """{name: ndarray} and metadata {str: str} as one safetensors file at `path`, written to
    a temporary file and renamed (nn/atomic.py). Streamed: the header, then each array's own
    bytes, so saving takes no second copy of the model (only a non-contiguous or big-endian
    array is copied, one at a time)."""
    # the largest items first: the data starts 8-byte aligned, so every tensor then starts at a
    # multiple of its item size, and a reader that maps the file can view each in place
    names = sorted(arrays, key=lambda name: -arrays[name].dtype.itemsize)
    header, offset = {"__metadata__": metadata}, 0
    for name in names:
        array = arrays[name]
        code = CODES.get(array.dtype.newbyteorder("="))   # the byte order aside: the bytes go little-endian
        if code is None:
            raise ValueError(f"write_safetensors: tensor {name!r} has dtype {array.dtype}, which safetensors has no "
                             f"code for; expected one of {', '.join(str(dtype) for dtype in CODES)}")
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # padded with spaces, as safetensors pads: the data 8-byte aligned

    def write(file):
        file.write(struct.pack("<Q", len(text)) + text)
        for name in names:
            array = np.ascontiguousarray(arrays[name], arrays[name].dtype.newbyteorder("<"))   # safetensors is little-endian
            file.write(array.reshape(-1).view(np.uint8))
    write_atomically(path, write)


def read_safetensors(path, names=None):
    """({name: ndarray}, metadata {str: str}) of a safetensors file, its header checked first
    (safetensors_layout); `names` reads only those tensors. Each tensor's bytes are read
    straight into the array returned (writable, its own): no mapping of the file, no
    intermediate copy, so a model read this way takes its own size in memory."""
    layout, data_start, metadata = safetensors_layout(path)
    missing = [name for name in names or () if name not in layout]
    if missing:
        raise CheckpointError(f"{path}: has no tensor {missing[0]!r}")
    arrays = {}
    with open_regular(path) as file:
        for name in layout if names is None else names:
            dtype, shape, begin = layout[name]
            array = arrays[name] = np.empty(shape, dtype)
            file.seek(data_start + begin)
            if file.readinto(array.reshape(-1).view(np.uint8)) != array.nbytes:   # the file shrank since
                raise CheckpointError(f"{path}: truncated while reading tensor {name!r}")
    return arrays, metadata


def safetensors_layout(path):
    """The header of a safetensors file, checked against the file's size before anything
    else is read: ({name: (numpy dtype, shape, offset of its bytes in the data)}, where the
    data starts in the file, metadata {str: str}). The file is opened as nn.atomic.open_regular
    opens it: a FIFO or a device is refused, without waiting."""
    with open_regular(path) as file:
        size = os.fstat(file.fileno()).st_size
        prefix = file.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path}: not a checkpoint: {size} bytes, too short for a safetensors file "
                                  "(8 bytes of header length first)")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise CheckpointError(f"{path}: not a checkpoint, or truncated: its header length {length:,} is more than "
                                  + (f"the {size - 8:,} bytes that follow it" if length <= MAX_HEADER_BYTES
                                     else f"a safetensors header may have ({MAX_HEADER_BYTES:,})"))
        text = file.read(length)
    header = parse_json(path, text, "not a checkpoint: its header")
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a checkpoint: its header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(value, str) for value in metadata.values())):
        raise CheckpointError(f"{path}: its __metadata__ must map text to text, got {str(metadata)[:80]}")
    data_size = size - 8 - length
    layout, spans = {}, []
    for name, entry in header.items():
        dtype, shape, begin, end = _tensor_entry(path, name, entry, data_size)
        layout[name] = (dtype, shape, begin)
        spans.append((begin, end, name))
    covered = 0
    for begin, end, name in sorted(spans):   # the tensors must tile the data: no gap, no overlap
        if begin != covered:
            raise CheckpointError(f"{path}: tensor {name!r} starts at byte {begin:,} of the data, expected {covered:,} "
                                  f"({'a gap' if begin > covered else 'an overlap'} before it)")
        covered = end
    if covered != data_size:
        raise CheckpointError(f"{path}: its tensors cover {covered:,} bytes of data but {data_size:,} follow the "
                              "header (truncated, or bytes appended)")
    return layout, 8 + length, metadata


def _tensor_entry(path, name, entry, data_size):
    """(dtype, shape, begin, end) of one header entry, each checked."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(f"{where}: expected {{dtype, shape, data_offsets}}, got {str(entry)[:80]}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if code not in DTYPES:
        hint = " (numpy has no bfloat16: save the model in float32)" if code == "BF16" else ""
        raise CheckpointError(f"{where}: dtype {code!r} is not one of {', '.join(DTYPES)}{hint}")
    if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
        raise CheckpointError(f"{where}: shape must be a list of sizes >= 0, got {str(shape)[:80]}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_size):
        raise CheckpointError(f"{where}: data_offsets {offsets!r} are not a range inside the "
                              f"{data_size:,} bytes of data")
    dtype = np.dtype(DTYPES[code]).newbyteorder("<")   # safetensors stores little-endian
    check_shape(where, shape, dtype)
    needed = math.prod(shape) * dtype.itemsize
    if offsets[1] - offsets[0] != needed:
        raise CheckpointError(f"{where}: {code} of shape {tuple(shape)} needs {needed:,} bytes, its data_offsets "
                              f"give {offsets[1] - offsets[0]:,}")
    return dtype, tuple(shape), offsets[0], offsets[1]


def check_shape(where, shape, dtype):
    """Refuse (CheckpointError) a shape no numpy array can have, counted in python ints,
    which never overflow. A size-0 axis makes the array empty, so the bytes it needs, 0, fit
    any file; numpy still multiplies the other sizes, and refuses past MAX_BYTES."""
    if len(shape) > MAX_NDIM:
        raise CheckpointError(f"{where}: shape has {len(shape)} axes; an array has at most {MAX_NDIM}")
    if math.prod(max(n, 1) for n in shape) * dtype.itemsize > MAX_BYTES:
        raise CheckpointError(f"{where}: shape {str(list(shape))[:80]} is larger than any array can be: its sizes "
                              f"(a 0 counted as 1) times {dtype.itemsize} bytes pass numpy's limit of {MAX_BYTES:,}")


def first_non_finite(arrays):
    """The name of the first float array of {name: array} that holds a NaN or an infinity, or
    None. Every value is finite exactly when the smallest and the largest are (a NaN makes
    both NaN): two passes over each array, and no mask of its size taken to find out (on a
    GPU, two numbers read back: float())."""
    return next((name for name, array in arrays.items()
                 if array.dtype.kind == "f" and array.size
                 and not np.isfinite([float(array.min()), float(array.max())]).all()),
                None)


def check_finite(path, arrays):
    """Refuse (CheckpointError) the first float array of {name: array} that holds a NaN or an
    infinity, naming the file, the tensor and where. A weight like that samples one token
    forever and trains to NaN; it comes from a run that diverged, or from an edited file."""
    name = first_non_finite(arrays)
    if name is not None:
        array = arrays[name]
        bad = ~np.isfinite(array)
        first = tuple(int(i) for i in np.unravel_index(bad.argmax(), array.shape))   # argmax: the first True
        raise CheckpointError(f"{path}: tensor {name!r} holds nan or inf in {np.count_nonzero(bad):,} of its "
                              f"{array.size:,} values (the first, {array[first]}, at index {first}): weights of a "
                              "run that diverged, or an edited file; refusing to read it")


# ---- JSON ------------------------------------------------------------------------------------
def read_json(path):
    """The JSON value in the file at `path`, read as parse_json reads it after its size is
    checked (at most MAX_JSON_BYTES), or CheckpointError naming the file; the file is opened
    as nn.atomic.open_regular opens it (a FIFO or a device is refused, without waiting)."""
    with open_regular(path) as file:
        text = file.read(MAX_JSON_BYTES + 1)
    if len(text) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path}: more than {MAX_JSON_BYTES:,} bytes: larger than any JSON file read here")
    return parse_json(path, text)


def parse_json(path, text, what="the file"):
    """The value of the JSON `text` (str, or bytes of UTF-8) read from `path`, or a
    CheckpointError naming path and `what` holds the text: text that is not JSON, a name
    repeated in one object (which of the two would count?), or nesting deeper than
    MAX_JSON_DEPTH. Python's parser recurses, so a text nested 100,000 deep ends in its
    RecursionError, caught here; a nesting it survives is measured without recursion."""
    try:
        value = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text, object_pairs_hook=_refuse_repeats)
        too_deep = _depth(value) > MAX_JSON_DEPTH
    except RecursionError:
        too_deep = True
    except ValueError as error:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CheckpointError(f"{path}: {what} is not JSON ({error})") from None
    if too_deep:
        raise CheckpointError(f"{path}: {what} is JSON nested more than {MAX_JSON_DEPTH} deep, deeper than a model's "
                              "files ever are")
    return value


def _depth(value):
    """How deep a parsed JSON value nests (a number or a string: 1), level by level, stopping
    past MAX_JSON_DEPTH."""
    depth, level = 0, [value]
    while level and depth <= MAX_JSON_DEPTH:
        depth += 1
        level = [child for v in level if isinstance(v, (dict, list))
                 for child in (v.values() if isinstance(v, dict) else v)]
    return depth


def _refuse_repeats(pairs):
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        repeated = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"the name {repeated!r} appears twice")
    return dict(pairs)


# ---- the .npz of tensorgrad 0.1 ------------------------------------------------------------
def read_npz(path):
    """{name: ndarray} of an .npz written by tensorgrad 0.1: a zip of uncompressed .npy
    members. Each member's .npy header is checked against the member's size before its
    array is read, and object arrays (which need pickle) are refused unread; zip's CRC
    catches a damaged byte."""
    with open_regular(path) as file:
        if not zipfile.is_zipfile(file):   # also catches truncation: the zip index sits at the end
            raise CheckpointError(f"{path}: not a checkpoint (an .npz zip archive), or truncated")
        size = os.fstat(file.fileno()).st_size
        try:
            with zipfile.ZipFile(file) as archive:
                names = archive.namelist()
                if len(set(names)) != len(names):
                    raise CheckpointError(f"{path}: corrupted: an entry's name appears twice")
                return {info.filename.removesuffix(".npy"): _npy_member(path, size, archive, info)
                        for info in archive.infolist()}
        except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
                KeyError) as error:   # zipfile reports a damaged archive in many ways (bad CRC, "encrypted"...)
            raise CheckpointError(f"{path}: corrupted ({type(error).__name__}: {error})") from None


def _npy_member(path, size, archive, info):
    where = f"{path}: entry {info.filename!r}"
    if not info.filename.endswith(".npy"):
        raise CheckpointError(f"{where} is not a numpy array (.npy): not a tensorgrad checkpoint")
    if info.compress_type != zipfile.ZIP_STORED or info.file_size > size:
        raise CheckpointError(f"{where}: compressed, or larger than the file: tensorgrad 0.1 wrote neither")
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)   # a ValueError unless it starts as an .npy file
        if version not in ((1, 0), (2, 0)):
            raise CheckpointError(f"{where}: .npy format version {version}: tensorgrad 0.1 wrote 1.0")
        shape, _, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)(member)
        if dtype.hasobject:
            raise CheckpointError(f"{where}: holds pickled objects, which a checkpoint never does; refusing to "
                                  "load it")
        check_shape(where, shape, dtype)
        needed = math.prod(shape) * dtype.itemsize
        if member.tell() + needed != info.file_size:
            raise CheckpointError(f"{where}: its header claims {dtype} of shape {shape} ({needed:,} bytes) but the "
                                  f"entry holds {info.file_size - member.tell():,}")
        member.seek(0)
        return np.lib.format.read_array(member, allow_pickle=False)
