"""check.py's hints: each rule recognises one mistake students make, and says what it is.

A rule gets c, what the grader saw (grading.Seen: the op, its inputs and output, g, the
gradient the vjp returned for one input and the right one, every input's right gradient,
the error the vjp raised), and returns its hint, or None where its mistake is not the one.

A hint is a claim about the learner's gradient, and no claim is made before it is checked:

- by recomputing the gradient with that one mistake made (_made: the grader's own gradient
  with the mistake in it, which must be the learner's, and not the right one);
- or by running the learner's vjp again with that one mistake undone (_undone: the same
  inputs and g, handed over as arrays whose sums keep their axes, or whose matrix products
  are made to fit), which must then give the right gradients;
- or by what the grader saw itself: a shape, a type, the array a vjp wrote into, numpy's
  own error.

A rule that cannot confirm its claim stays silent: numbers without a hint are better than
a hint that is wrong. hints(c) runs every rule of HINTS on its own: one that raises is
skipped (the grade stands) and its failure is said to be check.py's bug, by the rule's
name. Where no rule names the mistake, FALLBACKS say what the shapes and numbers show.
"""
import itertools
import re
import warnings

import numpy as np

from messages import say
from tensorgrad.autograd import broadcasts_to

ATOL, RTOL = 1e-6, 1e-5   # a gradient is right when np.isclose to finite differences' with these


class Hint(str):
    """A hint's line, which knows the rule that said it (tests/test_lab*.py ask)."""

    def __new__(cls, text, rule):
        hint = super().__new__(cls, text)
        hint.rule = rule
        return hint


def hints(c, rules=None):
    """The hints for the mistake in c: what every rule of `rules` (HINTS) says, or where
    none names it, what FALLBACKS can say of the shapes and numbers. A rule that raises is
    skipped, with a line that says so: its failure is check.py's, not the learner's."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the mistakes' own inf, nan and casts: the rules look at them
        named = [hint for rule in (HINTS if rules is None else rules) for hint in _tried(rule, c)]
        if rules is None and not any(hint.rule for hint in named):
            named += [hint for rule in FALLBACKS for hint in _tried(rule, c)]
    return named


def _tried(rule, c):
    try:
        hint = rule(c)
    except Exception as error:   # a rule's own bug: the learner's grade stands
        return [Hint(say("hint_rule_failed", rule=rule.__name__, error=f"{type(error).__name__}: {error}"), None)]
    return [Hint(hint, rule.__name__)] if hint else []


# ---- what the vjp returned, wrote or raised -------------------------------------------------------
def wrote_into(c):
    """A write into g, or into an array the forward saved (`s *= ...`, `p[rows, t] -= 1`):
    found by comparing them after the vjp, or, where numpy refused the write, by running it
    again on writable copies ("?": none of them changed, so it was another read-only array,
    a view of g)."""
    if not c.written:
        return None
    saved = [name for name in c.written if name not in ("g", "?")]
    lines = [say("hint_wrote_into_g")] if "g" in c.written else []
    lines += [say("hint_wrote_read_only")] if "?" in c.written else []
    if saved:
        lines.append(say("hint_wrote_into_saved", name=", ".join(saved), first=saved[0]))
    return " ".join(lines)


def returned_none(c):
    """None: a vjp with no return, or one that returns what an in-place call gives."""
    return say("hint_returned_none") if c.returned is None and (c.name is not None or c.malformed) else None


def returned_tuple(c):
    """The right gradient, in a tuple (or list) of one: `return g * out,`."""
    if not isinstance(c.returned, (tuple, list)) or len(c.returned) != 1:
        return None
    return say("hint_returned_tuple", name=c.name) if _like_array(c.returned[0], c.want) else None


def returned_number(c):
    """One number (a python float, a numpy scalar) where the input has a shape."""
    if c.name is None or isinstance(c.returned, np.ndarray) or np.ndim(c.returned) != 0 or not c.want.shape:
        return None
    if not isinstance(c.returned, (int, float, np.number)):
        return None
    return say("hint_returned_number", name=c.name, kind=type(c.returned).__name__, shape=c.want.shape)


def integer_values(c):
    """An integer (or boolean) array: it cannot hold the gradient's fractions."""
    dtype = getattr(c.returned, "dtype", None)
    if not _same_shape(c) or dtype is None or dtype.kind not in "iub" or np.allclose(c.want, np.round(c.want)):
        return None
    return say("hint_integer_values", dtype=dtype)


