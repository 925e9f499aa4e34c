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

The checksum proves only that the file is as it was written, not that whoever wrote it
meant well: anyone who edits a checkpoint can compute a new one. So what load reads is input
all the same: its metadata is JSON of a bounded size and depth (nn/tensorfile.py) and an
object, and every float array must be finite (check_finite), or the file is refused by name;
an optimizer state restored from it holds no negative step count or second moment
(check_optimizer_state).

load_gpt reads the checkpoint of a GPT as demos/train_chargpt.py writes it (model_config and
tokenizer in the metadata): each field it reads is checked for type and range as
nn.GPTConfig describes it, what the metadata claims is checked against the tensors before a
model is built from it, and each tensor against the model (check_state), and the model's
logits must be finite (check_logits), so a file that does not fit is a CheckpointError naming
the file, the field or the tensor and what differs, never a traceback or a model that samples
garbage.
"""
import errno
import json
import zlib
from dataclasses import asdict

import numpy as np

import tensorgrad as tg
from tensorgrad import devices

from . import rng
from .atomic import open_regular
from .config import DEFAULTS, FIELDS, REQUIRED, GPTConfig
from .data import CharTokenizer, DataError
from .tensorfile import CheckpointError, check_finite, parse_json, read_npz, read_safetensors, write_safetensors
from .transformer import GPT

OPTIMIZER = "optimizer/"
HEADER, CRC = "tensorgrad", "crc32"   # the metadata entries
NPZ_META = "__meta__"                 # tensorgrad 0.1: the JSON as a uint8 array in the .npz
ZIP_STARTS = (b"PK\x03\x04", b"PK\x05\x06")   # a zip's first member, or an empty zip's index
MAX_CONTEXT = 2**16   # the largest block_size believed without a position table in the file to confirm it
PROBE = 8   # tokens of the window check_logits runs the model on
NON_NEGATIVE = {"updates": "a count of steps", "v": "a second moment (a running mean of squared gradients)"}

__all__ = ["CheckpointError", "save", "load", "check_state", "check_optimizer_state", "check_logits", "load_gpt"]


def save(path, model, optimizer=None, **meta):
    """Write model (and optimizer) state and `meta` to `path` atomically. Returns path.
    `optimizer` may be given by position or by name."""
    arrays = {name: devices.to(array, "cpu") for name, array in model.state_dict().items()}   # host arrays, from a GPU
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
    optimizer's state into `optimizer` when given. Any damage is a CheckpointError, and so
    is an array (model or optimizer) holding a NaN or an infinity."""
    try:
        with open_regular(path) as file:   # a FIFO or a device is refused, without waiting
            zipped = file.read(4) in ZIP_STARTS
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no checkpoint file here", str(path)) from None
    arrays, meta = (_read_npz_checkpoint if zipped else _read_checkpoint)(path)
    check_finite(path, arrays)   # after the checksum: a flipped bit is called damage, not a NaN
    state = {name: a for name, a in arrays.items() if not name.startswith(OPTIMIZER)}
    if optimizer is not None:
        saved = {name[len(OPTIMIZER):]: a for name, a in arrays.items() if name.startswith(OPTIMIZER)}
        if not saved:
            raise CheckpointError(f"{path}: has no optimizer state to restore")
        check_optimizer_state(path, saved)
        try:
            optimizer.load_state_dict(saved)   # checks every name and shape before it writes
        except (KeyError, ValueError, TypeError) as error:
            raise CheckpointError(f"{path}: its optimizer state does not fit this optimizer: "
                                  f"{error.args[0]}") from None
    return state, meta


def check_optimizer_state(path, saved):
    """Refuse (CheckpointError) an optimizer state ({name: array}, without "optimizer/") that no
    optimizer writes: a step count (Adam's t, one per parameter: "updates") or a second moment
    (Adam's running mean of squared gradients, "v.3") below 0. Adam takes beta ** t and
    sqrt(v), so an edited file with one would fail in the middle of a step, or train on nan."""
    for name, array in saved.items():
        kind = name.split(".")[0]
        if kind in NON_NEGATIVE and array.size and array.min() < 0:
            raise CheckpointError(f"{path}: tensor '{OPTIMIZER}{name}' holds {np.count_nonzero(array < 0):,} negative "
                                  f"value(s) (the smallest {array.min()}), but it is {NON_NEGATIVE[kind]}, never "
                                  "negative: an edited file. Its weights still sample; to train, resume from a "
                                  "checkpoint of your own or start a new run")


