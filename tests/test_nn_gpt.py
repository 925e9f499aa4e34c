"""nn.GPT: layout and init as GPT-2/nanoGPT, forward (logits, loss), causality, loss at init
near ln(vocab_size), gradcheck of every parameter in float64, weight tying (one table, its
gradient the sum of both uses), building a model to load, positional-encoding options,
token-id checks, generate (shape, prompt, seeds, greedy, top_k, cropping), and a tiny model
overfitting a tiny text."""
import time

import numpy as np
import pytest

import nn
import tensorgrad as tg
from nn import optim


def tiny(seed=0, **overrides):
    config = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
    config.update(overrides)
    nn.manual_seed(seed)
    return nn.GPT(**config)


def tokens(shape, vocab=11, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, shape)


# ---- layout ------------------------------------------------------------------------------
def test_gpt_parameter_names_and_shapes_follow_the_design():
    model = nn.GPT(vocab_size=7, block_size=5, n_layer=1, n_head=2, n_embd=4)
    assert [(n, p.shape) for n, p in model.named_parameters()] == [
        ("tok_emb.weight", (7, 4)),
        ("pos_emb.weight", (5, 4)),
        ("h.0.ln1.weight", (4,)), ("h.0.ln1.bias", (4,)),
        ("h.0.attn.qkv.weight", (4, 12)), ("h.0.attn.qkv.bias", (12,)),
        ("h.0.attn.proj.weight", (4, 4)), ("h.0.attn.proj.bias", (4,)),
        ("h.0.ln2.weight", (4,)), ("h.0.ln2.bias", (4,)),
        ("h.0.ffn.fc.weight", (4, 16)), ("h.0.ffn.fc.bias", (16,)),
        ("h.0.ffn.proj.weight", (16, 4)), ("h.0.ffn.proj.bias", (4,)),
        ("ln_f.weight", (4,)), ("ln_f.bias", (4,)),
        ("head.weight", (4, 7)),
    ]
    assert all(p.dtype == np.float32 for p in model.parameters())


def test_gpt_blocks_are_named_by_index():
    names = [n for n, _ in tiny(n_layer=3).named_parameters()]
    assert [n for n in names if n.endswith("attn.qkv.weight")] == [
        "h.0.attn.qkv.weight", "h.1.attn.qkv.weight", "h.2.attn.qkv.weight"]


# ---- init --------------------------------------------------------------------------------
def test_gpt_init_is_gpt2_normal_002_with_scaled_residual_projections():
    n_layer = 2
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=256, block_size=64, n_layer=n_layer, n_head=4, n_embd=128)
    residual = 0.02 / np.sqrt(2 * n_layer)
    for name, p in model.named_parameters():
        data = p.data.astype(np.float64)
        if name.endswith("bias") and ".ln" not in name and not name.startswith("ln_f"):
            np.testing.assert_array_equal(data, 0, err_msg=name)
        elif ".ln" in name or name.startswith("ln_f"):
            np.testing.assert_array_equal(data, 1 if name.endswith("weight") else 0, err_msg=name)
        elif name.endswith(("attn.proj.weight", "ffn.proj.weight")):
            assert abs(data.mean()) < 0.1 * residual, name
            assert data.std() == pytest.approx(residual, rel=0.1), name
        else:   # tok_emb, pos_emb, qkv, fc, head
            assert abs(data.mean()) < 0.002, name
            assert data.std() == pytest.approx(0.02, rel=0.1), name


def test_manual_seed_makes_init_repeatable():
    a, b, c = tiny(seed=3), tiny(seed=3), tiny(seed=4)
    for (name, pa), (_, pb), (_, pc) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        np.testing.assert_array_equal(pa.data, pb.data, err_msg=name)
    assert not np.array_equal(a.tok_emb.weight.data, c.tok_emb.weight.data)


# ---- forward -----------------------------------------------------------------------------
def test_gpt_forward_returns_logits_and_no_loss_without_targets():
    model = tiny()
    logits, loss = model(tokens((3, 5)))
    assert isinstance(logits, tg.Tensor) and logits.shape == (3, 5, 11)
    assert loss is None


def test_gpt_forward_with_targets_returns_the_mean_cross_entropy():
    model = tiny()
    idx, targets = tokens((3, 5)), tokens((3, 5), seed=1)
    logits, loss = model(idx, targets)
    assert loss.shape == ()
    z = logits.data.astype(np.float64)
    logp = z - z.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    ref = -np.take_along_axis(logp, targets[..., None], -1).mean()
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())