def cast_into_integers(c):
    """numpy refused to put float values into an integer array (`+=`, `-=` into an int array)."""
    found = re.search(r"Cannot cast ufunc '(\w+)' output from dtype\('(\w+)'\) to dtype\('(\w+)'\)", str(c.error))
    if not isinstance(c.error, TypeError) or not found or np.dtype(found[3]).kind not in "iub":
        return None
    return say("hint_cast_into_integers", into=found[3], what=found[2])


def axis_as_index(c):
    """`x.shape[axis]` where 03's axis arrives as a tuple of ints."""
    if c.op not in ("sum", "mean") or not isinstance(c.error, TypeError) or "not tuple" not in str(c.error):
        return None
    return say("hint_axis_as_index", axis=_axes_of(c.inputs.get("axis"), c.inputs["x"].ndim))


def targets_as_rows(c):
    """An index past axis 0's N rows that is one of the targets: grad[targets], a row per
    target, where each row i wants its own target's column (grad[np.arange(N), targets])."""
    if c.op != "cross_entropy" or not isinstance(c.error, IndexError):
        return None
    found = re.search(r"index (-?\d+) is out of bounds for axis 0 with size (\d+)", str(c.error))
    targets = c.inputs["targets"]
    if not found or int(found[2]) != len(targets) or int(found[1]) not in targets:
        return None
    return say("hint_targets_as_rows", index=found[1], rows=len(targets), columns=c.inputs["logits"].shape[1])


# ---- a mistake undone: the learner's vjp run again, which must then be right ----------------------
def lost_keepdims(c):
    """A sum or mean that dropped its axis (keepdims=False, the default), so numpy could not
    line it up with what it came from, or lined it up with another axis: confirmed by
    running the vjp again with every sum and mean along an axis keeping it."""
    if c.op in ("sum", "mean") or not (c.error is not None or _wrong(c)) or not _undone(c, KeepDims):
        return None
    lost = _lost_axes(c.error)
    if lost is None:
        return say("hint_lost_keepdims_silent")
    big, small, axes = lost
    return say("hint_lost_keepdims", small=small, big=big, axes=_axes_text(axes))


def product_fits(c):
    """A matrix product whose shapes do not fit (a transpose missing, or too many, or the
    order swapped, or * for @): confirmed by running the vjp again with the products that
    do not fit made to fit, one way each, which must then give the right gradients."""
    if not isinstance(c.error, ValueError) or c.error.__class__ is not ValueError:
        return None
    made = _fitted(c)
    if not made:
        return None
    return say("hint_product_fits", products="; ".join(say("product_fixed", written=w, fixed=f) for w, f in made))


# ---- what the gradient is: the right one with one mistake made --------------------------------
def forgot_g(c):
    """The local derivative alone: the gradient for g = 1."""
    if not _same_shape(c):
        return None
    ones = c.want_for(np.ones_like(c.g))   # for softmax all 0 (but for the differences' noise): no sign of g
    return say("hint_forgot_g", name=c.name) if not _like(ones, 0 * ones) and _made(c, ones) else None


def zero(c):
    """Zero everywhere, or rounding noise of terms that cancel (1e-17), where the right one is not."""
    if not _same_shape(c) or not _nearly_zero(c.got, c.want):
        return None
    biggest = np.abs(c.got).max()
    return say("hint_zero") if biggest == 0 else say("hint_nearly_zero", biggest=biggest)


def sign(c):
    """The right one, negated."""
    return say("hint_sign") if _same_shape(c) and _made(c, -c.want) else None


def other_input(c):
    """Another input's right gradient: the two swapped, or one copied for both."""
    if c.got is None:
        return None
    for other, grad in c.expected.items():
        if other != c.name and not _like(grad, c.want) and _like(c.got, grad):
            swapped = _like(c.gots.get(other), c.want)
            return say("hint_swapped", name=c.name, other=other) if swapped else \
                say("hint_other_input", name=c.name, other=other)
    return None


def transposed(c):
    """The right gradient, transposed."""
    if c.got is None or c.want.ndim != 2 or c.got.shape == c.want.shape or not _like(c.got, c.want.T):
        return None
    return say("hint_transposed", name=c.name, want=c.want.shape)


