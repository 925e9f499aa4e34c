"""The random number generator of nn: parameter init and dropout draw from it, so one
seed (nn.manual_seed) makes a run repeatable, and its state can travel in a checkpoint.
A thread can be given a generator of its own (nn.parallel does, one per part of a batch,
seeded from this one), so threads never race for one stream and a run stays repeatable."""
import threading

import numpy as np

generator = np.random.default_rng()
_thread = threading.local()


def manual_seed(seed):
    """Reseed nn's generator in place (every module that holds it sees the new stream)."""
    generator.bit_generator.state = np.random.PCG64(seed).state


def get_state():
    """The generator's state: a JSON-friendly dict."""
    return generator.bit_generator.state


def set_state(state):
    generator.bit_generator.state = state


def current():
    """The generator this thread draws from: its own if one was given, else nn's."""
    return getattr(_thread, "generator", None) or generator


def use_in_this_thread(own):
    """Make `own` (a numpy Generator, or None for nn's) this thread's generator."""
    _thread.generator = own
