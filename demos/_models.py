"""The character models the demos use: one trained on the spot (train_char_model), on text
every Python installation has (local_text: the docstrings of its standard library), or one read
from disk (load_model: a train_chargpt.py checkpoint, or a Hugging Face GPT-2 folder, ours
exported or GPT-2's own, with its subword tokenizer)."""
import os

import numpy as np

import nn
import tgtrain
from nn import data


def local_text(source=None):
    """(text, description): `source` as nn.data.load_corpus reads it (a file's path, or
    "shakespeare"), else the docstrings of this Python's standard library
    (nn.data.fallback_corpus: every installation has them, nothing to download)."""
    if source:
        return data.load_corpus(source)
    text = data.fallback_corpus()
    return text, f"the docstrings of this Python's standard library ({len(text):,} characters)"


def train_char_model(corpus, steps, block_size, batch_size, n_layer, n_head, n_embd, pos="learned",
                     model_block_size=None, lr=2e-3, seed=0, label="training"):
    """A GPT trained by tgtrain.fit (AdamW, warmup, cosine decay, clipping) on windows of
    `block_size` characters of corpus.train (an nn.data.CharData). model_block_size, when
    larger, gives the model a longer position table than it ever trains on. Returns (model,
    final loss)."""
    nn.manual_seed(seed)
    model = nn.GPT(corpus.tokenizer.vocab_size, model_block_size or block_size, n_layer, n_head, n_embd,
                   pos=pos)
    return tgtrain.fit(model, corpus.train, steps, block_size, batch_size, lr=lr, seed=seed, label=label)


def load_model(path):
    """(model, tokenizer, meta) from a checkpoint of demos/train_chargpt.py, or from a Hugging
    Face GPT-2 folder (nn.GPT.from_gpt2; meta is empty). A folder's tokenizer is the character
    vocabulary nn.export.to_gpt2 writes, or else its tokenizer.json read by the `tokenizers`
    library (GPT-2's byte-level BPE)."""
    if not os.path.isdir(path):
        return tgtrain.start.load_checkpoint(path)
    model = nn.GPT.from_gpt2(path)
    nn.checkpoint.check_logits(path, model)
    tokenizer = nn.export.char_tokenizer(path) or SubwordTokenizer(os.path.join(path, nn.export.TOKENIZER))
    if tokenizer.vocab_size > model.config["vocab_size"]:   # fewer is fine: a vocabulary padded, as nanoGPT pads
        raise nn.CheckpointError(f"{path}: its tokenizer has {tokenizer.vocab_size} tokens but the model's "
                                 f"vocabulary is {model.config['vocab_size']}: the tokenizer is another model's")
    return model, tokenizer, {}


class SubwordTokenizer:
    """A tokenizer.json of the `tokenizers` library with CharTokenizer's encode and decode.
    vocab_size counts to its largest id (an id past the model's vocabulary must show there),
    and the file is read as every file here is (a regular file, at most MAX_JSON_BYTES)."""

    def __init__(self, path):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SystemExit(f"{path}: reading this tokenizer needs the tokenizers library: pip install tokenizers")
        if not os.path.lexists(path):
            raise FileNotFoundError(f"{os.path.dirname(path)} has no {os.path.basename(path)}: no tokenizer")
        with nn.atomic.open_regular(path) as file:
            text = file.read(nn.tensorfile.MAX_JSON_BYTES + 1)
        if len(text) > nn.tensorfile.MAX_JSON_BYTES:
            raise nn.CheckpointError(f"{path}: more than {nn.tensorfile.MAX_JSON_BYTES:,} bytes: larger than any "
                                     "tokenizer")
        try:
            self._tokenizer = Tokenizer.from_str(text.decode("utf-8"))
        except Exception as error:   # the library raises a bare Exception for a file it cannot parse
            raise nn.CheckpointError(f"{path}: the tokenizers library cannot read it: {error}") from error
        self.vocab_size = 1 + max(self._tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)

    def encode(self, text):
        return np.array(self._tokenizer.encode(text).ids, dtype=np.int64)

    def decode(self, ids):
        return self._tokenizer.decode([int(i) for i in ids])
