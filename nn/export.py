"""The bridge to Hugging Face GPT-2, both ways: to_gpt2(model, directory) writes a folder
that transformers' GPT2LMHeadModel.from_pretrained(directory) loads, and from_gpt2(directory)
(also nn.GPT.from_gpt2) builds our GPT from such a folder, GPT-2's own weights included.

Our GPT is GPT-2's architecture: pre-LN blocks, one qkv projection whose columns are
[q | k | v] (GPT-2's c_attn), the tanh approximation of GELU ("gelu_new"), learned
positions, LayerNorm eps 1e-5, and a Linear that stores its weight (in, out) as GPT-2's
Conv1D does. So every tensor crosses as it is, under another name; only an untied head is
transposed, since GPT-2's lm_head is a torch Linear, (out, in):

    ours                       GPT-2 (transformers' state_dict names)
    tok_emb.weight   (V, C)    transformer.wte.weight
    pos_emb.weight   (T, C)    transformer.wpe.weight
    h.i.ln1, h.i.ln2           transformer.h.i.ln_1, transformer.h.i.ln_2
    h.i.attn.qkv     (C, 3C)   transformer.h.i.attn.c_attn
    h.i.attn.proj    (C, C)    transformer.h.i.attn.c_proj
    h.i.ffn.fc       (C, 4C)   transformer.h.i.mlp.c_fc
    h.i.ffn.proj     (4C, C)   transformer.h.i.mlp.c_proj
    ln_f                       transformer.ln_f
    head.weight      (C, V)    lm_head.weight (V, C); absent when tied (tie_word_embeddings)

The character vocabulary travels as tokenizer.json (the `tokenizers` library's format: a BPE
without merges, so each character is one token), which transformers' AutoTokenizer loads and
char_tokenizer(directory) reads back. Nothing here imports torch or transformers.
"""
import json
import math
import os

from . import rng
from .atomic import write_atomically
from .data import CharTokenizer
from .layers import LayerNorm, Linear
from .tensorfile import CheckpointError, read_safetensors, safetensors_layout, write_safetensors
from .transformer import GPT, MultiHeadAttention

CONFIG, WEIGHTS, SHARDS = "config.json", "model.safetensors", "model.safetensors.index.json"
TOKENIZER, TOKENIZER_CONFIG = "tokenizer.json", "tokenizer_config.json"
LAYER_NORM_EPS = 1e-5
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")   # two names of one function, 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
MODULES = {"tok_emb": "wte", "pos_emb": "wpe", "ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn",
           "attn.proj": "attn.c_proj", "ffn.fc": "mlp.c_fc", "ffn.proj": "mlp.c_proj", "ln_f": "ln_f"}
BUFFERS = (".attn.bias", ".attn.masked_bias")   # older GPT-2 files keep the causal mask as a tensor
# what transformers' GPT2Config assumes for a key config.json leaves out (GPT-2 small's values)
GPT2_DEFAULTS = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                     activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                     layer_norm_epsilon=1e-5, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                     add_cross_attention=False, tie_word_embeddings=True)


def gpt2_name(name):
    """Our state_dict name -> GPT-2's: "h.3.attn.qkv.bias" -> "transformer.h.3.attn.c_attn.bias"."""
    if name == "head.weight":
        return "lm_head.weight"
    module, parameter = name.rsplit(".", 1)
    block = ""
    if module.startswith("h."):   # "h.3.attn.qkv": block "h.3.", module "attn.qkv"
        _, i, module = module.split(".", 2)
        block = f"h.{i}."
    if module not in MODULES:
        raise ValueError(f"to_gpt2: the parameter {name!r} has no counterpart in GPT-2")
    return f"transformer.{block}{MODULES[module]}.{parameter}"


