"""nn.optim: SGD (with momentum), Adam, AdamW (decoupled decay on ndim >= 2 only) against
their update rules and, where torch is installed, against torch.optim step by step;
clip_grad_norm, cosine_lr, zero_grad, and the optimizers' state_dict round trip."""
import math

import numpy as np
import pytest

import nn
import tensorgrad as tg
from nn import optim

SHAPES = [(4, 3), (3,), (2, 2, 2), (5,)]


def params64(seed=0):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(rng.standard_normal(shape)) for shape in SHAPES]


def grad_stream(steps, seed=1):
    """The same gradients for every optimizer compared: one list per step."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(shape) for shape in SHAPES] for _ in range(steps)]


def run(opt, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.copy()
        opt.step()
    return [p.data.copy() for p in params]


# ---- the update rules --------------------------------------------------------------------
def test_sgd_without_momentum_steps_against_the_gradient():
    params = params64()
    start = [p.data.copy() for p in params]
    grads = grad_stream(1)[0]
    run(optim.SGD(params, lr=0.1), params, [grads])
    for p, w, g in zip(params, start, grads):
        np.testing.assert_allclose(p.data, w - 0.1 * g, rtol=1e-15)


def test_sgd_with_momentum_keeps_a_velocity():
    params = params64()
    w = [p.data.copy() for p in params]
    grads = grad_stream(4)
    run(optim.SGD(params, lr=0.05, momentum=0.9), params, grads)
    v = [np.zeros(s) for s in SHAPES]
    for step in grads:
        for i, g in enumerate(step):
            v[i] = 0.9 * v[i] + g
            w[i] = w[i] - 0.05 * v[i]
    for p, want in zip(params, w):
        np.testing.assert_allclose(p.data, want, rtol=1e-13, atol=1e-15)


def reference_adam(w, grads, lr, betas, eps, weight_decay=0.0):
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        w = w * (1 - lr * weight_decay)
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


def test_adam_follows_the_bias_corrected_update():
    params = params64()
    start = [p.data.copy() for p in params]
    grads = grad_stream(6)
    run(optim.Adam(params, lr=0.01, betas=(0.8, 0.95), eps=1e-6), params, grads)
    for i, p in enumerate(params):
        want = reference_adam(start[i], [step[i] for step in grads], 0.01, (0.8, 0.95), 1e-6)
        np.testing.assert_allclose(p.data, want, rtol=1e-12, atol=1e-14)


def test_adamw_decays_matrices_but_never_biases_or_vectors():
    params = params64()
    start = [p.data.copy() for p in params]
    opt = optim.AdamW(params, lr=0.1, weight_decay=0.5)
    zero = [[np.zeros(s) for s in SHAPES]]   # zero gradients: only the decay moves anything
    run(opt, params, zero)
    for p, w in zip(params, start):
        if p.ndim >= 2:
            np.testing.assert_allclose(p.data, w * (1 - 0.1 * 0.5), rtol=1e-15)
        else:
            np.testing.assert_array_equal(p.data, w)


def test_adamw_decay_is_decoupled_from_the_adaptive_step():
    params = params64()
    start = [p.data.copy() for p in params]
    grads = grad_stream(5)
    run(optim.AdamW(params, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1), params, grads)
    for i, p in enumerate(params):
        decay = 0.1 if p.ndim >= 2 else 0.0
        want = reference_adam(start[i], [step[i] for step in grads], 0.01, (0.9, 0.99), 1e-8, decay)
        np.testing.assert_allclose(p.data, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_the_tiled_in_place_adamw_is_the_textbook_update(weight_decay):
    """nn.optim.AdamW (in place, in tiles of rows, the bias corrections folded into two
    scalars) against adamw_step, the paper's four lines, step by step: 0-d, 1-d and 2-d
    parameters, one of them large enough to be updated in several tiles."""
    shapes = [(), (7,), (4, 3), (1200, 64)]
    assert 1200 * 64 * 5 > tg.threads.TILE_ELEMENTS   # its five arrays (w, g, m, v, scratch): 2 tiles or more
    rng = np.random.default_rng(0)
    params = [nn.Parameter(rng.standard_normal(shape)) for shape in shapes]
    textbook = [(p.data.copy(), np.zeros(p.shape), np.zeros(p.shape)) for p in params]   # (w, m, v)
    opt = optim.AdamW(params, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=weight_decay)
    assert opt.decays == [False, False, True, True]   # decided when built: ndim >= 2 decays
    for t in range(1, 7):
        grads = [rng.standard_normal(shape) for shape in shapes]
        for p, g in zip(params, grads):
            p.grad = g.copy()
        opt.step()
        textbook = [optim.adamw_step(w, g, m, v, t, 0.01, (0.9, 0.99), 1e-8, weight_decay if w.ndim >= 2 else 0.0)
                    for (w, m, v), g in zip(textbook, grads)]
        for i, (p, (w, m, v)) in enumerate(zip(params, textbook)):
            np.testing.assert_allclose(p.data, w, rtol=1e-12, atol=1e-14, err_msg=f"step {t}, w of {shapes[i]}")
            np.testing.assert_allclose(opt.m[i], m, rtol=1e-12, atol=1e-14, err_msg=f"step {t}, m of {shapes[i]}")
            np.testing.assert_allclose(opt.v[i], v, rtol=1e-12, atol=1e-14, err_msg=f"step {t}, v of {shapes[i]}")


def test_adamw_step_changes_none_of_the_arrays_it_is_given():
    w, g, m, v = (np.full(3, x) for x in (1.0, 0.5, 0.1, 0.2))
    new = optim.adamw_step(w, g, m, v, 1, 0.1, (0.9, 0.99), 1e-8, 0.1)
    assert all(a is not b for a, b in zip(new, (w, m, v)))
    for a, x in zip((w, g, m, v), (1.0, 0.5, 0.1, 0.2)):
        np.testing.assert_array_equal(a, x)


def test_adamw_decides_which_parameters_decay_when_it_is_built():
    params = params64()
    assert optim.AdamW(params).decays == [p.ndim >= 2 for p in params] == [True, False, True, False]
    assert not hasattr(optim.Adam(params), "decays") and optim.Adam(params).decay(0) == 0.0


def test_default_hyperparameters_follow_the_design():
    p = params64()
    adam, adamw = optim.Adam(p), optim.AdamW(p)
    assert (adam.lr, adam.betas, adam.eps) == (1e-3, (0.9, 0.999), 1e-8)
    assert (adamw.lr, adamw.betas, adamw.eps, adamw.weight_decay) == (1e-3, (0.9, 0.999), 1e-8, 0.01)
    assert optim.SGD(p, lr=0.1).momentum == 0.0


def test_step_skips_parameters_without_a_gradient():
    params = params64()
    before = params[1].data.copy()
    for p in params:
        p.grad = np.ones_like(p.data)
    params[1].grad = None
    for opt in (optim.SGD(params, lr=0.1, momentum=0.9), optim.AdamW(params, weight_decay=0.5)):
        opt.step()
        np.testing.assert_array_equal(params[1].data, before)


def test_a_parameter_listed_twice_is_updated_once():
    p = nn.Parameter(np.array([1.0, 2.0]))
    opt = optim.SGD([p, p], lr=0.5)
    p.grad = np.array([1.0, 1.0])
    opt.step()
    np.testing.assert_array_equal(p.data, [0.5, 1.5])


def test_an_empty_parameter_list_is_a_clear_error():
    with pytest.raises(ValueError, match="empty"):
        optim.Adam([])


def test_optimizer_and_module_zero_grad_set_grads_to_none():
    model = nn.Linear(3, 2)
    opt = optim.AdamW(model.parameters())
    model(tg.Tensor(np.ones((2, 3), np.float32))).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_updates_are_in_place_and_keep_float32():
    model = nn.Linear(3, 2)
    arrays = [p.data for p in model.parameters()]
    opt = optim.AdamW(model.parameters(), lr=0.1)
    model(tg.Tensor(np.ones((2, 3), np.float32))).sum().backward()
    opt.step()
    assert all(p.data is a and p.dtype == np.float32 for p, a in zip(model.parameters(), arrays))


# ---- against torch.optim ------------------------------------------------------------------
def torch_run(torch, make_opt, grads, seed=0):
    tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params64(seed)]
    opt = make_opt(tparams)
    for step_grads in grads:
        for p, g in zip(tparams, step_grads):
            p.grad = torch.from_numpy(g.copy())
        opt.step()
    return [p.detach().numpy() for p in tparams]


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_matches_torch(momentum):
    torch = pytest.importorskip("torch")
    grads = grad_stream(5)
    ours = run(optim.SGD(p := params64(), lr=0.03, momentum=momentum), p, grads)
    theirs = torch_run(torch, lambda ps: torch.optim.SGD(ps, lr=0.03, momentum=momentum), grads)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_adam_matches_torch_step_by_step():
    torch = pytest.importorskip("torch")
    grads = grad_stream(8)
    ours_p = params64()
    ours = optim.Adam(ours_p, lr=0.02, betas=(0.85, 0.99), eps=1e-7)
    tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params64()]
    theirs = torch.optim.Adam(tparams, lr=0.02, betas=(0.85, 0.99), eps=1e-7)
    for step_grads in grads:
        run(ours, ours_p, [step_grads])
        for p, g in zip(tparams, step_grads):
            p.grad = torch.from_numpy(g.copy())
        theirs.step()
        for a, b in zip(ours_p, tparams):
            np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_adamw_matches_torch_with_decay_only_on_matrices():
    torch = pytest.importorskip("torch")
    grads = grad_stream(8)
    ours = run(optim.AdamW(p := params64(), lr=0.02, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.3), p, grads)

    def make(ps):
        return torch.optim.AdamW([{"params": [q for q in ps if q.ndim >= 2], "weight_decay": 0.3},
                                  {"params": [q for q in ps if q.ndim < 2], "weight_decay": 0.0}],
                                 lr=0.02, betas=(0.9, 0.95), eps=1e-8)
    theirs = torch_run(torch, make, grads)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_training_a_model_with_adamw_clipping_and_cosine_lr_matches_torch():
    torch = pytest.importorskip("torch")
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for i in (0, 2):
            ref[i].weight.copy_(torch.from_numpy(model[i].weight.data.T.copy()))
            ref[i].bias.copy_(torch.from_numpy(model[i].bias.data))
    opt = optim.AdamW(model.parameters(), lr=0.05, betas=(0.9, 0.99), weight_decay=0.1)
    ref_opt = torch.optim.AdamW([{"params": [ref[0].weight, ref[2].weight], "weight_decay": 0.1},
                                 {"params": [ref[0].bias, ref[2].bias], "weight_decay": 0.0}],
                                lr=0.05, betas=(0.9, 0.99))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 5)).astype(np.float32)
    y = rng.integers(0, 3, 16)
    for step in range(10):
        lr = optim.cosine_lr(step, 0.05, 0.005, 3, 10)
        opt.lr = lr
        for group in ref_opt.param_groups:
            group["lr"] = lr
        logits = model(tg.Tensor(x))
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        norm = optim.clip_grad_norm(model.parameters(), 0.5)
        opt.step()
        ref_loss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        ref_opt.step()
        assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
        assert norm == pytest.approx(ref_norm.item(), rel=1e-5)
    for i in (0, 2):
        np.testing.assert_allclose(model[i].weight.data, ref[i].weight.detach().numpy().T, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(model[i].bias.data, ref[i].bias.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_adam_bias_correction_counts_each_parameters_own_updates_as_torch_does():
    """A parameter that gets its first gradient at step 3 (frozen before, or unused by the
    loss) takes the same first step as in torch: its bias correction starts at t = 1."""
    torch = pytest.importorskip("torch")
    grads = grad_stream(5)
    for step in grads[:2]:
        step[1] = None
    ours_p = params64()
    ours = optim.Adam(ours_p, lr=0.01)
    tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params64()]
    theirs = torch.optim.Adam(tparams, lr=0.01)
    for step_grads in grads:
        for p, t, g in zip(ours_p, tparams, step_grads):
            p.grad = None if g is None else g.copy()
            t.grad = None if g is None else torch.from_numpy(g.copy())
        ours.step()
        theirs.step()
    for a, b in zip(ours_p, tparams):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-12, atol=1e-14)


# ---- clip_grad_norm ----------------------------------------------------------------------
def test_clip_grad_norm_returns_the_norm_before_clipping_and_scales_to_max_norm():
    params = params64()
    grads = grad_stream(1)[0]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    total = math.sqrt(sum((g ** 2).sum() for g in grads))
    returned = optim.clip_grad_norm(params, 1.0)
    assert isinstance(returned, float)
    assert returned == pytest.approx(total, rel=1e-12)
    clipped = math.sqrt(sum((p.grad ** 2).sum() for p in params))
    assert clipped == pytest.approx(1.0, rel=1e-5)
    for p, g in zip(params, grads):   # one common scale: directions are kept
        np.testing.assert_allclose(p.grad, g * (1.0 / (total + 1e-6)), rtol=1e-12)


def test_clip_grad_norm_leaves_small_gradients_alone_and_skips_missing_ones():
    params = params64()
    grads = grad_stream(1)[0]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    params[2].grad = None
    total = math.sqrt(sum((g ** 2).sum() for i, g in enumerate(grads) if i != 2))
    assert optim.clip_grad_norm(params, total * 2) == pytest.approx(total, rel=1e-12)
    for i, (p, g) in enumerate(zip(params, grads)):
        if i != 2:
            np.testing.assert_array_equal(p.grad, g)
    assert params[2].grad is None


def test_clip_grad_norm_clips_the_gradients_the_optimizer_then_uses():
    model = nn.Linear(4, 3)
    model(tg.Tensor(np.full((8, 4), 10.0, np.float32))).sum().backward()
    optim.clip_grad_norm(model.parameters(), 0.1)
    norm = math.sqrt(sum(float((p.grad.astype(np.float64) ** 2).sum()) for p in model.parameters()))
    assert norm == pytest.approx(0.1, rel=1e-4)


def test_clip_grad_norm_with_two_parameters_added_together_scales_each_once():
    """a + b hands the same upstream gradient to both leaves; clipping in place must
    still scale each parameter's gradient exactly once."""
    a = nn.Parameter(np.array([3.0, 4.0]))
    b = nn.Parameter(np.array([1.0, 0.0]))
    ((a + b) * np.array([3.0, 4.0])).sum().backward()   # d/da = d/db = [3, 4]
    total = optim.clip_grad_norm([a, b], 1.0)
    assert total == pytest.approx(math.sqrt(50), rel=1e-12)
    np.testing.assert_allclose(a.grad, np.array([3.0, 4.0]) / math.sqrt(50), rtol=1e-5)
    np.testing.assert_allclose(b.grad, np.array([3.0, 4.0]) / math.sqrt(50), rtol=1e-5)


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    grads = grad_stream(1)[0]
    for max_norm in (0.5, 100.0):
        params = params64()
        for p, g in zip(params, grads):
            p.grad = g.copy()
        tparams = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in SHAPES]
        for t, g in zip(tparams, grads):
            t.grad = torch.from_numpy(g.copy())
        ours = optim.clip_grad_norm(params, max_norm)
        theirs = torch.nn.utils.clip_grad_norm_(tparams, max_norm)
        assert ours == pytest.approx(theirs.item(), rel=1e-12)
        for p, t in zip(params, tparams):
            np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)


