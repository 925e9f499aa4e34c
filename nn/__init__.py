"""nn: layers, attention, the GPT model, optimizers, checkpoints and the GPT-2 bridge on tensorgrad.

    import nn
    from nn import functional as F
    model = nn.GPT(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    logits, loss = model(idx, targets)
"""
from . import atomic, checks, config, data, export, functional, gpt2, init, optim, tensorfile, transformer
from .checkpoint import CheckpointError, load, save
from .config import GPTConfig
from .layers import (GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, SinusoidalPositionalEncoding,
                     Tanh)
from .module import Module, ModuleList, Parameter, Sequential
from .rng import manual_seed
from .transformer import GPT, FeedForward, MultiHeadAttention, TransformerBlock

# attention lives with the model (nn/transformer.py); nn.functional names it too, as PyTorch's does
functional.scaled_dot_product_attention = transformer.scaled_dot_product_attention
functional.future_positions, functional.future_penalty = transformer.future_positions, transformer.future_penalty

__all__ = [
    "Module", "Parameter", "Sequential", "ModuleList", "Linear", "Embedding", "LayerNorm", "Dropout",
    "GELU", "ReLU", "Tanh", "SinusoidalPositionalEncoding", "MultiHeadAttention", "FeedForward",
    "TransformerBlock", "GPT", "GPTConfig", "checks", "data", "functional", "optim", "save", "load",
    "CheckpointError", "manual_seed", "export", "init",
]
