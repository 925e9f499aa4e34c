"""nn.save / nn.load: one .npz of plain arrays plus JSON metadata, never pickle.

Round trips are exact (model and optimizer arrays, metadata with nested dicts and big
ints), resuming from a checkpoint continues bit-identically, writes are atomic, and every
kind of bad file raises nn.CheckpointError with a clear message (and runs no code)."""
import json
import os
import zipfile

import numpy as np
import pytest

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


def temp_leftovers(folder):
    return [name for name in os.listdir(folder) if name.startswith(".tmp") or name.endswith(".tmp")]


META = {
    "config": {"vocab_size": 9, "block_size": 6, "nested": {"deep": [1, 2.5, None, True, "x"]}},
    "tokenizer": {"chars": "ab\n한국어 é"},
    "step": 1234,
    "lr": 3.0e-4,
    "rng": np.random.default_rng(7).bit_generator.state,   # 128-bit ints: beyond int64 and float
}


# ---- round trips -------------------------------------------------------------------------
def test_save_writes_one_npz_of_plain_arrays_named_by_state_dict_optimizer_and_meta(tmp_path):
    model, opt = trained(small_gpt())
    path = tmp_path / "ck.npz"
    assert nn.save(path, model, opt, step=2) == path
    assert os.listdir(tmp_path) == ["ck.npz"]
    with np.load(path, allow_pickle=False) as archive:   # readable without pickle
        names = set(archive.files)
        meta = archive["__meta__"]
    assert meta.dtype == np.uint8
    assert json.loads(meta.tobytes().decode("utf-8")) == {"step": 2}
    optimizer_names = {"optimizer/" + n for n in opt.state_dict()}
    assert names == set(model.state_dict()) | optimizer_names | {"__meta__"}


def test_model_state_and_metadata_round_trip_exactly(tmp_path):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.npz"
    nn.save(path, model, **META)
    state, meta = nn.load(path)
    assert list(state) == list(model.state_dict())   # same keys (and in the model's order)
    for name, array in model.state_dict().items():
        assert state[name].dtype == array.dtype
        np.testing.assert_array_equal(state[name], array, err_msg=name)
    assert meta == META
    assert meta["rng"]["state"]["state"] > 2 ** 64   # big ints survive exactly


def test_loaded_state_restores_a_fresh_model_exactly(tmp_path):
    model, _ = trained(small_gpt(seed=0))
    nn.save(tmp_path / "ck.npz", model)
    fresh = small_gpt(seed=1)
    state, _ = nn.load(tmp_path / "ck.npz")
    fresh.load_state_dict(state)
    idx, _ = batch(99)
    np.testing.assert_array_equal(fresh(idx)[0].data, model(idx)[0].data)


def test_optimizer_state_round_trips_exactly(tmp_path):
    model, opt = trained(small_gpt(), steps=3)
    nn.save(tmp_path / "ck.npz", model, opt)
    fresh_opt = optim.AdamW(small_gpt(seed=5).parameters(), lr=1e-2, weight_decay=0.1)
    nn.load(tmp_path / "ck.npz", optimizer=fresh_opt)
    assert list(fresh_opt.updates) == [3] * len(fresh_opt.params)
    saved, restored = opt.state_dict(), fresh_opt.state_dict()
    assert set(saved) == set(restored)
    for name in saved:
        np.testing.assert_array_equal(restored[name], saved[name], err_msg=name)


def test_loading_optimizer_state_from_a_checkpoint_without_one_is_a_clear_error(tmp_path):
    model, _ = trained(small_gpt())
    nn.save(tmp_path / "ck.npz", model)
    opt = optim.AdamW(model.parameters())
    with pytest.raises(nn.CheckpointError, match="optimizer"):
        nn.load(tmp_path / "ck.npz", optimizer=opt)


def test_resuming_model_optimizer_and_rng_continues_bit_identically(tmp_path):
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
    nn.save(tmp_path / "ck.npz", first, opt, step=3, rng=nn_rng.get_state())

    resumed = small_gpt(seed=9, dropout=0.1)
    opt = optim.AdamW(resumed.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    nn.manual_seed(0)   # a different stream, to be replaced by the saved one
    state, meta = nn.load(tmp_path / "ck.npz", optimizer=opt)
    resumed.load_state_dict(state)
    nn_rng.set_state(meta["rng"])
    train(resumed, opt, range(meta["step"], 6))
    for name, array in resumed.state_dict().items():
        np.testing.assert_array_equal(array, expected[name], err_msg=name)


# ---- atomic writes ------------------------------------------------------------------------
def test_save_leaves_no_temporary_files_and_overwrites_the_target(tmp_path):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.npz"
    nn.save(path, model, step=1)
    nn.save(path, model, step=2)
    assert os.listdir(tmp_path) == ["ck.npz"]
    assert nn.load(path)[1] == {"step": 2}


def test_save_creates_missing_folders(tmp_path):
    path = tmp_path / "out" / "run1" / "ck.npz"
    nn.save(path, small_gpt(), step=0)
    assert nn.load(path)[1] == {"step": 0}


@pytest.mark.parametrize("bad_meta", [{"step": np.int64(3)}, {"fn": print}, {"arr": np.zeros(2)}],
                         ids=["numpy-int", "function", "ndarray"])
def test_failed_save_with_non_json_metadata_is_a_clear_error_and_keeps_the_old_checkpoint(tmp_path, bad_meta):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.npz"
    nn.save(path, model, step=1)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="JSON"):
        nn.save(path, small_gpt(seed=3), **bad_meta)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.npz"]