def reshaped(c):
    """The right gradient transposed, then reshaped to the input's shape: the numbers in
    the wrong places (reshape keeps the order in memory; a transpose changes it)."""
    if not _same_shape(c) or c.want.ndim != 2 or not _made(c, c.want.T.reshape(c.want.shape)):
        return None
    return say("hint_reshaped", name=c.name)


def not_summed_back(c):
    """A broadcast input's gradient left in the broadcast shape, right once summed back."""
    if c.got is None or c.got.shape == c.want.shape or c.got.shape != c.g.shape:
        return None
    want, big = c.want.shape, c.g.shape
    if not broadcasts_to(want, big) or not _like(_summed_to(c.got, want), c.want):
        return None
    return say("hint_not_summed_back", name=c.name, want=want, out=big, axes=_stretched(want, big))


def averaged(c):
    """A broadcast input's gradient averaged over its copies, where the chain rule adds them."""
    if not _same_shape(c) or c.want.shape == c.g.shape or not broadcasts_to(c.want.shape, c.g.shape):
        return None
    copies = c.g.size // c.want.size
    return say("hint_averaged", name=c.name, copies=copies) if _made(c, c.want / copies) else None


def summed_wrong(c):
    """A broadcast input's gradient with the shape of a sum of g over other axes than the
    stretched ones; or over the right ones, with the right numbers, but not its shape (the
    axes put in front kept, or the size-1 ones dropped)."""
    if c.got is None or c.got.shape in (c.want.shape, c.g.shape) or not broadcasts_to(c.want.shape, c.g.shape):
        return None
    right = _stretched(c.want.shape, c.g.shape)
    for axes, keep in _sums(c.g.ndim):
        if _summed_shape(c.g.shape, axes, keep) != c.got.shape:
            continue
        if set(axes) != set(right):
            return say("hint_sum_wrong_axes", name=c.name, want=c.want.shape, g=c.g.shape,
                       yours=_axes_text(axes), right=_axes_text(right))
        if c.got.size == c.want.size and _like(c.got.reshape(c.want.shape), c.want):
            front = tuple(range(c.g.ndim - c.want.ndim))
            key = "hint_sum_drop_front" if keep and front else "hint_sum_keep_ones"
            return say(key, name=c.name, want=c.want.shape, axes=_axes_text(right), front=_axes_text(front))
    return None


def g_shape(c):
    """g itself, where the forward summed axes away: its shape, not the input's (sum and mean
    have their own rule)."""
    if c.op in ("sum", "mean") or not isinstance(c.returned, np.ndarray) or c.got.shape != c.g.shape \
            or c.g.shape == c.want.shape:
        return None
    for axes, keep in _sums(len(c.want.shape)):
        if _summed_shape(c.want.shape, axes, keep) == c.g.shape:
            return say("hint_g_shape", name=c.name, want=c.want.shape, axes=_axes_text(axes))
    return None


def sum_keepdims(c):
    """Exercise 03's vjp with a shape that is not x's, or raising numpy's ValueError (a
    broadcast that does not fit): how g is put back to x's axes, as keepdims says."""
    if c.op not in ("sum", "mean") or not (isinstance(c.error, ValueError) or c.got is not None
                                           and c.got.shape != c.want.shape):
        return None
    x = c.inputs["x"]
    axes = _axes_of(c.inputs.get("axis"), x.ndim)
    key = "hint_keepdims_true" if c.inputs.get("keepdims") else "hint_keepdims_false"
    return say(key, g=c.g.shape, x=x.shape, axes=_axes_text(axes), axis=axes, ndim=x.ndim)


# the local derivative of each elementwise op of exercise 04, written with x, then with out
ELEMENTWISE = {
    "exp": (lambda x: np.exp(x), lambda out: out, "d(e^x)/dx = e^x = out"),
    "log": (lambda x: 1 / x, lambda out: np.exp(-out), "d(ln x)/dx = 1/x"),
    "tanh": (lambda x: 1 - np.tanh(x) ** 2, lambda out: 1 - out ** 2, "d(tanh x)/dx = 1 - tanh²(x) = 1 - out²"),
}


