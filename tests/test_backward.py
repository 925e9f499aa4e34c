"""backward(): depth, order, accumulation, retain_graph, freeing the graph, grad modes,
detect_anomaly, scopes and the printed chain-rule trace."""
import gc
import re
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import tensorgrad as tg


def f64(data, requires_grad=True, label=None):
    return tg.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad, label=label)


# ---- depth and order ------------------------------------------------------------------------
def test_a_chain_of_100000_ops_backpropagates_without_recursion_and_can_be_deleted():
    x = f64(1.0)
    y = x
    for _ in range(100_000):
        y = y * 1.00001
    order = tg.backward_order(y)
    assert len(order) == 100_001 and order[0] is y and order[-1] is x
    del order
    y.backward()
    assert x.grad == pytest.approx(1.00001 ** 100_000, rel=1e-9)   # about e = 2.718...
    root = weakref.ref(y)
    del y                    # dropping a 100,000-deep graph must not overflow the C stack either
    assert root() is None


def neuron(trace_labels=True):
    """micrograd's neuron: o = tanh(x1*w1 + x2*w2 + b)."""
    x1, x2 = f64(2.0, label="x1"), f64(0.0, label="x2")
    w1, w2 = f64(-3.0, label="w1"), f64(1.0, label="w2")
    b = f64(6.8813735870195432, label="b")
    x1w1 = x1 * w1
    x2w2 = x2 * w2
    s = x1w1 + x2w2
    n = s + b
    o = n.tanh()
    for t, name in [(x1w1, "x1w1"), (x2w2, "x2w2"), (s, "s"), (n, "n"), (o, "o")]:
        t.label = name
    return o, dict(x1=x1, x2=x2, w1=w1, w2=w2, b=b, x1w1=x1w1, x2w2=x2w2, s=s, n=n, o=o)


def test_backward_order_is_deterministic_and_follows_the_first_input_first():
    o, _ = neuron()
    first = [t.label for t in tg.backward_order(o)]
    assert first == [t.label for t in tg.backward_order(o)]
    assert first == [t.label for t in tg.backward_order(neuron()[0])]
    assert first == ["o", "n", "s", "x1w1", "x1", "w1", "x2w2", "x2", "w2", "b"]


def test_backward_order_puts_every_node_after_all_its_consumers():
    x = f64([1.0, 2.0], label="x")
    a = x.exp()
    b = x.tanh()
    c = a * b + x          # x feeds three ops
    d = c.sum() + a.sum()
    order = tg.backward_order(d)
    position = {id(t): i for i, t in enumerate(order)}
    for node in order:
        for parent in node._parents:
            if parent.requires_grad:
                assert position[id(parent)] > position[id(node)]
    assert order[-1] is x
    assert len(order) == len({id(t) for t in order})   # each node once


def test_backward_order_in_a_diamond_visits_the_first_input_first():
    x = f64([1.0, 2.0], label="x")
    a, b = x.exp(), x.tanh()
    a.label, b.label = "a", "b"
    c = a * b
    c.label = "c"
    assert [t.label for t in tg.backward_order(c)] == ["c", "a", "b", "x"]


def test_backward_order_skips_tensors_that_need_no_gradient():
    x, constant = f64([1.0]), f64([2.0], requires_grad=False)
    y = x * constant
    assert tg.backward_order(y) == [y, x]


