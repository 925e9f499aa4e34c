"""The bridge to Hugging Face GPT-2, ours -> theirs: to_gpt2(model, directory) writes a
folder that transformers' GPT2LMHeadModel.from_pretrained(directory) loads. The reverse,
nn.GPT.from_gpt2(directory), reads such a folder, GPT-2's own weights included; the layout
both share (the names, config.json, tokenizer.json) is nn/gpt2.py's.
Nothing here imports torch or transformers.
"""
import json
import os

from .atomic import write_atomically
from .data import CharTokenizer
from .gpt2 import CONFIG, LAYER_NORM_EPS, TOKENIZER, TOKENIZER_CONFIG, WEIGHTS, char_tokenizer, gpt2_name
from .layers import LayerNorm, Linear
from .tensorfile import write_safetensors
from .transformer import GPT, MultiHeadAttention

__all__ = ["to_gpt2", "char_tokenizer", "CONFIG", "WEIGHTS", "TOKENIZER", "TOKENIZER_CONFIG"]


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
