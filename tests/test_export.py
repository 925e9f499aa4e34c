"""nn.export.to_gpt2 and nn.GPT.from_gpt2: the bridge to Hugging Face GPT-2.

Without torch: the folder's files and names, what GPT-2 cannot express refused by name,
from_gpt2 reading every GPT-2 layout (transformers' names, the original files' names and
mask buffers, shards, float16) and refusing the rest, every tensor round-tripping bit for
bit, the character tokenizer, GPT-2 small's shapes read in about their own memory, and an
imported model drawn and traced like any other.
With torch and transformers (CI installs both), for a random tied and untied model and for
models trained a few steps: GPT2LMHeadModel loads the folder with no missing or unexpected
keys, and its logits, its loss and its gradients equal ours; transformers' AutoTokenizer
reads the characters; greedy generation picks the same tokens."""
import json
import os
import tracemalloc

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import nn
import tensorgrad as tg
from nn import export

CONFIG = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
TEXT = "hello world.?\n"   # 11 characters: the vocabulary of the models below
KINDS = ["untied", "tied", "trained-untied", "trained-tied"]


def make(kind, seed=0):
    """A model of CONFIG: random, or trained 5 AdamW steps on random batches."""
    nn.manual_seed(seed)
    model = nn.GPT(**CONFIG, tie_weights=kind.endswith("-tied") or kind == "tied")
    if kind.startswith("trained"):
        optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        rng = np.random.default_rng(seed)
        for _ in range(5):
            _, loss = model(*rng.integers(0, 11, (2, 4, 8)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model


def tokens(shape, seed=1):
    return np.random.default_rng(seed).integers(0, CONFIG["vocab_size"], shape)


def weights_of(folder):
    return safetensors.numpy.load_file(os.path.join(folder, "model.safetensors"))


@pytest.fixture(params=KINDS)
def exported(request, tmp_path):
    """(our model, the folder it was exported to)."""
    model = make(request.param)
    return model, export.to_gpt2(model, tmp_path / "gpt2", nn.data.CharTokenizer(TEXT))


# ---- the folder ---------------------------------------------------------------------------
def test_the_folder_holds_gpt2s_config_and_names(exported):
    model, folder = exported
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "tokenizer.json",
                                          "tokenizer_config.json"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert {k: config[k] for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")} == dict(
        vocab_size=11, n_positions=8, n_embd=16, n_layer=2, n_head=2)
    assert config["activation_function"] == "gelu_new" and config["layer_norm_epsilon"] == 1e-5
    assert config["resid_pdrop"] == config["embd_pdrop"] == config["attn_pdrop"] == 0.0
    assert config["tie_word_embeddings"] is model.tie_weights and config["n_inner"] is None
    weights = weights_of(folder)
    expected = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                "transformer.ln_f.bias"} | {
        f"transformer.h.{i}.{module}.{p}" for i in range(2) for p in ("weight", "bias")
        for module in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj")}
    assert set(weights) == expected | (set() if model.tie_weights else {"lm_head.weight"})
    # Conv1D stores (in, out) as our Linear does: c_attn is qkv as it is, columns [q | k | v]
    np.testing.assert_array_equal(weights["transformer.h.1.attn.c_attn.weight"], model.h[1].attn.qkv.weight.data)
    assert weights["transformer.h.1.mlp.c_fc.weight"].shape == (16, 64)
    if not model.tie_weights:   # lm_head is a torch Linear: (V, C), our head transposed
        np.testing.assert_array_equal(weights["lm_head.weight"], model.head.weight.data.T)
    with safetensors.safe_open(folder / "model.safetensors", framework="np") as file:
        assert file.metadata() == {"format": "pt"}   # transformers refuses a file without it


def test_export_then_import_round_trips_every_tensor_bit_for_bit(exported):
    model, folder = exported
    back = nn.GPT.from_gpt2(folder)
    assert back.config == model.config
    ours, theirs = model.state_dict(), back.state_dict()
    assert list(theirs) == list(ours)
    for name, array in ours.items():
        assert theirs[name].dtype == array.dtype and theirs[name].flags.c_contiguous
        np.testing.assert_array_equal(theirs[name], array, err_msg=name)
    x = tokens((2, 8))
    np.testing.assert_array_equal(back(x)[0].data, model(x)[0].data)


def test_the_character_vocabulary_reads_back_as_our_tokenizer(exported):
    _, folder = exported
    tokenizer = export.char_tokenizer(folder)
    assert tokenizer == nn.data.CharTokenizer(TEXT)
    vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    ids = tokenizer.encode("hello world?")   # what a user without tensorgrad does with the file:
    assert "".join({i: c for c, i in vocab.items()}[i] for i in ids) == "hello world?"


def test_a_folder_without_a_character_vocabulary_has_no_char_tokenizer(tmp_path):
    assert export.char_tokenizer(tmp_path) is None
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                                                   "merges": [["a", "b"]]}}))
    assert export.char_tokenizer(tmp_path) is None
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["a", -1.0]]}}))
    assert export.char_tokenizer(tmp_path) is None   # another kind of tokenizer
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(nn.CheckpointError, match="tokenizer.json: the file is not JSON"):
        export.char_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("[1, 2]")
    with pytest.raises(nn.CheckpointError, match="tokenizer.json: not a tokenizers file"):
        export.char_tokenizer(tmp_path)


