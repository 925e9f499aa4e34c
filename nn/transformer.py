"""The transformer, in reading order: attention, feed-forward, block, GPT.

Shapes: B batch, T sequence length, C = n_embd channels, nh heads of hs = C / nh each,
V vocabulary size.
"""
import math
import numbers

import numpy as np

import tensorgrad as tg

from . import functional as F
from . import gpt2, rng
from .layers import Dropout, Embedding, LayerNorm, Linear, SinusoidalPositionalEncoding, check_ids
from .module import Module, ModuleList
from .rng import generator


class MultiHeadAttention(Module):
    """Each head h looks at the sequence through its own projections:
    q = x W_Q, k = x W_K, v = x W_V; weights = softmax(q kᵀ / √hs + causal mask);
    head = weights v. The heads are concatenated and mixed by W_O (proj). Inside
    tg.composed(), attention runs step by step (scores, mask, softmax, weighted_sum).

    qkv is one Linear(C, 3C) whose output columns are [q | k | v]; head h uses columns
    h*hs:(h+1)*hs of each. The last forward's weights stay in `last_weights` (B, nh, T, T).
    """

    def __init__(self, dim, n_heads, causal=True, dropout=0.0):
        if dim % n_heads:
            raise ValueError(f"MultiHeadAttention: dim {dim} is not divisible by n_heads {n_heads}")
        self.n_heads, self.causal, self.dropout_p = n_heads, causal, dropout
        self.qkv = Linear(dim, 3 * dim)
        self.proj = Linear(dim, dim)
        self.resid_dropout = Dropout(dropout)
        self.last_weights = None

    def forward(self, x):
        B, T, C = x.shape
        nh = self.n_heads
        qkv = self.qkv(x).reshape(B, T, 3, nh, C // nh)     # (B, T, 3, nh, hs)
        qkv = qkv.transpose(2, 0, 3, 1, 4)                   # (3, B, nh, T, hs)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # each (B, nh, T, hs)
        q.label, k.label, v.label = "q", "k", "v"             # names drawings and traces show
        y, self.last_weights = F.scaled_dot_product_attention(
            q, k, v, causal=self.causal, return_weights=True,
            dropout_p=self.dropout_p, training=self.training)  # (B, nh, T, hs)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)          # (B, T, nh, hs) -> (B, T, C)
        return self.resid_dropout(self.proj(y))

    def extra_repr(self):
        return f"n_heads={self.n_heads}, causal={self.causal}"


class FeedForward(Module):
    """Linear -> GELU -> Linear, applied to each position on its own."""

    def __init__(self, dim, hidden=None, dropout=0.0):
        self.fc = Linear(dim, hidden or 4 * dim)
        self.proj = Linear(hidden or 4 * dim, dim)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.proj(self.fc(x).gelu()))


