"""GPT-2's layout on disk, and reading it: the names of GPT-2's tensors for ours, its
config.json, and the weights of a Hugging Face GPT-2 folder (nn.GPT.from_gpt2 builds the model
from them; nn.export.to_gpt2 writes such a folder).

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
without merges, so each character is one token), which char_tokenizer(directory) reads back.
Every file of a folder is input, opened as a corpus is (nn.atomic.open_regular: a FIFO or a
device is refused, without waiting): its JSON is read within nn/tensorfile.py's bounds, each
config.json key GPT-2 defines is checked for its type before it is used, those that become
nn.GPTConfig's fields as those are (a wrong one is a CheckpointError naming the key and the
file), and every weight must be finite.
This module builds no model and imports no other part of nn's network: nn/transformer.py
imports it. Nothing here imports torch or transformers.
"""
import math
import os
from dataclasses import asdict

from . import checks
from .config import CHECKS, GPTConfig
from .data import CharTokenizer
from .tensorfile import CheckpointError, check_finite, read_json, read_safetensors, safetensors_layout

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


# the keys of a config.json that become nn.GPTConfig's fields, each checked as that field is
BECOMES = {"vocab_size": "vocab_size", "n_positions": "block_size", "n_embd": "n_embd", "n_layer": "n_layer",
           "n_head": "n_head", "resid_pdrop": "dropout", "embd_pdrop": "dropout", "attn_pdrop": "dropout",
           "tie_word_embeddings": "tie_weights"}
