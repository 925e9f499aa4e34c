"""nn.Module (the tree, modes, state, repr), Sequential/ModuleList, and the layers and
functional ops below attention: Linear, Embedding, LayerNorm, Dropout, activations,
positional encodings, FeedForward, TransformerBlock, softmax, cross_entropy.

Every layer's forward and parameter gradients are gradient-checked in float64; fused ops
are compared with the same function composed from the engine's primitives; where torch
is installed, layers are compared with torch (weights copied over, Linear transposed).
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nn
import tensorgrad as tg
from nn import functional as F


def rand(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def t64(*shape, seed=0, requires_grad=True):
    return tg.Tensor(rand(*shape, seed=seed), requires_grad=requires_grad)


def grads_of(fn, inputs, upstream):
    """Gradients of sum(fn(*inputs) * upstream) with respect to each input (fresh copies)."""
    leaves = [tg.Tensor(x.data.copy(), requires_grad=True) for x in inputs]
    out = fn(*leaves)
    (out * upstream).sum().backward()
    return out.data, [leaf.grad for leaf in leaves]


class Pair(nn.Module):
    """A module with a child, a list of children and a Sequential, for naming tests."""

    def __init__(self):
        self.first = nn.Linear(3, 4)
        self.blocks = nn.ModuleList([nn.LayerNorm(4), nn.Linear(4, 4, bias=False)])
        self.out = nn.Sequential(nn.Linear(4, 2), nn.ReLU())

    def forward(self, x):
        x = self.first(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


# ---- Module: the tree --------------------------------------------------------------------
def test_named_parameters_are_dotted_names_in_assignment_order():
    names = [name for name, _ in Pair().named_parameters()]
    assert names == ["first.weight", "first.bias", "blocks.0.weight", "blocks.0.bias",
                     "blocks.1.weight", "out.0.weight", "out.0.bias"]


def test_named_parameters_are_stable_across_instances_and_calls():
    a, b = Pair(), Pair()
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in a.named_parameters()]
    a(tg.Tensor(rand(2, 3, dtype=np.float32)))
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]


def test_parameters_are_the_named_parameters_in_order():
    model = Pair()
    assert [id(p) for p in model.parameters()] == [id(p) for _, p in model.named_parameters()]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert model.num_parameters() == 3 * 4 + 4 + 4 + 4 + 16 + 4 * 2 + 2


def test_a_shared_parameter_is_listed_once():
    class Tied(nn.Module):
        def __init__(self):
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model = Tied()
    names = [n for n, _ in model.named_parameters()]
    assert names == ["a.weight", "a.bias", "b.bias"]
    assert len(model.parameters()) == 3


def test_a_shared_module_is_listed_once():
    class Twice(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(2, 2)
            self.again = self.layer

    assert [n for n, _ in Twice().named_parameters()] == ["layer.weight", "layer.bias"]


def test_zero_grad_sets_every_grad_to_none():
    model = Pair()
    model(tg.Tensor(rand(5, 3, dtype=np.float32))).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_train_and_eval_reach_every_submodule():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.Dropout(0.1)))
    modules = [model] + [m for _, m in model.named_modules()]
    assert len(modules) == 5
    assert all(m.training for m in modules)
    assert model.eval() is model
    assert not any(m.training for m in modules)
    assert model.train() is model
    assert all(m.training for m in modules)
    model.train(False)
    assert not any(m.training for m in modules)


def test_to_float64_casts_every_parameter():
    model = Pair().to(np.float64)
    assert all(p.dtype == np.float64 for p in model.parameters())
    out = model(tg.Tensor(rand(2, 3)))
    assert out.dtype == np.float64


def test_calling_a_module_runs_forward_and_a_module_without_forward_says_so():
    lin = nn.Linear(3, 2)
    x = tg.Tensor(rand(4, 3, dtype=np.float32))
    np.testing.assert_array_equal(lin(x).data, lin.forward(x).data)

    class Empty(nn.Module):
        pass
    with pytest.raises(NotImplementedError, match="Empty"):
        Empty()(x)


# ---- Module: state -----------------------------------------------------------------------
def test_state_dict_holds_copies_under_dotted_names():
    model = Pair()
    state = model.state_dict()
    assert list(state) == [n for n, _ in model.named_parameters()]
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(state[name], p.data)
        assert state[name] is not p.data
    state["first.weight"][...] = 123.0
    assert not np.any(model.first.weight.data == 123.0)


def test_load_state_dict_copies_every_array_exactly():
    nn.manual_seed(1)
    source = Pair()
    nn.manual_seed(2)
    target = Pair()
    target.load_state_dict(source.state_dict())
    for (name, a), (_, b) in zip(source.named_parameters(), target.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)
        assert a.data is not b.data
    x = tg.Tensor(rand(3, 3, dtype=np.float32))
    np.testing.assert_array_equal(source(x).data, target(x).data)


def _snapshot(model):
    return {n: p.data.copy() for n, p in model.named_parameters()}


def _unchanged(model, snapshot):
    return all(np.array_equal(p.data, snapshot[n]) for n, p in model.named_parameters())


def test_load_state_dict_with_a_missing_name_is_a_clear_error_and_loads_nothing():
    model = Pair()
    before = _snapshot(model)
    state = {n: a + 1 for n, a in model.state_dict().items()}
    del state["out.0.bias"]
    with pytest.raises(KeyError, match="out.0.bias"):
        model.load_state_dict(state)
    assert _unchanged(model, before)


def test_load_state_dict_with_an_unexpected_name_is_a_clear_error_and_loads_nothing():
    model = Pair()
    before = _snapshot(model)
    state = {n: a + 1 for n, a in model.state_dict().items()}
    state["extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(KeyError, match="extra.weight"):
        model.load_state_dict(state)
    assert _unchanged(model, before)


def test_load_state_dict_with_a_wrong_shape_is_a_clear_error_and_loads_nothing():
    model = Pair()
    before = _snapshot(model)
    state = {n: a + 1 for n, a in model.state_dict().items()}
    state["out.0.bias"] = np.zeros(5, np.float32)   # the last parameter: all others would fit
    with pytest.raises(ValueError, match=r"out\.0\.bias.*\(5,\).*\(2,\)"):
        model.load_state_dict(state)
    assert _unchanged(model, before)


# ---- Module: repr ------------------------------------------------------------------------
def test_repr_of_a_leaf_layer_shows_its_arguments_and_parameter_count():
    assert repr(nn.Linear(3, 4)) == "Linear(3, 4, bias=True)  # 16 parameters"
    assert repr(nn.Linear(3, 4, bias=False)) == "Linear(3, 4, bias=False)  # 12 parameters"
    assert repr(nn.LayerNorm(8)) == "LayerNorm(8, eps=1e-05)  # 16 parameters"
    assert repr(nn.Embedding(10, 3)) == "Embedding(10, 3)  # 30 parameters"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1)"


def test_repr_of_a_tree_shows_each_child_by_name_and_the_total():
    text = repr(Pair())
    lines = text.splitlines()
    assert lines[0] == "Pair("
    assert lines[-1] == f")  # {Pair().num_parameters():,} parameters"
    assert "  (first): Linear(3, 4, bias=True)  # 16 parameters" in lines
    assert "  (blocks): ModuleList(" in lines
    assert "    (0): LayerNorm(4, eps=1e-05)  # 8 parameters" in lines
    assert "    (1): ReLU()" in lines


def test_repr_of_a_gpt_counts_with_thousands_separators():
    model = nn.GPT(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32)
    text = repr(model)
    assert text.startswith("GPT(")
    assert text.endswith(f"  # {model.num_parameters():,} parameters")
    assert "," in f"{model.num_parameters():,}"
    for name in ("tok_emb", "pos_emb", "h", "ln_f", "head", "attn", "qkv", "ffn"):
        assert f"({name}):" in text


# ---- Sequential and ModuleList -------------------------------------------------------------
def test_sequential_applies_its_modules_in_order():
    a, b = nn.Linear(3, 5), nn.Linear(5, 2)
    seq = nn.Sequential(a, nn.Tanh(), b)
    x = tg.Tensor(rand(4, 3, dtype=np.float32))
    np.testing.assert_array_equal(seq(x).data, b(a(x).tanh()).data)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(seq) == 3 and seq[0] is a and seq[2] is b and list(seq)[1].__class__ is nn.Tanh


def test_modulelist_indexes_iterates_appends_and_owns_its_parameters():
    layers = nn.ModuleList([nn.Linear(2, 2)])
    layers.append(nn.Linear(2, 3))
    assert len(layers) == 2
    assert layers[1].weight.shape == (2, 3)
    assert layers[-1] is layers[1]
    assert [type(m) for m in layers] == [nn.Linear, nn.Linear]
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]


# ---- Linear ------------------------------------------------------------------------------
def test_linear_layout_is_in_by_out_and_computes_x_at_w_plus_b():
    lin = nn.Linear(3, 5)
    assert lin.weight.shape == (3, 5) and lin.bias.shape == (5,)
    assert lin.weight.dtype == np.float32
    x = rand(2, 4, 3, dtype=np.float32)
    np.testing.assert_allclose(lin(tg.Tensor(x)).data, x @ lin.weight.data + lin.bias.data, rtol=1e-6)


def test_linear_without_bias_has_only_a_weight():
    lin = nn.Linear(3, 5, bias=False)
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    x = rand(4, 3, dtype=np.float32)
    np.testing.assert_allclose(lin(tg.Tensor(x)).data, x @ lin.weight.data, rtol=1e-6)


def test_linear_initialises_uniformly_within_one_over_sqrt_fan_in():
    lin = nn.Linear(64, 256)
    bound = 1 / np.sqrt(64)
    for p in (lin.weight.data, lin.bias.data):
        assert np.abs(p).max() <= bound
        assert np.abs(p).max() > 0.9 * bound
    assert abs(lin.weight.data.std() - bound / np.sqrt(3)) < 0.01


def test_linear_with_the_wrong_number_of_input_features_is_a_clear_error():
    with pytest.raises(ValueError, match=r"(?i)linear.*\(2, 4\).*expected 3"):
        nn.Linear(3, 5)(tg.Tensor(rand(2, 4, dtype=np.float32)))


def test_linear_gradcheck_parameters_and_input():
    lin = nn.Linear(3, 4).to(np.float64)
    x = t64(2, 5, 3)
    assert tg.gradcheck(lambda *ps: lin(x), *lin.parameters())
    assert tg.gradcheck(lambda x: lin(x), x)


def test_linear_matches_torch_with_the_weight_transposed():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(6, 4)
    ref = torch.nn.Linear(6, 4)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(lin.weight.data.T.copy()))
        ref.bias.copy_(torch.from_numpy(lin.bias.data))
    x = rand(3, 2, 6, dtype=np.float32)
    up = rand(3, 2, 4, seed=1, dtype=np.float32)
    xt = tg.Tensor(x, requires_grad=True)
    out = lin(xt)
    (out * up).sum().backward()
    xr = torch.tensor(x, requires_grad=True)
    out_r = ref(xr)
    (out_r * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(out.data, out_r.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad, ref.weight.grad.numpy().T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lin.bias.grad, ref.bias.grad.numpy(), rtol=1e-5, atol=1e-5)


# ---- Embedding ---------------------------------------------------------------------------
def test_embedding_looks_up_rows_and_keeps_the_batch_shape():
    emb = nn.Embedding(7, 3)
    assert emb.weight.shape == (7, 3)
    ids = np.array([[0, 6, 2], [2, 2, 1]])
    out = emb(ids)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.data, emb.weight.data[ids])
    np.testing.assert_array_equal(emb(tg.Tensor(ids)).data, out.data)   # int Tensors work too


def test_embedding_gradient_accumulates_over_repeated_ids():
    emb = nn.Embedding(4, 2)
    ids = np.array([1, 3, 1, 1])
    up = rand(4, 2, seed=3, dtype=np.float32)
    (emb(ids) * up).sum().backward()
    expected = np.zeros((4, 2), np.float32)
    expected[1] = up[0] + up[2] + up[3]
    expected[3] = up[1]
    np.testing.assert_allclose(emb.weight.grad, expected, rtol=1e-6)


@pytest.mark.parametrize("bad", [7, 100, -1])
def test_embedding_id_out_of_range_is_an_error_never_a_wrap(bad):
    emb = nn.Embedding(7, 3)
    with pytest.raises(IndexError, match=rf"Embedding.*{bad}.*\[0, 7\)"):
        emb(np.array([[0, bad, 1]]))


def test_embedding_float_ids_are_a_clear_error():
    with pytest.raises(TypeError, match="integer"):
        nn.Embedding(7, 3)(np.array([0.0, 1.0]))


def test_embedding_gradcheck():
    emb = nn.Embedding(5, 3).to(np.float64)
    ids = np.array([[0, 4, 4], [2, 0, 1]])
    assert tg.gradcheck(lambda w: emb(ids), emb.weight)


def test_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    emb = nn.Embedding(9, 4)
    ref = torch.nn.Embedding(9, 4)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(emb.weight.data))
    ids = np.array([[1, 8, 1], [0, 1, 5]])
    up = rand(2, 3, 4, seed=2, dtype=np.float32)
    (emb(ids) * up).sum().backward()
    out_r = ref(torch.from_numpy(ids))
    (out_r * torch.from_numpy(up)).sum().backward()
    np.testing.assert_array_equal(emb(ids).data, out_r.detach().numpy())
    np.testing.assert_allclose(emb.weight.grad, ref.weight.grad.numpy(), rtol=1e-6, atol=1e-7)


# ---- LayerNorm ---------------------------------------------------------------------------
def composed_layer_norm(x, weight, bias, eps=1e-5):
    """The reference: LayerNorm from the engine's mean, var and sqrt primitives."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    xhat = (x - mean) / (var + eps).sqrt()
    return xhat * weight + bias