def test_a_unicode_vocabulary_survives_the_folder(tmp_path):
    tokenizer = nn.data.CharTokenizer("한국어 é\n")
    nn.manual_seed(0)
    model = nn.GPT(tokenizer.vocab_size, 8, 1, 2, 8)
    export.to_gpt2(model, tmp_path, tokenizer)
    assert export.char_tokenizer(tmp_path) == tokenizer


# ---- what GPT-2 cannot express --------------------------------------------------------------
def test_positions_other_than_learned_are_refused():
    for pos in ("sinusoidal", "none"):
        nn.manual_seed(0)
        with pytest.raises(ValueError, match=f"GPT-2 cannot express this model: positions pos='{pos}': GPT-2 has a "
                                             "learned table of positions only"):
            export.to_gpt2(nn.GPT(**CONFIG, pos=pos), "unused")


@pytest.mark.parametrize("change, message", [
    (lambda m: setattr(m.h[1].attn.qkv, "bias", None), "h.1.attn.qkv has no bias; GPT-2's has one"),
    (lambda m: setattr(m.h[0].ffn.proj, "bias", None), "h.0.ffn.proj has no bias; GPT-2's has one"),
    (lambda m: setattr(m.ln_f, "eps", 1e-6), "ln_f has eps 1e-06"),
    (lambda m: setattr(m.h[0].attn, "causal", False), "h.0.attn is not causal"),
    (lambda m: setattr(m.h[0].ln1.weight, "data", m.h[0].ln1.weight.data.astype(np.float64)), "several dtypes"),
], ids=["qkv-bias", "proj-bias", "eps", "not-causal", "mixed-dtypes"])
def test_anything_else_gpt2_cannot_express_is_refused_by_name(tmp_path, change, message):
    model = make("untied")
    change(model)
    with pytest.raises(ValueError, match="GPT-2 cannot express this model") as error:
        export.to_gpt2(model, tmp_path / "gpt2")
    assert message in str(error.value)
    assert not (tmp_path / "gpt2").exists()   # refused before anything is written


def test_a_head_with_a_bias_is_refused(tmp_path):
    model = make("untied")
    model.head.bias = nn.Parameter(np.zeros(11, np.float32))
    with pytest.raises(ValueError, match="head has a bias; GPT-2's has none"):
        export.to_gpt2(model, tmp_path)


def test_not_a_gpt_or_a_wrong_tokenizer_is_refused(tmp_path):
    with pytest.raises(TypeError, match="expected an nn.GPT, got Linear"):
        export.to_gpt2(nn.Linear(2, 3), tmp_path)
    with pytest.raises(ValueError, match="the tokenizer has 3 characters but the model's vocabulary is 11"):
        export.to_gpt2(make("untied"), tmp_path / "gpt2", nn.data.CharTokenizer("abc"))
    with pytest.raises(TypeError, match="tokenizer must be an nn.data.CharTokenizer"):
        export.to_gpt2(make("untied"), tmp_path / "gpt2", "abc")
    assert not (tmp_path / "gpt2").exists()   # refused before anything is written


# ---- GPT-2 -> ours: every layout ---------------------------------------------------------------
@pytest.fixture
def folder(tmp_path):
    """(a random untied model, its folder)."""
    model = make("untied")
    return model, export.to_gpt2(model, tmp_path / "gpt2")


def assert_same(model, other):
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[name], array, err_msg=name)


