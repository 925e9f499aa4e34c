"""nn.GPT's training step written by hand in numpy: the floor under tensorgrad's step.

    trainer = NumpyTrainer(model)      # an nn.GPT: its shape and a copy of its weights
    loss = trainer.step(x, y)          # forward, backward, clip_grad_norm(1.0), AdamW
    loss = trainer.forward_backward(x, y)   # forward and backward: trainer.grads, by name
    trainer.close()                    # the forked processes, if processes > 1

The same model as nn.GPT with pos="learned" and no dropout (nanoGPT's: learned positions,
pre-LN blocks, causal attention, tanh-GELU, an untied head without bias, mean
cross-entropy), then clip_grad_norm and AdamW as nn.optim has them (decay on ndim >= 2
only, each parameter's own bias correction; the moments' arithmetic is nn.optim.adam_update,
so both steps run the same optimizer). No autodiff: each layer's backward is derived
by hand and stands below its forward, the local derivative stated beside the line that
applies it. What bench/gpt_step.py measures against this is the engine's own cost (graph
building, vjp calls, fresh arrays); so it is written the way a careful numpy programmer
makes it fast: every row of the batch in one matrix product, the right operand of each
batched product contiguous or a plain strided view (numpy runs a transposed view about
half as fast), products written straight into the views where their results go, updates
in place, the gradients written into arrays made once, the optimizer allocating nothing.

With processes > 1 the batch is split across that many forked processes, as
tgtrain.parallel.DataParallel splits it: the weights, each process's gradients and the
optimizer's moments live in shared memory; each process sums one group of the
parameters' gradients and then updates that group. tests/test_numpy_step.py checks the
loss, every gradient and the update against tensorgrad's.

Shapes: B batch, T sequence, C channels, nh heads of hs = C / nh, V vocabulary,
N = B * T rows (every position of the batch, as one matrix).
"""
import math
import multiprocessing
import weakref

import numpy as np

from nn.optim import adam_update
from tgtrain.parallel import balanced_groups, receive, serve, shared_arrays, stop_workers

GELU_C, GELU_K = math.sqrt(2 / math.pi), 0.044715   # GELU's tanh approximation: c·(x + k·x³)


# ---- the layers: each forward, then its backward -----------------------------------------

def linear(x, weight, bias=None):
    """x @ weight + bias for x (N, in), weight (in, out): the bias added in place."""
    out = x @ weight
    if bias is not None:
        out += bias
    return out


def linear_backward(g, x, weight, grad_weight, grad_bias, ones):
    """From g = dL/dout (N, out): dL/dweight = xᵀ g and dL/dbias = Σ_rows g (ones @ g: BLAS
    sums the rows) written into their arrays; returns dL/dx = g weightᵀ (N, in)."""
    np.matmul(x.T, g, out=grad_weight)
    if grad_bias is not None:
        np.matmul(ones, g, out=grad_bias)
    return g @ weight.T


def layer_norm(x, weight, bias, eps=1e-5):
    """(x - mean) / σ · weight + bias over each row of x (N, C). Returns the output and
    (xhat, 1/σ), what the backward needs."""
    channels = x.shape[1]
    average = np.full((channels, 1), 1 / channels, x.dtype)   # x @ average: the row means, by BLAS
    xhat = x - x @ average
    rstd = 1 / np.sqrt(np.vecdot(xhat, xhat)[:, None] / channels + eps)   # (N, 1): 1/σ
    xhat *= rstd
    out = xhat * weight
    out += bias
    return out, (xhat, rstd)


def layer_norm_backward(g, saved, weight, grad_weight, grad_bias, ones):
    """From g = dL/dout (N, C), which it overwrites: dL/dweight = Σ_rows g·xhat and dL/dbias
    = Σ_rows g into their arrays; returns dL/dx = (gh - mean(gh) - xhat·mean(gh·xhat)) / σ
    with gh = g·weight. The row means of gh and gh·xhat are g @ (weight / C) and
    (g·xhat) @ (weight / C): gh·xhat is never formed."""
    xhat, rstd = saved
    g_xhat = g * xhat
    np.matmul(ones, g_xhat, out=grad_weight)
    np.matmul(ones, g, out=grad_bias)
    weighted_average = (weight / len(weight))[:, None]          # (C, 1)
    mean_gh, mean_gh_xhat = g @ weighted_average, g_xhat @ weighted_average   # (N, 1) each
    g *= weight                                                   # gh
    g -= mean_gh
    np.multiply(xhat, mean_gh_xhat, out=g_xhat)
    g -= g_xhat
    g *= rstd
    return g