def test_layernorm_starts_with_weight_one_and_bias_zero():
    ln = nn.LayerNorm(6)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    np.testing.assert_array_equal(ln.weight.data, np.ones(6, np.float32))
    np.testing.assert_array_equal(ln.bias.data, np.zeros(6, np.float32))
    assert ln.eps == 1e-5


def test_layernorm_output_has_mean_zero_and_variance_one_per_row():
    x = rand(4, 5, 16, dtype=np.float32) * 3 + 2
    y = nn.LayerNorm(16)(tg.Tensor(x)).data
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(axis=-1), 1, atol=1e-3)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 6)])
def test_fused_layer_norm_equals_composed_version_in_value_and_gradient(shape):
    x = t64(*shape)
    w = t64(shape[-1], seed=1)
    b = t64(shape[-1], seed=2)
    up = rand(*shape, seed=3)
    fused, fused_grads = grads_of(lambda x, w, b: F.layer_norm(x, w, b, 1e-5), [x, w, b], up)
    ref, ref_grads = grads_of(lambda x, w, b: composed_layer_norm(x, w, b, 1e-5), [x, w, b], up)
    np.testing.assert_allclose(fused, ref, rtol=1e-10, atol=1e-12)
    for got, want in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


def test_layer_norm_parameter_gradients_of_a_constant_input_and_of_a_second_backward():
    x = tg.Tensor(rand(3, 6, seed=7))   # needs no gradient: only the weight's and bias's vjps run
    w, b = t64(6, seed=1), t64(6, seed=2)
    up = rand(3, 6, seed=3)
    out = F.layer_norm(x, w, b)
    (out * up).sum().backward(retain_graph=True)
    ref_w, ref_b = t64(6, seed=1), t64(6, seed=2)
    (composed_layer_norm(tg.Tensor(x.data), ref_w, ref_b) * up).sum().backward()
    np.testing.assert_allclose(w.grad, ref_w.grad, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(b.grad, ref_b.grad, rtol=1e-9, atol=1e-11)
    first = w.grad.copy()
    w.grad *= 100   # what an optimizer or clipping may do to a leaf's gradient in place
    w.grad = None
    (out * up).sum().backward()   # the second backward must not see that
    np.testing.assert_allclose(w.grad, first, rtol=1e-12)


def test_functional_layer_norm_without_weight_and_bias():
    x = t64(3, 4)
    out = F.layer_norm(x)
    ref = composed_layer_norm(x, 1.0, 0.0)
    np.testing.assert_allclose(out.data, ref.data, rtol=1e-10, atol=1e-12)
    assert tg.gradcheck(lambda x: F.layer_norm(x), x)


def test_layernorm_gradcheck_input_and_parameters():
    ln = nn.LayerNorm(5).to(np.float64)
    ln.weight.data[...] = rand(5, seed=4)
    ln.bias.data[...] = rand(5, seed=5)
    x = t64(2, 3, 5)
    assert tg.gradcheck(lambda *ps: ln(x), *ln.parameters())
    assert tg.gradcheck(lambda x: ln(x), x)


def test_layernorm_matches_torch():
    torch = pytest.importorskip("torch")
    ln = nn.LayerNorm(8).to(np.float64)
    ln.weight.data[...] = rand(8, seed=1)
    ln.bias.data[...] = rand(8, seed=2)
    ref = torch.nn.LayerNorm(8, eps=1e-5).double()
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(ln.weight.data))
        ref.bias.copy_(torch.from_numpy(ln.bias.data))
    x = rand(3, 4, 8) * 2 + 1
    up = rand(3, 4, 8, seed=9)
    xt = tg.Tensor(x, requires_grad=True)
    out = ln(xt)
    (out * up).sum().backward()
    xr = torch.tensor(x, requires_grad=True)
    out_r = ref(xr)
    (out_r * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(out.data, out_r.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ln.weight.grad, ref.weight.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ln.bias.grad, ref.bias.grad.numpy(), rtol=1e-9, atol=1e-11)


# ---- Dropout -----------------------------------------------------------------------------
def test_dropout_is_the_identity_in_eval_mode():
    drop = nn.Dropout(0.5).eval()
    x = tg.Tensor(rand(10, 10, dtype=np.float32), requires_grad=True)
    y = drop(x)
    np.testing.assert_array_equal(y.data, x.data)


def test_dropout_with_p_zero_is_the_identity_in_training():
    x = tg.Tensor(rand(10, 10, dtype=np.float32))
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).data, x.data)