def test_the_original_gpt2_names_and_mask_buffers_are_read(folder):
    """The original GPT-2 files name tensors without "transformer." and keep each block's
    causal mask as a tensor ("h.0.attn.bias", "h.0.attn.masked_bias"): read, and skipped."""
    model, path = folder
    weights = weights_of(path)
    original = {name.removeprefix("transformer."): array for name, array in weights.items()}
    for i in range(2):
        original[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 8, 8), np.float32))
        original[f"h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    safetensors.numpy.save_file(original, path / "model.safetensors", metadata={"format": "pt"})
    assert_same(model, nn.GPT.from_gpt2(path))


def test_a_sharded_folder_is_read(folder):
    model, path = folder
    weights = weights_of(path)
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
    for file, part in shards.items():
        safetensors.numpy.save_file({n: weights[n] for n in part}, path / file, metadata={"format": "pt"})
    (path / "model.safetensors").unlink()
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: file for file, part in shards.items() for n in part}}))
    assert_same(model, nn.GPT.from_gpt2(path))


def test_float16_weights_become_float32(folder):
    _, path = folder
    half = {name: array.astype(np.float16) for name, array in weights_of(path).items()}
    safetensors.numpy.save_file(half, path / "model.safetensors", metadata={"format": "pt"})
    model = nn.GPT.from_gpt2(path)
    assert all(p.dtype == np.float32 for p in model.parameters())
    np.testing.assert_array_equal(model.tok_emb.weight.data, half["transformer.wte.weight"].astype(np.float32))


def test_a_tied_folder_that_keeps_its_head_too_is_read_when_the_head_is_the_embedding(tmp_path):
    model = make("tied")
    path = export.to_gpt2(model, tmp_path)
    weights = weights_of(path)
    weights["lm_head.weight"] = weights["transformer.wte.weight"]
    safetensors.numpy.save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    assert_same(model, nn.GPT.from_gpt2(path))
    weights["lm_head.weight"] = weights["lm_head.weight"] + 1
    safetensors.numpy.save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(nn.CheckpointError, match="ties lm_head to wte, but .* holds an lm_head.weight of its own"):
        nn.GPT.from_gpt2(path)


def test_importing_draws_no_random_numbers(folder):
    _, path = folder
    nn.manual_seed(5)
    before = nn.rng.get_state()
    nn.GPT.from_gpt2(path)
    assert nn.rng.get_state() == before


def test_a_config_with_few_keys_takes_gpt2s_defaults(folder):
    model, path = folder
    config = json.loads((path / "config.json").read_text())
    del config["activation_function"], config["layer_norm_epsilon"], config["n_inner"]
    (path / "config.json").write_text(json.dumps(config))
    assert_same(model, nn.GPT.from_gpt2(path))


# ---- GPT-2 -> ours: what is refused ------------------------------------------------------------
@pytest.mark.parametrize("edit, message", [
    ({"model_type": "llama"}, "describes model_type 'llama'; only GPT-2's layout ('gpt2') is read"),
    ({"activation_function": "relu"}, "activation_function 'relu'"),
    ({"n_inner": 32}, "n_inner 32 (ours is 4 * n_embd)"),
    ({"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon 1e-06"),
    ({"scale_attn_by_inverse_layer_idx": True}, "attention scaled other than by 1/sqrt(head size)"),
    ({"add_cross_attention": True}, "cross-attention"),
    ({"attn_pdrop": 0.1}, "three different dropouts [0.0, 0.1] (ours is one)"),
    ({"n_embd": "16", "n_layer": 0}, "wrong values: n_embd '16' (expected a whole number >= 1); n_layer 0 "
                                     "(expected a whole number >= 1)"),
    ({"n_head": 3}, "config.json: GPTConfig: n_embd 16 must be divisible by n_head 3"),
], ids=["llama", "relu", "n_inner", "eps", "layer-scaled", "cross-attention", "dropouts", "sizes", "heads"])
def test_a_config_nn_gpt_cannot_build_is_refused_by_name(folder, edit, message):
    _, path = folder
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(ValueError, match="GPT.from_gpt2") as error:
        nn.GPT.from_gpt2(path)
    assert message in str(error.value)


def test_missing_or_unexpected_tensors_are_refused(folder):
    _, path = folder
    weights = weights_of(path)
    del weights["transformer.h.1.ln_2.bias"]
    weights["transformer.h.0.crossattention.c_attn.weight"] = np.zeros((16, 48), np.float32)
    safetensors.numpy.save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(nn.CheckpointError, match=r"missing \['transformer.h.1.ln_2.bias'\], unexpected "
                                                 r"\['transformer.h.0.crossattention.c_attn.weight'\]"):
        nn.GPT.from_gpt2(path)


def test_a_tensor_of_the_wrong_shape_is_refused(folder):
    _, path = folder
    weights = weights_of(path)
    weights["transformer.h.0.ln_1.weight"] = np.zeros(9, np.float32)
    safetensors.numpy.save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="'h.0.ln1.weight' has shape \\(9,\\) in the state but \\(16,\\)"):
        nn.GPT.from_gpt2(path)