# ---- accumulation and retain_graph ------------------------------------------------------------
def test_leaf_gradients_accumulate_across_backward_calls():
    x = f64([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    (x * 10).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data + 10)


def test_a_tensor_used_twice_in_one_graph_gets_both_gradients():
    x = f64([1.0, -2.0])
    (x * 3 + x.exp() * x).sum().backward()
    np.testing.assert_allclose(x.grad, 3 + np.exp(x.data) * (1 + x.data))


def test_slices_of_one_tensor_add_their_gradients_into_it_without_touching_shared_ones():
    x = f64(np.arange(6.0).reshape(2, 3))
    y = x * 1.0                       # an intermediate: slices of it scatter into y.grad
    out = y + 0.0                     # add hands y the upstream array itself (shared with out.grad)
    q, k = y[:, 0], y[:, 1:]          # two slices, and one position picked twice by an index array
    loss = (out * 2).sum() + (q * 3).sum() + (k * k).sum() + y[[0, 0], [2, 2]].sum()
    loss.backward()
    expected = np.full((2, 3), 2.0)
    expected[:, 0] += 3
    expected[:, 1:] += 2 * y.data[:, 1:]
    expected[0, 2] += 2
    np.testing.assert_array_equal(y.grad, expected)
    np.testing.assert_array_equal(x.grad, expected)
    np.testing.assert_array_equal(out.grad, np.full((2, 3), 2.0))   # not the scattered sum


def test_a_leaf_keeps_accumulating_when_slices_and_whole_uses_mix():
    x = f64([1.0, 2.0, 3.0])
    (x[1:] * 2).sum().backward()
    first = x.grad
    (x * x).sum().backward()
    (x[:1] * 5).sum().backward()
    np.testing.assert_array_equal(x.grad, [0 + 2 + 5, 2 + 4, 2 + 6])
    np.testing.assert_array_equal(first, [0, 2, 2])   # the first call's array was not reused


def test_retain_graph_allows_a_second_backward_that_doubles_the_leaf_gradients_exactly():
    x, w = f64([[0.5, -1.0, 2.0]]), f64([[1.0], [2.0], [-0.5]])
    hidden = (x @ w).tanh()
    loss = (hidden * hidden).sum()
    loss.backward(retain_graph=True)
    first_x, first_w, first_hidden = x.grad.copy(), w.grad.copy(), hidden.grad.copy()
    loss.backward()
    np.testing.assert_array_equal(x.grad, 2 * first_x)
    np.testing.assert_array_equal(w.grad, 2 * first_w)
    np.testing.assert_array_equal(hidden.grad, first_hidden)   # an intermediate holds the latest call's


def test_a_second_backward_without_retain_graph_is_a_clear_error_and_changes_no_grad():
    x = f64([1.0, 2.0])
    loss = (x.exp() * 2).sum()
    loss.backward()
    before = x.grad.copy()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()
    np.testing.assert_array_equal(x.grad, before)   # no silent double count


def test_backward_through_a_subgraph_freed_by_an_earlier_backward_is_an_error():
    x = f64([1.0, 2.0])
    shared = x.exp()
    shared.sum().backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        (shared * 3).sum().backward()


def test_leaf_gradients_are_separate_arrays():
    # an optimizer or clip_grad_norm may update grads in place; one must not change another
    a, b, c = f64([1.0, 2.0]), f64([3.0, 4.0]), f64([5.0, 6.0])
    loss = ((a + b) * c).sum()
    loss.backward()
    assert not np.shares_memory(a.grad, b.grad)
    a.grad *= 0
    np.testing.assert_array_equal(b.grad, [5.0, 6.0])


def test_leaf_gradient_of_a_scalar_sum_is_not_the_roots_grad_array():
    a, b = f64(1.0), f64(2.0)
    loss = a + b
    loss.backward()
    assert not np.shares_memory(a.grad, b.grad) and not np.shares_memory(a.grad, loss.grad)


def test_leaf_gradient_does_not_alias_the_grad_passed_to_backward():
    x = f64([1.0, 2.0])
    upstream = np.array([1.0, 1.0])
    (x + 0.0).backward(upstream)
    upstream[0] = 100.0
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_backward_on_a_leaf_keeps_its_own_copy_of_the_grad_passed():
    x = f64([0.0, 0.0, 0.0])
    upstream = np.ones(3)
    x.backward(upstream)
    upstream[0] = 100.0
    np.testing.assert_array_equal(x.grad, [1.0, 1.0, 1.0])


# ---- the grad argument ------------------------------------------------------------------------
def test_backward_on_a_non_scalar_without_grad_is_a_clear_error():
    y = f64(np.ones((2, 3))) * 2
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\)") as error:
        y.backward()
    assert "backward(grad)" in str(error.value)


def test_backward_with_a_grad_of_the_wrong_shape_is_a_value_error():
    y = f64(np.ones((2, 3))) * 2
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        y.backward(np.ones((3, 2)))


def test_backward_with_a_grad_for_a_non_scalar_output():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    g = np.array([[1.0, 0.0], [2.0, -1.0]])
    (x * x).backward(g)
    np.testing.assert_array_equal(x.grad, 2 * x.data * g)


def test_backward_accepts_a_tensor_as_grad_and_implies_one_for_single_element_outputs():
    x = f64([1.0, 2.0])
    (x * 3).backward(tg.tensor(np.array([1.0, 2.0])))
    np.testing.assert_array_equal(x.grad, [3.0, 6.0])
    z = f64([[2.0]])
    (z * z).backward()                  # shape (1, 1): one element, grad implied
    np.testing.assert_array_equal(z.grad, [[4.0]])