def test_a_crash_while_writing_keeps_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    model, _ = trained(small_gpt())
    path = tmp_path / "ck.npz"
    nn.save(path, model, step=1)
    before = path.read_bytes()

    def half_written(file, array, **options):
        file.write(b"\x93NUMPY half an array")
        raise KeyboardInterrupt   # the user pressed Ctrl-C mid-write

    monkeypatch.setattr(nn.checkpoint.np.lib.format, "write_array", half_written)
    with pytest.raises(KeyboardInterrupt):
        nn.save(path, small_gpt(seed=3), step=2)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ck.npz"]


# ---- bad files -----------------------------------------------------------------------------
@pytest.fixture
def good_checkpoint(tmp_path):
    model, opt = trained(small_gpt())
    path = tmp_path / "good.npz"
    nn.save(path, model, opt, step=2, note="hello")
    return path


def test_a_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        nn.load(tmp_path / "nope.npz")


@pytest.mark.parametrize("keep", [0, 10, 0.5, -1, -10], ids=["empty", "10-bytes", "half", "minus-1", "minus-10"])
def test_a_truncated_file_is_a_checkpoint_error(good_checkpoint, keep):
    raw = good_checkpoint.read_bytes()
    cut = int(len(raw) * keep) if isinstance(keep, float) else keep % len(raw) if keep < 0 else keep
    good_checkpoint.write_bytes(raw[:cut])
    with pytest.raises(nn.CheckpointError, match="good.npz"):
        nn.load(good_checkpoint)


def test_random_bytes_are_a_checkpoint_error(tmp_path):
    path = tmp_path / "noise.npz"
    path.write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(nn.CheckpointError, match="not a checkpoint"):
        nn.load(path)


def test_a_plain_npy_file_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "array.npy"
    np.save(path, np.arange(10.0))
    with pytest.raises(nn.CheckpointError, match="array.npy"):
        nn.load(path)


def test_a_flipped_byte_inside_an_array_fails_the_crc_check(good_checkpoint):
    state, _ = nn.load(good_checkpoint)
    raw = bytearray(good_checkpoint.read_bytes())
    data = state["tok_emb.weight"].tobytes()
    at = raw.find(data)
    assert at > 0
    raw[at + len(data) // 2] ^= 0x40
    good_checkpoint.write_bytes(bytes(raw))
    with pytest.raises(nn.CheckpointError, match="(?i)crc|corrupt"):
        nn.load(good_checkpoint)


def test_a_flipped_byte_inside_the_metadata_fails_the_crc_check(good_checkpoint):
    raw = bytearray(good_checkpoint.read_bytes())
    at = raw.find(b'"note": "hello"')
    assert at > 0
    raw[at + 10] ^= 0x01
    good_checkpoint.write_bytes(bytes(raw))
    with pytest.raises(nn.CheckpointError):
        nn.load(good_checkpoint)


def test_every_single_bit_flip_either_loads_the_same_checkpoint_or_is_a_checkpoint_error(tmp_path):
    """No flipped bit anywhere in the file (zip headers and directory included) may escape
    as another exception, or load different values silently."""
    model = nn.Linear(2, 3)
    path = tmp_path / "small.npz"
    nn.save(path, model, step=1)
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


def test_a_checkpoint_without_meta_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "nometa.npz"
    np.savez(path, **small_gpt().state_dict())
    with pytest.raises(nn.CheckpointError, match="__meta__"):
        nn.load(path)


@pytest.mark.parametrize("payload", [b'{"step": 1,', b"\xff\xfe{}", b"", b"not json at all"],
                         ids=["cut-json", "bad-utf8", "empty", "text"])
def test_damaged_metadata_is_a_checkpoint_error(tmp_path, payload):
    path = tmp_path / "badmeta.npz"
    np.savez(path, __meta__=np.frombuffer(payload, np.uint8), **small_gpt().state_dict())
    with pytest.raises(nn.CheckpointError, match="metadata"):
        nn.load(path)


@pytest.mark.parametrize("members", [
    {"__meta__": b'{"step": 1}'},
    {"__meta__.npy": None, "tok_emb.weight": b"raw bytes, not an array"},
], ids=["raw-meta", "raw-array"])
def test_a_zip_whose_members_are_not_npy_arrays_is_a_checkpoint_error(tmp_path, members):
    path = tmp_path / "plain.zip"
    meta_npy = tmp_path / "meta.npy"
    np.save(meta_npy, np.frombuffer(b'{"step": 1}', np.uint8))
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, meta_npy.read_bytes() if content is None else content)
    with pytest.raises(nn.CheckpointError):
        nn.load(path)


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


def test_checkpoint_error_is_a_value_error():
    assert issubclass(nn.CheckpointError, ValueError)


def test_save_accepts_str_paths_and_load_keeps_tensorgrad_out_of_the_file(tmp_path):
    path = str(tmp_path / "ck.npz")
    model = small_gpt()
    nn.save(path, model)
    state, meta = nn.load(path)
    assert meta == {}
    assert all(isinstance(a, np.ndarray) and not isinstance(a, tg.Tensor) for a in state.values())
