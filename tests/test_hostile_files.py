"""Files and arguments made to mislead, met as a user meets them: a checkpoint rewritten with
its checksum recomputed, JSON nested 100,000 deep, a shape whose size overflows, weights that
are NaN in a file with a valid checksum, GPT-2 folders whose JSON has the wrong types,
sampling arguments out of range, and tensors of things that are not numbers.

A checksum proves that a file is as it was written, not that its writer meant well: the CRC
of a checkpoint is computed from the file's own contents, so whoever edits it writes a new
one (forge below does). Each case is one error naming the file and the field or tensor (a
CheckpointError, a ValueError), and on the command line (demos/sample_chargpt.py,
demos/export_gpt2.py) one line on stderr, no traceback, exit status 1, the file untouched.
"""
import io
import json
import os
import re
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import nn
import tensorgrad as tg
from nn import export

REPO = Path(__file__).resolve().parents[1]
CHARS = "\n abcdehilnorstw"
DEEP = 100_000   # far past Python's recursion limit: its json parser raises RecursionError


def nested(depth):
    """A JSON text of `depth` nested lists."""
    return "[" * depth + "]" * depth


def tiny_gpt(seed=0):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=len(CHARS), block_size=8, n_layer=1, n_head=2, n_embd=8)


def checkpoint(path, model=None, **meta):
    """A checkpoint as demos/train_chargpt.py writes one for sampling: the model, its
    model_config and its tokenizer in the metadata."""
    model = model or tiny_gpt()
    return nn.save(path, model, model_config=dict(model.config), tokenizer=CHARS, step=3, **meta)


def forge(path, header):
    """Rewrite the checkpoint at `path` with `header` (text) as its tensorgrad metadata, the
    JSON {"names": [...], "meta": {...}} that nn.save writes, and a checksum recomputed over it
    and the arrays, as nn.checkpoint computes it: what anyone who edits a file can do."""
    arrays = safetensors.numpy.load_file(path)
    safetensors.numpy.save_file(arrays, path, metadata={"tensorgrad": header,
                                                        "crc32": nn.checkpoint._crc32(header, arrays)})
    return path


def forge_meta(path, edit):
    """forge with the metadata edit(meta) makes (edit changes it in place, or returns another)."""
    with safetensors.safe_open(path, framework="np") as file:
        header = json.loads(file.metadata()["tensorgrad"])
    header["meta"] = edit(header["meta"]) or header["meta"]
    return forge(path, json.dumps(header))


def run(script, *args):
    """demos/<script> run as a user runs it; returns the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(REPO / "demos" / script), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)


def job(checkpoint, tmp_path):
    """demos/train_chargpt.py --resume from `checkpoint`, on a small text (it never gets that far)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be, that is the question\n" * 50, encoding="utf-8")
    return run("train_chargpt.py", "--resume", "--out", checkpoint, "--data", corpus)


def assert_one_line_refusal(result, *words):
    """The command failed with one line on stderr holding each of `words`, and no traceback."""
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr   # a bad file: status 1
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr


def raw_safetensors(path, header_text, data=b""):
    """A safetensors file whose header is `header_text` as it is."""
    text = header_text.encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


# ---- a checkpoint's metadata is input --------------------------------------------------------
def config_set(**changes):
    return lambda meta: meta["model_config"].update(changes)


