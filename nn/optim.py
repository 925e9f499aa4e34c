"""Optimizers (SGD, Adam, AdamW), gradient clipping and the learning-rate schedule.

adamw_step is AdamW as the paper writes it: four lines to read beside the paper. The
optimizers run the same update as adam_update, in place on each parameter's array
(`p.data`), vectorized with numpy; tests/test_optim.py proves the two equal. The
parameters are split across the cores (tensorgrad.threads.split): each is updated by one
thread, with the same numpy calls as alone, so any number of threads gives the same numbers;
Adam's passes go over each in cache-sized tiles of rows (tensorgrad.threads.by_rows).
"""
import math
import threading

import numpy as np

from tensorgrad import devices, threads

from . import checks
from .module import zero_grads

# What each optimizer setting must be (nn.checks), refused otherwise: a value that would
# silently train wrong, a nan or negative learning rate, a beta of 1 or more, a negative weight
# decay (gradient ascent, or nan weights). lr 0 is allowed, as PyTorch allows it: a cosine
# schedule whose min_lr is 0 ends there, and a checkpoint saved then must load.
CHECKS = {"lr": checks.NON_NEGATIVE, "momentum": checks.FRACTION, "eps": checks.NON_NEGATIVE,
          "weight_decay": checks.NON_NEGATIVE, "betas[0]": checks.FRACTION, "betas[1]": checks.FRACTION}


def check_setting(owner, name, value):
    """Refuse a value of an optimizer's setting that would silently train wrong (CHECKS): a
    TypeError for one that is no number, a ValueError for one out of range (nn.checks.refuse)."""
    if name != "betas":
        return checks.refuse(owner, name, value, CHECKS[name])
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{owner}: betas must be a pair (beta1, beta2), got {repr(value)[:60]}")
    for which, beta in zip(("betas[0]", "betas[1]"), value):
        checks.refuse(owner, which, beta, CHECKS[which])


class Optimizer:
    """Holds the parameters, the update rule's settings (SETTINGS: lr, ...; settings()) and
    the per-parameter state arrays (STATE; state_dict())."""
    SETTINGS = ("lr",)

    def __init__(self, params, lr):
        self.params = list({id(p): p for p in params}.values())
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        self.load_settings({"lr": lr})
        self.updates = np.zeros(len(self.params), np.int64)   # how many times each parameter moved (Adam's t)

    def zero_grad(self, set_to_none=True):
        """Forget the gradients (see nn.module.zero_grads)."""
        zero_grads(self.params, set_to_none)

    def step(self):
        """Update every parameter that has a gradient (one without is left alone)."""
        moving = [i for i, p in enumerate(self.params) if p.grad is not None]
        self.updates[moving] += 1
        self.follow(moving)
        update = lambda i: self.update(i, self.params[i].data, self.params[i].grad)   # noqa: E731
        if any(devices.on_gpu(self.params[i].data) for i in moving):   # a GPU spreads each update itself
            for i in moving:
                update(i)
        else:   # the CPU's cores share the parameters out (threads.each)
            threads.each(update, moving, [self.params[i].data.size for i in moving])

    def update(self, i, w, g):
        raise NotImplementedError

    def follow(self, indices):
        """Move the state arrays of these parameters to each one's device, where a parameter
        has moved since (model.to("cuda") after the optimizer was made): the state follows its
        parameter, as in PyTorch."""
        for i in indices:
            where = devices.of(self.params[i].data)
            for kind in self.STATE:
                arrays = getattr(self, kind)
                arrays[i] = devices.to(arrays[i], where)

    # settings: the update rule's numbers (lr, betas, ...), which a schedule may change
    def settings(self):
        """{name: value} of every setting in SETTINGS, as it is now (after `optimizer.lr = ...`,
        the new lr): with state_dict(), what a copy of this optimizer over the same parameters
        (in another process, say) needs to update them exactly as this one does."""
        return {name: getattr(self, name) for name in self.SETTINGS}

    def load_settings(self, settings):
        """Set the settings given, {name: value} as settings() returns them (all or some),
        each checked first (CHECKS): a value that would train wrong is a ValueError (a TypeError
        if it is no number), an unknown name a KeyError, and either sets nothing."""
        owner = type(self).__name__
        unknown = sorted(set(settings) - set(self.SETTINGS))
        if unknown:
            raise KeyError(f"{owner}.load_settings: {owner} has no setting {unknown}; its settings are "
                           f"{list(self.SETTINGS)}")
        for name, value in settings.items():
            check_setting(owner, name, value)
        for name, value in settings.items():
            setattr(self, name, tuple(value) if name == "betas" else value)

    # state: one array per (kind, parameter index), plus the step count
    def state_arrays(self):
        """{name: array} of every state array, e.g. "m.3" is the first moment of parameter 3."""
        arrays = {"updates": self.updates}
        for kind in self.STATE:
            for i, array in enumerate(getattr(self, kind)):
                arrays[f"{kind}.{i}"] = array
        return arrays

    def state_dict(self):
        return {name: np.array(devices.to(array, "cpu")) for name, array in self.state_arrays().items()}   # host copies

    def load_state_dict(self, state):
        """Restore state saved by state_dict(); checks every name and shape before writing."""
        own = self.state_arrays()
        if set(own) != set(state):
            raise KeyError(f"{type(self).__name__}.load_state_dict: state names differ: missing "
                           f"{sorted(set(own) - set(state)) or 'none'}, unexpected "
                           f"{sorted(set(state) - set(own)) or 'none'}")
        for name, array in own.items():
            if np.shape(state[name]) != array.shape:
                raise ValueError(f"{type(self).__name__}.load_state_dict: '{name}' has shape "
                                 f"{np.shape(state[name])}, expected {array.shape}")
        for name, array in own.items():
            np.copyto(array, devices.to(devices.array(state[name]), devices.of(array)))