def test_dropout_zeroes_about_p_and_scales_the_rest_by_one_over_one_minus_p():
    nn.manual_seed(0)
    x = np.ones((200, 200), np.float32)
    y = nn.Dropout(0.25)(tg.Tensor(x)).data
    zero = y == 0
    assert abs(zero.mean() - 0.25) < 0.01
    np.testing.assert_allclose(y[~zero], 1 / 0.75, rtol=1e-6)
    assert abs(y.mean() - 1) < 0.02   # the expected value is kept


def test_dropout_is_repeatable_under_manual_seed():
    x = tg.Tensor(rand(20, 20, dtype=np.float32))
    nn.manual_seed(123)
    a = nn.Dropout(0.3)(x).data
    b = nn.Dropout(0.3)(x).data
    nn.manual_seed(123)
    c = nn.Dropout(0.3)(x).data
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)


def test_dropout_gradient_is_the_mask_over_one_minus_p():
    nn.manual_seed(7)
    x = tg.Tensor(rand(30, 30, dtype=np.float32), requires_grad=True)
    y = nn.Dropout(0.4)(x)
    y.sum().backward()
    kept = y.data != 0
    np.testing.assert_allclose(x.grad, kept / np.float32(0.6), rtol=1e-6)


def test_dropout_gradcheck_with_a_fixed_mask():
    x = t64(4, 5)
    assert tg.gradcheck(lambda x: F.dropout(x, 0.5, True, rng=np.random.default_rng(0)), x)


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5])
def test_dropout_probability_outside_zero_one_is_an_error(p):
    with pytest.raises(ValueError, match="Dropout"):
        nn.Dropout(p)
    with pytest.raises(ValueError, match="dropout"):
        F.dropout(t64(2), p)