# ---- ours -> GPT-2 -------------------------------------------------------------------------
def to_gpt2(model, directory, tokenizer=None):
    """Write `model` (an nn.GPT) as a Hugging Face GPT-2 folder: config.json, model.safetensors
    with GPT-2's names, and with `tokenizer` (an nn.data.CharTokenizer) tokenizer.json and
    tokenizer_config.json. Existing files of those names are replaced, each atomically, as
    save_pretrained does. Refuses, naming each, what GPT-2 cannot express. Returns directory."""
    files = {CONFIG: gpt2_config(model), **({} if tokenizer is None else char_tokenizer_files(tokenizer, model))}
    tensors = {gpt2_name(name): p.data.T if name == "head.weight" else p.data   # lm_head is (V, C)
               for name, p in model.named_parameters()}
    os.makedirs(directory, exist_ok=True)   # everything is checked: now write
    write_safetensors(os.path.join(directory, WEIGHTS), tensors, {"format": "pt"})   # transformers asks for "pt"
    for name, contents in files.items():
        text = json.dumps(contents, indent=2, ensure_ascii=False) + "\n"
        write_atomically(os.path.join(directory, name), lambda file: file.write(text.encode("utf-8")))
    return directory


def gpt2_config(model):
    """config.json's contents for `model`, or a ValueError listing what GPT-2 cannot express."""
    if not isinstance(model, GPT):
        raise TypeError(f"to_gpt2: expected an nn.GPT, got {type(model).__name__}")
    c = model.config
    problems = [] if c["pos"] == "learned" else [
        f"positions pos={c['pos']!r}: GPT-2 has a learned table of positions only (transformer.wpe)"]
    for name, module in model.named_modules():
        if isinstance(module, Linear) and (module.bias is None) != (name == "head"):
            problems.append(f"{name} has {'no bias' if module.bias is None else 'a bias'}; GPT-2's has "
                            f"{'one' if module.bias is None else 'none'}")
        elif isinstance(module, LayerNorm) and module.eps != LAYER_NORM_EPS:
            problems.append(f"{name} has eps {module.eps}; GPT-2 has one layer_norm_epsilon, and nn.GPT reads back "
                            f"{LAYER_NORM_EPS}")
        elif isinstance(module, MultiHeadAttention) and not module.causal:
            problems.append(f"{name} is not causal; GPT-2's attention always is")
    if len({p.dtype for p in model.parameters()}) != 1:
        problems.append("its parameters have several dtypes; a folder holds one")
    if problems:
        raise ValueError("to_gpt2: GPT-2 cannot express this model: " + "; ".join(problems))
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": c["vocab_size"], "n_positions": c["block_size"], "n_embd": c["n_embd"],
            "n_layer": c["n_layer"], "n_head": c["n_head"], "n_inner": None,   # None: 4 * n_embd, as ours
            "activation_function": "gelu_new", "layer_norm_epsilon": LAYER_NORM_EPS,
            "resid_pdrop": c["dropout"], "embd_pdrop": c["dropout"], "attn_pdrop": c["dropout"],
            "scale_attn_weights": True, "initializer_range": 0.02, "tie_word_embeddings": c["tie_weights"],
            "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,   # a character model has none
            "use_cache": True, "dtype": str(model.tok_emb.weight.dtype)}


def char_tokenizer_files(tokenizer, model):
    """{file name: JSON} for a CharTokenizer. tokenizer.json: a BPE without merges whose
    vocabulary is the characters (a character is one token, ids as ours), fused back into
    text on decoding; tokenizer_config.json tells AutoTokenizer to load it, without the
    spaces-before-punctuation clean-up that decode would otherwise do, and to hand the model
    no token_type_ids (GPT-2 would add their embeddings, rows of wte, to every position)."""
    if not isinstance(tokenizer, CharTokenizer):
        raise TypeError(f"to_gpt2: tokenizer must be an nn.data.CharTokenizer (or None), got "
                        f"{type(tokenizer).__name__}")
    if tokenizer.vocab_size != model.config["vocab_size"]:
        raise ValueError(f"to_gpt2: the tokenizer has {tokenizer.vocab_size} characters but the model's vocabulary "
                         f"is {model.config['vocab_size']}")
    return {
        TOKENIZER: {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {char: i for i, char in enumerate(tokenizer.chars)}, "merges": []}},
        TOKENIZER_CONFIG: {"tokenizer_class": "PreTrainedTokenizerFast",
                           "model_max_length": model.config["block_size"], "clean_up_tokenization_spaces": False,
                           "model_input_names": ["input_ids", "attention_mask"]}}