def check_logits(path, model):
    """Refuse (CheckpointError) weights that are finite but so large that the model cannot be
    computed with them: a product overflows float32 to inf (a LayerNorm's variance, an
    attention score), and inf - inf is nan, or a LayerNorm divides by inf and leaves zeros:
    such a model samples garbage. Measured on one short window of tokens (PROBE), in eval mode
    (no dropout, no random numbers drawn), where numpy's overflow is an error (one thread:
    tensorgrad splits only large arrays); the refusal names the tensor with the largest value."""
    ids = np.arange(min(PROBE, model.config["block_size"]))[None] % model.config["vocab_size"]   # (1, T)
    was_training = model.training
    model.eval()
    try:
        with tg.no_grad(), np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            logits, _ = model(ids)
        finite = bool(np.isfinite(logits.data).all())
    except FloatingPointError:   # overflow, or inf - inf
        finite = False
    finally:
        model.train(was_training)
    if not finite:
        name, largest = max(((name, float(np.abs(p.data).max())) for name, p in model.named_parameters()),
                            key=lambda pair: pair[1])
        raise CheckpointError(f"{path}: its weights are finite but so large that the model's forward pass overflows "
                              f"to inf or nan (the largest value, {largest:.3g}, is in tensor {name!r}): a run that "
                              "diverged, or an edited file; sample or resume from an earlier checkpoint")


def check_state(path, state, model):
    """Raise CheckpointError unless `state` ({name: array}, as load returns it) holds exactly
    the model's tensors, each of the model's shape and of a float dtype where the model's is
    float (float16 or float64 are cast on loading; an integer or bool array is not a weight).
    The message names the path, the tensor and what differs. Nothing is loaded."""
    own = dict(model.named_parameters())
    missing, unexpected = [n for n in own if n not in state], [n for n in state if n not in own]
    if missing or unexpected:
        raise CheckpointError(f"{path}: its tensors are not the model's: missing {missing[:6] or 'none'}, "
                              f"unexpected {unexpected[:6] or 'none'}")
    for name, p in own.items():
        array = state[name]
        if array.shape != p.shape:
            raise CheckpointError(f"{path}: tensor {name!r} has shape {array.shape}, the model's is {p.shape}")
        if array.dtype.kind != p.dtype.kind:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {array.dtype}, the model's is {p.dtype}")


def _read_checkpoint(path):
    """(arrays in the order saved, meta) of a safetensors checkpoint, its checksum verified."""
    arrays, metadata = read_safetensors(path)
    if HEADER not in metadata:
        raise CheckpointError(f"{path}: a safetensors file without tensorgrad's metadata: not a tensorgrad checkpoint "
                              "(a Hugging Face GPT-2 folder loads with nn.GPT.from_gpt2)")
    if metadata.get(CRC) != _crc32(metadata[HEADER], arrays):
        raise CheckpointError(f"{path}: corrupted: its contents do not match their checksum (crc32)")
    # as save() wrote it, unless someone wrote a checksum of their own
    header = parse_json(path, metadata[HEADER], "its tensorgrad metadata")
    names = header.get("names") if isinstance(header, dict) else None
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names) and "meta" in header):
        raise CheckpointError(f"{path}: its tensorgrad metadata is damaged: expected {{names: [text], meta: {{...}}}}, "
                              f"got {str(header)[:80]}")
    unlisted, absent = sorted(arrays.keys() - set(names)), [name for name in names if name not in arrays]
    if absent:
        raise CheckpointError(f"{path}: its tensorgrad metadata lists the arrays {absent[:5]}, which it does not hold")
    if unlisted:
        raise CheckpointError(f"{path}: its tensorgrad metadata does not list the arrays {unlisted[:5]}")
    return {name: arrays[name] for name in names}, _checked_meta(path, header["meta"])


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
    meta = parse_json(path, arrays.pop(NPZ_META).tobytes(), "its metadata")
    return arrays, _checked_meta(path, meta)