def heads(qkv, B, T, nh):
    """q, k, v (B, nh, T, hs) as views into qkv (N, 3C), whose columns are [q | k | v] and
    head h is columns h·hs:(h+1)·hs of each (nn.MultiHeadAttention's layout)."""
    return qkv.reshape(B, T, 3, nh, -1).transpose(2, 0, 3, 1, 4)   # (3, B, nh, T, hs)


def attention(qkv, B, T, nh, mask):
    """Causal self-attention: per head, weights = softmax(q kᵀ / √hs + mask), y = weights v.
    Returns y (N, C), the heads side by side, and the weights (B, nh, T, T)."""
    q, k, v = heads(qkv, B, T, nh)                                # (B, nh, T, hs) each
    hs = q.shape[-1]
    # kᵀ made contiguous (a batched product runs a transposed view at half speed), and
    # scaled by 1/√hs on the way: the (T, T) scores then need no pass of their own
    k_t = np.multiply(k.swapaxes(-1, -2), 1 / math.sqrt(hs), out=np.empty((B, nh, hs, T), qkv.dtype))
    weights = q @ k_t                                             # (B, nh, T, T): the scores
    weights += mask                                               # -inf where a key is later
    # softmax in place. Any constant per row may be subtracted: each head's largest score
    # is one (far cheaper to find than every row's) that keeps exp from overflowing. A row
    # far below it could underflow to zeros: then redo the softmax with each row's max.
    shift = weights.max(axis=(-2, -1), keepdims=True)
    ones = np.ones((T, 1), qkv.dtype)                             # w @ ones: each row's sum, by BLAS
    np.subtract(weights, shift, out=weights)
    np.exp(weights, out=weights)
    totals = weights @ ones
    if (totals < 1e-30).any():
        weights = q @ k_t + mask
        weights -= weights.max(axis=-1, keepdims=True)
        np.exp(weights, out=weights)
        totals = weights @ ones
    weights *= 1 / totals                                         # rows sum to 1
    y = np.empty((B, T, nh, hs), qkv.dtype)                       # the heads side by side, per row
    np.matmul(weights, v, out=y.transpose(0, 2, 1, 3))            # (B, nh, T, hs), into y's rows
    return y.reshape(B * T, nh * hs), weights


def attention_backward(dy, qkv, weights, dqkv, B, T, nh):
    """From dy = dL/dy (N, C): dL/dq, dL/dk, dL/dv written into dqkv (N, 3C), where qkv
    keeps q, k and v."""
    q, k, v = heads(qkv, B, T, nh)
    dq, dk, dv = heads(dqkv, B, T, nh)                            # (B, nh, T, hs) each, views
    hs = q.shape[-1]
    dy = dy.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)           # (B, nh, T, hs)
    np.matmul(weights.swapaxes(-1, -2), dy, out=dv)               # y = W v: dL/dv = Wᵀ dy
    # dL/dW = dy vᵀ, computed with vᵀ/√hs (contiguous, as kᵀ in the forward): every array
    # below is then 1/√hs times its name, which is the 1/√hs that ds/dq and ds/dk carry
    v_t = np.multiply(v.swapaxes(-1, -2), 1 / math.sqrt(hs), out=np.empty((B, nh, hs, T), qkv.dtype))
    grad = dy @ v_t                                               # dL/dW (B, nh, T, T)
    # softmax: dL/ds = W·(dL/dW - Σ_j dL/dW_j·W_j); masked places have W = 0
    grad -= np.vecdot(grad, weights)[..., None]
    grad *= weights                                               # dL/ds
    np.matmul(grad, k, out=dq)                                    # s = q kᵀ/√hs: dL/dq = dL/ds k/√hs
    np.matmul(grad.swapaxes(-1, -2), q, out=dk)                   # dL/dk = dL/dsᵀ q/√hs


def gelu(h):
    """GELU, tanh approximation: h·s with s = (1 + tanh(u)) / 2, u = c·(h + k·h³). Returns
    the output and s, computed in place in one array."""
    s = np.multiply(h, h)
    s *= GELU_K * GELU_C
    s += GELU_C
    s *= h                                                        # u = c·h·(1 + k·h²)
    np.tanh(s, out=s)
    s += 1
    s *= 0.5                                                      # s = (1 + t) / 2, t = tanh(u)
    return h * s, s


