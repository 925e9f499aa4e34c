"""Shared pieces of the test suite: a hypothesis profile and small helpers as fixtures.

torch is never imported here: tests that compare against it import it with
pytest.importorskip, so the suite runs (and those tests skip) without torch.
"""
import json
import zipfile

import numpy as np
import pytest
from hypothesis import settings

# few examples, no per-example deadline, the same examples on every run (no flaky CI) and no
# example database left in the checkout: the suite must stay fast and reproducible on 2 cores
settings.register_profile("tensorgrad", max_examples=25, deadline=None, derandomize=True, database=None)
settings.load_profile("tensorgrad")


def random_array(shape, seed=0, positive=False, away_from_zero=False, dtype=np.float64):
    """Reproducible test data. positive: in [0.5, 2) (for log, sqrt, div, pow bases);
    away_from_zero: |x| in [0.3, 2) with a random sign (for abs and relu, whose kink is at 0)."""
    rng = np.random.default_rng(seed)
    if positive:
        data = rng.uniform(0.5, 2.0, size=shape)
    elif away_from_zero:
        data = rng.uniform(0.3, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    else:
        data = rng.standard_normal(size=shape)
    return np.asarray(data, dtype=dtype)


@pytest.fixture(scope="session")
def rand():
    """rand(shape, seed=0, positive=False, away_from_zero=False, dtype=float64) -> ndarray."""
    return random_array


@pytest.fixture(scope="session")
def write_v01():
    """write_v01(path, arrays, meta): a checkpoint in tensorgrad 0.1's layout, as its nn.save
    wrote it: a zip of one uncompressed .npy per array (the optimizer's named "optimizer/..."),
    and the metadata as UTF-8 JSON in the uint8 array "__meta__". Returns path."""
    def write(path, arrays, meta):
        arrays = {**arrays, "__meta__": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
        with zipfile.ZipFile(path, "w") as archive:
            for name, array in arrays.items():
                with archive.open(name + ".npy", "w") as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
        return path
    return write