@pytest.mark.parametrize("edit, message", [
    ({"n_layer": 10**9}, "the weights hold 2 blocks, config.json says n_layer 1000000000"),
    ({"vocab_size": 50257}, "transformer.wte.weight has shape (11, 16), config.json says (50257, 16)"),
    ({"n_positions": 2**40}, "transformer.wpe.weight has shape (8, 16), config.json says (1099511627776, 16)"),
], ids=["n_layer", "vocab_size", "n_positions"])
def test_a_config_that_lies_about_the_weights_is_refused_before_a_model_is_built(folder, edit, message):
    _, path = folder
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(nn.CheckpointError, match="its weights and its config.json disagree") as error:
        nn.GPT.from_gpt2(path)
    assert message in str(error.value)


def test_a_pickled_pytorch_model_bin_is_refused_with_the_way_out(folder):
    _, path = folder
    (path / "model.safetensors").rename(path / "pytorch_model.bin")
    with pytest.raises(nn.CheckpointError, match="a .bin is a pickle, which tensorgrad never loads.*save_pretrained"):
        nn.GPT.from_gpt2(path)


def test_folders_without_the_files_are_refused(tmp_path, folder):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        nn.GPT.from_gpt2(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="has no config.json: not a Hugging Face model folder"):
        nn.GPT.from_gpt2(tmp_path)
    _, path = folder
    (path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        nn.GPT.from_gpt2(path)
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../../elsewhere.safetensors"}}))
    with pytest.raises(nn.CheckpointError, match="names files outside its folder"):
        nn.GPT.from_gpt2(path)


def test_a_damaged_weights_file_or_config_is_a_checkpoint_error(folder):
    _, path = folder
    raw = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(nn.CheckpointError, match="model.safetensors"):
        nn.GPT.from_gpt2(path)
    (path / "config.json").write_text('{"model_type": "gpt2",')
    with pytest.raises(nn.CheckpointError, match="config.json: the file is not JSON"):
        nn.GPT.from_gpt2(path)


# ---- a real model's size --------------------------------------------------------------------
def test_gpt2_small_shapes_import_in_about_their_own_memory(tmp_path):
    """GPT-2 small's shapes (n_embd 768, 12 layers, 12 heads, vocabulary 50257, 1024
    positions; 124M parameters, 498 MB) with random weights, under the original files' names:
    from_gpt2 takes no memory beyond the weights themselves (the arrays read become the
    parameters; no random init). bench/gpt2_import.py times it against transformers."""
    rng = np.random.default_rng(0)
    C, V, T = 768, 50257, 1024
    shapes = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(12):
        shapes.update({f"h.{i}.ln_1.weight": (C,), f"h.{i}.ln_1.bias": (C,), f"h.{i}.ln_2.weight": (C,),
                       f"h.{i}.ln_2.bias": (C,), f"h.{i}.attn.c_attn.weight": (C, 3 * C),
                       f"h.{i}.attn.c_attn.bias": (3 * C,), f"h.{i}.attn.c_proj.weight": (C, C),
                       f"h.{i}.attn.c_proj.bias": (C,), f"h.{i}.mlp.c_fc.weight": (C, 4 * C),
                       f"h.{i}.mlp.c_fc.bias": (4 * C,), f"h.{i}.mlp.c_proj.weight": (4 * C, C),
                       f"h.{i}.mlp.c_proj.bias": (C,)})
    weights = {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}
    size = sum(array.nbytes for array in weights.values())
    safetensors.numpy.save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": V, "n_positions": T,
                                                      "n_embd": C, "n_layer": 12, "n_head": 12}))
    expected = {name: weights[name][:3, :5].copy() for name in ("wte.weight", "h.11.mlp.c_proj.weight")}
    del weights
    tracemalloc.start()
    try:
        model = nn.GPT.from_gpt2(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert model.num_parameters() == 124_439_808 == size // 4
    assert peak < 1.05 * size, f"peak {peak / 2**20:.0f} MiB for {size / 2**20:.0f} MiB of weights"
    np.testing.assert_array_equal(model.tok_emb.weight.data[:3, :5], expected["wte.weight"])
    np.testing.assert_array_equal(model.h[11].ffn.proj.weight.data[:3, :5], expected["h.11.mlp.c_proj.weight"])
    with tg.no_grad():
        logits, _ = model(np.array([[464, 3290, 318]]))   # a forward pass runs at this size
    assert logits.shape == (1, 3, V) and np.isfinite(logits.data).all()


def test_an_imported_model_is_drawn_and_traced_like_ours(folder, capsys):
    _, path = folder
    model = nn.GPT.from_gpt2(path)
    x = tokens((1, 5))
    _, loss = model(x, tokens((1, 5), seed=2))
    loss.backward(trace=True, retain_graph=True)
    assert "h.1.attn.qkv.weight" in capsys.readouterr().out
    dot = tg.draw_graph(loss, collapse="modules").source
    assert "h.0 | 17 ops" in dot and "h.1 | 17 ops" in dot and "head | 1 op" in dot
    model(x)
    assert model.h[1].attn.last_weights.shape == (1, 2, 5, 5)   # what demos/attention_heads.py draws


# ---- against transformers --------------------------------------------------------------------
@pytest.fixture
def hf(exported):
    """(our model, the transformers model loaded from its folder, the folder)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model, folder = exported
    theirs, info = transformers.GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True,
                                                                local_files_only=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set(), info
    assert not info["mismatched_keys"] and not info["error_msgs"], info
    assert all(p.dtype == torch.float32 for p in theirs.parameters())
    return model, theirs, folder


def test_transformers_logits_equal_ours(hf):
    import torch
    model, theirs, _ = hf
    x = tokens((3, 8))
    theirs.eval()
    with torch.no_grad():
        expected = theirs(torch.tensor(x)).logits.numpy()
    np.testing.assert_allclose(model(x)[0].data, expected, rtol=0, atol=1e-5)


def test_transformers_loss_and_gradients_equal_ours(hf):
    """One training step's forward and backward on the same batch: the loss, and the gradient of
    every parameter (relative 1e-4: |ours - theirs| / |ours| per tensor)."""
    import torch
    model, theirs, _ = hf
    sequence = tokens((4, 8), seed=3)
    theirs.train()   # dropout is 0, as ours
    out = theirs(torch.tensor(sequence), labels=torch.tensor(sequence))   # transformers shifts the labels
    out.loss.backward()
    model.zero_grad()   # a trained model keeps its last step's gradients
    _, loss = model(sequence[:, :-1], sequence[:, 1:])
    loss.backward()
    assert loss.item() == pytest.approx(out.loss.item(), rel=1e-6)
    grads = {name: p.grad.numpy() for name, p in theirs.named_parameters()}
    for name, p in model.named_parameters():
        expected = grads[export.gpt2_name(name)]
        expected = expected.T if name == "head.weight" else expected
        error = np.linalg.norm(p.grad - expected) / np.linalg.norm(expected)
        assert error < 1e-4, f"{name}: relative error {error:.2e}"


def test_transformers_reads_the_characters_and_generates_our_tokens(hf):
    import torch
    import transformers
    model, theirs, folder = hf
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    ours = nn.data.CharTokenizer(TEXT)
    text = "world . hello?\n"   # a space before "." must survive decoding
    assert tokenizer(text)["input_ids"] == ours.encode(text).tolist()
    assert set(tokenizer(text)) == {"input_ids", "attention_mask"}   # no token_type_ids for GPT-2 to embed
    assert tokenizer.decode(ours.encode(text)) == text
    prompt = ours.encode("he")[None]
    theirs.eval()
    with torch.no_grad():
        generated = theirs.generate(torch.tensor(prompt), attention_mask=torch.ones(prompt.shape, dtype=torch.long),
                                    do_sample=False, max_new_tokens=6, pad_token_id=0)
    np.testing.assert_array_equal(generated.numpy(), model.generate(prompt, 6, temperature=0))