def test_gpt_loss_at_init_is_near_ln_vocab_size():
    vocab = 65
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=vocab, block_size=16, n_layer=2, n_head=2, n_embd=32)
    idx = tokens((4, 16), vocab)
    _, loss = model(idx, tokens((4, 16), vocab, seed=1))
    assert loss.item() == pytest.approx(np.log(vocab), abs=0.05)


def test_gpt_accepts_int_tensors_for_ids_and_targets():
    model = tiny()
    idx, targets = tokens((2, 4)), tokens((2, 4), seed=1)
    a = model(idx, targets)[1].item()
    b = model(tg.Tensor(idx), tg.Tensor(targets))[1].item()
    assert a == b


def test_gpt_is_causal_changing_token_t_never_changes_logits_before_t():
    model = tiny()
    idx = tokens((2, 8))
    base = model(idx)[0].data
    for t in range(8):
        changed = idx.copy()
        changed[:, t] = (changed[:, t] + 1 + t) % 11
        logits = model(changed)[0].data
        np.testing.assert_allclose(logits[:, :t], base[:, :t], rtol=1e-5, atol=1e-6)
        assert not np.allclose(logits[:, t], base[:, t])


def test_gpt_forward_observes_each_blocks_insides_by_name_and_computes_the_same():
    model = tiny().eval()
    idx = tokens((2, 8))
    logits = model(idx)[0].data
    inside = {}
    observed = model(idx, observe=inside)[0].data
    np.testing.assert_array_equal(observed, logits)
    assert list(inside) == ["h.0", "h.1"]
    with tg.no_grad():   # TransformerBlock.forward, step by step, against what was observed
        x = model.tok_emb(idx) + model.pos_emb(np.arange(8))
        for name, block in zip(inside, model.h):
            seen = inside[name]
            assert set(seen) == {"attn", "gelu_input", "out"}
            attended = block.attn(block.ln1(x))
            np.testing.assert_array_equal(seen["attn"].data, attended.data)
            x = x + attended
            hidden = block.ffn.fc(block.ln2(x))
            assert seen["gelu_input"].shape == (2, 8, 64)
            np.testing.assert_array_equal(seen["gelu_input"].data, hidden.data)
            x = x + block.ffn.proj(hidden.gelu())
            np.testing.assert_array_equal(seen["out"].data, x.data)
        np.testing.assert_array_equal(model.head(model.ln_f(x)).data, logits)


def test_observing_leaves_the_loss_and_its_gradients_unchanged():
    idx, targets = tokens((2, 8)), tokens((2, 8), seed=1)
    grads = []
    for observe in (None, {}):
        model = tiny()
        _, loss = model(idx, targets, observe=observe)
        loss.backward()
        grads.append([p.grad for p in model.parameters()])
    for plain, observed in zip(*grads):
        np.testing.assert_array_equal(plain, observed)


def test_a_block_is_causal_by_default_and_with_causal_false_sees_every_position():
    nn.manual_seed(0)
    causal, open_ = nn.TransformerBlock(8, 2), nn.TransformerBlock(8, 2, causal=False)
    assert causal.attn.causal and not open_.attn.causal
    x = np.random.default_rng(0).standard_normal((1, 5, 8)).astype(np.float32)
    later = x.copy()
    later[:, -1] += 1                                  # only the last position changes
    for block, sees_later in ((causal, False), (open_, True)):
        first, changed = block(tg.Tensor(x)).data[:, 0], block(tg.Tensor(later)).data[:, 0]
        assert (not np.array_equal(first, changed)) == sees_later


def test_gpt_input_longer_than_block_size_is_a_clear_error():
    model = tiny(block_size=4)
    model(tokens((1, 4)))
    with pytest.raises(ValueError, match=r"GPT.*5.*block_size 4"):
        model(tokens((1, 5)))


@pytest.mark.parametrize("bad", [-1, 11, 1000])
def test_gpt_token_id_out_of_range_is_an_error_never_a_wrap(bad):
    model = tiny()
    idx = tokens((2, 4))
    idx[1, 2] = bad
    with pytest.raises(IndexError, match=rf"{bad}.*\[0, 11\)"):
        model(idx)
    with pytest.raises(IndexError, match=rf"{bad}"):
        model.generate(idx, 2)