# ---- cosine_lr ---------------------------------------------------------------------------
def test_cosine_lr_warms_up_linearly_to_max_lr():
    lrs = [optim.cosine_lr(s, 1e-3, 1e-4, 10, 100) for s in range(10)]
    assert lrs[0] > 0
    np.testing.assert_allclose(np.diff(lrs), lrs[0], rtol=1e-9)   # equal increments from 0
    assert max(lrs) == pytest.approx(1e-3)
    assert optim.cosine_lr(10, 1e-3, 1e-4, 10, 100) == pytest.approx(1e-3)


def test_cosine_lr_decays_by_a_cosine_to_min_lr_at_total_steps_and_stays_there():
    max_lr, min_lr, warmup, total = 1e-3, 1e-4, 10, 110
    assert optim.cosine_lr(60, max_lr, min_lr, warmup, total) == pytest.approx((max_lr + min_lr) / 2)
    for s in range(warmup, total + 1):
        progress = (s - warmup) / (total - warmup)
        want = min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
        assert optim.cosine_lr(s, max_lr, min_lr, warmup, total) == pytest.approx(want, rel=1e-12)
    decay = [optim.cosine_lr(s, max_lr, min_lr, warmup, total) for s in range(warmup, total + 1)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert optim.cosine_lr(total, max_lr, min_lr, warmup, total) == pytest.approx(min_lr)
    assert optim.cosine_lr(total + 1, max_lr, min_lr, warmup, total) == min_lr
    assert optim.cosine_lr(10 * total, max_lr, min_lr, warmup, total) == min_lr


def test_cosine_lr_without_warmup_starts_at_max_lr():
    assert optim.cosine_lr(0, 0.5, 0.0, 0, 10) == pytest.approx(0.5)
    assert optim.cosine_lr(10, 0.5, 0.0, 0, 10) == pytest.approx(0.0)


# ---- optimizer state -----------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: optim.Adam(ps, lr=0.01),
    lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
], ids=["sgd", "adam", "adamw"])
def test_optimizer_state_dict_round_trip_continues_identically(make):
    grads = grad_stream(6)
    params = params64()
    opt = make(params)
    run(opt, params, grads[:3])
    state = opt.state_dict()
    assert list(state["updates"]) == [3] * len(params)
    saved_weights = [p.data.copy() for p in params]
    run(opt, params, grads[3:])

    restored = [nn.Parameter(w.copy()) for w in saved_weights]
    fresh = make(restored)
    fresh.load_state_dict(state)
    assert list(fresh.updates) == [3] * len(restored)
    run(fresh, restored, grads[3:])
    for a, b in zip(params, restored):
        np.testing.assert_array_equal(a.data, b.data)