def mixed_up(c):
    """The output where the formula needs the input, or the reverse (exercise 04)."""
    if c.op not in ELEMENTWISE:
        return None
    with_x, with_out, rule = ELEMENTWISE[c.op]
    x, out = c.inputs["x"], c.out
    if _made(c, c.g * with_x(out)):
        return say("hint_needs_x", op=c.op, rule=rule)
    if _made(c, c.g * with_out(x)):
        return say("hint_needs_out", op=c.op, rule=rule)
    return None


def function_itself(c):
    """g times the function (out), where its derivative belongs (exercise 04; for exp they are one)."""
    if c.op not in ELEMENTWISE or not _made(c, c.g * c.out):
        return None
    return say("hint_function_itself", op=c.op, rule=ELEMENTWISE[c.op][2])


def multiplied_for_divided(c):
    """log's g·x, where its derivative divides: g / x."""
    return say("hint_multiplied_for_divided") if c.op == "log" and _made(c, c.g * c.inputs["x"]) else None


def wrong_axis(c):
    """softmax's sum, or layer norm's means, along another axis than each row's (the last),
    or over the whole array."""
    if c.op not in ALONG_ROWS or c.name != "x" or not _same_shape(c):
        return None
    formula, key = ALONG_ROWS[c.op]
    for axis in [*range(c.got.ndim - 1), None]:
        if _made(c, formula(c, axis)):
            return say(key, axis=say("whole_array") if axis is None else say("axis_number", axis=axis))
    return None


