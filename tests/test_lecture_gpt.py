"""The 'Let's build GPT' lecture's final script, ported to tensorgrad by find-and-replace only.

SCRIPT is that program in PyTorch's spelling, written here in the lecture's order (the
hyperparameters, the character data, get_batch, estimate_loss, Head, MultiHeadAttention,
FeedForward, Block, the language model, the training loop, a sample), small enough to train
in seconds. to_tensorgrad() applies EDITS to it and nothing else, and the result must train:
the lecture's PyTorch code is tensorgrad code, give or take these rows. Where torch is
installed, SCRIPT itself runs in torch too, to show it is the same program.

EDITS is also the find-and-replace table of docs/coming-from-pytorch.md: a test keeps the two
the same. The corpus is written under tmp_path: the start of tiny shakespeare where this
machine has it (the team's shared copy), else text every Python has (nn.data.fallback_corpus).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nn

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "coming-from-pytorch.md"
SHAKESPEARE = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
CORPUS_CHARS = 20_000

EDITS = [   # (find, replace), applied in this order
    ("import torch.nn as nn", "import nn"),
    ("from torch.nn import functional as F", "from nn import functional as F"),
    ("import torch", "import tensorgrad as tg"),
    ("torch.nn.", "nn."),
    ("torch.optim.", "nn.optim."),
    ("torch.", "tg."),
    ("transpose(-2,-1)", "swapaxes(-2,-1)"),
]

SCRIPT = '''\
import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters: tiny, so that a test trains it in seconds
batch_size = 4        # sequences per step
block_size = 8        # the longest context the model sees
max_iters = 30
eval_interval = 10
learning_rate = 1e-3
device = 'cuda' if torch.cuda.is_available() else 'cpu'
eval_iters = 2        # batches averaged per loss estimate
n_embd = 16
n_head = 2
n_layer = 2
dropout = 0.2

torch.manual_seed(1337)

with open('input.txt', 'r', encoding='utf-8') as f:
    text = f.read()

# the vocabulary is every character of the text, in sorted order
chars = sorted(set(text))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for i, ch in enumerate(chars)}
encode = lambda s: [stoi[ch] for ch in s]           # text -> list of ids
decode = lambda ids: ''.join(itos[i] for i in ids)  # list of ids -> text

# the first 90% trains, the rest validates
data = torch.tensor(encode(text), dtype=torch.long)
n = int(0.9 * len(data))
train_data = data[:n]
val_data = data[n:]


def get_batch(split):
    # batch_size windows at random places; each target is the next character of its input
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i+block_size] for i in ix])
    y = torch.stack([data[i+1:i+block_size+1] for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y


@torch.no_grad()
def estimate_loss():
    # the mean loss of a few batches per split: one batch alone is too noisy to compare steps
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


class Head(nn.Module):
    """One head of causal self-attention."""

    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        # the lower triangle: position t may look at positions 0..t only. A buffer, not a weight
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)     # (B, T, head_size)
        q = self.query(x)   # (B, T, head_size)
        # affinities, scaled so that softmax starts out soft whatever the head size
        wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5                 # (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))    # no looking ahead
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)   # (B, T, head_size)
        return wei @ v      # (B, T, head_size)


class MultiHeadAttention(nn.Module):
    """Several heads side by side, their outputs joined and projected back."""

    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))


class FeedForward(nn.Module):
    """Per position: widen, a nonlinearity, narrow back."""

    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd),
            nn.ReLU(),
            nn.Linear(4 * n_embd, n_embd),
            nn.Dropout(dropout),
        )

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """Communication (attention), then computation (feed-forward), each on a residual path."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        head_size = n_embd // n_head
        self.sa = MultiHeadAttention(n_head, head_size)
        self.ffwd = FeedForward(n_embd)
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)

    def forward(self, x):
        x = x + self.sa(self.ln1(x))
        x = x + self.ffwd(self.ln2(x))
        return x