def _checked_meta(path, meta):
    """The metadata, refused unless it is a JSON object (save's **meta always is)."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: its metadata is a JSON {type(meta).__name__}, not an object of named fields")
    return meta


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


def load_gpt(path):
    """(model, tokenizer, meta) of a checkpoint holding an nn.GPT and its character vocabulary,
    as demos/train_chargpt.py writes it: nn.save(path, model, model_config=model.config,
    tokenizer=tokenizer.chars, ...). The metadata is checked against the tensors before the
    model is built (gpt_config), the model is built without drawing weights, every tensor is
    checked against it (check_state), and the arrays read become its parameters (no copy)."""
    state, meta = load(path)
    config, tokenizer = gpt_config(path, meta, state)   # checked as nn.GPTConfig, so GPT(**config) takes it
    with rng.skipping_init():   # placeholders that take no memory: the file's arrays replace them
        model = GPT(**config)
    check_state(path, state, model)
    model.load_state_dict(state, assign=True)
    check_logits(path, model)
    return model, tokenizer, meta


def gpt_config(path, meta, state):
    """(nn.GPT's arguments, the CharTokenizer) from a checkpoint's metadata, or CheckpointError
    naming what is missing or what differs. Every size is checked against a tensor the file
    holds (so against the file's size) before anything is built from it: vocab_size and n_embd
    against tok_emb.weight, n_layer against the blocks h.0, h.1, ..., a learned block_size
    against pos_emb.weight; a block_size without a table is held to MAX_CONTEXT."""
    config, chars = meta.get("model_config"), meta.get("tokenizer")
    if not isinstance(config, dict) or not isinstance(chars, str):
        raise CheckpointError(f"{path}: its metadata has no model_config (a dict) and tokenizer (the characters): "
                              "not a GPT checkpoint of demos/train_chargpt.py")
    missing = [key for key in REQUIRED if key not in config]   # the sizes; the rest have defaults (0.1 had no tying)
    unknown = sorted(config.keys() - FIELDS.keys())
    if missing or unknown:
        raise CheckpointError(f"{path}: its model_config is incomplete or foreign: missing {missing or 'none'}, "
                              f"unknown {unknown or 'none'}")
    try:   # each field as nn.GPT checks it (and the job's flags), in the same words
        config = asdict(GPTConfig(**{**DEFAULTS, **config}))
    except (TypeError, ValueError) as error:   # e.g. n_embd not divisible by n_head
        raise CheckpointError(f"{path}: its model_config describes no GPT: {error}") from None
    vocab_size, n_embd, block_size = config["vocab_size"], config["n_embd"], config["block_size"]
    expected = {"tok_emb.weight": (vocab_size, n_embd)}
    if config["pos"] == "learned":
        expected["pos_emb.weight"] = (block_size, n_embd)
    elif block_size > MAX_CONTEXT:
        raise CheckpointError(f"{path}: its model_config claims block_size {block_size:,}, more than the "
                              f"{MAX_CONTEXT:,} believed without a position table in the file")
    for name, shape in expected.items():
        if name not in state or state[name].shape != shape:
            found = f"has shape {state[name].shape}" if name in state else "is missing"
            raise CheckpointError(f"{path}: its model_config implies tensor {name!r} of shape {shape}, but it {found}")
    blocks = {name.split(".")[1] for name in state if name.startswith("h.")}
    if len(blocks) != config["n_layer"] or blocks != {str(i) for i in range(len(blocks))}:
        raise CheckpointError(f"{path}: its model_config says n_layer {config['n_layer']}, but its tensors are of "
                              f"the blocks {sorted(blocks, key=lambda b: (len(b), b))[:8]}")
    try:
        tokenizer = CharTokenizer.from_chars(chars)
    except DataError as error:
        raise CheckpointError(f"{path}: its tokenizer is damaged: {error}") from None
    if tokenizer.vocab_size != vocab_size:
        raise CheckpointError(f"{path}: its tokenizer has {tokenizer.vocab_size} characters but the model's "
                              f"vocabulary (vocab_size, the rows of tok_emb.weight) is {vocab_size}")
    return config, tokenizer
