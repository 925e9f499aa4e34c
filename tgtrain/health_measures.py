"""Gradient health, the numbers: measured around one optimizer update, they show whether the
gradients and updates are sound before the loss shows that they are not (tgtrain/health.py
keeps them as a log).

- per parameter, the gradient's norm (before any clipping), and the update-to-weight
  ratio std(w_after - w_before) / std(w_before): how far the update moved the weights,
  relative to their spread. The rule of thumb (Karpathy's makemore lectures) is log10 of it
  near -3: each step changes a weight by about a thousandth of the weights' spread. Far
  above -3 the learning rate throws the weights around; far below they hardly learn.
- per transformer block, on one batch: the std of the residual stream after the block (it
  grows when the updates are too large), and the fraction of the block's GELU inputs in
  GELU's flat tails (see gelu_tail_fraction).
"""
import math

import numpy as np

import tensorgrad as tg

GELU_TAIL = 3.0   # |x| beyond which GELU is flat to about 1% (gelu_tail_fraction)


def grad_norms(model):
    """{parameter name: L2 norm of its gradient}, None for a parameter without one."""
    return {name: None if p.grad is None else float(np.linalg.norm(p.grad))
            for name, p in model.named_parameters()}


def snapshot(model):
    """{parameter name: a copy of its weights}, to compare with after an update."""
    return {name: p.data.copy() for name, p in model.named_parameters()}


def update_ratios(before, model):
    """{parameter name: std(w - before) / std(before)}, w the weights now. nan where the
    weights before had no spread (a bias of zeros, a LayerNorm's ones at initialization):
    a ratio to nothing is not defined."""
    ratios = {}
    for name, p in model.named_parameters():
        spread = before[name].std()
        ratios[name] = float((p.data - before[name]).std() / spread) if spread > 0 else math.nan
    return ratios


def gelu_tail_fraction(x):
    """The fraction of the GELU inputs x in GELU's flat tails, |x| > GELU_TAIL = 3.

    GELU(x) = x Phi(x) (and its tanh approximation, which x.gelu() computes) bends between
    about -3 and 3 and is a straight line outside: its slope differs most from 0 and 1 at
    x = -/+ sqrt(2) (-0.13 and 1.13) and comes closer to them ever after, to within 0.012
    at |x| = 3. Below -3 the unit is off: it outputs
    about 0 and passes back about 1% of the gradient it gets, so the weights feeding it
    barely learn. Above +3 it is the identity: its nonlinearity does nothing. A healthy
    MLP keeps nearly all its inputs in the bend; a fraction in the tails that grows as
    training goes means units dying or turning linear."""
    return float(np.mean(np.abs(x) > GELU_TAIL))


def block_stats(model, idx):
    """{block name ("h.0", ...): (std of the residual stream after the block, fraction of
    its GELU inputs in the flat tails)} of a GPT on token ids idx (B, T): GPT.forward itself,
    observed (model(idx, observe=...) keeps each block's insides by name), without a graph and
    in eval mode (no dropout: no random numbers drawn, so a run that measures makes the same
    numbers as one that does not)."""
    was_training = model.training
    model.eval()
    inside = {}
    try:
        with tg.no_grad():
            model(idx, observe=inside)
    finally:
        model.train(was_training)
    return {name: (float(block["out"].data.std()), gelu_tail_fraction(block["gelu_input"].data))
            for name, block in inside.items()}