# ---- GPT-2 -> ours -------------------------------------------------------------------------
def from_gpt2(directory):
    """nn.GPT from a Hugging Face GPT-2 folder: config.json, and model.safetensors (or the
    shards that model.safetensors.index.json lists). Tensor names may start with
    "transformer." (transformers) or not (the original GPT-2 files); the causal-mask buffers
    of older files are skipped. Float16 weights become float32. The arrays read become the
    parameters (no second copy), and no random weights are drawn for them."""
    config = gpt2_model_config(directory)
    files = weight_files(directory)
    where, shapes = {}, {}   # GPT-2 name -> (file, the name inside it), and its shape: from the headers, nothing read yet
    for file in files:
        for stored, (_, shape, _) in safetensors_layout(file)[0].items():
            name = stored if stored.startswith(("transformer.", "lm_head.")) else "transformer." + stored
            if not name.endswith(BUFFERS):
                where[name], shapes[name] = (file, stored), shape
    check_sizes(directory, config, shapes)   # before a model of config.json's size is built
    with rng.skipping_init():
        model = GPT(**config)
    ours = {gpt2_name(name): name for name, _ in model.named_parameters()}
    tied_copy = where.pop("lm_head.weight", None) if config["tie_weights"] else None
    missing, unexpected = sorted(ours.keys() - where.keys()), sorted(where.keys() - ours.keys())
    if missing or unexpected:
        raise CheckpointError(f"GPT.from_gpt2: {directory} does not hold the tensors its config.json describes: "
                              f"missing {missing[:6] or 'none'}, unexpected {unexpected[:6] or 'none'}")
    state = {}
    for file in files:
        wanted = {stored: name for name, (f, stored) in where.items() if f == file}
        for stored, array in read_safetensors(file, list(wanted))[0].items():
            name = wanted[stored]
            state[ours[name]] = array.T if name == "lm_head.weight" else array   # GPT-2's (V, C) -> our (C, V)
    if tied_copy is not None:   # some files keep the tied head too: it must be the embedding
        file, stored = tied_copy
        if not (read_safetensors(file, [stored])[0][stored] == state["tok_emb.weight"]).all():
            raise CheckpointError(f"GPT.from_gpt2: {directory}: config.json ties lm_head to wte, but {file} holds "
                                  "an lm_head.weight of its own that differs")
    model.load_state_dict(state, assign=True)
    return model


def check_sizes(directory, config, shapes):
    """config.json's sizes against the weight files' headers ({GPT-2 name: shape}): the same
    number of blocks, and the token and position tables of the shapes it says. A lying
    config.json (n_layer 10**9) is refused here, before a model of its size is built."""
    blocks = {name.split(".")[2] for name in shapes if name.startswith("transformer.h.")}
    expected = {"transformer.wte.weight": (config["vocab_size"], config["n_embd"]),
                "transformer.wpe.weight": (config["block_size"], config["n_embd"])}
    wrong = [f"{name} has shape {tuple(shapes.get(name, ()))}, config.json says {shape}"
             for name, shape in expected.items() if tuple(shapes.get(name, ())) != shape]
    if len(blocks) != config["n_layer"]:
        wrong.append(f"the weights hold {len(blocks)} blocks, config.json says n_layer {config['n_layer']}")
    if wrong:
        raise CheckpointError(f"GPT.from_gpt2: {directory}: its weights and its config.json disagree: "
                              + "; ".join(wrong))