FORGED_META = {
    "metadata-a-list": (lambda meta: [1, 2], "its metadata is a JSON list, not an object"),
    "model_config-a-list": (lambda meta: meta.update(model_config=[1, 2]), "has no model_config (a dict)"),
    "tokenizer-a-number": (lambda meta: meta.update(tokenizer=5), "and tokenizer (the characters)"),
    "tokenizer-empty": (lambda meta: meta.update(tokenizer=""), "its tokenizer is damaged: CharTokenizer: the text is "
                                                                "empty"),
    # a model_config is refused in nn.GPT's words (nn.GPTConfig's): "describes no GPT: GPTConfig: ..."
    "n_layer-text": (config_set(n_layer="1"), "describes no GPT: GPTConfig: n_layer must be a whole number >= 1, "
                                              "got '1'"),
    "n_head-negative": (config_set(n_head=-2), "n_head must be a whole number >= 1, got -2"),
    "vocab_size-fraction": (config_set(vocab_size=2.5), "vocab_size must be a whole number >= 1, got 2.5"),
    "n_embd-true": (config_set(n_embd=True), "n_embd must be a whole number >= 1, got True"),
    "dropout-text": (config_set(dropout="abc"), "dropout must be a number in [0, 1), got 'abc'"),
    "dropout-one": (config_set(dropout=1.0), "dropout must be a number in [0, 1), got 1.0"),
    "dropout-nan": (config_set(dropout=float("nan")), "dropout must be a number in [0, 1), got nan"),
    "dropout-a-list": (config_set(dropout=[0.1]), "dropout must be a number in [0, 1), got [0.1]"),
    "pos-unknown": (config_set(pos="rotary"), "pos must be one of learned, sinusoidal, none, got 'rotary'"),
    "pos-a-dict": (config_set(pos={"a": 1}), "got {'a': 1}"),
    "tie_weights-text": (config_set(tie_weights="yes"), "tie_weights must be true or false, got 'yes'"),
    "n_head-huge": (config_set(n_head=10**30), "describes no GPT: GPTConfig: n_embd 8 must be divisible by n_head "
                                               "1000000000000000000000000000000"),
}


@pytest.mark.parametrize("name", FORGED_META)
def test_a_forged_metadata_field_is_refused_naming_the_file_and_the_field(tmp_path, name):
    edit, message = FORGED_META[name]
    path = forge_meta(checkpoint(tmp_path / "forged.safetensors"), edit)
    before = path.read_bytes()
    with pytest.raises(nn.CheckpointError, match="forged.safetensors: ") as error:
        nn.checkpoint.load_gpt(path)
    assert message in str(error.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("header, message", [
    ('{"meta": {}}', "its tensorgrad metadata is damaged: expected {names: [text], meta: {...}}"),
    ('{"names": "abc", "meta": {}}', "its tensorgrad metadata is damaged"),
    ('{"names": [1], "meta": {}}', "its tensorgrad metadata is damaged"),
    ('[1, 2]', "its tensorgrad metadata is damaged"),
    ('{"names": ["ghost"], "meta": {}}', "lists the arrays ['ghost'], which it does not hold"),
], ids=["no-names", "names-text", "names-numbers", "a-list", "a-ghost"])
def test_forged_tensorgrad_metadata_is_refused_by_nn_load(tmp_path, header, message):
    path = forge(checkpoint(tmp_path / "forged.safetensors"), header)
    with pytest.raises(nn.CheckpointError, match="forged.safetensors: ") as error:
        nn.load(path)
    assert message in str(error.value)


def test_an_npz_checkpoint_whose_metadata_is_not_an_object_is_refused(tmp_path, write_v01):
    path = write_v01(tmp_path / "old.npz", dict(tiny_gpt().state_dict()), ["not", "an", "object"])
    with pytest.raises(nn.CheckpointError, match="old.npz: its metadata is a JSON list, not an object"):
        nn.load(path)


def test_the_sampler_and_the_exporter_answer_a_forged_field_in_one_line(tmp_path):
    path = forge_meta(checkpoint(tmp_path / "forged.safetensors"), config_set(dropout="abc"))
    before = path.read_bytes()
    for result in (run("sample_chargpt.py", path), run("export_gpt2.py", path, tmp_path / "gpt2")):
        assert_one_line_refusal(result, "forged.safetensors", "dropout must be a number in [0, 1), got 'abc'")
    assert path.read_bytes() == before and not (tmp_path / "gpt2").exists()


# ---- weights are checked finite ----------------------------------------------------------------
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_a_checkpoint_with_a_non_finite_weight_and_a_valid_checksum_is_refused_by_name(tmp_path, value):
    model = tiny_gpt()
    model.h[0].attn.qkv.weight.data[1, 2] = value
    path = checkpoint(tmp_path / "diverged.safetensors", model)   # nn.save writes it, checksum and all
    message = (f"diverged.safetensors: tensor 'h.0.attn.qkv.weight' holds nan or inf in 1 of its 192 values (the "
               f"first, {value}, at index (1, 2)): weights of a run that diverged, or an edited file")
    for load in (nn.load, nn.checkpoint.load_gpt):
        with pytest.raises(nn.CheckpointError, match="diverged.safetensors") as error:
            load(path)
        assert message in str(error.value)


def test_a_non_finite_optimizer_moment_is_refused_on_resume(tmp_path):
    model = tiny_gpt()
    optimizer = nn.optim.AdamW(model.parameters())
    _, loss = model(np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64))
    loss.backward()
    optimizer.step()
    state = optimizer.state_dict()
    name = next(name for name, array in state.items() if array.dtype.kind == "f")
    state[name] = state[name].copy()
    state[name].reshape(-1)[0] = np.inf
    optimizer.load_state_dict(state)
    path = nn.save(tmp_path / "ck.safetensors", model, optimizer)
    with pytest.raises(nn.CheckpointError, match=f"ck.safetensors: tensor 'optimizer/{name}' holds nan or inf in 1 of"):
        nn.load(path, nn.optim.AdamW(tiny_gpt().parameters()))