def test_backward_on_a_tensor_that_needs_no_grad_is_a_clear_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (f64([1.0], requires_grad=False) * 2).sum().backward()


# ---- building graph only when needed -----------------------------------------------------------
def assert_no_graph(t):
    assert not t.requires_grad and t._parents == () and t._vjps is None and t._op is None


def test_no_grad_builds_no_graph():
    x = f64([1.0, 2.0])
    with tg.no_grad():
        y = (x * 2).exp().sum()
        z = x[0] + tg.cat([x, x]).sum()
    assert_no_graph(y)
    assert_no_graph(z)
    assert (x * 2).requires_grad   # grad mode is back after the block


def test_no_grad_works_as_a_decorator_and_restores_the_mode_after_an_error():
    @tg.no_grad()
    def evaluate(t):
        return (t * t).sum()
    x = f64([3.0])
    assert_no_graph(evaluate(x))
    with pytest.raises(ZeroDivisionError):
        with tg.no_grad():
            1 / 0
    assert (x * 2).requires_grad


def test_tensors_that_need_no_grad_build_no_graph():
    a, b = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0])
    assert_no_graph(((a * b).exp() @ b).relu())
    assert_no_graph(tg.where(a > 1.5, a, b))


def test_a_constant_input_gets_no_gradient():
    x, constant = f64([1.0, 2.0]), f64([3.0, 4.0], requires_grad=False)
    (x * constant).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])
    assert constant.grad is None


# ---- memory: the graph's saved arrays are released by backward ---------------------------------
def op_saving_an_array(x):
    """A custom op, made the way nn's fused ops are: out = 3x, its vjp keeps an array of 3s."""
    saved = np.full(x.shape, 3.0)
    out = tg.make_op("triple", x.data * saved, (x,), (lambda g: g * saved,))   # d(3x)/dx = 3
    return out, weakref.ref(saved)


def test_backward_releases_the_arrays_saved_by_vjps():
    x = f64([1.0, 2.0])
    out, saved = op_saving_an_array(x)
    loss = out.sum()
    assert saved() is not None
    loss.backward()
    assert saved() is None                 # freed by backward, while `out` and `loss` still live
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    assert out._vjps is None and loss._vjps is None


def test_retain_graph_keeps_the_saved_arrays_until_the_graph_is_dropped():
    x = f64([1.0, 2.0])
    out, saved = op_saving_an_array(x)
    loss = out.sum()
    loss.backward(retain_graph=True)
    assert saved() is not None
    loss.backward()
    assert saved() is None


def test_without_intermediate_grads_only_the_leaves_keep_a_gradient_and_it_is_the_same():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    grads = []
    for keep in (True, False):
        x, w = f64(data[0]), f64(data[1])
        hidden = (x @ w).gelu()
        loss = (hidden * hidden).sum()
        loss.backward(intermediate_grads=keep)
        assert (hidden.grad is not None and loss.grad is not None) if keep else (hidden.grad is None and loss.grad is None)
        grads.append((x.grad, w.grad))
    for kept, dropped in zip(*grads):
        np.testing.assert_array_equal(kept, dropped)


def test_without_intermediate_grads_the_peak_holds_only_the_gradients_in_flight():
    rng = np.random.default_rng(0)
    x = f64(rng.standard_normal((256, 256)))

    def peak_of_backward(keep):
        y = x
        for _ in range(20):   # a chain: each intermediate's gradient is needed by one step only
            y = (y * 0.5).tanh()
        loss = y.sum()
        gc.collect()
        tracemalloc.start()
        try:
            loss.backward(intermediate_grads=keep)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            x.grad = None
    one_gradient = x.data.nbytes
    assert peak_of_backward(True) > 30 * one_gradient     # 40 intermediates' gradients stay
    assert peak_of_backward(False) < 6 * one_gradient     # a few on their way at any time


def test_max_saves_nothing_for_backward_but_its_input_and_output():
    x = f64([[1.0, 5.0, 5.0], [2.0, 0.0, 1.0]])
    top = x.max(axis=1)
    saved = [cell.cell_contents for cell in top._vjps[0].__closure__
             if isinstance(cell.cell_contents, np.ndarray)]
    assert saved and all(a is x.data or np.shares_memory(a, top.data) for a in saved)
    top.sum().backward()
    assert top._vjps is None
    np.testing.assert_array_equal(x.grad, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])