def gelu_backward(g, h, s):
    """dL/dh from g = dL/dout, computed in g (s is used up).
    d(h·s)/dh = s + h·(1 - t²)/2·du/dh with 1 - t² = 4s(1 - s) and du/dh = c·(1 + 3k·h²),
    so d/dh = s·(1 + 2h·(1 - s)·du/dh)."""
    d = np.multiply(h, h)
    d *= 2 * 3 * GELU_K * GELU_C
    d += 2 * GELU_C
    d *= h                                                        # 2h·du/dh
    g *= s
    np.subtract(1, s, out=s)
    d *= s
    d += 1
    g *= d
    return g


def cross_entropy(logits, targets, scale):
    """The mean over rows of -log softmax(logits)[target] for logits (N, V), and its
    gradient times `scale`, (softmax - onehot(target)) · scale / N, computed in logits."""
    rows, count = np.arange(len(targets)), len(targets)
    logits -= logits.max(axis=1, keepdims=True)                   # shifted: exp cannot overflow
    picked = logits[rows, targets]                                # (N,) each target's shifted logit
    np.exp(logits, out=logits)
    totals = logits @ np.ones(logits.shape[1], logits.dtype)      # (N,) Σ_j e^shifted_j
    loss = float(np.mean(np.log(totals) - picked))
    logits *= (scale / count / totals)[:, None]                   # softmax · scale / N
    logits[rows, targets] -= scale / count
    return loss, logits


# ---- the model: a block, then GPT ------------------------------------------------------------

def block(x, p, B, T, nh, mask):
    """A pre-LN block, in place on the residual stream x (N, C): x += attn(ln1(x)), then
    x += mlp(ln2(x)). p: the block's arrays by nn.TransformerBlock's names. Returns what
    the backward needs."""
    a1, ln1 = layer_norm(x, p["ln1.weight"], p["ln1.bias"])
    qkv = linear(a1, p["attn.qkv.weight"], p["attn.qkv.bias"])    # (N, 3C)
    y, weights = attention(qkv, B, T, nh, mask)                   # (N, C)
    x += linear(y, p["attn.proj.weight"], p["attn.proj.bias"])
    a2, ln2 = layer_norm(x, p["ln2.weight"], p["ln2.bias"])
    h = linear(a2, p["ffn.fc.weight"], p["ffn.fc.bias"])          # (N, 4C)
    act, s = gelu(h)
    x += linear(act, p["ffn.proj.weight"], p["ffn.proj.bias"])
    return a1, ln1, qkv, weights, y, a2, ln2, h, s, act


def block_backward(dx, saved, p, grads, B, T, nh, ones):
    """From dx = dL/dx (N, C) at the block's output, in place: dL/dx at its input. The
    residual path passes dx through unchanged (d(x + f(x))/dx = 1 + df/dx), and each
    branch adds its part. grads: the block's gradient arrays by name, written."""
    a1, ln1, qkv, weights, y, a2, ln2, h, s, act = saved
    dact = linear_backward(dx, act, p["ffn.proj.weight"], grads["ffn.proj.weight"], grads["ffn.proj.bias"], ones)
    dh = gelu_backward(dact, h, s)                                # (N, 4C)
    da2 = linear_backward(dh, a2, p["ffn.fc.weight"], grads["ffn.fc.weight"], grads["ffn.fc.bias"], ones)
    dx += layer_norm_backward(da2, ln2, p["ln2.weight"], grads["ln2.weight"], grads["ln2.bias"], ones)
    dy = linear_backward(dx, y, p["attn.proj.weight"], grads["attn.proj.weight"], grads["attn.proj.bias"], ones)
    dqkv = np.empty_like(qkv)                                     # (N, 3C), filled by the heads
    attention_backward(dy, qkv, weights, dqkv, B, T, nh)
    da1 = linear_backward(dqkv, a1, p["attn.qkv.weight"], grads["attn.qkv.weight"], grads["attn.qkv.bias"], ones)
    dx += layer_norm_backward(da1, ln1, p["ln1.weight"], grads["ln1.weight"], grads["ln1.bias"], ones)


def block_arrays(arrays, i):
    """Block i's arrays of {nn.GPT's name: array}, by their names inside the block."""
    prefix = f"h.{i}."
    return {name[len(prefix):]: array for name, array in arrays.items() if name.startswith(prefix)}


