"""bench/torch_gpt.py, the PyTorch peer of the benchmarks, trains what tensorgrad trains:
with nn.GPT's weights copied over it gives the same loss and gradients, and one step of its
AdamW (torch_gpt.adamw: decay on matrices only) after clipping moves every weight as
nn.optim.AdamW after nn.optim.clip_grad_norm does. Without torch these tests skip."""
import sys
from pathlib import Path

import numpy as np
import pytest

import nn

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from torch_gpt import TorchGPT, adamw, copy_weights, other_layout, torch_name  # noqa: E402

CONFIG = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
SETTINGS = dict(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)


def twins():
    nn.manual_seed(0)
    ours = nn.GPT(**CONFIG).to(np.float64)
    theirs = TorchGPT(*(CONFIG[k] for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"))).double()
    copy_weights(ours, theirs)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8))
    return ours, theirs, x, y


def as_ours(name, tensor):
    """A TorchGPT parameter (or its gradient) as an array in nn.GPT's layout."""
    return other_layout(name, tensor.detach().numpy())


def test_the_torch_twin_gives_the_same_loss_and_gradients():
    ours, theirs, x, y = twins()
    _, loss = ours(x, y)
    loss.backward()
    _, torch_loss = theirs(torch.from_numpy(x), torch.from_numpy(y))
    torch_loss.backward()
    assert torch_loss.item() == pytest.approx(loss.item(), rel=1e-12)
    params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(as_ours(name, params[torch_name(name)].grad), p.grad, rtol=1e-9, atol=1e-12)


def test_one_clipped_adamw_step_moves_every_weight_as_nn_optim_does():
    ours, theirs, x, y = twins()
    optimizer, torch_optimizer = nn.optim.AdamW(ours.parameters(), **SETTINGS), adamw(theirs, **SETTINGS)
    for _ in range(3):
        optimizer.zero_grad()
        ours(x, y)[1].backward()
        nn.optim.clip_grad_norm(ours.parameters(), 0.5)
        optimizer.step()
        torch_optimizer.zero_grad()
        theirs(torch.from_numpy(x), torch.from_numpy(y))[1].backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.5)
        torch_optimizer.step()
    params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(as_ours(name, params[torch_name(name)]), p.data, rtol=1e-6, atol=1e-9,
                                   err_msg=name)