def test_memory_stays_flat_over_a_training_like_loop():
    rng = np.random.default_rng(0)
    inputs, targets = rng.standard_normal((32, 16)), rng.standard_normal((32, 4))
    w1, w2 = f64(rng.standard_normal((16, 64)) * 0.1), f64(rng.standard_normal((64, 4)) * 0.1)
    params = [w1, w2]
    losses, memory = [], []
    gc.collect()
    tracemalloc.start()
    try:
        for step in range(50):
            hidden = (tg.tensor(inputs) @ w1).gelu()
            loss = ((hidden @ w2 - targets) ** 2).mean()
            loss.backward()
            with tg.no_grad():
                for p in params:
                    p.data -= 0.05 * p.grad
                    p.grad = None
            losses.append(loss.item())
            gc.collect()   # what is still held, not garbage whose turn to be collected has not come
            memory.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert losses[-1] < losses[0]             # it does train
    # one step's graph holds ~60 KB of activations; 40 leaked steps would add megabytes
    assert memory[-1] - memory[9] < 20_000, f"memory grew from {memory[9]} to {memory[-1]} bytes"


# ---- detect_anomaly -----------------------------------------------------------------------------
def test_detect_anomaly_names_the_op_and_shapes_when_a_forward_makes_inf():
    x = f64([1.0, 0.0])
    with np.errstate(divide="ignore"), tg.detect_anomaly():
        with pytest.raises(FloatingPointError, match=r"'log'.*\(2,\)"):
            x.log()


def test_detect_anomaly_catches_zero_times_inf_in_forward():
    a, b = f64([0.0, 1.0]), f64([np.inf, 1.0], requires_grad=False)
    with np.errstate(invalid="ignore"), tg.detect_anomaly():
        with pytest.raises(FloatingPointError, match=r"'mul'.*nan"):
            a * b


def test_detect_anomaly_catches_a_nan_or_inf_made_only_by_a_backward():
    x = f64([0.0, 4.0])
    with np.errstate(divide="ignore"), tg.detect_anomaly():
        y = x.sqrt()                      # forward is fine: [0, 2]
        with pytest.raises(FloatingPointError, match=r"'sqrt'.*backward|backward.*'sqrt'"):
            y.sum().backward()


def test_detect_anomaly_names_a_custom_op_whose_vjp_returns_nan():
    x = f64([1.0, 2.0])
    with tg.detect_anomaly():
        out = tg.make_op("leaky_custom", x.data * 2, (x,), (lambda g: g * np.nan,))
        with pytest.raises(FloatingPointError, match="leaky_custom"):
            out.sum().backward()


