"""nn as a PyTorch user spells it: buffers (register_buffer) in state_dict and load_state_dict
but not in parameters(), Module.apply's order, nn.init's in-place fills, zero_grad(set_to_none=)
on modules and optimizers, Module.to with a device or a dtype, and nn.functional's dim=.

Where torch is installed, the module tree's orders (state_dict keys, apply) are compared with
the same tree built in torch; those tests skip cleanly without it."""
import sys

import numpy as np
import pytest

import nn
import tensorgrad as tg
from nn import functional as F


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def causal_mask(n):
    return tg.Tensor(np.tril(np.ones((n, n), np.float32)))


class Masked(nn.Module):
    """A layer with a parameter, a persistent buffer and a non-persistent one, and no
    super().__init__(): buffers must not need it."""

    def __init__(self, n=3):
        self.proj = nn.Linear(n, n)
        self.register_buffer("tril", causal_mask(n))
        self.register_buffer("positions", tg.Tensor(np.arange(n)), persistent=False)

    def forward(self, x):
        return self.proj(x) @ self.tril   # feature j: the sum of features j.. (a buffer in use)


class Stack(nn.Module):
    def __init__(self):
        self.scale = nn.Parameter(np.ones(3, np.float32))
        self.register_buffer("step", tg.Tensor(np.zeros((), np.int64)))
        self.blocks = nn.ModuleList([Masked(), Masked()])
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x * self.scale)
        return self.head(x)


STACK_STATE = ["scale", "step",   # a module's own, then each child's in turn (PyTorch's order)
               "blocks.0.tril", "blocks.0.proj.weight", "blocks.0.proj.bias",
               "blocks.1.tril", "blocks.1.proj.weight", "blocks.1.proj.bias",
               "head.weight", "head.bias"]


# ---- buffers -----------------------------------------------------------------------------
def test_a_buffer_is_an_attribute_listed_by_named_buffers_but_not_a_parameter():
    model = Stack()
    assert [name for name, _ in model.named_buffers()] == [
        "step", "blocks.0.tril", "blocks.0.positions", "blocks.1.tril", "blocks.1.positions"]
    assert model.buffers()[1] is model.blocks[0].tril
    assert not any(b is p for b in model.buffers() for p in model.parameters())
    assert "tril" not in " ".join(name for name, _ in model.named_parameters())
    assert model.num_parameters() == 3 + 2 * (9 + 3) + 3 * 2 + 2
    out = model(tg.Tensor(rand(2, 3)))   # the buffer is used as an attribute
    assert out.shape == (2, 2)


def test_state_dict_holds_each_modules_parameters_and_persistent_buffers_then_its_childrens():
    state = Stack().state_dict()
    assert list(state) == STACK_STATE   # non-persistent "positions" left out
    np.testing.assert_array_equal(state["blocks.1.tril"], np.tril(np.ones((3, 3))))


def test_load_state_dict_restores_buffers_too():
    source, target = Stack(), Stack()
    source.blocks[1].tril.data[...] = 7
    source.step.data[...] = 12
    target.load_state_dict(source.state_dict())
    for (name, mine), (_, theirs) in zip(target.named_buffers(), source.named_buffers()):
        np.testing.assert_array_equal(mine.data, theirs.data, err_msg=name)
    for mine, theirs in zip(target.parameters(), source.parameters()):
        np.testing.assert_array_equal(mine.data, theirs.data)


def test_load_state_dict_without_a_buffer_names_it_and_loads_nothing():
    model = Stack()
    before = model.state_dict()
    state = {name: array + 1 for name, array in before.items() if name != "blocks.0.tril"}
    with pytest.raises(KeyError, match=r"missing \['blocks.0.tril'\]"):
        model.load_state_dict(state)
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(array, before[name], err_msg=name)


def test_a_buffer_of_the_wrong_shape_is_refused_by_name():
    state = Stack().state_dict()
    state["blocks.1.tril"] = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"'blocks.1.tril' has shape \(4, 4\)"):
        Stack().load_state_dict(state)


def test_a_buffer_set_to_none_is_no_buffer_and_can_be_set_again():
    layer = Masked()
    layer.register_buffer("cache", None)
    assert [name for name, _ in layer.named_buffers()] == ["tril", "positions"]
    layer.cache = tg.Tensor(np.zeros(2, np.float32))   # assigned later, as a kv cache would be
    assert [name for name, _ in layer.named_buffers()] == ["tril", "positions", "cache"]
    assert list(layer.state_dict()) == ["tril", "cache", "proj.weight", "proj.bias"]


@pytest.mark.parametrize("name, value, error, words", [
    ("mask", np.ones(3), TypeError, "must be a Tensor"),
    ("mask", nn.Parameter(np.ones(3, np.float32)), TypeError, "not a Parameter"),
    ("a.b", tg.Tensor(np.ones(3)), KeyError, "without dots"),
    ("proj", tg.Tensor(np.ones(3)), KeyError, "already has an attribute 'proj'"),
    ("forward", tg.Tensor(np.ones(3)), KeyError, "already has an attribute 'forward'"),
])
def test_register_buffer_refuses_what_is_not_a_buffer_naming_it(name, value, error, words):
    with pytest.raises(error, match=f"Masked.register_buffer: .*{words}"):
        Masked().register_buffer(name, value)


