"""The transformer, in reading order: attention, feed-forward, block, GPT.

Shapes: B batch, T sequence length, C = n_embd channels, nh heads of hs = C / nh each,
V vocabulary size; S keys (S = T in the model: each position is a query and a key).
"""
import functools
import math
from dataclasses import asdict

import numpy as np

import tensorgrad as tg
from tensorgrad import devices, make_op

from . import checks
from . import functional as F
from . import gpt2
from . import rng as nn_rng
from .config import GPTConfig
from .layers import Dropout, Embedding, LayerNorm, Linear, SinusoidalPositionalEncoding, check_ids
from .module import Module, ModuleList
from .rng import generator


# ---- attention: softmax(q kᵀ / √d + mask) v, written twice ----------------------------------------
def scaled_dot_product_attention(q, k, v, causal=True, return_weights=False, dropout_p=0.0,
                                 training=True, rng=None):
    """softmax(q kᵀ / √d + mask) v for q (..., T, d), k (..., S, d), v (..., S, dv).

    With causal=True, query i attends only to keys j <= i (aligned at the end when S > T).
    Returns out (..., T, dv), and with return_weights also the attention weights
    (..., T, S) as an ndarray. Inside tg.composed() it runs composed_attention, the formula
    op by op (what drawings and traces show); else fused_attention, the same function as one
    node of the graph, faster. tests/test_composed.py proves the two equal.
    """
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.ndim < 2:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not "
                         "fit: expected q (..., T, d), k (..., S, d), v (..., S, dv)")
    attention = composed_attention if tg.is_composed() else fused_attention
    out, weights = attention(q, k, v, causal, dropout_p if training else 0.0, rng)
    return (out, weights) if return_weights else out


def composed_attention(q, k, v, causal=True, dropout_p=0.0, rng=None):
    """The article's line, softmax(q kᵀ / √d + mask) v, from the engine's primitive ops, each
    step in a named scope that drawings show. Returns (out, the weights as an ndarray)."""
    T, S, d = q.shape[-2], k.shape[-2], q.shape[-1]
    with tg.scope("scores"):         # how well each query matches each key
        scores = q @ k.swapaxes(-2, -1) / np.sqrt(d)    # (B, nh, T, hs) @ (B, nh, hs, S) -> (B, nh, T, S)
    scores.label = "scores"
    if causal:
        with tg.scope("mask"):       # a query may not look at later keys
            scores = scores.masked_fill(future_positions(T, S, scores.device), -np.inf)
    with tg.scope("softmax"):        # each row of scores into a distribution over the keys
        weights = scores.softmax(axis=-1)               # (B, nh, T, S), rows sum to 1
    weights.label = "weights"
    attended = weights
    if dropout_p:
        with tg.scope("dropout"):
            attended = F.dropout(weights, dropout_p, True, rng)
    with tg.scope("weighted_sum"):   # each output: the values averaged by the weights
        out = attended @ v                              # (B, nh, T, S) @ (B, nh, S, hs) -> (B, nh, T, hs)
    return out, weights.data


