"""nn.save / nn.load: one safetensors file of plain arrays plus JSON metadata, never pickle;
and the .npz checkpoints of tensorgrad 0.1, still read.

Round trips are exact (model and optimizer arrays, metadata with nested dicts and big
ints), resuming from a checkpoint continues bit-identically, writes are atomic, other
safetensors readers (numpy, PyTorch) read the file, and every kind of bad file raises
nn.CheckpointError with a clear message (and runs no code, and takes no memory for what a
lying header claims)."""
import io
import json
import os
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import nn
import tensorgrad as tg
from nn import optim
from nn import rng as nn_rng


def small_gpt(seed=0, dropout=0.0):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=9, block_size=6, n_layer=1, n_head=2, n_embd=8, dropout=dropout)


def trained(model, steps=2, lr=1e-2):
    """The model and an AdamW that has taken `steps` steps (so its moments are non-zero)."""
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    for step in range(steps):
        idx, targets = batch(step)
        _, loss = model(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


def batch(step):
    rng = np.random.default_rng(1000 + step)
    return rng.integers(0, 9, (3, 6)), rng.integers(0, 9, (3, 6))


def header_of(path):
    """(the JSON header of a safetensors file as a dict, the data after it)."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + length]), raw[8 + length:]


def write_raw(path, header, data=b""):
    """A safetensors file from a header (a dict, or the header's bytes as they are) and data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def temp_leftovers(folder):
    return [name for name in os.listdir(folder) if name.startswith(".tmp") or name.endswith(".tmp")]


META = {
    "config": {"vocab_size": 9, "block_size": 6, "nested": {"deep": [1, 2.5, None, True, "x"]}},
    "tokenizer": {"chars": "ab\n한국어 é"},
    "step": 1234,
    "lr": 3.0e-4,
    "rng": np.random.default_rng(7).bit_generator.state,   # 128-bit ints: beyond int64 and float
}


# ---- the file -------------------------------------------------------------------------------
def test_save_writes_one_safetensors_file_named_by_state_dict_optimizer_and_meta(tmp_path):
    model, opt = trained(small_gpt())
    path = tmp_path / "ck.safetensors"
    assert nn.save(path, model, opt, step=2) == path
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    arrays = safetensors.numpy.load_file(path)   # any safetensors reader opens it, no tensorgrad needed
    optimizer_names = ["optimizer/" + n for n in opt.state_dict()]
    assert set(arrays) == set(model.state_dict()) | set(optimizer_names)
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(arrays[name], array, err_msg=name)
    with safetensors.safe_open(path, framework="np") as file:
        metadata = file.metadata()
    assert set(metadata) == {"tensorgrad", "crc32"}
    header = json.loads(metadata["tensorgrad"])
    assert header["meta"] == {"step": 2} and header["names"] == list(model.state_dict()) + optimizer_names


def test_the_optimizer_can_be_given_by_name(tmp_path):
    model, opt = trained(small_gpt())
    nn.save(tmp_path / "ck.safetensors", model, optimizer=opt, step=2)
    fresh = optim.AdamW(small_gpt(seed=5).parameters(), lr=1e-2, weight_decay=0.1)
    state, meta = nn.load(tmp_path / "ck.safetensors", optimizer=fresh)
    assert meta == {"step": 2}
    for name, array in opt.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name], array, err_msg=name)


def test_pytorch_reads_the_file_with_safetensors_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    model, opt = trained(small_gpt())
    path = nn.save(tmp_path / "ck.safetensors", model, opt, step=2)
    tensors = safetensors.torch.load_file(path)
    assert tensors["tok_emb.weight"].dtype == torch.float32 and tensors["optimizer/updates"].dtype == torch.int64
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(tensors[name].numpy(), array, err_msg=name)
    for name, array in opt.state_dict().items():
        np.testing.assert_array_equal(tensors["optimizer/" + name].numpy(), array, err_msg=name)


