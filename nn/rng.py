"""The random number generator of nn: parameter init and dropout draw from it, so one
seed makes a run repeatable, and its state can travel in a checkpoint. It is tensorgrad's
generator, so nn.manual_seed is tg.manual_seed (PyTorch's torch.manual_seed).
tgtrain.parallel runs each part of a batch drawing from a generator of its own, seeded from
this one (drawing_from), so a run is repeatable for a given number of processes."""
import contextlib

import numpy as np

from tensorgrad.creation import generator, manual_seed   # one stream: tg.manual_seed seeds nn's too

_instead = None   # the generator drawing_from() put in place of nn's, if any
_skipping_init = False   # inside skipping_init(): layers leave their weights undrawn


def get_state():
    """The generator's state: a JSON-friendly dict."""
    return generator.bit_generator.state


def set_state(state):
    generator.bit_generator.state = state


def current():
    """The generator dropout draws from: nn's, or the one drawing_from() put in its place."""
    return _instead or generator


@contextlib.contextmanager
def drawing_from(own):
    """Inside this block, dropout draws from `own` (a numpy Generator; None: nn's own)."""
    global _instead
    previous, _instead = _instead, own
    try:
        yield
    finally:
        _instead = previous


@contextlib.contextmanager
def skipping_init():
    """Inside this block, new layers get placeholders for their weights instead of drawing
    them (read-only zeros of the right shape, which take no memory), for a model whose
    weights a file is about to replace (nn.GPT.from_gpt2, with load_state_dict(assign=True)):
    GPT-2 small's 124M random numbers would take seconds and 500 MB, and move nn's stream."""
    global _skipping_init
    previous, _skipping_init = _skipping_init, True
    try:
        yield
    finally:
        _skipping_init = previous


def initial(shape, draw):
    """A layer's initial float32 weights of `shape`: draw() (from nn's generator), or a
    placeholder inside skipping_init()."""
    if _skipping_init:
        return np.broadcast_to(np.float32(0), shape)   # one zero seen at every index
    return draw().astype(np.float32)


def init_skipped():
    return _skipping_init