class TransformerBlock(Module):
    """Pre-LN block: x + attn(ln1(x)), then x + ffn(ln2(x)). The residual path carries
    x (and its gradient) through unchanged; each sub-layer only adds a correction."""

    def __init__(self, dim, n_heads, dropout=0.0):
        self.ln1 = LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, n_heads, causal=True, dropout=dropout)
        self.ln2 = LayerNorm(dim)
        self.ffn = FeedForward(dim, 4 * dim, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class GPT(Module):
    """A decoder-only transformer over token ids: embeddings, n_layer blocks, a final
    LayerNorm and a linear head to next-token logits. Initialised as GPT-2/nanoGPT.

    tie_weights=True makes the head reuse the token embedding's table (as GPT-2 and nanoGPT
    do): one parameter, tok_emb.weight (V, C), read by rows to embed a token and used
    transposed to score every token, logits = x @ W_embᵀ; its gradient is the sum of both
    uses. Untied, the head is a Linear of its own, head.weight (C, V)."""

    POSITIONS = ("learned", "sinusoidal", "none")

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, pos="learned",
                 tie_weights=False):
        if pos not in self.POSITIONS:
            raise ValueError(f"GPT: pos must be one of {self.POSITIONS}, got {pos!r}")
        if not isinstance(tie_weights, bool):
            raise TypeError(f"GPT: tie_weights must be True or False, got {tie_weights!r}")
        self.config = dict(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer,
                           n_head=n_head, n_embd=n_embd, dropout=dropout, pos=pos, tie_weights=tie_weights)
        self.block_size, self.tie_weights = block_size, tie_weights
        self.tok_emb = Embedding(vocab_size, n_embd)
        self.pos_emb = {"learned": lambda: Embedding(block_size, n_embd),
                        "sinusoidal": lambda: SinusoidalPositionalEncoding(block_size, n_embd),
                        "none": lambda: None}[pos]()
        self.drop = Dropout(dropout)
        self.h = ModuleList(TransformerBlock(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln_f = LayerNorm(n_embd)
        self.head = None if tie_weights else Linear(n_embd, vocab_size, bias=False)
        self._init_weights(n_layer)

    @classmethod
    def from_gpt2(cls, directory):
        """The model of a Hugging Face GPT-2 directory on disk (config.json and
        model.safetensors, as transformers' save_pretrained writes them, the original GPT-2
        weights included): the reverse of nn.export.to_gpt2. Nothing is downloaded. The arrays
        read become the parameters (no second copy), and no random weights are drawn for them."""
        config, where = gpt2.read_layout(directory)   # checked against the files' headers first
        with rng.skipping_init():
            model = cls(**config)
        names = [name for name, _ in model.named_parameters()]
        model.load_state_dict(gpt2.read_weights(directory, config, where, names), assign=True)
        return model

    def _init_weights(self, n_layer):
        # N(0, 0.02) for every Linear and Embedding, biases 0, LayerNorms keep 1 and 0. The
        # projections that write into the residual stream (attn.proj, ffn.proj) get
        # 0.02/sqrt(2 n_layer), so the stream's variance does not grow with depth (GPT-2).
        # A tied table is drawn once, as the embedding.
        if rng.init_skipped():   # a file's weights replace these (from_gpt2)
            return
        for name, module in self.named_modules():
            if isinstance(module, (Linear, Embedding)):
                std = 0.02 / np.sqrt(2 * n_layer) if name.endswith(".proj") else 0.02
                module.weight.data[...] = generator.normal(0, std, module.weight.shape)
            if isinstance(module, Linear) and module.bias is not None:
                module.bias.data[...] = 0

    def forward(self, idx, targets=None):
        """idx (B, T) token ids -> (logits (B, T, V), loss or None)."""
        idx = check_ids("GPT", idx, self.tok_emb.weight.shape[0], "token id")
        if idx.ndim != 2:
            raise ValueError(f"GPT: idx must have shape (B, T), got {idx.shape}")
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"GPT: sequence length {T} is longer than block_size {self.block_size}")
        x = self.tok_emb(idx)                                   # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(np.arange(T))                  # (B, T, C) + (T, C)
        x = self.drop(x)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if self.tie_weights:   # the embedding table, transposed: each token's score is x · its row
            logits = F.linear(x, self.tok_emb.weight.T)         # (B, T, C) @ (C, V) = x @ W_embᵀ
        else:
            logits = self.head(x)                               # (B, T, C) @ (C, V)
        loss = None if targets is None else F.cross_entropy(logits, targets)
        return logits, loss

    def extra_repr(self):
        return "head: tok_emb.weight transposed (tie_weights=True)" if self.tie_weights else ""

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, seed=None):
        """Extend idx (B, T) by sampling one token at a time from the model's next-token
        distribution; the context is cropped to the last block_size tokens. temperature 0
        picks the most likely token. Returns int ndarray (B, T + max_new_tokens)."""
        idx = idx.data if isinstance(idx, tg.Tensor) else np.asarray(idx)
        if idx.ndim != 2 or 0 in idx.shape:   # before its dtype: np.asarray([[]]) is float
            raise ValueError(f"GPT.generate: idx must be a prompt of shape (B, T) with B and T at least 1, got shape "
                             f"{idx.shape}")
        idx = check_ids("GPT.generate", idx, self.tok_emb.weight.shape[0], "token id").astype(np.int64)
        if not (_whole(max_new_tokens) and max_new_tokens >= 0):
            raise ValueError(f"GPT.generate: max_new_tokens must be a whole number >= 0, got {max_new_tokens!r}")
        if not (_real(temperature) and 0 <= temperature < math.inf):   # nan fails both
            raise ValueError(f"GPT.generate: temperature must be a finite number >= 0, got {temperature!r}")
        if not (top_k is None or _whole(top_k) and top_k >= 1):
            raise ValueError(f"GPT.generate: top_k must be a whole number >= 1 (or None for no cut), got {top_k!r}")
        rng = generator if seed is None else np.random.default_rng(seed)
        was_training = self.training
        self.eval()
        try:
            with tg.no_grad():
                for _ in range(max_new_tokens):
                    logits, _ = self(idx[:, -self.block_size:])
                    idx = np.concatenate([idx, _sample(logits.data[:, -1, :], temperature, top_k, rng)], axis=1)
        finally:
            self.train(was_training)
        return idx


def _whole(n):
    return isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_))


def _real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def _sample(logits, temperature, top_k, rng):
    """One token id per row of logits (B, V) -> (B, 1)."""
    if temperature == 0:
        return logits.argmax(axis=-1)[:, None]
    # softmax(l / t) = softmax((l - max l) / t). In the second every value is <= 0 and the
    # largest exactly 0, so dividing by a tiny t can only overflow to -inf, whose exp is 0: never
    # the inf - inf = nan of the first. A t that small samples the most likely token, as t = 0.
    logits = logits.astype(np.float64)
    with np.errstate(over="ignore"):
        logits = (logits - logits.max(axis=-1, keepdims=True)) / temperature
    if top_k is not None:
        kth = np.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1])][:, None]
        logits = np.where(logits < kth, -np.inf, logits)        # keep only the top_k
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    cumulative = probs.cumsum(axis=-1)
    draws = rng.random((len(probs), 1))
    return np.minimum((cumulative < draws).sum(axis=-1, keepdims=True), probs.shape[-1] - 1)