def gpt_forward_backward(params, grads, n_layer, n_head, idx, targets, scale=1.0):
    """The loss of nn.GPT with weights `params` {name: array} on token ids idx (B, T) and
    targets (B, T); d(scale · loss)/d parameter written into grads {name: array}."""
    B, T = idx.shape
    N = B * T
    dtype = params["tok_emb.weight"].dtype
    ones = np.ones(N, dtype)                                      # ones @ g: the rows of g summed
    layers = [(block_arrays(params, i), block_arrays(grads, i)) for i in range(n_layer)]   # (weights, grads)
    mask = np.triu(np.full((T, T), -np.inf, dtype), k=1)          # 0 where key j <= query i, else -inf

    # forward, in nanoGPT's order
    x = params["tok_emb.weight"][idx]                             # (B, T, C): each token's row
    x += params["pos_emb.weight"][:T]                             # + each position's row (T, C)
    x = x.reshape(N, -1)                                          # (N, C): the residual stream
    saved = [block(x, p, B, T, n_head, mask) for p, _ in layers]
    a, ln_f = layer_norm(x, params["ln_f.weight"], params["ln_f.bias"])
    logits = a @ params["head.weight"]                            # (N, V)
    loss, dlogits = cross_entropy(logits, targets.reshape(-1), scale)

    # backward, in reverse
    da = linear_backward(dlogits, a, params["head.weight"], grads["head.weight"], None, ones)
    dx = layer_norm_backward(da, ln_f, params["ln_f.weight"], grads["ln_f.weight"], grads["ln_f.bias"], ones)
    for (p, g), block_saved in zip(reversed(layers), reversed(saved)):
        block_backward(dx, block_saved, p, g, B, T, n_head, ones)
    # x = tok_emb[idx] + pos_emb[t]: each row's gradient goes to the rows it picked. A
    # one-hot (V, N) matrix product adds the token rows up (many times faster than np.add.at)
    vocab = len(params["tok_emb.weight"])
    picks = np.zeros((vocab, N), dtype)
    picks[idx.reshape(-1), np.arange(N)] = 1
    np.matmul(picks, dx, out=grads["tok_emb.weight"])
    grads["pos_emb.weight"][T:] = 0
    np.sum(dx.reshape(B, T, -1), axis=0, out=grads["pos_emb.weight"][:T])
    return loss


# ---- the trainer: forward and backward, clip, AdamW; on one process or several --------------

# a block's parameters, by nn.TransformerBlock's names, in nn.GPT's order
BLOCK_NAMES = ("ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
               "ln2.weight", "ln2.bias", "ffn.fc.weight", "ffn.fc.bias", "ffn.proj.weight", "ffn.proj.bias")


def parameter_names(n_layer):
    """nn.GPT's parameter names, in its order, for the model this file is written for."""
    return (["tok_emb.weight", "pos_emb.weight"] + [f"h.{i}.{name}" for i in range(n_layer) for name in BLOCK_NAMES]
            + ["ln_f.weight", "ln_f.bias", "head.weight"])