def test_optimizer_state_dict_holds_copies():
    params = params64()
    opt = optim.Adam(params)
    run(opt, params, grad_stream(1))
    state = opt.state_dict()
    assert set(state) == {"updates"} | {f"{k}.{i}" for k in ("m", "v") for i in range(len(SHAPES))}
    state["m.0"][...] = 99
    assert not np.any(opt.m[0] == 99)


def test_optimizer_load_state_dict_mismatches_are_clear_errors_and_load_nothing():
    params = params64()
    opt = optim.Adam(params)
    run(opt, params, grad_stream(2))
    before = opt.state_dict()
    other = optim.SGD(params64(), lr=0.1, momentum=0.9).state_dict()
    with pytest.raises(KeyError, match="velocity"):
        opt.load_state_dict(other)
    bad = {k: v + 1 for k, v in before.items()}
    bad["v.3"] = np.zeros(7)
    with pytest.raises(ValueError, match=r"v\.3.*\(7,\)"):
        opt.load_state_dict(bad)
    after = opt.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)


# ---- optimizer settings --------------------------------------------------------------------
def test_settings_name_every_number_of_the_update_rule_as_it_is_now():
    params = params64()
    assert optim.SGD(params, lr=0.1, momentum=0.9).settings() == {"lr": 0.1, "momentum": 0.9}
    assert optim.Adam(params, lr=0.01).settings() == {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8}
    opt = optim.AdamW(params, lr=0.01, betas=[0.8, 0.9], weight_decay=0.1)
    opt.lr = 0.005   # a schedule's change
    assert opt.settings() == {"lr": 0.005, "betas": (0.8, 0.9), "eps": 1e-8, "weight_decay": 0.1}