def test_an_npz_checkpoint_with_a_nan_weight_is_refused(tmp_path, write_v01):
    state = dict(tiny_gpt().state_dict())
    state["ln_f.bias"] = np.full(8, np.nan, np.float32)
    path = write_v01(tmp_path / "old.npz", state, {"model_config": {}, "tokenizer": CHARS})
    with pytest.raises(nn.CheckpointError, match="old.npz: tensor 'ln_f.bias' holds nan or inf in 8 of its 8 values"):
        nn.load(path)


@pytest.fixture
def folder(tmp_path):
    """A GPT-2 folder of a tiny model with its character vocabulary (nn.export.to_gpt2)."""
    return export.to_gpt2(tiny_gpt(), tmp_path / "gpt2", nn.data.CharTokenizer(CHARS))


def test_a_gpt2_folder_with_a_nan_weight_is_refused_naming_the_file_and_the_tensor(folder):
    weights = safetensors.numpy.load_file(folder / "model.safetensors")
    weights["transformer.h.0.mlp.c_fc.weight"][3, 4] = np.nan
    safetensors.numpy.save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(nn.CheckpointError, match=r"model.safetensors: tensor 'transformer.h.0.mlp.c_fc.weight' holds "
                                                 r"nan or inf in 1 of its 256 values \(the first, nan, at index "
                                                 r"\(3, 4\)\)"):
        nn.GPT.from_gpt2(folder)
    assert_one_line_refusal(run("sample_chargpt.py", folder), "model.safetensors", "transformer.h.0.mlp.c_fc.weight")


def test_the_sampler_the_exporter_and_a_resume_refuse_a_nan_checkpoint_in_one_line(tmp_path):
    model = tiny_gpt()
    model.tok_emb.weight.data[0, 0] = np.nan
    path = checkpoint(tmp_path / "diverged.safetensors", model)
    before = path.read_bytes()
    for result in (run("sample_chargpt.py", path), run("export_gpt2.py", path, tmp_path / "gpt2"), job(path, tmp_path)):
        assert_one_line_refusal(result, "diverged.safetensors", "tensor 'tok_emb.weight'", "nan or inf")
    assert not (tmp_path / "gpt2").exists() and path.read_bytes() == before


# ---- every parser is bounded -----------------------------------------------------------------
@pytest.mark.parametrize("depth", [DEEP, 40], ids=["100000-deep", "40-deep"])
def test_a_safetensors_header_nested_deep_is_refused_by_name(tmp_path, depth):
    path = raw_safetensors(tmp_path / "deep.safetensors", '{"w": ' + nested(depth) + "}")
    with pytest.raises(nn.CheckpointError, match="deep.safetensors: not a checkpoint: its header is JSON nested "
                                                 "more than 32 deep"):
        nn.load(path)


def test_checkpoint_metadata_nested_deep_is_refused_by_name(tmp_path):
    path = checkpoint(tmp_path / "deep.safetensors")
    names = json.dumps(list(safetensors.numpy.load_file(path)))
    forge(path, '{"names": ' + names + ', "meta": {"history": ' + nested(DEEP) + "}}")
    for load in (nn.load, nn.checkpoint.load_gpt):
        with pytest.raises(nn.CheckpointError, match="deep.safetensors: its tensorgrad metadata is JSON nested more "
                                                     "than 32 deep"):
            load(path)
    before = path.read_bytes()
    for result in (run("sample_chargpt.py", path), job(path, tmp_path)):
        assert_one_line_refusal(result, "deep.safetensors", "nested more than 32 deep")
    assert path.read_bytes() == before