class NumpyTrainer:
    """Trains a copy of `model` (an nn.GPT) with hand-written numpy: step(x, y) is
    forward, backward, clip_grad_norm(max_norm) and AdamW (as nn.optim.AdamW: decay on
    ndim >= 2 only, bias correction per parameter). `params` and `grads` are {nn.GPT's
    parameter name: array}; after a step, grads holds the clipped gradient. With
    processes > 1 the batch is split across forked processes (close() ends them)."""

    def __init__(self, model, processes=1, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1,
                 max_norm=1.0):
        config = model.config
        names, arrays = zip(*((name, p.data) for name, p in model.named_parameters()))
        expected = parameter_names(config["n_layer"])
        if config["pos"] != "learned" or config["dropout"] or list(names) != expected:
            raise ValueError(f"NumpyTrainer: written for nn.GPT with pos='learned', no dropout and an untied "
                             f"head without bias, got pos={config['pos']!r}, dropout={config['dropout']}, "
                             f"parameters missing {sorted(set(expected) - set(names)) or 'none'}, "
                             f"unexpected {sorted(set(names) - set(expected)) or 'none'}")
        if processes < 1:
            raise ValueError(f"NumpyTrainer: processes must be at least 1, got {processes}")
        self.n_layer, self.n_head, self.processes = config["n_layer"], config["n_head"], processes
        self.lr, self.betas, self.eps, self.weight_decay, self.max_norm = lr, betas, eps, weight_decay, max_norm
        self.names = list(names)
        # in memory that forked processes share: the weights, each process's gradients
        # (the first process's becomes their sum), the moments and the update counts
        self.weights = shared_arrays(arrays)
        for shared, array in zip(self.weights, arrays):
            shared[...] = array
        self.part_grads = [shared_arrays(arrays) for _ in range(processes)]
        self.m, self.v = shared_arrays(arrays), shared_arrays(arrays)
        self.updates = shared_arrays([np.zeros(len(arrays), np.int64)])[0]
        self.scratch = np.empty(max(a.size for a in arrays), arrays[0].dtype)   # Adam's one temporary
        self.groups = balanced_groups([a.size for a in arrays], processes)
        self.params = dict(zip(self.names, self.weights))
        self.grads = dict(zip(self.names, self.part_grads[0]))
        self.grad_norm = None   # the last forward_backward's gradient norm, before clipping
        self.workers = []
        context = multiprocessing.get_context("fork")
        for k in range(1, processes):
            here, there = context.Pipe()
            process = context.Process(target=self._serve, args=(k, there), daemon=True)
            process.start()
            there.close()
            self.workers.append((here, process))
        self._finalizer = weakref.finalize(self, stop_workers, list(self.workers))

    def close(self):
        self._finalizer()
        self.workers = []

    def step(self, x, y):
        """One training step on the batch (x, y); returns its loss."""
        loss = self.forward_backward(x, y)
        scale = self.max_norm / (self.grad_norm + 1e-6) if self.grad_norm > self.max_norm else 1.0
        self._exchange([("update", scale)] * len(self.workers), lambda: self._update(0, scale))
        return loss

    def forward_backward(self, x, y):
        """The mean loss on the batch (x, y); grads = its gradient, grad_norm = its norm.
        Each process takes a part of the rows, the loss weighted by its share of them."""
        messages = [("part", x_part, y_part, len(x_part) / len(x))
                    for x_part, y_part in zip(np.array_split(x, self.processes), np.array_split(y, self.processes))]
        loss, losses = self._exchange(messages[1:], lambda: self._part(0, *messages[0][1:]))
        own, others = self._exchange([("sum",)] * len(self.workers), lambda: self._sum(0))
        self.grad_norm = math.sqrt(own + sum(others))
        return loss + sum(losses)

    # what each process does: k = 0 is this one, the others are forked workers
    def _part(self, k, x, y, share):
        """d(share · loss on (x, y))/d parameter into process k's gradients; returns share · loss."""
        if not len(x):   # a batch of fewer rows than processes: this one's gradients count zero
            for grad in self.part_grads[k]:
                grad[...] = 0
            return 0.0
        grads = dict(zip(self.names, self.part_grads[k]))
        return share * gpt_forward_backward(self.params, grads, self.n_layer, self.n_head, x, y, share)

    def _sum(self, k):
        """Into the first process's gradients, for process k's group of the parameters: the
        sum of every process's, in process order. Returns the group's Σ g² (for the norm)."""
        total = 0.0
        for i in self.groups[k]:
            grad = self.part_grads[0][i]
            for other in self.part_grads[1:]:
                grad += other[i]
            total += float(np.vdot(grad, grad))
        return total

    def _update(self, k, scale):
        """clip_grad_norm's scale, then AdamW, for process k's group of the parameters."""
        for i in self.groups[k]:
            w, g = self.weights[i], self.part_grads[0][i]
            if scale != 1.0:
                g *= scale                                # clip: the global norm down to max_norm
            if w.ndim >= 2:
                w *= 1 - self.lr * self.weight_decay      # decoupled weight decay, matrices only
            self.updates[i] += 1                          # each parameter's own count, for its bias correction
            # nn.optim's Adam arithmetic, shared: in place, scratch from one buffer, no allocation;
            # t a python int, so that no scalar factor turns the float32 passes into float64 ones
            adam_update(w, g, self.m[i], self.v[i], self.scratch[:w.size].reshape(w.shape), int(self.updates[i]),
                        self.lr, self.betas, self.eps)

    def _serve(self, k, connection):
        """Worker process k: run each message it is sent until the connection closes."""
        actions = {"part": self._part, "sum": self._sum, "update": self._update}
        serve(connection, lambda message: actions[message[0]](k, *message[1:]))

    def _exchange(self, messages, here):
        """Send messages[k - 1] to worker k, run here() meanwhile; returns (here()'s result,
        the workers' replies)."""
        for (connection, _), message in zip(self.workers, messages):
            connection.send(message)
        try:
            result = here()
        finally:
            replies = [receive(connection, process) for connection, process in self.workers]
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return result, replies