@pytest.mark.parametrize("make", [
    lambda ps, **s: optim.SGD(ps, **{"lr": 0.1, "momentum": 0.5, **s}),
    lambda ps, **s: optim.Adam(ps, **{"lr": 0.01, **s}),
    lambda ps, **s: optim.AdamW(ps, **{"lr": 0.01, "weight_decay": 0.1, **s}),
], ids=["sgd", "adam", "adamw"])
def test_load_settings_and_state_make_a_copy_that_steps_identically(make):
    grads = grad_stream(6)
    params = params64()
    first = make(params)
    run(first, params, grads[:2])
    first.lr *= 0.5
    restored = [nn.Parameter(p.data.copy()) for p in params]
    copy = make(restored, lr=1.0)
    copy.load_settings(first.settings())
    copy.load_state_dict(first.state_dict())
    assert copy.settings() == first.settings()
    run(first, params, grads[2:])
    run(copy, restored, grads[2:])
    for a, b in zip(params, restored):
        np.testing.assert_array_equal(a.data, b.data)


def test_load_settings_checks_each_value_and_name_and_sets_nothing_when_one_is_wrong():
    opt = optim.AdamW(params64(), lr=0.01, weight_decay=0.1)
    before = opt.settings()
    with pytest.raises(ValueError, match=r"AdamW: betas\[1\] must be a number in \[0, 1\), got 1.0"):
        opt.load_settings({"lr": 0.5, "betas": (0.9, 1.0)})
    with pytest.raises(KeyError, match="AdamW has no setting \\['momentum'\\]"):
        opt.load_settings({"lr": 0.5, "momentum": 0.9})
    assert opt.settings() == before
    opt.load_settings({"lr": 0.5})   # some of them: the rest stay
    assert opt.settings() == {**before, "lr": 0.5}