def mean_divisor(c):
    """mean's gradient not divided by n, multiplied by it, or divided by the size of other
    axes than the averaged ones."""
    if c.op != "mean" or not _same_shape(c):
        return None
    x = c.inputs["x"]
    axes = _axes_of(c.inputs.get("axis"), x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    for others, _ in _sums(x.ndim):
        m = int(np.prod([x.shape[a] for a in others]))
        if set(others) != set(axes) and m != n and _made(c, c.want * n / m):
            return say("hint_mean_other_axes", m=m, others=_axes_text(others), axes=_axes_text(axes), n=n)
    if _made(c, n * c.want):
        return say("hint_mean_missing_n", n=n)
    return say("hint_mean_times_n", n=n) if _made(c, n * n * c.want) else None


def softmax_step(c):
    """One of SOFTMAX_MISTAKES (exercise 06)."""
    if c.op != "softmax":
        return None
    for mistake, key in SOFTMAX_MISTAKES.items():
        if _made(c, _softmax_backward(c.g, c.out, mistake)):
            return say(key)
    return None


def cross_entropy_step(c):
    """One of CROSS_ENTROPY_MISTAKES (exercise 07)."""
    if c.op != "cross_entropy":
        return None
    logits, targets = c.inputs["logits"], c.inputs["targets"]
    for mistake, key in CROSS_ENTROPY_MISTAKES.items():
        if _made(c, _cross_entropy_backward(c.g, logits, targets, mistake)):
            return say(key, rows=len(targets), size=logits.size)
    return None


def layer_norm_step(c):
    """One of LAYER_NORM_MISTAKES in dL/dx (exercise 08)."""
    if c.op != "layer_norm" or c.name != "x":
        return None
    for mistake, key in LAYER_NORM_MISTAKES.items():
        if _made(c, _layer_norm_backward(c.g, c.inputs["x"], c.inputs["w"], mistake)):
            return say(key, columns=c.g.shape[-1])
    return None


def embedding_repeats(c):
    """grad[ids] += g (or = g), which keeps one row of g for an id picked twice."""
    if c.op != "embedding" or not _made(c, _overwritten(c.g, c.inputs["table"], c.inputs["ids"])):
        return None
    return say("hint_embedding_repeats", repeats=_repeats(c.inputs["ids"]))


def embedding_rows(c):
    """g's shape: one row per id, where the table has one row per character."""
    if c.op != "embedding" or c.got is None or c.got.shape != c.g.shape or c.g.shape == c.want.shape:
        return None
    return say("hint_embedding_rows", ids=len(c.inputs["ids"]), rows=c.want.shape[0])


def attention_step(c):
    """One of ATTENTION_MISTAKES, in the step where it is made."""
    if c.op != "attention" or not _same_shape(c):
        return None
    q, k, v = (c.inputs[name] for name in "qkv")
    args = c.g, q, k, v, c.inputs.get("causal", True)
    for mistake, key in ATTENTION_MISTAKES.items():
        if _made(c, _attention_backward(*args, mistake)[c.name]):
            return say(key, name=c.name, T=q.shape[0], root_d=np.sqrt(q.shape[1]))
    return None


def attention_mask_inf(c):
    """-inf (or nan) written where the scores were masked: their gradient is 0."""
    if c.op != "attention" or not _same_shape(c) or np.isfinite(c.got).all():
        return None
    q, k, v = (c.inputs[name] for name in "qkv")
    mistaken = _attention_backward(c.g, q, k, v, c.inputs.get("causal", True), "mask_inf")[c.name]
    if not np.allclose(c.got, mistaken, RTOL, ATOL, equal_nan=True):
        return None
    return say("hint_attention_mask_inf", name=c.name)


HINTS = [wrote_into, returned_none, returned_tuple, returned_number, integer_values, cast_into_integers,
         axis_as_index, targets_as_rows, lost_keepdims, product_fits, forgot_g, zero, sign, other_input,
         transposed, reshaped, not_summed_back, averaged, summed_wrong, g_shape, sum_keepdims, mixed_up,
         function_itself, multiplied_for_divided, wrong_axis, mean_divisor, softmax_step, cross_entropy_step,
         layer_norm_step, embedding_repeats, embedding_rows, attention_step, attention_mask_inf]


# ---- where no rule names the mistake: what the shapes and the numbers show ------------------------
def matmul_shapes(c):
    """A matmul gradient whose product does not fit, or of the wrong shape: how the shapes line up."""
    if c.op != "matmul" or not (_other_error(c) or c.error is None and c.got.shape != c.want.shape):
        return None
    return say("hint_matmul_shapes")


def attention_shapes(c):
    """A product of attention's backward whose shapes do not fit, or a wrong shape: how they line up."""
    if c.op != "attention" or not (_other_error(c) or c.error is None and c.got.shape != c.want.shape):
        return None
    T, d = c.inputs["q"].shape
    return say("hint_attention_shapes", T=T, d=d)


def ratio(c):
    """The right one times a number, everywhere."""
    if not _same_shape(c) or c.got.size < 2:
        return None
    meaningful = np.abs(c.want) > 1e-6
    ratios = c.got[meaningful] / c.want[meaningful]
    if not meaningful.any() or not np.allclose(ratios, ratios[0], rtol=1e-4) or np.isclose(ratios[0], 1) \
            or np.isclose(ratios[0], -1):
        return None
    return say("hint_ratio", ratio=ratios[0])


FALLBACKS = [matmul_shapes, attention_shapes, ratio]


# ---- the mistakes each op's rule recognises: the grader's own backward, with one mistake made -----
SOFTMAX_MISTAKES = {
    "subtraction": "hint_softmax_subtraction",       # s·g
    "diagonal": "hint_softmax_diagonal",             # g·s(1 - s): the Jacobian's diagonal alone
    "row_sum_without_s": "hint_softmax_row_sum_s",   # s·(g - Σ_j g_j)
    "mean": "hint_softmax_mean",                     # s·(g - mean_j g_j s_j)
    "plus": "hint_softmax_plus",                     # s·(g + Σ_j g_j s_j)
}


def _softmax_backward(g, s, mistake=None, axis=-1):
    """dL/dx of softmax (s its output), right, or with one of SOFTMAX_MISTAKES made."""
    if mistake == "subtraction":
        return s * g
    if mistake == "diagonal":
        return g * s * (1 - s)
    rows = (g if mistake == "row_sum_without_s" else g * s)
    rows = rows.mean(axis=axis, keepdims=True) if mistake == "mean" else rows.sum(axis=axis, keepdims=axis is not None)
    return s * (g + rows) if mistake == "plus" else s * (g - rows)


CROSS_ENTROPY_MISTAKES = {
    "one_hot": "hint_one_hot",                       # p, without the one-hot subtracted
    "one_hot_and_mean": "hint_one_hot_and_mean",     # the same, and not divided by N
    "mean": "hint_mean_rows",                        # not divided by N
    "mean_all": "hint_mean_all",                     # divided by N·C, the number of logits
    "columns": "hint_one_hot_columns",               # grad[:, targets] -= 1: every row, every target's column
    "logits_for_p": "hint_logits_for_p",             # the logits where p belongs
}


def _cross_entropy_backward(g, logits, targets, mistake=None):
    """dL/dlogits of the mean cross-entropy, right, or with one of CROSS_ENTROPY_MISTAKES made."""
    rows, columns = len(targets), logits.shape[1]
    one_hot = np.eye(columns)[targets]
    if mistake == "columns":
        one_hot = np.zeros_like(logits)
        one_hot[:, targets] = 1
    elif mistake in ("one_hot", "one_hot_and_mean"):
        one_hot = 0
    p = logits if mistake == "logits_for_p" else _softmax(logits)
    divisor = {"mean": 1, "one_hot_and_mean": 1, "mean_all": logits.size}.get(mistake, rows)
    return g * (p - one_hot) / divisor


LAYER_NORM_MISTAKES = {
    "constants": "hint_layer_norm_constants",        # ĝ/σ: μ and σ held constant
    "mu_path": "hint_layer_norm_mu_path",            # the mean of ĝ missing
    "sigma_path": "hint_layer_norm_sigma_path",      # x̂ times the mean of ĝ·x̂ missing
    "mu_sign": "hint_layer_norm_mu_sign",            # + mean(ĝ)
    "sigma_sign": "hint_layer_norm_sigma_sign",      # + x̂ · mean(ĝ·x̂)
    "sums": "hint_layer_norm_sums",                  # both means as sums (no 1/C)
    "mu_sum": "hint_layer_norm_sums",
    "sigma_sum": "hint_layer_norm_sums",
    "without_w": "hint_layer_norm_w",                # ĝ = g: w left out
    "without_sigma": "hint_layer_norm_sigma",        # not divided by σ
}


def _layer_norm_parts(x):
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    return (x - x.mean(axis=-1, keepdims=True)) / sigma, sigma


def _layer_norm_backward(g, x, w, mistake=None, axis=-1):
    """layer norm's dL/dx, right (its two means along `axis`: the last), or with one of
    LAYER_NORM_MISTAKES made."""
    x_hat, sigma = _layer_norm_parts(x)
    g_hat = g if mistake == "without_w" else g * w
    mean = lambda a, sums: a.sum(axis=axis, keepdims=True) if sums else a.mean(axis=axis, keepdims=True)
    mu_term = mean(g_hat, mistake in ("sums", "mu_sum"))
    sigma_term = x_hat * mean(g_hat * x_hat, mistake in ("sums", "sigma_sum"))
    mu_term = {"constants": 0, "mu_path": 0, "mu_sign": -mu_term}.get(mistake, mu_term)
    sigma_term = {"constants": 0, "sigma_path": 0, "sigma_sign": -sigma_term}.get(mistake, sigma_term)
    return (g_hat - mu_term - sigma_term) / (1 if mistake == "without_sigma" else sigma)


# the ops that work along each row: their vjp with its sums along any axis, and the hint's key
ALONG_ROWS = {"softmax": (lambda c, axis: _softmax_backward(c.g, c.out, axis=axis), "hint_softmax_axis"),
              "layer_norm": (lambda c, axis: _layer_norm_backward(c.g, c.inputs["x"], c.inputs["w"], axis=axis),
                             "hint_layer_norm_axis")}

# attention's mistakes, each in one of its steps: what _attention_backward does for each, the hint's key
ATTENTION_MISTAKES = {
    "mask_forgotten": "hint_attention_mask_forgotten",
    "dv_transpose": "hint_attention_dv",
    "softmax_subtraction": "hint_attention_softmax_subtraction",
    "softmax_diagonal": "hint_attention_softmax_diagonal",
    "softmax_axis": "hint_attention_softmax_axis",
    "scale_lost": "hint_attention_scale",
    "scale_twice": "hint_attention_scale",
    "dq_transpose": "hint_attention_dq",
    "dk_transpose": "hint_attention_dk",
}


def _attention_backward(g, q, k, v, causal, mistake=None):
    """{"q": dL/dq, "k": dL/dk, "v": dL/dv} of exercise 09's attention, right, or with one of
    ATTENTION_MISTAKES (or "mask_inf": -inf written where the scores were masked) made: the
    grader's own, to recognise each mistake by."""
    T, d = q.shape
    scores = q @ k.T / np.sqrt(d)                                          # 1. scores
    masked = np.triu(np.ones((T, T), dtype=bool), k=1) if causal else np.zeros((T, T), dtype=bool)
    if mistake != "mask_forgotten":                                        # 2. mask
        scores = np.where(masked, -np.inf, scores)
    weights = _softmax(scores)                                             # 3. softmax
    grad_v = (weights if mistake == "dv_transpose" else weights.T) @ g     # 4. out = weights @ v, backward
    grad_weights = g @ v.T
    rows = (grad_weights * weights).sum(axis=0 if mistake == "softmax_axis" else -1, keepdims=True)
    grad_scores = {"softmax_subtraction": weights * grad_weights,
                   "softmax_diagonal": grad_weights * weights * (1 - weights)}.get(
        mistake, weights * (grad_weights - rows))
    if mistake == "mask_inf":
        grad_scores = np.where(masked, -np.inf, grad_scores)
    scale = {"scale_lost": 1.0, "scale_twice": 1 / d}.get(mistake, 1 / np.sqrt(d))
    grad_q = (grad_scores.T if mistake == "dq_transpose" else grad_scores) @ k * scale
    grad_k = (grad_scores if mistake == "dk_transpose" else grad_scores.T) @ q * scale
    return {"q": grad_q, "k": grad_k, "v": grad_v}


def _overwritten(g, table, ids):
    grad = np.zeros_like(table)
    grad[ids] += g
    return grad


def _repeats(ids):
    values, counts = np.unique(ids, return_counts=True)
    return ", ".join(say("id_times", id=v, times=n) for v, n in zip(values, counts) if n > 1)


# ---- a mistake undone: arrays that undo it, for the vjp to be run again on -------------------------
class KeepDims(np.ndarray):
    """An array whose sums and means along an axis keep it (keepdims=True), as do theirs:
    a vjp run on these has every lost keepdims put back."""

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **more):
        return super().sum(axis, dtype, out, keepdims=keepdims or axis is not None, **more)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **more):
        return super().mean(axis, dtype, out, keepdims=keepdims or axis is not None, **more)