# ---- activations and softmax -------------------------------------------------------------
def test_gelu_relu_tanh_modules_apply_their_functions():
    x = rand(3, 7)
    xt = tg.Tensor(x)
    gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(nn.GELU()(xt).data, gelu, rtol=1e-12)
    np.testing.assert_allclose(F.gelu(xt).data, gelu, rtol=1e-12)
    np.testing.assert_array_equal(nn.ReLU()(xt).data, np.maximum(x, 0))
    np.testing.assert_allclose(nn.Tanh()(xt).data, np.tanh(x), rtol=1e-12)


def test_gelu_matches_torch_tanh_approximation():
    torch = pytest.importorskip("torch")
    x = rand(50) * 3
    ref = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(F.gelu(tg.Tensor(x)).data, ref, rtol=1e-12, atol=1e-14)


def test_functional_softmax_and_log_softmax():
    x = rand(3, 5)
    e = np.exp(x - x.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(F.softmax(tg.Tensor(x)).data, s, rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(tg.Tensor(x)).data, np.log(s), rtol=1e-12)
    np.testing.assert_allclose(F.softmax(tg.Tensor(x), axis=0).data.sum(0), 1, rtol=1e-12)


# ---- cross_entropy -----------------------------------------------------------------------
def composed_cross_entropy(logits, targets, ignore_index=None):
    """The reference: mean over kept positions of -log_softmax(logits)[target], from primitives."""
    vocab = logits.shape[-1]
    flat = logits.reshape(-1, vocab).log_softmax(axis=-1)
    targets = np.asarray(targets).reshape(-1)
    keep = np.ones(len(targets), bool) if ignore_index is None else targets != ignore_index
    rows = np.nonzero(keep)[0]
    return -flat[rows, targets[rows]].mean()


@given(st.integers(1, 4), st.integers(1, 3), st.integers(2, 6), st.integers(0, 2 ** 31))
def test_cross_entropy_equals_composed_version_in_value_and_gradient(b, t, v, seed):
    rng = np.random.default_rng(seed)
    logits = tg.Tensor(rng.standard_normal((b, t, v)) * 3)
    targets = rng.integers(0, v, (b, t))
    fused, (g_fused,) = grads_of(lambda z: F.cross_entropy(z, targets), [logits], 1.0)
    ref, (g_ref,) = grads_of(lambda z: composed_cross_entropy(z, targets), [logits], 1.0)
    np.testing.assert_allclose(fused, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g_fused, g_ref, rtol=1e-10, atol=1e-12)


def test_cross_entropy_is_a_scalar_mean_of_minus_log_probabilities():
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    loss = F.cross_entropy(tg.Tensor(logits), np.array([0, 2]))
    assert loss.shape == ()
    p0 = np.exp(2) / (np.exp(2) + 1 + np.exp(-1))
    np.testing.assert_allclose(loss.item(), (-np.log(p0) + np.log(3)) / 2, rtol=1e-12)


def test_cross_entropy_gradcheck():
    logits = t64(2, 3, 5)
    targets = np.array([[0, 4, 2], [1, 1, 3]])
    assert tg.gradcheck(lambda z: F.cross_entropy(z, targets), logits)
    targets_ignored = np.array([[0, -100, 2], [-100, 1, 3]])
    assert tg.gradcheck(lambda z: F.cross_entropy(z, targets_ignored, ignore_index=-100), logits)


def test_cross_entropy_ignore_index_positions_count_for_nothing():
    logits = t64(6, 4)
    targets = np.array([1, 3, 0, 3, 2, 0])
    ignored = targets.copy()
    ignored[[1, 3]] = 3
    loss, (grad,) = grads_of(lambda z: F.cross_entropy(z, ignored, ignore_index=3), [logits], 1.0)
    keep = [0, 2, 4, 5]
    ref = F.cross_entropy(tg.Tensor(logits.data[keep]), targets[keep])
    np.testing.assert_allclose(loss, ref.data, rtol=1e-12)
    np.testing.assert_array_equal(grad[[1, 3]], 0)
    ref_loss, (ref_grad,) = grads_of(lambda z: composed_cross_entropy(z, ignored, 3), [logits], 1.0)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-12)