class GPTLanguageModel(nn.Module):

    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        # small weights: the first predictions are near uniform, the first loss near ln(vocab_size)
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tok_emb = self.token_embedding_table(idx)                                  # (B, T, C)
        pos_emb = self.position_embedding_table(torch.arange(T, device=device))   # (T, C)
        x = tok_emb + pos_emb   # (B, T, C)
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)   # (B, T, vocab_size)
        if targets is None:
            loss = None
        else:
            B, T, C = logits.shape
            logits = logits.view(B*T, C)
            targets = targets.view(B*T)
            loss = F.cross_entropy(logits, targets)
        return logits, loss

    def generate(self, idx, max_new_tokens):
        # idx (B, T): extend it one sampled token at a time
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -block_size:]   # the position table has block_size rows
            logits, loss = self(idx_cond)
            logits = logits[:, -1, :]         # the last position predicts the next token
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)   # (B, 1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


model = GPTLanguageModel()
m = model.to(device)
print(sum(p.numel() for p in m.parameters())/1e6, 'M parameters')

optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

for iter in range(max_iters):
    if iter % eval_interval == 0 or iter == max_iters - 1:
        losses = estimate_loss()
        print(f"step {iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")

    xb, yb = get_batch('train')
    logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()

context = torch.zeros((1, 1), dtype=torch.long, device=device)
print(decode(m.generate(context, max_new_tokens=50)[0].tolist()))
'''

STEP = re.compile(r"step (\d+): train loss (\d+\.\d{4}), val loss (\d+\.\d{4})\n")
NEW_TOKENS = 50


def to_tensorgrad(script):
    for find, replace in EDITS:
        script = script.replace(find, replace)
    return script


def corpus():
    if SHAKESPEARE.is_file():
        return SHAKESPEARE.read_text(encoding="utf-8")[:CORPUS_CHARS]
    return nn.data.fallback_corpus()[:CORPUS_CHARS]


def run(script, folder):
    """Write the corpus and `script` into `folder` and run it there: (return code, stdout, stderr)."""
    (folder / "input.txt").write_text(corpus(), encoding="utf-8")
    (folder / "gpt.py").write_text(script, encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="utf-8",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "gpt.py"], cwd=folder, capture_output=True, env=env, timeout=300)
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8", "replace")


def check_the_run(status, out, err):
    """What the lecture's script prints: the parameter count, a loss line at every eval that
    falls, then a sample of the corpus's characters. Returns the parameter count line."""
    assert status == 0, err
    count, _, rest = out.partition("\n")
    assert count.endswith(" M parameters"), out
    steps = list(STEP.finditer(rest))
    assert [int(step[1]) for step in steps] == [0, 10, 20, 29], out
    assert float(steps[-1][2]) < float(steps[0][2]), f"the train loss did not fall:\n{out}"
    sample = rest[steps[-1].end():].removesuffix("\n")   # the prompt's one character, then the new ones
    assert len(sample) == 1 + NEW_TOKENS, repr(sample)
    assert set(sample) <= set(corpus()), repr(sample)
    return count


def test_the_edits_are_the_rows_of_the_docs_table():
    """The page's find-and-replace table lists EDITS, row for row."""
    section = PAGE.read_text(encoding="utf-8").split("## The lecture's script")[1].split("\n## ")[0]
    rows = [re.findall(r"`([^`]+)`", line) for line in section.splitlines() if line.startswith("| `")]
    assert [tuple(row) for row in rows] == EDITS


def test_after_the_edits_nothing_of_torch_is_left():
    assert "torch" not in to_tensorgrad(SCRIPT)


@pytest.fixture(scope="module")
def in_tensorgrad(tmp_path_factory):
    """The ported script's run: (return code, stdout, stderr)."""
    return run(to_tensorgrad(SCRIPT), tmp_path_factory.mktemp("tensorgrad"))


def test_the_lecture_script_trains_in_tensorgrad_after_find_and_replace(in_tensorgrad):
    check_the_run(*in_tensorgrad)


def test_the_lecture_script_is_the_same_program_in_torch(in_tensorgrad, tmp_path):
    pytest.importorskip("torch")
    in_torch = check_the_run(*run(SCRIPT, tmp_path))
    assert check_the_run(*in_tensorgrad) == in_torch   # the same model: the same number of parameters