def test_without_detect_anomaly_nan_and_inf_pass_silently():
    x = f64([1.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        y = x.log()
        assert np.isneginf(y.data[1])
        y.sum().backward()
    assert np.isinf(x.grad[1])


def test_detect_anomaly_is_off_again_after_the_block_even_after_an_error():
    x = f64([0.0])
    with np.errstate(divide="ignore"):
        with pytest.raises(FloatingPointError):
            with tg.detect_anomaly():
                x.log()
        assert np.isneginf(x.log().data[0])


# ---- scopes -----------------------------------------------------------------------------------
def test_scope_tags_the_ops_made_inside_and_nests():
    x = f64([1.0, 2.0])
    with tg.scope("h.0"):
        a = x * 2
        with tg.scope("attn"):
            b = a.exp()
        c = b.sum()
    d = c * 1.0
    assert a._scope == ("h.0",)
    assert b._scope == ("h.0", "attn")
    assert c._scope == ("h.0",)
    assert d._scope == ()


def test_errors_about_an_op_name_its_scope():
    x = f64([1.0, 2.0])
    with tg.scope("h.0"), tg.scope("mlp"):
        loss = x.exp().sum()
    loss.backward()
    with pytest.raises(RuntimeError, match=r"'sum' in h\.0\.mlp"):
        loss.backward()


# ---- the printed chain rule -------------------------------------------------------------------
def test_trace_prints_the_chain_rule_node_by_node_on_micrograds_neuron(capsys):
    o, t = neuron()
    o.backward(trace=True)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("backward from o")

    # one header per op node, in backward order, numbered by that order
    headers = [re.match(r"\[(\d+)\] (\S+) = (\w+)\(", line) for line in lines]
    headers = [(int(m.group(1)), m.group(2), m.group(3)) for m in headers if m]
    order = tg.backward_order(o)
    assert [name for _, name, _ in headers] == [n.label for n in order if n._parents]
    assert [number for number, _, _ in headers] == [i + 1 for i, n in enumerate(order) if n._parents]
    assert [op for _, _, op in headers] == ["tanh", "add", "add", "mul", "mul"]

    # upstream grad × local derivative = contribution, with micrograd's numbers, then the
    # op's rule for that input, as written where the op is defined
    rule = lambda node, index: re.escape(f"    [{node.op}: {node.rules[index]}]") + "$"
    assert re.search(r"n\.grad \+= o\.grad .*= 1 × 0\.5 = 0\.5" + rule(t["o"], 0), out, re.M)   # 1 - tanh(n)²
    assert re.search(r"^\[\d+\] n = add\(s, b\) .*n\.grad = 0\.5$", out, re.M)
    assert re.search(r"x1\.grad \+= x1w1\.grad .*= 0\.5 × -3 = -1\.5" + rule(t["x1w1"], 0), out, re.M)
    assert re.search(r"w1\.grad \+= x1w1\.grad .*= 0\.5 × 2 = 1" + rule(t["x1w1"], 1), out, re.M)
    assert re.search(r"w2\.grad \+= x2w2\.grad .*= 0\.5 × 0 = 0" + rule(t["x1w1"], 1), out, re.M)
    assert " x " not in out.replace("×", "")   # multiplication is never the letter x
    # the leaves close the numbering: every number from 1 to the last is printed once
    for leaf, value in [("x1", "-1.5"), ("w1", "1"), ("x2", "0.5"), ("w2", "0"), ("b", "0.5")]:
        assert f"] {leaf}.grad = {value}" in lines[-1]
    numbers = sorted(int(n) for n in re.findall(r"\[(\d+)\] ", out))
    assert numbers == list(range(1, len(order) + 1))

    # and the gradients are exactly plain backward's
    plain, p = neuron()
    plain.backward()
    for name in ["x1", "x2", "w1", "w2", "b", "n"]:
        assert t[name].grad == p[name].grad
    assert t["x1"].grad == pytest.approx(-1.5) and t["n"].grad == pytest.approx(0.5)


def test_trace_of_a_tensor_graph_prints_jacobians_and_matches_plain_backward(capsys):
    def build():
        x = f64([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]], label="x")
        w = f64([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]], label="w")
        return (x @ w).relu().sum(), x, w
    loss, x, w = build()
    loss.backward(trace=True)
    out = capsys.readouterr().out
    assert "matmul" in out and "relu" in out and "Jacobian" in out and "elementwise" in out
    plain, px, pw = build()
    plain.backward()
    np.testing.assert_array_equal(x.grad, px.grad)
    np.testing.assert_array_equal(w.grad, pw.grad)


def test_slices_trace_and_run_under_detect_anomaly_with_the_gradients_of_plain_backward(capsys):
    def build():
        x = f64([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]], label="x")
        return (x[0] * x[1]).sum() + x[:, 2].sum() + x[[1, 1], [0, 0]].sum(), x
    loss, x = build()
    loss.backward(trace=True)
    assert "getitem" in capsys.readouterr().out
    with tg.detect_anomaly():
        anomaly_loss, anomaly_x = build()
        anomaly_loss.backward()
    plain, px = build()
    plain.backward()
    np.testing.assert_array_equal(px.grad, [[0.3, 0.2, 0.0], [3.0, -2.0, 1.5]])
    np.testing.assert_array_equal(x.grad, px.grad)
    np.testing.assert_array_equal(anomaly_x.grad, px.grad)


def test_trace_of_a_long_graph_stops_printing_but_finishes_backward(capsys):
    x = f64(1.0)
    y = x
    for _ in range(1000):
        y = y * 1.0
    y.backward(trace=True)
    out = capsys.readouterr().out
    assert "trace stops" in out and len(out.splitlines()) < 700
    assert x.grad == 1.0


def test_trace_respects_retain_graph(capsys):
    x = f64([1.0, 2.0])
    loss = (x * x).sum()
    loss.backward(trace=True, retain_graph=True)
    loss.backward(trace=True)
    capsys.readouterr()
    np.testing.assert_array_equal(x.grad, 4 * x.data)
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward(trace=True)