@pytest.mark.parametrize("make, setting", [
    (lambda p: optim.SGD(p, lr=float("nan")), "lr"),
    (lambda p: optim.SGD(p, lr=-1.0), "lr"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=1.0), "momentum"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=-0.5), "momentum"),
    (lambda p: optim.Adam(p, lr=float("inf")), "lr"),
    (lambda p: optim.Adam(p, betas=(1.5, 0.99)), r"betas\[0\]"),
    (lambda p: optim.Adam(p, betas=(0.9, 1.0)), r"betas\[1\]"),
    (lambda p: optim.Adam(p, betas=(0.9, float("nan"))), r"betas\[1\]"),
    (lambda p: optim.Adam(p, eps=-1e-8), "eps"),
    (lambda p: optim.AdamW(p, weight_decay=float("nan")), "weight_decay"),
    (lambda p: optim.AdamW(p, weight_decay=-0.1), "weight_decay"),
])
def test_optimizers_refuse_settings_that_would_train_wrong(make, setting):
    with pytest.raises(ValueError, match=rf"{setting} must be"):
        make([nn.Parameter(np.ones(3))])


@pytest.mark.parametrize("make, message", [
    (lambda p: optim.AdamW(p, lr="1e-3"), "AdamW: lr must be a finite number >= 0, got '1e-3'"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=True), "SGD: momentum must be a number in [0, 1), got True"),
    (lambda p: optim.Adam(p, betas=0.9), "Adam: betas must be a pair (beta1, beta2), got 0.9"),
    (lambda p: optim.Adam(p, betas=(0.9, None)), "Adam: betas[1] must be a number in [0, 1), got None"),
])
def test_a_setting_that_is_no_number_is_a_type_error_naming_the_optimizer_the_setting_and_the_value(make, message):
    """As PyTorch: a TypeError for a value of the wrong type, a ValueError for one out of range,
    in nn.checks' words (the flags' and the GPT's)."""
    with pytest.raises(TypeError) as error:
        make([nn.Parameter(np.ones(3))])
    assert str(error.value) == message