class NeedsChoice(Exception):
    """A product that does not fit was met, and no choice was made for it yet: `options`,
    the ways to make it fit."""

    def __init__(self, options):
        super().__init__(options)
        self.options = options


class Fits(np.ndarray):
    """An array whose matrix products (and elementwise products) that do not fit are made to
    fit, each in the way `choices` picks in turn: a transpose added to either side or both,
    the two sides swapped, or @ for *. What was written and what it became is kept in
    `made`, with names for the arrays the vjp was handed (`names`: id -> name)."""
    choices, made, names = [], [], {}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, Fits) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, Fits) else x for x in kwargs["out"])
        try:
            result = getattr(ufunc, method)(*plain, **kwargs)
        except ValueError:
            if method != "__call__" or ufunc not in (np.matmul, np.multiply) or len(inputs) != 2 or kwargs:
                raise
            result = Fits._fit(ufunc, *inputs)
        return result.view(Fits) if isinstance(result, np.ndarray) else result

    @staticmethod
    def _fit(ufunc, a, b):
        sign = "*" if ufunc is np.multiply else "@"
        names = Fits._name(a), Fits._name(b)
        ways = [(f"{x}{'ᵀ' * tx} @ {y}{'ᵀ' * ty}", (xa.T if tx else xa), (ya.T if ty else ya))
                for (x, xa), (y, ya) in (((names[0], a), (names[1], b)), ((names[1], b), (names[0], a)))
                for tx, ty in itertools.product((0, 1), repeat=2)]
        ways = [(text, x, y) for text, x, y in ways if text != f"{names[0]} @ {names[1]}" or sign == "*"]
        fitting = [way for way in ways if np.ndim(way[1]) == 2 and np.ndim(way[2]) == 2
                   and np.shape(way[1])[1] == np.shape(way[2])[0]]
        done = len(Fits.made)
        if not fitting:
            raise ValueError("no way to fit")
        if done >= len(Fits.choices):
            raise NeedsChoice(len(fitting))
        text, x, y = fitting[Fits.choices[done]]
        Fits.made.append((f"{names[0]} {sign} {names[1]} ({np.shape(a)} {sign} {np.shape(b)})", text))
        return np.matmul(x.view(np.ndarray), y.view(np.ndarray))

    @staticmethod
    def _name(x):
        if id(x) in Fits.names:
            return Fits.names[id(x)]
        base = getattr(x, "base", None)
        if id(base) in Fits.names and x.ndim == 2 and x.shape == base.shape[::-1] and x.strides == base.strides[::-1]:
            return Fits.names[id(base)] + "ᵀ"
        return say("an_array", shape=np.shape(x))