def fused_attention(q, k, v, causal=True, dropout_p=0.0, rng=None):
    """composed_attention's function as one node of the graph, its backward derived by hand
    (fewer passes over memory: training uses it). Returns (out, the weights as an ndarray)."""
    T, S, d = q.shape[-2], k.shape[-2], q.shape[-1]
    devices.same("scaled_dot_product_attention", q.data, k.data, v.data)
    scale = q.dtype.type(1 / np.sqrt(d))                               # 1/√d
    k_t_scaled = scaled_transpose(k.data, scale)                       # (B, nh, hs, S): kᵀ/√d

    def make_scores():                                                  # (B, nh, T, S)
        s = q.data @ k_t_scaled                                         # q (kᵀ/√d)
        if causal:
            s += future_penalty(T, S, s.dtype, devices.of(s))           # -inf on the later keys
        return s

    weights = block_max_softmax(make_scores)                            # (B, nh, T, S), rows sum to 1
    attended, drop_scale = weights, None
    if dropout_p:
        keep = devices.uniform(weights.shape, weights, rng or nn_rng.current()) >= dropout_p
        drop_scale = (keep / (1 - dropout_p)).astype(weights.dtype)    # mask / (1-p)
        attended = weights * drop_scale
    out = heads_side_by_side(q.shape[:-1] + v.shape[-1:], q.data)       # (B, nh, T, hs)
    np.matmul(attended, v.data, out=out)                                # (B, nh, T, S) @ (B, nh, S, hs)

    def backward(g):   # q's and k's gradients share dL/ds: computed once
        grad_q = grad_k = None
        grad_v = np.swapaxes(attended, -1, -2) @ g if v.requires_grad else None   # d(A v)/dv = Aᵀ
        if q.requires_grad or k.requires_grad:
            # out = A v with A = dropout(W), W = softmax(s), s = q kᵀ/√d. The 1/√d of
            # ds/dq = k/√d and ds/dk = q/√d rides on the copy of vᵀ the first product needs
            # anyway (see scaled_transpose), so buf carries it from its first value on:
            buf = g @ scaled_transpose(v.data, scale)                  # dL/dA / √d (dL/dA = g vᵀ)
            if drop_scale is not None:
                buf *= drop_scale                                       # dL/dW / √d (dL/dW = dL/dA·mask/(1-p))
            # softmax: dL/ds = W·(dL/dW - Σ_j dL/dW_j·W_j); masked entries have W = 0
            buf -= devices.row_dot(buf, weights)[..., None]             # (dL/dW - Σ_j dL/dW_j·W_j) / √d
            buf *= weights                                              # dL/ds / √d
            grad_q = buf @ k.data if q.requires_grad else None                       # dL/dq = dL/ds k/√d
            grad_k = np.swapaxes(buf, -1, -2) @ q.data if k.requires_grad else None   # dL/dk = dL/dsᵀ q/√d
        return grad_q, grad_k, grad_v

    out_tensor = make_op("scaled_dot_product_attention", out, (q, k, v), vjps=backward,
                         rules=("dL/dq = dL/ds @ k / √d, dL/ds = W·(dL/dW - Σ_j dL/dW_j·W_j), dL/dW = g @ vᵀ",
                                "dL/dk = (dL/ds)ᵀ @ q / √d",
                                "dL/dv = Wᵀ @ g"))
    return out_tensor, weights


def block_max_softmax(make_scores):
    """softmax over each row of the scores make_scores() returns (..., T, S), in place in
    that array. Any constant may be subtracted from a row before exp; the max of each head's
    whole (T, S) block is one (much cheaper to find in numpy than every row's), and since it
    is >= each row's max, exp cannot overflow. A row far below its block's max could
    underflow to all zeros: then the scores are made again and each row shifted by its own.
    On a GPU each row is shifted by its own max from the start: there a row's max costs no
    more than a block's, and asking whether a row underflowed would wait for the answer."""
    def exp_shifted(s, axis):         # e^(s - max of s over axis), in place in s
        s -= s.max(axis=axis, keepdims=True)
        return np.exp(s, out=s)

    scores = make_scores()
    on_cpu = type(scores) is np.ndarray
    e = exp_shifted(scores, axis=(-2, -1) if on_cpu else -1)  # shifted by each head's max
    ones = np.ones((e.shape[-1], 1), e.dtype, like=e)         # e @ ones sums the rows with BLAS,
    totals = e @ ones                                         # faster than .sum(-1): (..., T, 1)
    if on_cpu and (totals < 1e-30).any():                     # a row underflowed
        e = exp_shifted(make_scores(), axis=-1)               # shifted by each row's own max
        totals = e @ ones
    return np.multiply(e, 1 / totals, out=e)                  # e / Σ_j e_j: each row sums to 1