def test_optimizer_checks_are_nn_checks():
    assert optim.CHECKS == {"lr": nn.checks.NON_NEGATIVE, "momentum": nn.checks.FRACTION,
                            "eps": nn.checks.NON_NEGATIVE, "weight_decay": nn.checks.NON_NEGATIVE,
                            "betas[0]": nn.checks.FRACTION, "betas[1]": nn.checks.FRACTION}
    assert not hasattr(optim, "require") and not hasattr(optim, "RULES")


@pytest.mark.parametrize("make", [lambda p, lr: optim.SGD(p, lr, momentum=0.9), lambda p, lr: optim.AdamW(p, lr)])
def test_lr_0_where_a_cosine_schedule_ends_is_saved_and_loaded(make):
    """A cosine schedule with min_lr 0 reaches lr 0 (the main job's --min_lr may be 0): the
    optimizer's settings then must load into a copy (they were refused before); lr 0 is also
    accepted when constructing, as PyTorch accepts it. A step at lr 0 moves nothing (AdamW's
    decay is lr-scaled too)."""
    params = params64()
    opt = make(params, 0.1)
    opt.lr = optim.cosine_lr(10, 0.1, 0.0, 2, 10)
    assert opt.lr == 0.0
    copy = make([nn.Parameter(p.data.copy()) for p in params], 0.1)
    copy.load_settings(opt.settings())
    assert copy.settings() == opt.settings() and copy.lr == 0.0
    before = [p.data.copy() for p in copy.params]
    run(copy, copy.params, grad_stream(1))
    for p, b in zip(copy.params, before):
        np.testing.assert_array_equal(p.data, b)
    assert make(params64(), 0.0).lr == 0.0


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("nan"), float("inf")])
def test_clip_grad_norm_refuses_a_norm_that_is_not_positive_and_finite(max_norm):
    p = nn.Parameter(np.ones(3))
    p.grad = np.full(3, 5.0)
    with pytest.raises(ValueError, match="clip_grad_norm: max_norm must be a finite number > 0"):
        optim.clip_grad_norm([p], max_norm)
    np.testing.assert_array_equal(p.grad, 5.0)   # nothing was scaled
