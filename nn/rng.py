"""The random number generator of nn: parameter init and dropout draw from it, so one
seed (nn.manual_seed) makes a run repeatable, and its state can travel in a checkpoint."""
import numpy as np

generator = np.random.default_rng()


def manual_seed(seed):
    """Reseed nn's generator in place (every module that holds it sees the new stream)."""
    generator.bit_generator.state = np.random.PCG64(seed).state


def get_state():
    """The generator's state: a JSON-friendly dict."""
    return generator.bit_generator.state


def set_state(state):
    generator.bit_generator.state = state