def test_gpt_target_out_of_range_is_a_clear_error():
    model = tiny()
    targets = tokens((2, 4))
    targets[0, 0] = 11
    with pytest.raises(ValueError, match="target 11"):
        model(tokens((2, 4)), targets)


def test_gpt_idx_must_be_two_dimensional_integers():
    model = tiny()
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(np.arange(4))
    with pytest.raises(TypeError, match="integer"):
        model(np.zeros((1, 4)))


def test_gpt_gradcheck_every_parameter_in_float64():
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=4).to(np.float64)
    for p in model.parameters():   # move off the init (zero biases, LayerNorm 1/0, tiny weights)
        p.data[...] += np.random.default_rng(p.size).standard_normal(p.shape) * 0.3
    idx, targets = tokens((2, 4), 5), tokens((2, 4), 5, seed=1)
    assert tg.gradcheck(lambda *ps: model(idx, targets)[1], *model.parameters())


# ---- weight tying ----------------------------------------------------------------------------
def test_a_tied_gpt_has_one_table_for_embedding_and_head():
    untied, tied = tiny(), tiny(tie_weights=True)
    assert [n for n, _ in untied.named_parameters()] == [n for n, _ in tied.named_parameters()] + ["head.weight"]
    assert tied.head is None and list(tied.state_dict()) == [n for n, _ in tied.named_parameters()]
    assert tied.num_parameters() == untied.num_parameters() - 16 * 11
    assert tied.config["tie_weights"] is True and untied.config["tie_weights"] is False
    assert "head: tok_emb.weight transposed (tie_weights=True)" in repr(tied)
    idx = tokens((2, 5))   # logits = ln_f(x) @ W_embᵀ: each token's score is the dot with its row
    with tg.no_grad():
        x = tied.tok_emb(idx) + tied.pos_emb(np.arange(5))
        for block in tied.h:
            x = block(x)
        expected = tied.ln_f(x).data @ tied.tok_emb.weight.data.T
    np.testing.assert_allclose(tied(idx)[0].data, expected, rtol=1e-5, atol=1e-6)


def test_a_tied_tables_gradient_is_the_sum_of_its_two_uses():
    """The tied model's gradient equals, in an untied twin whose head holds the same table
    transposed, the embedding's gradient plus the head's (transposed back)."""
    tied = tiny(tie_weights=True)
    twin = tiny()
    twin.load_state_dict({**tied.state_dict(), "head.weight": tied.tok_emb.weight.data.T})
    idx, targets = tokens((3, 8)), tokens((3, 8), seed=1)
    for model in (tied, twin):
        model(idx, targets)[1].backward()
    np.testing.assert_allclose(tied.tok_emb.weight.grad, twin.tok_emb.weight.grad + twin.head.weight.grad.T,
                               rtol=1e-5, atol=1e-7)
    assert np.abs(twin.head.weight.grad).max() > 0.01 and np.abs(twin.tok_emb.weight.grad).max() > 0.01   # both count


def test_a_tied_gpt_gradchecks_in_float64():
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=4, tie_weights=True).to(np.float64)
    for p in model.parameters():
        p.data[...] += np.random.default_rng(p.size).standard_normal(p.shape) * 0.3
    idx, targets = tokens((2, 4), 5), tokens((2, 4), 5, seed=1)
    assert tg.gradcheck(lambda *ps: model(idx, targets)[1], *model.parameters())


def test_a_tied_table_is_drawn_once():
    model = tiny(tie_weights=True)
    _, loss = model(tokens((1, 4)), tokens((1, 4), seed=1))
    source = tg.draw_graph(loss, show_data=False, show_grad=False).source
    assert source.count("tok_emb.weight") == 1


def test_tie_weights_must_be_a_bool():
    with pytest.raises(TypeError, match="tie_weights must be true or false, got 'yes'"):
        tiny(tie_weights="yes")


SIZES = dict(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=4)