def _undone(c, kind):
    """True when the vjp, run again with its arrays handed over as `kind` (a mistake undone),
    returns the right gradient for every input (in its shape, or one with the same numbers),
    where it did not before."""
    if c.error is None and _all_right(c, c.gots):
        return False
    try:
        returned = c.rerun(kind)
    except Exception:
        return False
    return _all_right(c, returned)


def _fitted(c, most=40):
    """What the vjp's products that do not fit were made into, where that makes every
    gradient right; None where no way of making them fit does (at most `most` tries)."""
    queue = [[]]
    while queue and most:
        Fits.choices, Fits.made, most = queue.pop(0), [], most - 1
        try:
            returned = c.rerun(Fits)
        except NeedsChoice as need:
            queue += [Fits.choices + [i] for i in range(need.options)]
            continue
        except Exception:
            continue
        if Fits.made and _all_right(c, returned):
            return list(Fits.made)
    return None


def _all_right(c, returned):
    return bool(c.expected) and all(_like_array(returned.get(name), want) for name, want in c.expected.items())


# ---- what the rules share -------------------------------------------------------------------------
def _like(a, b):
    return a is not None and b is not None and np.shape(a) == np.shape(b) and np.allclose(a, b, RTOL, ATOL)


def _like_array(value, want):
    """value (any array-like) has want's numbers, in want's shape or one with the same size."""
    try:
        value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return value.size == want.size and _like(value.reshape(want.shape), want)


