"""The same GPT as nn.GPT, written in PyTorch: the peer in benchmarks and parity tests.

Same architecture, step for step: learned positions, pre-LN blocks, one qkv Linear with
columns [q | k | v], explicit matmul attention with a causal mask, tanh-GELU, an untied
head without bias, GPT-2 init. `copy_weights(tg_model, torch_model)` moves weights
across (tensorgrad's Linear weight is (in, out), PyTorch's is (out, in): a transpose).
torch is an optional dependency; import this module only where torch is installed.
"""
import math

import numpy as np
import torch
from torch import nn as tnn
from torch.nn import functional as TF


class Attention(tnn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.qkv = tnn.Linear(n_embd, 3 * n_embd)
        self.proj = tnn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])          # (B, nh, T, T)
        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = scores.softmax(dim=-1) @ v                                         # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(tnn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln1 = tnn.LayerNorm(n_embd)
        self.attn = Attention(n_embd, n_head, block_size)
        self.ln2 = tnn.LayerNorm(n_embd)
        self.fc = tnn.Linear(n_embd, 4 * n_embd)
        self.proj = tnn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TorchGPT(tnn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.tok_emb = tnn.Embedding(vocab_size, n_embd)
        self.pos_emb = tnn.Embedding(block_size, n_embd)
        self.h = tnn.ModuleList(Block(n_embd, n_head, block_size) for _ in range(n_layer))
        self.ln_f = tnn.LayerNorm(n_embd)
        self.head = tnn.Linear(n_embd, vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                tnn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                tnn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else TF.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def torch_name(name):
    """nn.GPT's parameter name -> TorchGPT's (the FeedForward's fc/proj sit in the block)."""
    return name.replace(".ffn.", ".")


def other_layout(name, array):
    """nn.GPT's parameter `name` as TorchGPT keeps it, or back: a Linear weight is (in, out)
    in tensorgrad and (out, in) in PyTorch, so it is transposed (either way); the rest is as it is."""
    return array.T if name.endswith("weight") and "emb" not in name and array.ndim == 2 else array


def copy_weights(tg_model, torch_model):
    """Load tensorgrad weights into the PyTorch twin (Linear weights transposed)."""
    params = dict(torch_model.named_parameters())
    with torch.no_grad():
        for name, p in tg_model.named_parameters():
            params[torch_name(name)].copy_(torch.from_numpy(np.ascontiguousarray(other_layout(name, p.data))))


def adamw(model, lr, betas, weight_decay, eps=1e-8):
    """torch.optim.AdamW that decays the matrices only, as nn.optim.AdamW does (biases and
    LayerNorm get no weight decay): the same update as tensorgrad's, so both engines train
    the same numbers as well as at the same cost."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": matrices}, {"params": others, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