def test_buffers_travel_through_a_checkpoint(tmp_path):
    source, target = Stack(), Stack()
    source.blocks[0].tril.data[...] = 3
    nn.save(tmp_path / "model.safetensors", source)
    state, _ = nn.load(tmp_path / "model.safetensors")
    assert list(state) == STACK_STATE
    target.load_state_dict(state)
    np.testing.assert_array_equal(target.blocks[0].tril.data, np.full((3, 3), 3))


def test_a_gpt_has_no_buffers_so_its_checkpoints_keep_their_names():
    model = nn.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    assert model.buffers() == []
    assert list(model.state_dict()) == [name for name, _ in model.named_parameters()]


def test_state_dict_order_is_torchs():
    torch = pytest.importorskip("torch")

    class TorchMasked(torch.nn.Module):
        def __init__(self, n=3):
            super().__init__()
            self.proj = torch.nn.Linear(n, n)
            self.register_buffer("tril", torch.tril(torch.ones(n, n)))
            self.register_buffer("positions", torch.arange(n), persistent=False)

    class TorchStack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("step", torch.zeros((), dtype=torch.long))
            self.blocks = torch.nn.ModuleList([TorchMasked(), TorchMasked()])
            self.head = torch.nn.Linear(3, 2)

    reference = TorchStack()
    assert list(reference.state_dict()) == STACK_STATE
    assert [name for name, _ in reference.named_buffers()] == [name for name, _ in Stack().named_buffers()]


# ---- apply -------------------------------------------------------------------------------
def visit_order(model):
    seen = []
    assert model.apply(lambda module: seen.append(type(module).__name__)) is model
    return seen


APPLY_ORDER = ["Linear", "Masked", "Linear", "Masked", "ModuleList", "Linear", "Stack"]


def test_apply_visits_children_before_their_parent_and_returns_the_module():
    assert visit_order(Stack()) == APPLY_ORDER


def test_apply_order_is_torchs():
    torch = pytest.importorskip("torch")
    tree = torch.nn.Sequential(torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(3, 3)),
                                                     torch.nn.Linear(3, 3)]), torch.nn.Linear(3, 2))
    ours = nn.Sequential(nn.ModuleList([nn.Sequential(nn.Linear(3, 3)), nn.Linear(3, 3)]), nn.Linear(3, 2))
    assert visit_order(ours) == visit_order(tree)


def test_apply_with_nn_init_gives_a_model_its_own_initialisation():
    def init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).apply(init_weights)
    weights = np.concatenate([model[0].weight.data.ravel(), model[2].weight.data.ravel()])
    assert abs(weights.std() - 0.02) < 0.001 and abs(weights.mean()) < 0.001
    assert not model[0].bias.data.any() and not model[2].bias.data.any()


# ---- nn.init -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_fills_in_place_with_the_asked_mean_and_std(dtype):
    tensor = nn.Parameter(np.zeros((200, 100), dtype))
    array = tensor.data
    assert nn.init.normal_(tensor, mean=1.5, std=0.02) is tensor
    assert tensor.data is array and tensor.dtype == dtype and tensor.shape == (200, 100)
    assert abs(array.mean() - 1.5) < 0.001 and abs(array.std() - 0.02) < 0.001


def test_uniform_fills_in_place_within_its_range():
    tensor = tg.Tensor(np.zeros(20_000, np.float32))
    array = tensor.data
    assert nn.init.uniform_(tensor, a=-2.0, b=3.0) is tensor and tensor.data is array
    assert array.min() >= -2 and array.max() < 3 and abs(array.mean() - 0.5) < 0.05
    nn.init.uniform_(tensor)   # PyTorch's default range, [0, 1)
    assert array.min() >= 0 and array.max() < 1


@pytest.mark.parametrize("fill, value", [
    (nn.init.zeros_, 0), (nn.init.ones_, 1), (lambda t: nn.init.constant_(t, -0.25), -0.25)])
def test_constant_fills_keep_the_array_and_its_dtype(fill, value):
    tensor = nn.Parameter(rand(3, 4, dtype=np.float64))
    array = tensor.data
    assert fill(tensor) is tensor
    assert tensor.data is array and tensor.dtype == np.float64
    np.testing.assert_array_equal(array, np.full((3, 4), value))


def test_init_builds_no_graph_and_leaves_the_gradient_alone():
    weight = nn.Parameter(rand(4, 4))
    weight.grad = np.ones((4, 4), np.float32)
    nn.init.normal_(weight)
    assert weight.op is None and weight.requires_grad
    np.testing.assert_array_equal(weight.grad, np.ones((4, 4)))


def test_a_seed_makes_init_repeatable():
    draws = []
    for _ in range(2):
        nn.manual_seed(1337)
        draws.append(nn.init.normal_(tg.Tensor(np.zeros(5, np.float32))).data)
    np.testing.assert_array_equal(*draws)