def test_cross_entropy_accepts_int_tensor_targets():
    logits = t64(3, 4)
    targets = np.array([0, 3, 1])
    a = F.cross_entropy(logits, targets).item()
    b = F.cross_entropy(logits, tg.Tensor(targets)).item()
    assert a == b


@pytest.mark.parametrize("bad", [5, 17, -1])
def test_cross_entropy_target_out_of_range_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=rf"cross_entropy.*target {bad}.*5 classes"):
        F.cross_entropy(t64(3, 5), np.array([0, bad, 1]))


def test_cross_entropy_every_target_ignored_is_an_error():
    with pytest.raises(ValueError, match="ignore_index"):
        F.cross_entropy(t64(2, 5), np.array([-1, -1]), ignore_index=-1)


def test_cross_entropy_float_targets_and_wrong_shapes_are_clear_errors():
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(t64(3, 5), np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"\(2,\).*\(3, 5\)"):
        F.cross_entropy(t64(3, 5), np.array([0, 1]))


def test_cross_entropy_matches_torch_with_and_without_ignore_index():
    torch = pytest.importorskip("torch")
    z = rand(4, 3, 7) * 2
    targets = np.array([[0, 6, 2], [3, -100, 1], [6, 6, -100], [0, 0, 0]])
    for ignore in (None, -100):
        tgt = np.where(targets < 0, 5, targets) if ignore is None else targets
        zt = tg.Tensor(z, requires_grad=True)
        loss = F.cross_entropy(zt, tgt, ignore_index=ignore)
        loss.backward()
        zr = torch.tensor(z, requires_grad=True)
        loss_r = torch.nn.functional.cross_entropy(zr.reshape(-1, 7), torch.from_numpy(tgt.reshape(-1)),
                                                   ignore_index=-100 if ignore is None else ignore)
        loss_r.backward()
        np.testing.assert_allclose(loss.item(), loss_r.item(), rtol=1e-12)
        np.testing.assert_allclose(zt.grad, zr.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_cross_entropy_keeps_float32():
    loss = F.cross_entropy(tg.Tensor(rand(3, 4, dtype=np.float32), requires_grad=True), np.array([0, 1, 2]))
    assert loss.dtype == np.float32
    loss.backward()


# ---- positional encodings ----------------------------------------------------------------
@pytest.mark.parametrize("dim", [6, 7])
def test_sinusoidal_positional_encoding_follows_the_formula(dim):
    pe = nn.SinusoidalPositionalEncoding(10, dim)
    assert pe.parameters() == []
    out = pe(np.arange(10)).data
    assert out.shape == (10, dim)
    for p in range(10):
        for i in range(dim):
            angle = p / 10000 ** (2 * (i // 2) / dim)
            want = np.sin(angle) if i % 2 == 0 else np.cos(angle)
            assert out[p, i] == pytest.approx(want, abs=1e-6)
    np.testing.assert_array_equal(pe(np.array([3, 1])).data, out[[3, 1]])


def test_sinusoidal_positional_encoding_position_out_of_range_is_an_error():
    with pytest.raises(IndexError, match="position"):
        nn.SinusoidalPositionalEncoding(4, 6)(np.arange(5))


# ---- FeedForward and TransformerBlock ---------------------------------------------------
def test_feedforward_is_linear_gelu_linear_with_a_four_times_hidden_layer():
    ffn = nn.FeedForward(4)
    assert [(n, p.shape) for n, p in ffn.named_parameters()] == [
        ("fc.weight", (4, 16)), ("fc.bias", (16,)), ("proj.weight", (16, 4)), ("proj.bias", (4,))]
    x = tg.Tensor(rand(2, 3, 4, dtype=np.float32))
    ref = ffn.proj(ffn.fc(x).gelu())
    np.testing.assert_allclose(ffn(x).data, ref.data, rtol=1e-6)
    assert nn.FeedForward(4, hidden=6).fc.weight.shape == (4, 6)


def test_feedforward_gradcheck():
    ffn = nn.FeedForward(3, hidden=5).to(np.float64)
    x = t64(2, 2, 3)
    assert tg.gradcheck(lambda *ps: ffn(x), *ffn.parameters())
    assert tg.gradcheck(lambda x: ffn(x), x)


def test_transformer_block_is_pre_layernorm_with_residuals():
    block = nn.TransformerBlock(8, 2)
    assert [n for n, _ in block.named_children()] == ["ln1", "attn", "ln2", "ffn"]
    x = tg.Tensor(rand(2, 5, 8, dtype=np.float32))
    h = x + block.attn(block.ln1(x))
    ref = h + block.ffn(block.ln2(h))
    np.testing.assert_allclose(block(x).data, ref.data, rtol=1e-5, atol=1e-6)


def test_transformer_block_gradcheck():
    block = nn.TransformerBlock(4, 2).to(np.float64)
    for p in block.parameters():   # move LayerNorm off 1/0 so its weight matters
        p.data[...] += rand(*p.shape, seed=p.size) * 0.1
    x = t64(2, 3, 4)
    assert tg.gradcheck(lambda *ps: block(x), *block.parameters())
    assert tg.gradcheck(lambda x: block(x), x)


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_linear_equals_x_at_w_plus_b_in_value_and_gradient(shape, bias):
    rng = np.random.default_rng(0)
    x = tg.Tensor(rng.standard_normal(shape), requires_grad=True)
    w = tg.Tensor(rng.standard_normal((5, 4)), requires_grad=True)
    b = tg.Tensor(rng.standard_normal(4), requires_grad=True) if bias else None
    g = rng.standard_normal(shape[:-1] + (4,))
    fused = F.linear(x, w, b)
    fused.backward(g)
    fused_grads = [t.grad.copy() for t in (x, w, b) if t is not None]
    for t in (x, w, b):
        if t is not None:
            t.grad = None
    composed = x @ w + b if bias else x @ w
    composed.backward(g)
    np.testing.assert_allclose(fused.data, composed.data, rtol=1e-12)
    for got, expected in zip(fused_grads, [t.grad for t in (x, w, b) if t is not None]):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert tg.gradcheck(lambda *ts: F.linear(*ts), *[t for t in (x, w, b) if t is not None])