def test_a_thread_starts_with_its_own_grad_mode_and_scope():
    seen = {}

    def worker():
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        seen["requires_grad"] = (x * 2).requires_grad
        with tg.scope("worker"):
            seen["scope"] = (x * 2)._scope

    with tg.no_grad(), tg.scope("main"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen == {"requires_grad": True, "scope": ("worker",)}


# ---- the backward loop, the vjp forms, and what backward may write into --------------------------
def test_the_backward_loop_fits_one_screen():
    import importlib.util
    import inspect
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "bench" / "engine_size.py"
    spec = importlib.util.spec_from_file_location("engine_size", script)
    engine_size = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(engine_size)
    source = inspect.getsource(tg.autograd.backward)
    assert engine_size.code_lines(source) <= 30, source


def transposing_matmul(a, b):
    """A student's matmul whose vjp for a gives (g @ b^T)^T = b @ g^T: a (2, 4) gradient for a (4, 2) input."""
    return tg.make_op("my_matmul", a.data @ b.data, (a, b),
                      vjps=(lambda g: b.data @ g.T, lambda g: a.data.T @ g))


def test_a_vjp_returning_a_transposed_gradient_is_an_error_naming_op_input_and_shapes():
    a = f64(np.ones((4, 2)), label="a")
    b = f64(np.ones((2, 3)), label="b")
    loss = transposing_matmul(a, b).sum()
    with pytest.raises(ValueError) as error:
        loss.backward()
    message = str(error.value)
    for part in ["'my_matmul'", "input 0", "'a'", "of shape (4, 2)", "with shape (2, 4)", "transpose"]:
        assert part in message, message


def test_a_gradient_in_the_reversed_shape_gets_a_transpose_hint():
    x = f64(np.ones((4, 2)), label="x")
    y = tg.make_op("bad", x.data * 2, (x,), vjps=(lambda g: (2 * g).T,))
    with pytest.raises(ValueError, match=r"came back with shape \(2, 4\).*transpose"):
        y.backward(np.ones((4, 2)))


def test_a_gradient_in_the_broadcast_shape_is_summed_down():
    x = f64([1.0, 2.0, 3.0])
    y = tg.make_op("outer_ones", np.ones((2, 3)) * x.data, (x,), vjps=(lambda g: g,))
    y.backward(np.ones((2, 3)))
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_make_op_takes_one_backward_for_all_inputs_called_once_whatever_the_order():
    calls = []

    def product(a, b):
        def backward(g):   # both gradients at once
            calls.append(1)
            return g * b.data, g * a.data
        return tg.make_op("product", a.data * b.data, (a, b), vjps=backward,
                          rules=("d(a·b)/da = b", "d(a·b)/db = a"))

    a, b = f64([1.0, 2.0]), f64([3.0, -1.0])
    loss = (product(a, b) + product(b, a)).sum()
    loss.backward()
    np.testing.assert_array_equal(a.grad, 2 * b.data)
    np.testing.assert_array_equal(b.grad, 2 * a.data)
    assert len(calls) == 2   # once per node, not once per input

    constant = f64([5.0, 5.0], requires_grad=False)
    calls.clear()
    product(constant, b).sum().backward()   # one input needs no gradient: its result is dropped
    np.testing.assert_array_equal(b.grad, 2 * a.data + 5.0)
    assert constant.grad is None and len(calls) == 1


def test_backward_never_writes_into_an_array_a_vjp_shared():
    x = f64([1.0, 2.0])
    y = x * 3.0
    z = y + y             # add's vjps hand back z's own grad array to y, twice
    w = z * 1.0
    loss = (w + w.exp()).sum()
    loss.backward()
    np.testing.assert_allclose(z.grad, 1 + np.exp(z.data))
    np.testing.assert_allclose(y.grad, 2 * (1 + np.exp(z.data)))
    np.testing.assert_allclose(x.grad, 6 * (1 + np.exp(z.data)))
    assert not np.shares_memory(y.grad, z.grad)


def test_every_op_states_its_rule_for_each_input():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    outputs = [x + x, x - 1, x * x, x / 2, x ** 2, -x, x @ x, x.sum(), x.mean(), x.max(), x.min(),
               x.exp(), x.log(), x.sqrt(), x.abs(), x.tanh(), x.sigmoid(), x.relu(), x.gelu(),
               x.softmax(), x.log_softmax(), x.reshape(4), x.T, x[0], x.masked_fill(x.data > 2, 0.0),
               tg.cat([x, x]), tg.where(x.data > 2, x, 0.0), tg.maximum(x, 2.0)]
    for out in outputs:
        assert out.rules is not None and len(out.rules) == len(out._parents), out.op
        assert all(isinstance(rule, str) and rule for rule in out.rules), out.op