def gpt2_model_config(directory):
    """nn.GPT's arguments from a GPT-2 config.json, or a ValueError naming what nn.GPT
    cannot build (keys config.json leaves out take transformers' GPT-2 defaults)."""
    path = os.path.join(directory, CONFIG)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"GPT.from_gpt2: {directory} is not a folder")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"GPT.from_gpt2: {directory} has no {CONFIG}: not a Hugging Face model folder")
    try:
        with open(path, encoding="utf-8") as file:
            given = json.load(file)
    except ValueError as error:
        raise CheckpointError(f"{path}: not JSON ({error})") from None
    if not isinstance(given, dict) or given.get("model_type") != "gpt2":
        kind = given.get("model_type") if isinstance(given, dict) else None
        raise ValueError(f"GPT.from_gpt2: {path} describes model_type {kind!r}; only GPT-2's layout ('gpt2') is read")
    c = {**GPT2_DEFAULTS, **given}
    sizes = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
    not_sizes = [f"{key} {c[key]!r}" for key in sizes if type(c[key]) is not int or c[key] <= 0]
    if not_sizes:
        raise ValueError(f"GPT.from_gpt2: {path}: expected positive whole numbers, got {', '.join(not_sizes)}")
    dropouts = {c["resid_pdrop"], c["embd_pdrop"], c["attn_pdrop"]}
    problems = [text for bad, text in [
        (c["activation_function"] not in TANH_GELUS, f"activation_function {c['activation_function']!r} (ours is "
                                                      "the tanh GELU, 'gelu_new')"),
        (c["n_inner"] not in (None, 4 * c["n_embd"]), f"n_inner {c['n_inner']} (ours is 4 * n_embd)"),
        (not math.isclose(c["layer_norm_epsilon"], LAYER_NORM_EPS), f"layer_norm_epsilon {c['layer_norm_epsilon']}"),
        (not c["scale_attn_weights"] or c["scale_attn_by_inverse_layer_idx"], "attention scaled other than by "
                                                                              "1/sqrt(head size)"),
        (c["add_cross_attention"], "cross-attention"),
        (len(dropouts) > 1, f"three different dropouts {sorted(dropouts)} (ours is one)")] if bad]
    if problems:
        raise ValueError(f"GPT.from_gpt2: nn.GPT cannot build {path}: " + "; ".join(problems))
    return dict(vocab_size=c["vocab_size"], block_size=c["n_positions"], n_layer=c["n_layer"], n_head=c["n_head"],
                n_embd=c["n_embd"], dropout=float(c["resid_pdrop"]), pos="learned",
                tie_weights=bool(c["tie_word_embeddings"]))


def weight_files(directory):
    """The safetensors files of a folder: model.safetensors, or the shards its index lists."""
    single, index = os.path.join(directory, WEIGHTS), os.path.join(directory, SHARDS)
    if os.path.isfile(single):
        return [single]
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as file:
                shards = sorted(set(json.load(file)["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CheckpointError(f"{index}: not a safetensors index ({type(error).__name__}: {error})") from None
        outside = [name for name in shards if not isinstance(name, str) or os.path.basename(name) != name]
        if outside:
            raise CheckpointError(f"{index}: names files outside its folder: {outside[:3]}")
        return [os.path.join(directory, name) for name in shards]
    if os.path.isfile(os.path.join(directory, "pytorch_model.bin")):
        raise CheckpointError(f"GPT.from_gpt2: {directory} has pytorch_model.bin but no {WEIGHTS}: a .bin is a "
                              "pickle, which tensorgrad never loads. Where you trust the file, transformers "
                              "converts it: GPT2LMHeadModel.from_pretrained(folder).save_pretrained(folder)")
    raise FileNotFoundError(f"GPT.from_gpt2: {directory} has no {WEIGHTS}")


def char_tokenizer(directory):
    """The nn.data.CharTokenizer in a folder's tokenizer.json when it is a character
    vocabulary as to_gpt2 writes it; None when the folder has another tokenizer (GPT-2's
    own byte-level BPE, say) or none."""
    path = os.path.join(directory, TOKENIZER)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            model = json.load(file)["model"]
        vocab, merges = dict(model["vocab"]), model.get("merges")
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: not a tokenizers file ({type(error).__name__}: {error})") from None
    chars = "".join(sorted(vocab, key=vocab.get))
    ours = (not merges and all(len(token) == 1 for token in vocab) and sorted(vocab.values()) == list(range(len(vocab)))
            and chars == "".join(sorted(chars)))
    return CharTokenizer.from_chars(chars) if ours else None   # ours: one token per character, in sorted order