def test_npz_metadata_nested_deep_is_refused_by_name(tmp_path):
    path = tmp_path / "deep.npz"
    with zipfile.ZipFile(path, "w") as archive, archive.open("__meta__.npy", "w") as member:
        np.lib.format.write_array(member, np.frombuffer(nested(DEEP).encode(), np.uint8))
    with pytest.raises(nn.CheckpointError, match="deep.npz: its metadata is JSON nested more than 32 deep"):
        nn.load(path)


@pytest.mark.parametrize("file", ["config.json", "tokenizer.json", "model.safetensors.index.json"])
def test_a_gpt2_folders_json_nested_deep_is_refused_naming_the_file(folder, file):
    if file == "model.safetensors.index.json":   # a sharded folder: its index is read for the shards
        (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / file).write_text('{"model_type": "gpt2", "x": ' + nested(DEEP) + "}")
    with pytest.raises(nn.CheckpointError, match=f"{file}: the file is JSON nested more than 32 deep"):
        nn.GPT.from_gpt2(folder) if file != "tokenizer.json" else export.char_tokenizer(folder)
    assert_one_line_refusal(run("sample_chargpt.py", folder), file, "nested more than 32 deep")


def test_a_json_file_larger_than_the_bound_is_refused_before_it_is_parsed(folder, monkeypatch):
    monkeypatch.setattr(nn.tensorfile, "MAX_JSON_BYTES", 1000)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "padding": " " * 1000}))
    with pytest.raises(nn.CheckpointError, match="config.json: more than 1,000 bytes: larger than any JSON file"):
        nn.GPT.from_gpt2(folder)


@pytest.mark.parametrize("shape, message", [
    ([0, 10**23], "shape [0, 100000000000000000000000] is larger than any array can be"),
    ([0, 2**62, 4], "is larger than any array can be: its sizes (a 0 counted as 1) times 4 bytes pass numpy's limit"),
    ([2**70, 0], "is larger than any array can be"),
    ([0] * 33, "shape has 33 axes; an array has at most 32"),
], ids=["0-by-10**23", "0-by-2**62-by-4", "2**70-by-0", "33-axes"])
def test_a_shape_whose_size_overflows_is_refused_naming_the_tensor(tmp_path, shape, message):
    header = {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}
    path = raw_safetensors(tmp_path / "huge.safetensors", json.dumps(header))
    with pytest.raises(nn.CheckpointError, match="huge.safetensors: tensor 'w': ") as error:
        nn.load(path)
    assert message in str(error.value)


def test_an_npy_shape_whose_size_overflows_is_refused_naming_the_entry(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (0, 10**23)})
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("w.npy", header.getvalue())
    with pytest.raises(nn.CheckpointError, match=r"huge.npz: entry 'w.npy': shape \[0, 10+\] is larger than any"):
        nn.load(path)


WRONG_CONFIG_TYPES = {
    "layer_norm_epsilon-text": ({"layer_norm_epsilon": "x"}, "layer_norm_epsilon 'x' (expected a number in (0, 1))"),
    "resid_pdrop-a-list": ({"resid_pdrop": [0.1]}, "resid_pdrop [0.1] (expected a number in [0, 1))"),
    "resid_pdrop-text": ({"resid_pdrop": "abc"}, "resid_pdrop 'abc' (expected a number in [0, 1))"),
    "epsilon-400-digits": ({"layer_norm_epsilon": 10**400}, "(expected a number in (0, 1))"),
    "attn_pdrop-nan": ({"attn_pdrop": float("nan")}, "attn_pdrop nan (expected a number in [0, 1))"),
    "n_inner-text": ({"n_inner": "x"}, "n_inner 'x' (expected null or a whole number >= 1)"),
    "activation-a-number": ({"activation_function": 5}, "activation_function 5 (expected a name)"),
    "tie-text": ({"tie_word_embeddings": "false"}, "tie_word_embeddings 'false' (expected true or false)"),
    "scale-a-number": ({"scale_attn_weights": 1}, "scale_attn_weights 1 (expected true or false)"),
    "n_head-a-dict": ({"n_head": {}}, "n_head {} (expected a whole number >= 1)"),
}