def scaled_transpose(a, scale):
    """aᵀ · scale (a's last two axes swapped), in a new array of its own layout. numpy hands
    a batched product to BLAS at full speed only when its right operand's last axis is
    contiguous, which a transpose's is not; so the copy is needed anyway, and a scale
    multiplied into it costs no pass of its own."""
    return np.multiply(np.swapaxes(a, -1, -2), scale, out=np.empty(a.shape[:-2] + a.shape[:-3:-1], a.dtype, like=a))


@functools.lru_cache(maxsize=16)
def future_positions(t, s, device="cpu"):
    """(t, s) boolean mask, True where key j comes after query i (j > i + s - t): what a
    causal query may not look at. Cached, so it is built once per sequence length (and
    copied to a GPU once)."""
    future = ~np.tril(np.ones((t, s), bool), k=s - t)
    future.flags.writeable = False
    return devices.to(future, device)


@functools.lru_cache(maxsize=16)
def future_penalty(t, s, dtype, device="cpu"):
    """The causal mask as numbers to add to the scores: -inf on future_positions(t, s), 0
    elsewhere (one pass over the scores, faster than writing -inf where a mask says). Made
    on the host, copied to a GPU once, and cached on each device."""
    penalty = np.where(future_positions(t, s), -np.inf, 0).astype(dtype)
    penalty.flags.writeable = False
    return devices.to(penalty, device)


def heads_side_by_side(shape, like):
    """An empty array of `shape` (..., heads, T, dv), of like's dtype and device, laid out in
    memory as (..., T, heads, dv): where MultiHeadAttention puts the heads next, so that its
    reshape of out.transpose(0, 2, 1, 3) to (B, T, C) is a view, not a copy. Any other shape
    comes laid out as it is."""
    if len(shape) < 3:
        return np.empty(shape, like.dtype, like=like)
    return np.swapaxes(np.empty(shape[:-3] + (shape[-2], shape[-3], shape[-1]), like.dtype, like=like), -3, -2)


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
        y, self.last_weights = scaled_dot_product_attention(
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

    def forward(self, x, observe=None):
        hidden = self.fc(x)                                     # (B, T, 4C): GELU's input
        if observe is not None:                                 # TransformerBlock.forward's observe
            observe["gelu_input"] = hidden
        return self.dropout(self.proj(hidden.gelu()))           # (B, T, C)


class TransformerBlock(Module):
    """Pre-LN block: x + attn(ln1(x)), then x + ffn(ln2(x)). The residual path carries
    x (and its gradient) through unchanged; each sub-layer only adds a correction.
    causal=False lets every position attend to every other (an encoder's block)."""

    def __init__(self, dim, n_heads, dropout=0.0, causal=True):
        self.ln1 = LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, n_heads, causal=causal, dropout=dropout)
        self.ln2 = LayerNorm(dim)
        self.ffn = FeedForward(dim, 4 * dim, dropout)

    def forward(self, x, observe=None):
        """x (B, T, C) -> (B, T, C). observe: None, or a dict to fill with what is inside, each
        a Tensor: "attn", the attention sub-layer's output (before the residual adds it),
        "gelu_input", the feed-forward's GELU input (B, T, 4C), and "out", the block's output."""
        attended = self.attn(self.ln1(x))                       # (B, T, C)
        x = x + attended
        x = x + self.ffn(self.ln2(x), observe)
        if observe is not None:
            observe.update(attn=attended, out=x)
        return x


