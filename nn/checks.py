"""One vocabulary for checking a number, a size or a flag, so that each check is written once.

Python counts True as 1 and False as 0 (bool is a subclass of int), so "is it a number?" must
say no to them on purpose: a checkpoint whose n_embd is `true`, or a dropout of `false`, is a
mistake, not 1 or 0. And nan fails every comparison, so a range written as comparisons
(`0 <= p < 1`) refuses nan without a word more, and compares a whole number of 400 digits
without turning it into a float (which would overflow).

    checks.is_number(0.5), checks.is_number(True)     # True, False
    checks.FRACTION(0.5), checks.FRACTION(1.0)        # True, False
    checks.FRACTION.expected                          # "a number in [0, 1)": the words of a refusal

A Check is a test and the words that say what passes it; the flags (tgtrain/flags.py), the GPT's
settings (nn/config.py), the checkpoint and GPT-2 readers and the run state --resume reads all
check with these.
"""
import math
import numbers
from typing import Callable, NamedTuple

import numpy as np


def is_number(x):
    """A real number (int, float, numpy's), but not True or False."""
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def is_whole(n):
    """A whole number (int, numpy's), but not True or False (and not 2.0: a float is not whole)."""
    return isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_))


class Check(NamedTuple):
    """ok(value) -> whether value passes; expected: what it must be, in words, for the message
    that refuses it ("must be a whole number >= 1, got 0")."""
    ok: Callable
    expected: str

    def __call__(self, value):
        return bool(self.ok(value))


COUNT = Check(lambda n: is_whole(n) and n >= 0, "a whole number >= 0")
POSITIVE_COUNT = Check(lambda n: is_whole(n) and n >= 1, "a whole number >= 1")
SEED = Check(lambda n: is_whole(n) and 0 <= n < 2**32, "a whole number from 0 to 2**32 - 1 (numpy's seed range)")
FINITE = Check(lambda x: is_number(x) and -math.inf < x < math.inf, "a finite number")
POSITIVE = Check(lambda x: is_number(x) and 0 < x < math.inf, "a finite number > 0")
NON_NEGATIVE = Check(lambda x: is_number(x) and 0 <= x < math.inf, "a finite number >= 0")
FRACTION = Check(lambda p: is_number(p) and 0 <= p < 1, "a number in [0, 1)")
SWITCH = Check(lambda b: isinstance(b, bool), "true or false")
TEXT = Check(lambda s: isinstance(s, str), "text")


def one_of(choices):
    """The check that a value is one of `choices` (texts)."""
    return Check(lambda value: isinstance(value, str) and value in choices, f"one of {', '.join(choices)}")


def or_none(check):
    """`check`, or None (JSON's null) for "not set"."""
    return Check(lambda value: value is None or check(value), f"null or {check.expected}")


def refuse(owner, name, value, check, of_type=is_number):
    """Raise unless `check` passes `value`, in the one wording of a refusal: "AdamW: lr must be a
    finite number >= 0, got -1". As PyTorch does, a value not even of the setting's type
    (of_type(value) false: a text for a number) is a TypeError, one of it but out of range a
    ValueError."""
    if not check(value):
        kind = TypeError if not of_type(value) else ValueError
        raise kind(f"{owner}: {name} must be {check.expected}, got {repr(value)[:60]}")