@pytest.mark.parametrize("call, error, words", [
    (lambda: nn.init.normal_(np.zeros(3)), TypeError, "normal_: expected a Tensor"),
    (lambda: nn.init.normal_(tg.Tensor(np.zeros(3, np.int64))), TypeError, "normal_: expected a float tensor"),
    (lambda: nn.init.normal_(tg.Tensor(np.zeros(3)), std=-1.0), ValueError, "normal_: std must be >= 0"),
    (lambda: nn.init.uniform_(tg.Tensor(np.zeros(3)), a=1.0, b=0.0), ValueError, "uniform_: expected a <= b"),
])
def test_init_refuses_what_it_cannot_fill_naming_the_function(call, error, words):
    with pytest.raises(error, match=words):
        call()


# ---- zero_grad ---------------------------------------------------------------------------
def with_gradients():
    """A model whose parameters all hold a gradient but the second Linear's bias, unused."""
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    (model[0](tg.Tensor(rand(5, 3))).relu() @ model[2].weight).sum().backward()
    assert model[2].bias.grad is None
    return model


def forget(model, set_to_none, by):
    """zero_grad called on the model itself, or on an optimizer over its parameters."""
    target = model if by == "module" else nn.optim.AdamW(model.parameters())
    if set_to_none is None:
        target.zero_grad()
    else:
        target.zero_grad(set_to_none=set_to_none)


@pytest.mark.parametrize("by", ["module", "optimizer"])
@pytest.mark.parametrize("set_to_none", [None, True])
def test_zero_grad_sets_gradients_to_none_by_default(by, set_to_none):
    model = with_gradients()
    forget(model, set_to_none, by)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("by", ["module", "optimizer"])
def test_zero_grad_without_set_to_none_zeros_the_arrays_in_place(by):
    model = with_gradients()
    arrays = [p.grad for p in model.parameters()]
    forget(model, False, by)
    for p, array in zip(model.parameters(), arrays):
        if array is None:
            assert p.grad is None   # nothing to zero: it stays None
        else:
            assert p.grad is array and not array.any()


def test_a_backward_after_zeroing_in_place_gives_the_fresh_gradient():
    model = with_gradients()
    fresh = [None if p.grad is None else p.grad.copy() for p in model.parameters()]
    model.zero_grad(set_to_none=False)
    (model[0](tg.Tensor(rand(5, 3))).relu() @ model[2].weight).sum().backward()
    for p, expected in zip(model.parameters(), fresh):
        np.testing.assert_array_equal(p.grad, expected)


# ---- to ----------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [lambda m: m.to("cpu"), lambda m: m.to(device="cpu")])
def test_to_cpu_returns_the_module_and_moves_nothing(call):
    model = Stack()
    arrays = [t.data for t in model.parameters() + model.buffers()]
    assert call(model) is model
    assert all(t.data is array for t, array in zip(model.parameters() + model.buffers(), arrays))


@pytest.mark.parametrize("call", [lambda m: m.to(np.float64), lambda m: m.to(dtype=np.float64),
                                  lambda m: m.to("cpu", np.float64), lambda m: m.to(tg.float64)])
def test_to_a_dtype_casts_parameters_and_float_buffers_in_place(call):
    model = Stack()
    tensors = model.parameters() + model.buffers()
    assert call(model) is model
    assert model.parameters() + model.buffers() == tensors   # the same tensors, cast
    assert all(p.dtype == np.float64 for p in model.parameters())
    assert model.blocks[0].tril.dtype == np.float64
    assert model.step.dtype == np.int64 and model.blocks[0].positions.dtype.kind == "i"   # ints keep theirs
    assert model(tg.Tensor(rand(2, 3, dtype=np.float64))).dtype == np.float64


def test_to_an_integer_dtype_is_refused():
    with pytest.raises(TypeError, match="Stack.to: only float dtypes"):
        Stack().to(np.int64)


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_to_cuda_without_cupy_says_how_to_install_it(device, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` fails, as without CuPy
    with pytest.raises(RuntimeError, match='needs CuPy.*pip install "tensorgrad\\[cuda\\]"'):
        Stack().to(device)
    assert tg.cuda.is_available() is False


def test_to_a_device_tensorgrad_has_not_is_refused_by_name():
    with pytest.raises(ValueError, match="Stack.to: device must be 'cpu' or 'cuda'.*'mps'"):
        Stack().to("mps")


# ---- nn.functional -----------------------------------------------------------------------
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("dim", [-1, 0])
def test_functional_takes_dim_as_pytorch_spells_it(fn, dim):
    x = tg.Tensor(rand(3, 5))
    np.testing.assert_array_equal(fn(x, dim=dim).data, fn(x, axis=dim).data)
    np.testing.assert_array_equal(fn(x, dim=dim).data, fn(x, dim).data)
    with pytest.raises(TypeError, match="both dim= and axis="):
        fn(x, dim=dim, axis=dim)


def test_one_hot_is_in_functional():
    out = F.one_hot(tg.tensor([2, 0, 3]), 4)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out.data, np.eye(4, dtype=np.int64)[[2, 0, 3]])