class SGD(Optimizer):
    """w -= lr * g, or with momentum: v = momentum * v + g; w -= lr * v (PyTorch's form)."""
    SETTINGS = ("lr", "momentum")
    STATE = ("velocity",)

    def __init__(self, params, lr, momentum=0.0):
        super().__init__(params, lr)
        self.load_settings({"momentum": momentum})
        self.velocity = [np.zeros_like(p.data) for p in self.params]

    def update(self, i, w, g):
        if self.momentum:
            v = self.velocity[i]
            v *= self.momentum
            v += g
            g = v
        w -= self.lr * g


def adamw_step(w, g, m, v, t, lr, betas, eps, weight_decay=0.0):
    """AdamW's update of w from its gradient g at its t-th step (t = 1, 2, ...), as the paper
    writes it (Loshchilov and Hutter, Decoupled Weight Decay Regularization, Algorithm 2):
    returns the new (w, m, v) and changes none of the arrays given. weight_decay=0 is Adam.
    The optimizers compute the same in place (adam_update); tests/test_optim.py proves it."""
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * g                                # a running mean of g
    v = beta2 * v + (1 - beta2) * g * g                            # a running mean of g²
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)      # bias corrections: m and v start at 0
    w = w - lr * (m_hat / (np.sqrt(v_hat) + eps) + weight_decay * w)   # the step, and the decay apart from it
    return w, m, v


class Adam(Optimizer):
    """Adam: running means of g (m) and g^2 (v), bias-corrected, step = lr * m / (sqrt(v) + eps)
    (adamw_step, with no decay). Each update works in place and in one scratch array per
    thread, sized for the largest parameter and shared by all it updates: no temporary
    arrays to allocate, and the scratch stays in the cache."""
    SETTINGS = ("lr", "betas", "eps")
    STATE = ("m", "v")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr)
        self.load_settings({"betas": betas, "eps": eps})
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]
        self.scratch = {}   # (dtype, thread) -> a flat array as large as the largest parameter of that dtype

    def update(self, i, w, g):
        # t as a python int: a numpy int64 would make the scalar factors of adam_update numpy
        # float64s, and numpy would then run each pass over these float32 arrays in float64, more slowly
        t, decay, arrays = int(self.updates[i]), self.decay(i), (w, g, self.m[i], self.v[i], self._scratch(w))
        step = lambda w, g, m, v, tmp: adam_update(w, g, m, v, tmp, t, self.lr, self.betas, self.eps, decay)
        if w.ndim == 0:
            return step(*arrays)
        # in tiles of rows (threads.by_rows), so that a large matrix's ten passes stay in the cache
        threads.by_rows(step, *arrays)

    def decay(self, i):
        """Parameter i's weight decay: none in Adam (see AdamW)."""
        return 0.0

    def _scratch(self, w):
        """A scratch array shaped like w, a view of this thread's scratch buffer."""
        key = (w.dtype, devices.of(w), threading.get_ident())
        buffer = self.scratch.get(key)
        if buffer is None or buffer.size < w.size:
            largest = max(p.size for p in self.params if p.data.dtype == w.dtype)
            buffer = self.scratch[key] = np.empty(largest, w.dtype, like=w)
        return buffer[:w.size].reshape(w.shape)