@pytest.mark.parametrize("change, error, message", [
    (dict(n_layer=0), ValueError, "GPTConfig: n_layer must be a whole number >= 1, got 0"),
    (dict(n_embd=4.0), TypeError, "GPTConfig: n_embd must be a whole number >= 1, got 4.0"),
    (dict(vocab_size=True), TypeError, "GPTConfig: vocab_size must be a whole number >= 1, got True"),
    (dict(dropout=1.0), ValueError, "GPTConfig: dropout must be a number in [0, 1), got 1.0"),
    (dict(dropout="0.1"), TypeError, "GPTConfig: dropout must be a number in [0, 1), got '0.1'"),
    (dict(pos="rotary"), ValueError, "GPTConfig: pos must be one of learned, sinusoidal, none, got 'rotary'"),
    (dict(pos=None), TypeError, "GPTConfig: pos must be one of learned, sinusoidal, none, got None"),
    (dict(tie_weights=1), TypeError, "GPTConfig: tie_weights must be true or false, got 1"),
    (dict(n_head=3), ValueError, "GPTConfig: n_embd 4 must be divisible by n_head 3"),
])
def test_gpt_checks_its_settings_as_gptconfig_does(change, error, message):
    """nn.GPT's settings are nn.GPTConfig's: the same refusal, a TypeError for a value of the
    wrong type and a ValueError for one out of range, as PyTorch's modules raise them."""
    for build in (nn.GPT, nn.GPTConfig):
        with pytest.raises(error) as raised:
            build(**{**SIZES, **change})
        assert str(raised.value) == message


def test_model_config_is_the_settings_as_a_dict():
    model = nn.GPT(**SIZES, dropout=0.1, pos="sinusoidal")
    assert model.config == {**SIZES, "dropout": 0.1, "pos": "sinusoidal", "tie_weights": False}
    assert nn.GPTConfig(**model.config) == nn.GPTConfig(**SIZES, dropout=0.1, pos="sinusoidal")


# ---- building a model to load -----------------------------------------------------------------
def test_skipping_init_draws_nothing_and_leaves_placeholders_that_take_no_memory():
    nn.manual_seed(3)
    state = nn.rng.get_state()
    with nn.rng.skipping_init():
        model = nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
    assert nn.rng.get_state() == state   # nn's stream did not move
    weight = model.h[0].attn.qkv.weight.data
    assert weight.shape == (16, 48) and weight.strides == (0, 0) and not weight.flags.writeable
    assert (model.ln_f.weight.data == 1).all()   # LayerNorm's deterministic 1 and 0 stay
    drawn = tiny(seed=3)   # outside the block, init is as ever
    assert np.abs(drawn.h[0].attn.qkv.weight.data).max() > 0


def test_load_state_dict_assign_makes_the_arrays_the_parameters():
    source = tiny(seed=1)
    state = source.state_dict()
    with nn.rng.skipping_init():
        model = tiny()
    model.load_state_dict(state, assign=True)
    assert all(p.data is state[n] for n, p in model.named_parameters())   # no copy
    idx = tokens((2, 5))
    np.testing.assert_array_equal(model(idx)[0].data, source(idx)[0].data)
    halves = {name: array.astype(np.float16) for name, array in state.items()}
    model.load_state_dict(halves, assign=True)   # cast where the dtype differs
    assert all(p.dtype == np.float32 and p.data.flags.writeable for p in model.parameters())


@pytest.mark.parametrize("pos", ["sinusoidal", "none"])
def test_gpt_without_learned_positions_has_no_position_parameters_and_trains(pos):
    model = tiny(pos=pos)
    assert not any(n.startswith("pos_emb") for n, _ in model.named_parameters())
    idx, targets = tokens((2, 8)), tokens((2, 8), seed=1)
    _, loss = model(idx, targets)
    assert np.isfinite(loss.item())
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_gpt_with_no_positions_cannot_tell_the_order_of_earlier_tokens_but_sinusoidal_can():
    # one block: the output at position t sees the set of tokens 0..t (attention is a weighted
    # sum over them), so without positions the order of the earlier tokens cannot matter
    idx = np.array([[1, 2, 3, 4]])
    swapped = np.array([[2, 1, 3, 4]])   # the same set of tokens before position 2
    for pos, order_blind in (("none", True), ("sinusoidal", False), ("learned", False)):
        model = tiny(pos=pos, n_layer=1)
        a, b = model(idx)[0].data[0, 2:], model(swapped)[0].data[0, 2:]
        assert np.allclose(a, b, rtol=1e-5, atol=1e-6) == order_blind, pos


def test_gpt_unknown_pos_is_an_error():
    with pytest.raises(ValueError, match="pos"):
        tiny(pos="rotary")