def every_kind_of_array():
    """{name: array} of each dtype safetensors and numpy share, with the shapes and layouts
    that trip a writer: 0-d, empty, 3-d, transposed (not contiguous), big-endian, a non-ASCII name."""
    rng = np.random.default_rng(0)
    arrays = {f"{np.dtype(dtype).name}": (rng.standard_normal(7) * 50).astype(dtype)
              for dtype in nn.tensorfile.DTYPES.values()}
    arrays.update({"scalar": np.array(2.5), "empty": np.zeros((0, 3), np.float16),
                   "cube": rng.standard_normal((2, 3, 4)).astype(np.float32),
                   "transposed": rng.standard_normal((4, 3)).astype(np.float32).T,
                   "big-endian": np.arange(5, dtype=">i4"), "poids.é": np.ones(3, np.float32)})
    return arrays


def test_the_safetensors_package_reads_every_kind_of_array_as_written(tmp_path):
    arrays, metadata = every_kind_of_array(), {"note": "é, \"quoted\"", "crc32": "00000000"}
    path = tmp_path / "all.safetensors"
    nn.tensorfile.write_safetensors(path, arrays, metadata)
    theirs = safetensors.numpy.load_file(path)
    ours, our_metadata = nn.tensorfile.read_safetensors(path)
    with safetensors.safe_open(path, framework="np") as file:
        assert file.metadata() == metadata == our_metadata
    for read in (theirs, ours):
        assert set(read) == set(arrays)
        for name, array in arrays.items():
            assert read[name].shape == array.shape and read[name].dtype == array.dtype.newbyteorder("="), name
            np.testing.assert_array_equal(read[name], array, err_msg=name)


def test_each_tensor_starts_at_a_multiple_of_its_item_size(tmp_path):
    """So that a reader that maps the file (safetensors' own, PyTorch's) views each in place."""
    path = tmp_path / "all.safetensors"
    nn.tensorfile.write_safetensors(path, every_kind_of_array(), {})
    layout, data_start, _ = nn.tensorfile.safetensors_layout(path)
    assert data_start % 8 == 0
    assert all(begin % dtype.itemsize == 0 for dtype, _, begin in layout.values())