CONFIG_CHECKS = {   # what each key of GPT2_DEFAULTS must be in a config.json
    **{key: CHECKS[field] for key, field in BECOMES.items()},
    "n_inner": checks.or_none(checks.POSITIVE_COUNT),
    "activation_function": checks.Check(lambda name: isinstance(name, str), "a name"),
    "layer_norm_epsilon": checks.Check(lambda eps: checks.is_number(eps) and 0 < eps < 1, "a number in (0, 1)"),
    **dict.fromkeys(("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "add_cross_attention"), checks.SWITCH)}


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


# ---- GPT-2 -> ours -------------------------------------------------------------------------
def read_layout(directory):
    """(nn.GPT's arguments, where) for a Hugging Face GPT-2 folder: config.json read and checked,
    and where = {GPT-2 name: (file, the name inside it)} of every weight, from the safetensors
    headers (model.safetensors, or the shards that model.safetensors.index.json lists), nothing
    read yet. Names may start with "transformer." (transformers) or not (the original GPT-2
    files); the causal-mask buffers of older files are skipped. config.json's sizes are checked
    against the headers here, before a model of its size is built (nn.GPT.from_gpt2)."""
    config = gpt2_model_config(directory)
    where, shapes = {}, {}
    for file in weight_files(directory):
        for stored, (_, shape, _) in safetensors_layout(file)[0].items():
            name = stored if stored.startswith(("transformer.", "lm_head.")) else "transformer." + stored
            if not name.endswith(BUFFERS):
                where[name], shapes[name] = (file, stored), shape
    check_sizes(directory, config, shapes)
    return config, where


def read_weights(directory, config, where, names):
    """{our name: array} for the parameter names `names` of the nn.GPT that config describes,
    read from the files read_layout found (`where`). Float16 weights become float32; a tied
    head that a file keeps too must equal the embedding."""
    ours = {gpt2_name(name): name for name in names}
    tied_copy = where.pop("lm_head.weight", None) if config["tie_weights"] else None
    missing, unexpected = sorted(ours.keys() - where.keys()), sorted(where.keys() - ours.keys())
    if missing or unexpected:
        raise CheckpointError(f"GPT.from_gpt2: {directory} does not hold the tensors its config.json describes: "
                              f"missing {missing[:6] or 'none'}, unexpected {unexpected[:6] or 'none'}")
    state = {}
    for file in dict.fromkeys(f for f, _ in where.values()):
        wanted = {stored: name for name, (f, stored) in where.items() if f == file}
        arrays = read_safetensors(file, list(wanted))[0]
        check_finite(file, arrays)
        for stored, array in arrays.items():
            name = wanted[stored]
            state[ours[name]] = array.T if name == "lm_head.weight" else array   # GPT-2's (V, C) -> our (C, V)
    if tied_copy is not None:   # some files keep the tied head too: it must be the embedding
        file, stored = tied_copy
        if not (read_safetensors(file, [stored])[0][stored] == state["tok_emb.weight"]).all():
            raise CheckpointError(f"GPT.from_gpt2: {directory}: config.json ties lm_head to wte, but {file} holds "
                                  "an lm_head.weight of its own that differs")
    return state


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
    """nn.GPT's arguments (nn.GPTConfig's fields, checked) from a GPT-2 config.json, or a
    ValueError naming what nn.GPT cannot build (keys config.json leaves out take transformers'
    GPT-2 defaults); a key of the wrong type is a CheckpointError naming it."""
    path = os.path.join(directory, CONFIG)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"GPT.from_gpt2: {directory} is not a folder")
    if not os.path.lexists(path):   # (a FIFO or a folder there is refused by name when it is read)
        raise FileNotFoundError(f"GPT.from_gpt2: {directory} has no {CONFIG}: not a Hugging Face model folder")
    given = read_json(path)
    if not isinstance(given, dict) or given.get("model_type") != "gpt2":
        kind = given.get("model_type") if isinstance(given, dict) else None
        raise ValueError(f"GPT.from_gpt2: {path} describes model_type {repr(kind)[:60]}; only GPT-2's layout "
                         "('gpt2') is read")
    c = {**GPT2_DEFAULTS, **given}
    wrong = [f"{key} {repr(c[key])[:60]} (expected {CONFIG_CHECKS[key].expected})" for key in GPT2_DEFAULTS
             if not CONFIG_CHECKS[key](c[key])]
    if wrong:
        raise CheckpointError(f"GPT.from_gpt2: {path}: wrong values: {'; '.join(wrong)}")
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
    try:   # and as nn.GPT checks its settings (n_embd divisible by n_head), in the same words
        return asdict(GPTConfig(vocab_size=c["vocab_size"], block_size=c["n_positions"], n_layer=c["n_layer"],
                                n_head=c["n_head"], n_embd=c["n_embd"], dropout=float(c["resid_pdrop"]),
                                pos="learned", tie_weights=c["tie_word_embeddings"]))
    except ValueError as error:
        raise ValueError(f"GPT.from_gpt2: nn.GPT cannot build {path}: {error}") from None


def weight_files(directory):
    """The safetensors files of a folder: model.safetensors, or the shards its index lists."""
    single, index = os.path.join(directory, WEIGHTS), os.path.join(directory, SHARDS)
    if os.path.lexists(single):
        return [single]
    if os.path.lexists(index):
        contents = read_json(index)
        weight_map = contents.get("weight_map") if isinstance(contents, dict) else None
        if not (isinstance(weight_map, dict) and all(isinstance(file, str) for file in weight_map.values())):
            raise CheckpointError(f"{index}: not a safetensors index: expected {{\"weight_map\": {{tensor name: file "
                                  f"name}}}}, got {str(contents)[:80]}")
        shards = sorted(set(weight_map.values()))
        outside = [name for name in shards if os.path.basename(name) != name or name in ("", ".", "..")]
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
    if not os.path.lexists(path):
        return None
    contents = read_json(path)
    model = contents.get("model") if isinstance(contents, dict) else None
    if not isinstance(model, dict):
        raise CheckpointError(f"{path}: not a tokenizers file: expected an object with a \"model\", got "
                              f"{str(contents)[:80]}")
    if model.get("type") != "BPE":   # WordPiece, Unigram, ...: another tokenizer than ours
        return None
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict):
        raise CheckpointError(f"{path}: model.vocab must map each token to its id, got {str(vocab)[:80]}")
    wrong = next(((token, i) for token, i in vocab.items() if type(i) is not int or i < 0), None)
    if wrong:
        raise CheckpointError(f"{path}: model.vocab gives the token {wrong[0]!r} the id {repr(wrong[1])[:40]}; an id "
                              "is a whole number >= 0")
    chars = "".join(sorted(vocab, key=vocab.get))
    ours = (not merges and all(len(token) == 1 for token in vocab) and sorted(vocab.values()) == list(range(len(vocab)))
            and chars == "".join(sorted(chars)))
    return CharTokenizer.from_chars(chars) if ours else None   # ours: one token per character, in sorted order