class GPT(Module):
    """A decoder-only transformer over token ids: embeddings, n_layer blocks, a final
    LayerNorm and a linear head to next-token logits. Initialised as GPT-2/nanoGPT.

    tie_weights=True makes the head reuse the token embedding's table (as GPT-2 and nanoGPT
    do): one parameter, tok_emb.weight (V, C), read by rows to embed a token and used
    transposed to score every token, logits = x @ W_embᵀ; its gradient is the sum of both
    uses. Untied, the head is a Linear of its own, head.weight (C, V).

    The settings are nn.GPTConfig's fields, checked by it (a wrong value is a ValueError, one of
    the wrong type a TypeError); model.config is them as a dict, for nn.save's model_config."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, pos="learned",
                 tie_weights=False):
        self.config = asdict(GPTConfig(vocab_size, block_size, n_layer, n_head, n_embd, dropout, pos, tie_weights))
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
        with nn_rng.skipping_init():
            model = cls(**config)
        names = [name for name, _ in model.named_parameters()]
        model.load_state_dict(gpt2.read_weights(directory, config, where, names), assign=True)
        return model

    def _init_weights(self, n_layer):
        # N(0, 0.02) for every Linear and Embedding, biases 0, LayerNorms keep 1 and 0. The
        # projections that write into the residual stream (attn.proj, ffn.proj) get
        # 0.02/sqrt(2 n_layer), so the stream's variance does not grow with depth (GPT-2).
        # A tied table is drawn once, as the embedding.
        if nn_rng.init_skipped():   # a file's weights replace these (from_gpt2)
            return
        for name, module in self.named_modules():
            if isinstance(module, (Linear, Embedding)):
                std = 0.02 / np.sqrt(2 * n_layer) if name.endswith(".proj") else 0.02
                module.weight.data[...] = generator.normal(0, std, module.weight.shape)
            if isinstance(module, Linear) and module.bias is not None:
                module.bias.data[...] = 0

    def forward(self, idx, targets=None, observe=None):
        """idx (B, T) token ids -> (logits (B, T, V), loss or None).

        observe: None, or a dict to fill with what is inside each block, by the block's name:
        observe["h.0"] is block h.0's {"attn", "gelu_input", "out"} (TransformerBlock.forward),
        Tensors, e.g. observe["h.0"]["out"], its output (B, T, C)."""
        idx = idx.data if isinstance(idx, tg.Tensor) else devices.array(idx)   # tok_emb checks each id
        if idx.ndim != 2:
            raise ValueError(f"GPT: idx must have shape (B, T), got {idx.shape}")
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"GPT: sequence length {T} is longer than block_size {self.block_size}")
        x = self.tok_emb(idx)                                   # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(np.arange(T, like=idx))        # (B, T, C) + (T, C)
        x = self.drop(x)
        for i, block in enumerate(self.h):   # observing, block h.i fills observe["h.i"]
            x = block(x) if observe is None else block(x, observe.setdefault(f"h.{i}", {}))
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
        idx = devices.to(idx.data if isinstance(idx, tg.Tensor) else devices.array(idx), "cpu")   # sampled on the host
        if idx.ndim != 2 or 0 in idx.shape:   # before its dtype: np.asarray([[]]) is float
            raise ValueError(f"GPT.generate: idx must be a prompt of shape (B, T) with B and T at least 1, got shape "
                             f"{idx.shape}")
        idx = check_ids("GPT.generate", idx, self.tok_emb.weight.shape[0], "token id").astype(np.int64)
        if not (checks.is_whole(max_new_tokens) and max_new_tokens >= 0):
            raise ValueError(f"GPT.generate: max_new_tokens must be a whole number >= 0, got {max_new_tokens!r}")
        if not (checks.is_number(temperature) and 0 <= temperature < math.inf):   # nan fails both
            raise ValueError(f"GPT.generate: temperature must be a finite number >= 0, got {temperature!r}")
        if not (top_k is None or checks.is_whole(top_k) and top_k >= 1):
            raise ValueError(f"GPT.generate: top_k must be a whole number >= 1 (or None for no cut), got {top_k!r}")
        rng = generator if seed is None else np.random.default_rng(seed)
        was_training = self.training
        self.eval()
        try:
            with tg.no_grad():
                for _ in range(max_new_tokens):
                    logits, _ = self(idx[:, -self.block_size:])
                    last = devices.to(logits.data[:, -1, :], "cpu")   # (B, V): from a GPU, a copy
                    idx = np.concatenate([idx, _sample(last, temperature, top_k, rng)], axis=1)
        finally:
            self.train(was_training)
        return idx


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