def _same_shape(c):
    return c.got is not None and c.got.shape == c.want.shape


def _wrong(c):
    return c.got is not None and not _like(c.got, c.want)


def _made(c, mistaken):
    """c.got is `mistaken` (the right gradient with one mistake made), which is not the right one."""
    return _same_shape(c) and np.shape(mistaken) == c.want.shape and not _like(mistaken, c.want) \
        and _like(c.got, mistaken)


def _nearly_zero(a, right):
    """a is 0, or rounding noise, beside the right gradient (which is not)."""
    return np.abs(a).max() <= 1e-9 * np.abs(right).max()


def _lost_axes(error):
    """(big, small, axes) where numpy's broadcast error is about `small`, `big` without its
    `axes`: a sum that lost them. None where it is another error."""
    if not isinstance(error, ValueError) or "could not be broadcast" not in str(error):
        return None
    shapes = [tuple(int(n) for n in found.split(",") if n.strip())
              for found in re.findall(r"\(([\d,\s]*)\)", str(error))]
    for big, small in itertools.permutations(shapes, 2):
        if len(big) <= len(small):
            continue
        for axes in itertools.combinations(range(len(big)), len(big) - len(small)):
            if tuple(n for i, n in enumerate(big) if i not in axes) == small:
                return big, small, axes
    return None


def _other_error(c):
    """The vjp raised, and no rule about keepdims explains it."""
    return c.error is not None and _lost_axes(c.error) is None


def _sums(ndim):
    """Every (axes, keepdims) a sum over some of `ndim` axes can take."""
    for count in range(1, ndim + 1):
        for axes in itertools.combinations(range(ndim), count):
            yield from ((axes, False), (axes, True))


def _summed_shape(shape, axes, keepdims):
    """The shape of a sum over `axes` of an array of `shape`."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)


def _summed_to(a, shape):
    """a summed over the axes along which broadcasting stretches `shape` to a's shape."""
    return a.sum(axis=_stretched(shape, a.shape), keepdims=True).reshape(shape)


def _stretched(shape, target):
    """The axes of `target` along which broadcasting stretched an array of `shape`."""
    extra = len(target) - len(shape)
    return tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n < target[extra + i])


def _axes_of(axis, ndim):
    """An op's axis argument as a tuple of non-negative ints (every axis for None)."""
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % ndim for a in axes))


def _axes_text(axes):
    return ", ".join(str(a) for a in axes)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