def adam_update(w, g, m, v, tmp, t, lr, betas, eps, weight_decay=0.0):
    """adamw_step in place in w and in its moments m and v, with tmp (shaped like w) as the
    only scratch: no array is allocated. Adam.update calls it on each tile of a parameter's
    rows, and so does bench/numpy_step.py's hand-written step."""
    beta1, beta2 = betas
    if weight_decay:
        w *= 1 - lr * weight_decay                # decoupled decay: w - lr·λ·w, before the step
    np.subtract(g, m, out=tmp)
    tmp *= 1 - beta1
    m += tmp                                      # m = beta1 m + (1 - beta1) g
    np.multiply(g, g, out=tmp)
    tmp -= v
    tmp *= 1 - beta2
    v += tmp                                      # v = beta2 v + (1 - beta2) g^2
    # The bias corrections (the moments start at 0) are m / c1 and v / c2 with
    # c = 1 - beta^t; lr (m / c1) / (sqrt(v / c2) + eps) = step * m / (sqrt(v) + eps sqrt(c2))
    # with step = lr sqrt(c2) / c1: two scalars instead of two more passes over the arrays.
    root_c2 = math.sqrt(1 - beta2 ** t)
    np.sqrt(v, out=tmp)
    tmp += eps * root_c2
    np.divide(m, tmp, out=tmp)
    tmp *= lr * root_c2 / (1 - beta1 ** t)
    w -= tmp                                      # w -= lr * m_hat / (sqrt(v_hat) + eps)


class AdamW(Adam):
    """Adam with decoupled weight decay (w -= lr * weight_decay * w), applied only to
    parameters with ndim >= 2 (matrices and embeddings), never to biases or LayerNorm."""
    SETTINGS = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps)
        self.load_settings({"weight_decay": weight_decay})
        # which parameters decay, decided once, here, from each parameter's own shape
        self.decays = [p.data.ndim >= 2 for p in self.params]

    def decay(self, i):
        return self.weight_decay if self.decays[i] else 0.0


def grad_norm(params):
    """The global L2 norm of all the gradients (parameters without one count as zero), a
    float: sqrt(sum of every gradient element squared). nan or inf if any element is. Each
    square is summed in float64 where its gradient lives, so a GPU answers once, at the end."""
    squares = [np.vdot(p.grad, p.grad).astype(np.float64) for p in params if p.grad is not None]
    return math.sqrt(float(sum(squares, 0.0)))


CLIP_NORM = checks.POSITIVE._replace(expected=checks.POSITIVE.expected + " (to not clip, do not call it)")


def clip_grad_norm(params, max_norm):
    """Scale all gradients together so their global L2 norm is at most max_norm.
    Returns the norm before clipping (a float)."""
    checks.refuse("clip_grad_norm", "max_norm", max_norm, CLIP_NORM)
    params = list(params)   # read twice: for the norm, then to scale
    grads = [p.grad for p in params if p.grad is not None]
    total = grad_norm(params)
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= scale   # leaf grads are the parameter's own arrays (see autograd.backward)
    return total


def cosine_lr(step, max_lr, min_lr, warmup_steps, total_steps):
    """Linear warmup to max_lr over warmup_steps, then cosine decay to min_lr at total_steps."""
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