def test_gpt_dropout_is_seeded_in_training_and_off_in_eval():
    model = tiny(dropout=0.2)
    idx = tokens((2, 6))
    nn.manual_seed(5)
    a = model(idx)[0].data
    b = model(idx)[0].data
    nn.manual_seed(5)
    c = model(idx)[0].data
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    model.eval()
    np.testing.assert_array_equal(model(idx)[0].data, model(idx)[0].data)


# ---- generate ----------------------------------------------------------------------------
def test_generate_returns_an_int_array_with_the_prompt_included():
    model = tiny()
    prompt = tokens((3, 4))
    out = model.generate(prompt, 5, seed=0)
    assert isinstance(out, np.ndarray) and out.dtype.kind == "i"
    assert out.shape == (3, 9)
    np.testing.assert_array_equal(out[:, :4], prompt)
    assert out.min() >= 0 and out.max() < 11


def test_generate_accepts_an_int_tensor_prompt_and_zero_new_tokens():
    model = tiny()
    prompt = tokens((1, 3))
    np.testing.assert_array_equal(model.generate(tg.Tensor(prompt), 0), prompt)
    assert model.generate(tg.Tensor(prompt), 2, seed=1).shape == (1, 5)


def test_generate_with_the_same_seed_gives_the_same_tokens():
    model = tiny()
    prompt = tokens((2, 2))
    a = model.generate(prompt, 20, seed=7)
    b = model.generate(prompt, 20, seed=7)
    c = model.generate(prompt, 20, seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_generate_top_k_1_equals_temperature_0_greedy():
    model = tiny()
    prompt = tokens((2, 3))
    greedy = model.generate(prompt, 10, temperature=0)
    np.testing.assert_array_equal(model.generate(prompt, 10, top_k=1, seed=0), greedy)
    np.testing.assert_array_equal(model.generate(prompt, 10, top_k=1, seed=1, temperature=2.0), greedy)
    # greedy really is the argmax of the model's next-token logits, step by step
    idx = prompt
    for _ in range(10):
        nxt = model(idx[:, -8:])[0].data[:, -1].argmax(-1)
        idx = np.concatenate([idx, nxt[:, None]], axis=1)
    np.testing.assert_array_equal(greedy, idx)


def test_generate_with_top_k_only_samples_among_the_k_most_likely():
    model = tiny()
    prompt = tokens((4, 2))
    out = model.generate(prompt, 6, top_k=3, temperature=5.0, seed=0)
    for step in range(2, 8):
        logits = model(out[:, :step])[0].data[:, -1]
        top3 = np.argsort(logits, axis=-1)[:, -3:]
        assert all(out[b, step] in top3[b] for b in range(4))


def test_generate_crops_the_context_to_the_last_block_size_tokens():
    model = tiny(block_size=4)
    prompt = tokens((2, 7))   # longer than block_size: allowed in generate
    out = model.generate(prompt, 5, temperature=0)
    assert out.shape == (2, 12)
    np.testing.assert_array_equal(out[:, :7], prompt)
    for step in range(7, 12):
        expected = model(out[:, step - 4:step])[0].data[:, -1].argmax(-1)
        np.testing.assert_array_equal(out[:, step], expected)


def test_generate_restores_training_mode_and_builds_no_graph():
    model = tiny(dropout=0.1)
    model.train()
    model.generate(tokens((1, 2)), 3, seed=0)
    assert model.training and model.drop.training
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    model.generate(tokens((1, 2)), 3, seed=0)
    assert not model.training


def test_generate_negative_temperature_is_an_error():
    with pytest.raises(ValueError, match="temperature"):
        tiny().generate(tokens((1, 2)), 3, temperature=-1.0)


# ---- learning ----------------------------------------------------------------------------
def test_a_tiny_gpt_overfits_a_tiny_text_to_near_zero_loss():
    text = "to be, or not to be, that is the question."
    chars = sorted(set(text))
    data = np.array([chars.index(c) for c in text])
    x, y = data[None, :-1], data[None, 1:]
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=len(chars), block_size=len(text) - 1, n_layer=1, n_head=2, n_embd=32)
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    start = time.perf_counter()
    first = None
    for _ in range(300):
        _, loss = model(x, y)
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first == pytest.approx(np.log(len(chars)), abs=0.1)
    assert loss.item() < 0.05
    sample = model.generate(data[None, :1], len(text) - 1, temperature=0)[0]
    assert "".join(chars[i] for i in sample) == text
    assert time.perf_counter() - start < 15