@pytest.mark.parametrize("name", WRONG_CONFIG_TYPES)
def test_a_config_json_value_of_the_wrong_type_names_the_key_and_the_file(folder, name):
    edit, message = WRONG_CONFIG_TYPES[name]
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(nn.CheckpointError, match=r"GPT.from_gpt2: \S+config.json: wrong values: ") as error:
        nn.GPT.from_gpt2(folder)
    assert message in str(error.value)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["model"]["vocab"].update(a="zz"), "model.vocab gives the token 'a' the id 'zz'"),
    (lambda t: t["model"]["vocab"].update(a=-1), "model.vocab gives the token 'a' the id -1"),
    (lambda t: t["model"].update(vocab=["a", "b"]), "model.vocab must map each token to its id"),
    (lambda t: t.update(model="BPE"), "not a tokenizers file: expected an object with a \"model\""),
], ids=["id-text", "id-negative", "vocab-a-list", "model-text"])
def test_a_tokenizer_json_of_the_wrong_types_names_the_field_and_the_file(folder, edit, message):
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    edit(tokenizer)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(nn.CheckpointError, match=r"tokenizer.json: ") as error:
        export.char_tokenizer(folder)
    assert message in str(error.value)
    if message.startswith("model.vocab gives the token 'a' the id 'zz'"):
        assert_one_line_refusal(run("sample_chargpt.py", folder), "tokenizer.json", "'zz'")


def subword_tokenizer_json(vocab, merges):
    """A tokenizers BPE file with merges (so not a character vocabulary: the demos read it with the
    tokenizers library), as GPT-2's own tokenizer.json is laid out."""
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                       "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
                       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                                 "ignore_merges": False, "vocab": vocab, "merges": merges}})


def test_a_tokenizer_json_the_tokenizers_library_cannot_parse_is_one_line_naming_the_file(folder):
    """The library raises a bare Exception ("Token `q` out of vocabulary"): the demos say which file."""
    pytest.importorskip("tokenizers")
    (folder / "tokenizer.json").write_text(subword_tokenizer_json({"a": 0, "b": 1, "ab": 2}, ["a q"]))
    for result in (run("sample_chargpt.py", folder), run("attention_heads.py", "--checkpoint", folder, "--out",
                                                          folder.parent)):
        assert_one_line_refusal(result, "tokenizer.json: the tokenizers library cannot read it", "`q`")


def test_a_tokenizer_larger_than_the_models_vocabulary_is_refused_before_sampling(folder):
    """Its ids past the model's vocabulary would be an IndexError in the middle of generate."""
    pytest.importorskip("tokenizers")
    vocab = {char: i for i, char in enumerate("abcdefghijklmnopqrstuvwxyz")}
    (folder / "tokenizer.json").write_text(subword_tokenizer_json({**vocab, "ab": 26}, [["a", "b"]]))
    result = run("sample_chargpt.py", folder, "--prompt", "zz")
    assert_one_line_refusal(result, str(folder), f"its tokenizer has 27 tokens but the model's vocabulary is "
                                                 f"{len(CHARS)}")


@pytest.mark.parametrize("index", [{"weight_map": ["model.safetensors"]}, {"weight_map": {"w": 5}}, [1],
                                   {"weight_map": {"w": ".."}}],
                         ids=["map-a-list", "file-a-number", "a-list", "parent-folder"])
def test_a_shard_index_of_the_wrong_types_names_the_file(folder, index):
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(nn.CheckpointError, match=r"model.safetensors.index.json: (not a safetensors index|names "
                                                 r"files outside its folder)"):
        nn.GPT.from_gpt2(folder)


def test_the_sampler_answers_a_config_json_of_the_wrong_type_in_one_line(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "layer_norm_epsilon": "x"}))
    assert_one_line_refusal(run("sample_chargpt.py", folder), "config.json", "layer_norm_epsilon 'x'")


# ---- sampling ----------------------------------------------------------------------------------
PROMPT = np.array([[1, 2, 3]])