def test_saving_streams_the_arrays_without_a_second_copy_of_the_model(tmp_path):
    model = nn.GPT(65, 64, 2, 4, 128)
    arrays = model.state_dict()
    size = sum(array.nbytes for array in arrays.values())
    tracemalloc.start()
    try:
        nn.tensorfile.write_safetensors(tmp_path / "m.safetensors", arrays, {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 1_000_000 and peak < size / 10, (peak, size)


def test_an_array_safetensors_has_no_dtype_for_is_refused_by_name(tmp_path):
    path = tmp_path / "c.safetensors"
    with pytest.raises(ValueError, match=r"write_safetensors: tensor 'z' has dtype complex64, which safetensors "
                                         r"has no code for; expected one of float64, float32"):
        nn.tensorfile.write_safetensors(path, {"w": np.ones(2, np.float32), "z": np.ones(2, np.complex64)}, {})
    assert not path.exists()


# ---- round trips ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def save_v01(write_v01):
    """save_v01(path, model, optimizer=None, **meta): nn.save as tensorgrad 0.1 wrote it."""
    def save(path, model, optimizer=None, **meta):
        arrays = dict(model.state_dict())
        if optimizer is not None:
            arrays.update({"optimizer/" + name: array for name, array in optimizer.state_dict().items()})
        return write_v01(path, arrays, meta)
    return save


@pytest.fixture(params=["safetensors", "npz-0.1"])
def writer(request, save_v01):
    """nn.save, or the layout of tensorgrad 0.1, which nn.load reads the same."""
    return {"safetensors": nn.save, "npz-0.1": save_v01}[request.param]


def test_model_state_and_metadata_round_trip_exactly(tmp_path, writer):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck"
    writer(path, model, **META)
    state, meta = nn.load(path)
    assert list(state) == list(model.state_dict())   # same keys (and in the model's order)
    for name, array in model.state_dict().items():
        assert state[name].dtype == array.dtype
        np.testing.assert_array_equal(state[name], array, err_msg=name)
    assert meta == META
    assert meta["rng"]["state"]["state"] > 2 ** 64   # big ints survive exactly


def test_loaded_state_restores_a_fresh_model_exactly(tmp_path, writer):
    model, _ = trained(small_gpt(seed=0))
    writer(tmp_path / "ck", model)
    fresh = small_gpt(seed=1)
    state, _ = nn.load(tmp_path / "ck")
    fresh.load_state_dict(state)
    idx, _ = batch(99)
    np.testing.assert_array_equal(fresh(idx)[0].data, model(idx)[0].data)


def test_optimizer_state_round_trips_exactly(tmp_path, writer):
    model, opt = trained(small_gpt(), steps=3)
    writer(tmp_path / "ck", model, opt)
    fresh_opt = optim.AdamW(small_gpt(seed=5).parameters(), lr=1e-2, weight_decay=0.1)
    nn.load(tmp_path / "ck", optimizer=fresh_opt)
    assert list(fresh_opt.updates) == [3] * len(fresh_opt.params)
    saved, restored = opt.state_dict(), fresh_opt.state_dict()
    assert set(saved) == set(restored)
    for name in saved:
        np.testing.assert_array_equal(restored[name], saved[name], err_msg=name)


def test_a_tied_model_saves_its_one_table_once(tmp_path):
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=9, block_size=6, n_layer=1, n_head=2, n_embd=8, tie_weights=True)
    nn.save(tmp_path / "ck.safetensors", model)
    state, _ = nn.load(tmp_path / "ck.safetensors")
    assert "head.weight" not in state and list(state) == list(model.state_dict())


def test_loading_optimizer_state_from_a_checkpoint_without_one_is_a_clear_error(tmp_path, writer):
    model, _ = trained(small_gpt())
    writer(tmp_path / "ck", model)
    opt = optim.AdamW(model.parameters())
    with pytest.raises(nn.CheckpointError, match="optimizer"):
        nn.load(tmp_path / "ck", optimizer=opt)


def test_resuming_model_optimizer_and_rng_continues_bit_identically(tmp_path, writer):
    """Train 6 steps straight; or train 3, save, rebuild everything from the file in a
    fresh model, and train 3 more: the weights must be bit-identical (dropout included)."""
    def train(model, opt, steps):
        for step in steps:
            opt.lr = optim.cosine_lr(step, 1e-2, 1e-3, 2, 6)
            idx, targets = batch(step)
            _, loss = model(idx, targets)
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm(model.parameters(), 1.0)
            opt.step()

    straight = small_gpt(dropout=0.1)
    opt = optim.AdamW(straight.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    nn.manual_seed(42)
    train(straight, opt, range(6))
    expected = straight.state_dict()

    first = small_gpt(dropout=0.1)
    opt = optim.AdamW(first.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    nn.manual_seed(42)
    train(first, opt, range(3))
    writer(tmp_path / "ck", first, opt, step=3, rng=nn_rng.get_state())

    resumed = small_gpt(seed=9, dropout=0.1)
    opt = optim.AdamW(resumed.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    nn.manual_seed(0)   # a different stream, to be replaced by the saved one
    state, meta = nn.load(tmp_path / "ck", optimizer=opt)
    resumed.load_state_dict(state)
    nn_rng.set_state(meta["rng"])
    train(resumed, opt, range(meta["step"], 6))
    for name, array in resumed.state_dict().items():
        np.testing.assert_array_equal(array, expected[name], err_msg=name)


# ---- atomic writes ------------------------------------------------------------------------
def test_save_leaves_no_temporary_files_and_overwrites_the_target(tmp_path):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.safetensors"
    nn.save(path, model, step=1)
    nn.save(path, model, step=2)
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    assert nn.load(path)[1] == {"step": 2}


def test_save_creates_missing_folders(tmp_path):
    path = tmp_path / "out" / "run1" / "ck.safetensors"
    nn.save(path, small_gpt(), step=0)
    assert nn.load(path)[1] == {"step": 0}


@pytest.mark.parametrize("bad_meta", [{"step": np.int64(3)}, {"fn": print}, {"arr": np.zeros(2)}],
                         ids=["numpy-int", "function", "ndarray"])
def test_failed_save_with_non_json_metadata_is_a_clear_error_and_keeps_the_old_checkpoint(tmp_path, bad_meta):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.safetensors"
    nn.save(path, model, step=1)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="JSON"):
        nn.save(path, small_gpt(seed=3), **bad_meta)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.safetensors"]


def test_a_crash_while_writing_keeps_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.safetensors"
    nn.save(path, model, step=1)
    before = path.read_bytes()
    written = []

    def interrupted(fd):   # the new file's bytes are in the temporary file; then Ctrl-C, before the rename
        written.append(os.fstat(fd).st_size)
        raise KeyboardInterrupt

    monkeypatch.setattr(nn.atomic.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        nn.save(path, small_gpt(seed=3), step=2)
    monkeypatch.undo()
    assert written and written[0] > 0
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.safetensors"]


# ---- bad files: both formats -----------------------------------------------------------------
@pytest.fixture
def good_checkpoint(tmp_path, writer):
    model, opt = trained(small_gpt())
    return writer(tmp_path / "good.ckpt", model, opt, step=2, note="hello")


def test_a_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        nn.load(tmp_path / "nope.safetensors")


@pytest.mark.parametrize("keep", [0, 4, 10, 100, 0.5, -1, -10], ids=["empty", "4-bytes", "10-bytes", "100-bytes",
                                                                     "half", "minus-1", "minus-10"])
def test_a_truncated_file_is_a_checkpoint_error(good_checkpoint, keep):
    raw = good_checkpoint.read_bytes()
    cut = int(len(raw) * keep) if isinstance(keep, float) else keep % len(raw) if keep < 0 else keep
    good_checkpoint.write_bytes(raw[:cut])
    with pytest.raises(nn.CheckpointError, match="good.ckpt"):
        nn.load(good_checkpoint)


def test_random_bytes_are_a_checkpoint_error(tmp_path):
    path = tmp_path / "noise.safetensors"
    path.write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(nn.CheckpointError, match="not a checkpoint"):
        nn.load(path)


def test_a_plain_npy_file_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "array.npy"
    np.save(path, np.arange(10.0))
    with pytest.raises(nn.CheckpointError, match="array.npy"):
        nn.load(path)


def test_a_flipped_byte_inside_an_array_fails_the_checksum(good_checkpoint):
    state, _ = nn.load(good_checkpoint)
    raw = bytearray(good_checkpoint.read_bytes())
    data = state["tok_emb.weight"].tobytes()
    at = raw.find(data)
    assert at > 0
    raw[at + len(data) // 2] ^= 0x40
    good_checkpoint.write_bytes(bytes(raw))
    with pytest.raises(nn.CheckpointError, match="(?i)crc|corrupt|checksum"):
        nn.load(good_checkpoint)


def test_a_flipped_byte_inside_the_metadata_is_a_checkpoint_error(good_checkpoint):
    raw = bytearray(good_checkpoint.read_bytes())
    at = max(raw.find(b'"note": "hello"'), raw.find(b'\\"note\\": \\"hello\\"'))   # plain, or JSON in JSON
    assert at > 0
    raw[at + 12] ^= 0x01
    good_checkpoint.write_bytes(bytes(raw))
    with pytest.raises(nn.CheckpointError):
        nn.load(good_checkpoint)


def test_every_single_bit_flip_either_loads_the_same_checkpoint_or_is_a_checkpoint_error(tmp_path, writer):
    """No flipped bit anywhere in the file (headers, zip directory, data) may escape as
    another exception, or load different values silently."""
    model = nn.Linear(2, 3)
    path = tmp_path / "small.ckpt"
    writer(path, model, step=1)
    raw = path.read_bytes()
    expected = model.state_dict()
    escaped = []
    with open(path, "r+b") as file:   # damage one byte in place, load, then put it back
        for i in range(len(raw)):
            for bit in (0x01, 0x20):
                file.seek(i)
                file.write(bytes([raw[i] ^ bit]))
                file.flush()
                try:
                    state, meta = nn.load(path)
                except nn.CheckpointError:
                    continue
                except Exception as error:   # noqa: BLE001 - the point of the test
                    escaped.append(f"byte {i} ^ {bit:#x}: {type(error).__name__}: {error}")
                    continue
                finally:
                    file.seek(i)
                    file.write(raw[i:i + 1])
                    file.flush()
                if meta != {"step": 1} or set(state) != set(expected) or not all(
                        np.array_equal(state[n], expected[n]) for n in expected):
                    escaped.append(f"byte {i} ^ {bit:#x}: loaded different values without an error")
    assert path.read_bytes() == raw
    assert not escaped, f"{len(escaped)} damaged files escaped:\n" + "\n".join(escaped[:10])


def test_a_loaded_state_for_another_model_shape_is_refused_by_load_state_dict(good_checkpoint):
    state, _ = nn.load(good_checkpoint)
    nn.manual_seed(0)
    other = nn.GPT(vocab_size=9, block_size=6, n_layer=1, n_head=2, n_embd=16)
    before = other.state_dict()
    with pytest.raises(ValueError, match="shape"):
        other.load_state_dict(state)
    assert all(np.array_equal(before[n], p.data) for n, p in other.named_parameters())
    deeper = nn.GPT(vocab_size=9, block_size=6, n_layer=2, n_head=2, n_embd=8)
    with pytest.raises(KeyError, match="h.1"):
        deeper.load_state_dict(state)


# ---- bad files: safetensors -----------------------------------------------------------------
TENSOR = {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}


@pytest.mark.parametrize("header, data, message", [
    (b"\x01\x02", b"", "not JSON"),
    (b'{"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}', bytes(24), "not JSON"),
    (b"\xff\xfe{}", b"", "not JSON"),
    (b"[1, 2, 3]", b"", "JSON list, not an object"),
    (b'{"w": ' + json.dumps(TENSOR).encode() + b', "w": ' + json.dumps(TENSOR).encode() + b"}", bytes(24),
     "appears twice"),
    ({"__metadata__": {"step": 3}}, b"", "__metadata__ must map text to text"),
    ({"w": [1, 2]}, b"", "expected {dtype, shape, data_offsets}"),
    ({"w": {**TENSOR, "extra": 1}}, bytes(24), "expected {dtype, shape, data_offsets}"),
    ({"w": {**TENSOR, "dtype": "F31"}}, bytes(24), "dtype 'F31' is not one of"),
    ({"w": {**TENSOR, "dtype": "BF16", "data_offsets": [0, 12]}}, bytes(12), "numpy has no bfloat16"),
    ({"w": {**TENSOR, "shape": [2, -3]}}, bytes(24), "shape must be a list of sizes >= 0"),
    ({"w": {**TENSOR, "shape": [2, 3.0]}}, bytes(24), "shape must be a list of sizes >= 0"),
    ({"w": {**TENSOR, "shape": [2, True]}}, bytes(24), "shape must be a list of sizes >= 0"),
    ({"w": {**TENSOR, "data_offsets": [0, 48]}}, bytes(24), "not a range inside the 24 bytes of data"),
    ({"w": {**TENSOR, "data_offsets": [-8, 16]}}, bytes(24), "not a range inside"),
    ({"w": {**TENSOR, "data_offsets": [16, 8]}}, bytes(24), "not a range inside"),
    ({"w": {**TENSOR, "data_offsets": [0]}}, bytes(24), "not a range inside"),
    ({"w": {**TENSOR, "shape": [2, 2]}}, bytes(24), "needs 16 bytes, its data_offsets give 24"),
    ({"w": {**TENSOR, "dtype": "F64"}}, bytes(24), "needs 48 bytes, its data_offsets give 24"),
    ({"w": TENSOR, "v": {**TENSOR, "data_offsets": [28, 52]}}, bytes(52), "a gap before it"),
    ({"w": TENSOR, "v": {**TENSOR, "data_offsets": [16, 40]}}, bytes(40), "an overlap before it"),
    ({"w": TENSOR}, bytes(30), "cover 24 bytes of data but 30 follow"),
], ids=["bytes", "cut-json", "bad-utf8", "json-list", "repeated-name", "metadata-not-text", "entry-not-object",
        "extra-field", "unknown-dtype", "bf16", "negative-size", "float-size", "bool-size", "end-outside",
        "begin-negative", "end-before-begin", "one-offset", "shape-too-small", "dtype-too-wide", "gap",
        "overlap", "trailing-bytes"])
def test_a_damaged_safetensors_header_is_a_checkpoint_error_saying_what_is_wrong(tmp_path, header, data, message):
    path = write_raw(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(nn.CheckpointError, match="bad.safetensors") as error:
        nn.load(path)
    assert message in str(error.value)


@pytest.mark.parametrize("length, message", [
    (10**6, "more than the 24 bytes that follow it"),
    (2**63 + 5, "more than a safetensors header may have (100,000,000)"),
], ids=["longer-than-the-file", "beyond-the-limit"])
def test_a_header_length_beyond_the_file_is_refused_before_reading(tmp_path, length, message):
    path = tmp_path / "long.safetensors"
    path.write_bytes(struct.pack("<Q", length) + b"{}" + bytes(22))
    with pytest.raises(nn.CheckpointError, match="long.safetensors") as error:
        nn.load(path)
    assert message in str(error.value)


def test_a_lying_header_takes_no_memory_for_what_it_claims(tmp_path):
    """A 1 TB tensor claimed in a 100-byte file: refused with no allocation of its size."""
    path = write_raw(tmp_path / "liar.safetensors",
                     {"w": {"dtype": "F32", "shape": [2**38], "data_offsets": [0, 2**40]}}, bytes(16))
    assert_refused_taking_no_memory(path, "not a range inside the 16 bytes")


def assert_refused_taking_no_memory(path, message):
    """nn.load(path) is a CheckpointError matching `message`, and allocates under 1 MB on the way."""
    tracemalloc.start()
    try:
        with pytest.raises(nn.CheckpointError, match=message):
            nn.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"{peak:,} bytes allocated"


def test_a_safetensors_file_of_another_tool_is_not_a_tensorgrad_checkpoint(tmp_path):
    path = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file({"w": np.zeros((2, 3), np.float32)}, path, metadata={"format": "pt"})
    with pytest.raises(nn.CheckpointError, match="foreign.safetensors: a safetensors file without tensorgrad's "
                                                 "metadata: not a tensorgrad checkpoint"):
        nn.load(path)


def test_a_checkpoint_whose_arrays_were_renamed_fails_the_checksum(tmp_path):
    path = nn.save(tmp_path / "ck.safetensors", small_gpt())
    header, data = header_of(path)
    header["tok_emb.weight_"] = header.pop("tok_emb.weight")
    write_raw(path, header, data)
    with pytest.raises(nn.CheckpointError, match="checksum"):
        nn.load(path)


def test_a_forged_checksum_over_unlisted_arrays_is_still_a_checkpoint_error(tmp_path):
    """Someone who recomputes the checksum cannot make nn.load return what the names list omits."""
    model = small_gpt()
    path = nn.save(tmp_path / "ck.safetensors", model)
    arrays = safetensors.numpy.load_file(path)
    arrays["extra"] = np.zeros(2, np.float32)
    with safetensors.safe_open(path, framework="np") as file:
        header = file.metadata()["tensorgrad"]
    safetensors.numpy.save_file(arrays, path, metadata={"tensorgrad": header,
                                                        "crc32": nn.checkpoint._crc32(header, arrays)})
    with pytest.raises(nn.CheckpointError, match="does not list the arrays \\['extra'\\]"):
        nn.load(path)


# ---- bad files: the .npz of tensorgrad 0.1 ---------------------------------------------------
class MakesADirectory:
    """Unpickling this runs os.mkdir(path): the marker of code execution."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_an_npz_with_a_pickled_object_array_is_refused_without_running_it(tmp_path):
    live_marker, marker = tmp_path / "ran-when-allowed", tmp_path / "ran"
    meta = np.frombuffer(json.dumps({"step": 1}).encode(), np.uint8)
    # first prove the payload is live: loading it with pickle allowed runs it
    np.savez(tmp_path / "live.npz", __meta__=meta, w=np.array([MakesADirectory(live_marker)], dtype=object))
    with np.load(tmp_path / "live.npz", allow_pickle=True) as archive:
        archive["w"]
    assert live_marker.exists()

    path = tmp_path / "evil.npz"
    np.savez(path, __meta__=meta, w=np.array([MakesADirectory(marker)], dtype=object))
    with pytest.raises(nn.CheckpointError, match="pickle"):
        nn.load(path)
    assert not marker.exists()
    opt = optim.SGD([nn.Parameter(np.zeros(2))], lr=0.1)
    with pytest.raises(nn.CheckpointError):
        nn.load(path, optimizer=opt)
    assert not marker.exists()


def test_an_npz_without_meta_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "nometa.npz"
    np.savez(path, **small_gpt().state_dict())
    with pytest.raises(nn.CheckpointError, match="__meta__"):
        nn.load(path)


@pytest.mark.parametrize("payload", [b'{"step": 1,', b"\xff\xfe{}", b"", b"not json at all"],
                         ids=["cut-json", "bad-utf8", "empty", "text"])
def test_damaged_npz_metadata_is_a_checkpoint_error(tmp_path, payload):
    path = tmp_path / "badmeta.npz"
    np.savez(path, __meta__=np.frombuffer(payload, np.uint8), **small_gpt().state_dict())
    with pytest.raises(nn.CheckpointError, match="metadata"):
        nn.load(path)


@pytest.mark.parametrize("members", [
    {"__meta__": b'{"step": 1}'},
    {"__meta__.npy": None, "tok_emb.weight": b"raw bytes, not an array"},
    {"__meta__.npy": None, "tok_emb.weight.npy": b"raw bytes, not an array"},
], ids=["raw-meta", "raw-array", "npy-name-raw-bytes"])
def test_a_zip_whose_members_are_not_npy_arrays_is_a_checkpoint_error(tmp_path, members):
    path = tmp_path / "plain.zip"
    meta_npy = tmp_path / "meta.npy"
    np.save(meta_npy, np.frombuffer(b'{"step": 1}', np.uint8))
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, meta_npy.read_bytes() if content is None else content)
    with pytest.raises(nn.CheckpointError):
        nn.load(path)


def test_an_npy_header_claiming_more_than_its_entry_holds_is_refused_before_reading(tmp_path):
    """A member whose .npy header claims 2**36 floats (256 GiB) in 16 bytes: refused, nothing
    allocated."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**36,)})
    meta = io.BytesIO()
    np.lib.format.write_array(meta, np.frombuffer(b'{"step": 1}', np.uint8))
    path = tmp_path / "liar.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__meta__.npy", meta.getvalue())
        archive.writestr("w.npy", header.getvalue() + bytes(16))
    assert_refused_taking_no_memory(path, r"liar.npz: entry 'w.npy': its header claims float32 of shape "
                                          r"\(68719476736,\) \(274,877,906,944 bytes\) but the entry holds 16")


def test_a_compressed_npz_is_not_a_tensorgrad_01_checkpoint(tmp_path):
    path = tmp_path / "squeezed.npz"
    np.savez_compressed(path, __meta__=np.frombuffer(b'{"step": 1}', np.uint8), w=np.zeros(100))
    with pytest.raises(nn.CheckpointError, match="compressed"):
        nn.load(path)


# ---- the rest -------------------------------------------------------------------------------
def test_checkpoint_error_is_a_value_error():
    assert issubclass(nn.CheckpointError, ValueError)


def test_save_accepts_str_paths_and_load_keeps_tensorgrad_out_of_the_file(tmp_path):
    path = str(tmp_path / "ck.safetensors")
    model = small_gpt()
    nn.save(path, model)
    state, meta = nn.load(path)
    assert meta == {}
    assert all(isinstance(a, np.ndarray) and not isinstance(a, tg.Tensor) for a in state.values())
    assert all(a.flags.writeable for a in state.values())