@pytest.mark.parametrize("arguments, message", [
    (dict(max_new_tokens=-5), "max_new_tokens must be a whole number >= 0, got -5"),
    (dict(max_new_tokens=2.5), "max_new_tokens must be a whole number >= 0, got 2.5"),
    (dict(max_new_tokens="3"), "max_new_tokens must be a whole number >= 0, got '3'"),
    (dict(max_new_tokens=True), "max_new_tokens must be a whole number >= 0, got True"),
    (dict(top_k=2.5), "top_k must be a whole number >= 1 (or None for no cut), got 2.5"),
    (dict(top_k=0), "top_k must be a whole number >= 1 (or None for no cut), got 0"),
    (dict(top_k="5"), "top_k must be a whole number >= 1 (or None for no cut), got '5'"),
    (dict(temperature="0.8"), "temperature must be a finite number >= 0, got '0.8'"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0, got nan"),
    (dict(temperature=float("inf")), "temperature must be a finite number >= 0, got inf"),
    (dict(temperature=-1e-9), "temperature must be a finite number >= 0, got -1e-09"),
    (dict(idx=np.zeros((1, 0), np.int64)), "idx must be a prompt of shape (B, T) with B and T at least 1, got "
                                           "shape (1, 0)"),
    (dict(idx=[[]]), "got shape (1, 0)"),
    (dict(idx=np.zeros((0, 3), np.int64)), "got shape (0, 3)"),
    (dict(idx=np.array([1, 2])), "got shape (2,)"),
], ids=["new-negative", "new-fraction", "new-text", "new-bool", "top_k-fraction", "top_k-0", "top_k-text",
        "temperature-text", "temperature-nan", "temperature-inf", "temperature-negative", "prompt-1-by-0",
        "prompt-empty-list", "prompt-0-by-3", "prompt-1-d"])
def test_generate_refuses_each_bad_argument_by_name(arguments, message):
    arguments = {"idx": PROMPT, "max_new_tokens": 3, **arguments}
    with pytest.raises(ValueError, match="GPT.generate: ") as error:
        tiny_gpt().generate(**arguments)
    assert message in str(error.value)


def test_generate_takes_numpy_numbers_for_its_arguments():
    ids = tiny_gpt().generate(PROMPT, np.int64(4), temperature=np.float32(0.5), top_k=np.int32(3), seed=0)
    assert ids.shape == (1, 7)


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-300])
@pytest.mark.parametrize("top_k", [None, 3])
def test_a_temperature_so_small_it_overflows_samples_as_temperature_0(temperature, top_k):
    """logits / 1e-320 overflows to inf, and inf - inf is nan: sampling subtracts the largest
    logit first, so the most likely token is picked, as at temperature 0, with no warning."""
    model = tiny_gpt()
    greedy = model.generate(PROMPT, 20, temperature=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # numpy's "overflow" or "invalid value" would be one
        tiny = model.generate(PROMPT, 20, temperature=temperature, top_k=top_k, seed=1)
    np.testing.assert_array_equal(tiny, greedy)
    assert len(set(tiny[0, 3:])) > 1   # not one token forever


def test_the_sampler_prints_real_text_at_a_temperature_of_1e_320(tmp_path):
    path = checkpoint(tmp_path / "ck.safetensors")
    tiny = run("sample_chargpt.py", path, "--prompt", "hi", "--max_new_tokens", 20, "--temperature", "1e-320")
    greedy = run("sample_chargpt.py", path, "--prompt", "hi", "--max_new_tokens", 20, "--temperature", "0")
    assert tiny.returncode == 0 and tiny.stderr == "", tiny.stderr
    assert tiny.stdout == greedy.stdout and len(set(tiny.stdout[2:-1])) > 1


# ---- tensors hold numbers ------------------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    ("hello", "<U5"), (["a", "b"], "<U1"), ([1, "a"], "<U21"), (b"bytes", "|S5"),
    (np.array([1, None], dtype=object), "object"), ({"a": 1}, "object"), (None, "object"),
    (np.datetime64("2020-01-01"), "datetime64[D]"),
], ids=["str", "strs", "mixed", "bytes", "object-array", "dict", "none", "datetime"])
def test_a_tensor_of_what_is_not_numbers_is_a_type_error_naming_the_dtype(data, dtype):
    for make in (tg.tensor, tg.Tensor):
        with pytest.raises(TypeError, match=re.escape(f"a tensor holds numbers, got dtype {dtype}")):
            make(data)
    with pytest.raises(TypeError, match=re.escape(f"got dtype {dtype}")):
        tg.tensor([1.0]) + data   # an op's other operand too


def test_numbers_and_bools_still_make_tensors():
    assert tg.tensor([True, False]).dtype == np.bool_   # as numpy and PyTorch keep them
    assert tg.tensor(3).dtype == np.int64 and tg.tensor(2.5).dtype == np.float32
    assert tg.tensor(np.float64(2.5)).dtype == np.float64 and tg.Tensor(np.arange(3, dtype=np.uint8)).dtype == np.uint8
