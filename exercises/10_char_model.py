"""Exercise 10: a tiny character model, trained with your own ops.

One transformer block, nanoGPT's shape, built from nothing but your ops of exercises 01,
02, 04, 05, 07, 08 and 09, and one more, the embedding, which you write here:

    ids: (T,) ints, the characters of a text; table: (V, C), one row per character
    embedding:  out = table[ids]                          (T, C): row t is table[ids[t]]
    x      = embedding(tokens, ids) + embedding(positions, 0..T-1)      (T, C)
    x      = x + attention(q, k, v) @ Wo,   q, k, v = layer_norm(x) @ Wq, Wk, Wv
    x      = x + tanh(layer_norm(x) @ W1 + b1) @ W2
    logits = layer_norm(x) @ head                         (T, V): a score for each next character
    loss   = cross_entropy(logits, the next characters)

The embedding picks rows, so its gradient puts each row of g back where it was picked
from; every other row of the table gets 0. A text repeats its characters: when ids holds
the same id twice, that row was used twice, and (exercise 02 again) both uses add up.

Write embedding_vjp: it gets g (T, C), the table and ids, and returns dL/dtable (V, C).
`python exercises/check.py 10` grades it, then trains the model for 150 steps (so the
exercises it uses must pass too); `python exercises/10_char_model.py` trains it for 1000,
printing the loss as it falls, and writes some text in the style it has learnt.

The text is the docstrings of Python's own standard library (what nn.data falls back on
offline): every Python has it, and nothing is downloaded. It is built once (a few seconds)
and kept in tensorgrad's cache folder (nn.data.cache_folder()).

한국어
------
연습 10: 내 연산으로 학습하는 작은 문자 모델.

nanoGPT 모양의 트랜스포머 블록 하나를, 연습 01, 02, 04, 05, 07, 08, 09의 내 연산과 여기서
작성할 연산 하나, 임베딩만으로 만듭니다:

    ids: (T,) 정수, 텍스트의 문자들;  table: (V, C), 문자마다 한 행
    embedding:  out = table[ids]                                    (T, C): t번째 행은 table[ids[t]]
    x      = embedding(tokens, ids) + embedding(positions, 0..T-1)  (T, C)
    x      = x + attention(q, k, v) @ Wo,   q, k, v = layer_norm(x) @ Wq, Wk, Wv
    x      = x + tanh(layer_norm(x) @ W1 + b1) @ W2
    logits = layer_norm(x) @ head                                   (T, V): 다음에 올 문자마다의 점수
    loss   = cross_entropy(logits, 다음 문자들)

임베딩은 행을 골라 오므로, 그 기울기는 g의 각 행을 골라 온 자리로 되돌려 놓습니다. 표의 다른
행은 모두 0을 받습니다. 텍스트에서는 문자가 되풀이됩니다: ids에 같은 id가 두 번 있으면 그 행은
두 번 쓰인 것이고, (다시 연습 02처럼) 두 쓰임의 기울기가 더해집니다.

embedding_vjp를 작성하세요: g (T, C), table, ids를 받아 dL/dtable (V, C)를 돌려줍니다.
`python exercises/check.py 10`이 채점한 다음 모델을 150단계 학습시킵니다(그러니 모델이 쓰는
연습들도 통과해야 합니다). `python exercises/10_char_model.py`는 1000단계 학습시키면서 손실이
떨어지는 것을 출력하고, 배운 문체로 글을 조금 써 냅니다.

텍스트는 파이썬 표준 라이브러리의 docstring입니다(오프라인일 때 nn.data가 쓰는 것과
같습니다): 어느 파이썬에나 있고, 아무것도 내려받지 않습니다. 한 번 만들고(몇 초) tensorgrad의
캐시 폴더(nn.data.cache_folder())에 보관해 둡니다.
"""
import functools
import os
import platform

import numpy as np

import lab
import nn
import tensorgrad as tg
from messages import say   # check.py's words, in English and Korean
from nn.atomic import write_atomically
from nn.data import CharTokenizer, cache_folder, fallback_corpus

add = lab.load(2).add
tanh = lab.load(4).tanh
matmul = lab.load(5).matmul
cross_entropy = lab.load(7).cross_entropy
layer_norm = lab.load(8).layer_norm
attention = lab.load(9).attention

BLOCK, DIM, BATCH = 32, 32, 4   # characters of context, width of the model, sequences a step


def embedding(table, ids):
    """out = table[ids]: table (V, C), ids (T,) ints -> (T, C)."""
    return tg.make_op("embedding", table.data[ids], (table,), vjps=(lambda g: embedding_vjp(g, table.data, ids),))


def embedding_vjp(g, table, ids):
    """g = dL/d(out), (T, C); return dL/dtable, (V, C)."""
    raise NotImplementedError("exercise 10: write embedding_vjp")


def new_parameters(vocab_size, seed=0):
    """The model's weights: random N(0, 0.02) matrices as in GPT-2, LayerNorms at 1 and 0."""
    rng = np.random.default_rng(seed)
    normal = lambda *shape: tg.Tensor(0.02 * rng.standard_normal(shape), dtype=np.float32, requires_grad=True)
    ones = lambda: tg.ones(DIM, requires_grad=True)
    zeros = lambda n: tg.zeros(n, requires_grad=True)
    return {"tokens": normal(vocab_size, DIM), "positions": normal(BLOCK, DIM),
            "ln1_w": ones(), "ln1_b": zeros(DIM), "Wq": normal(DIM, DIM), "Wk": normal(DIM, DIM),
            "Wv": normal(DIM, DIM), "Wo": normal(DIM, DIM),
            "ln2_w": ones(), "ln2_b": zeros(DIM), "W1": normal(DIM, 4 * DIM), "b1": zeros(4 * DIM),
            "W2": normal(4 * DIM, DIM),
            "ln3_w": ones(), "ln3_b": zeros(DIM), "head": normal(DIM, vocab_size)}


def logits_of(p, ids):
    """The model: (T, V) scores for the character after each of ids (T,)."""
    x = add(embedding(p["tokens"], ids), embedding(p["positions"], np.arange(len(ids))))
    h = layer_norm(x, p["ln1_w"], p["ln1_b"])
    x = add(x, matmul(attention(matmul(h, p["Wq"]), matmul(h, p["Wk"]), matmul(h, p["Wv"])), p["Wo"]))
    h = layer_norm(x, p["ln2_w"], p["ln2_b"])
    x = add(x, matmul(tanh(add(matmul(h, p["W1"]), p["b1"])), p["W2"]))
    return matmul(layer_norm(x, p["ln3_w"], p["ln3_b"]), p["head"])


def train(steps, lr=3e-3, seed=0, report_every=None, on_step=None):
    """Train a new model for `steps` steps of BATCH sequences; returns (losses, parameters,
    tokenizer). Each sequence's backward adds into the same .grad (leaves accumulate).
    on_step(step), when given, is called as each step starts."""
    text = corpus()
    tokenizer = CharTokenizer(text)
    data = tokenizer.encode(text)
    parameters = new_parameters(tokenizer.vocab_size, seed)
    optimizer = nn.optim.Adam(parameters.values(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        if on_step:
            on_step(step)
        optimizer.zero_grad()
        total = 0.0
        for start in rng.integers(0, len(data) - BLOCK - 1, BATCH):
            loss = cross_entropy(logits_of(parameters, data[start:start + BLOCK]), data[start + 1:start + BLOCK + 1])
            loss.backward()
            total += loss.item() / BATCH
        optimizer.step()
        losses.append(total)
        if report_every and (step % report_every == 0 or step == steps - 1):
            print(f"step {step}: loss {np.mean(losses[-report_every:]):.3f} (mean of the last {min(step + 1, report_every)})")
    return losses, parameters, tokenizer


@functools.cache
def corpus():
    """The training text, the standard library's docstrings (nn.data.fallback_corpus): read
    from cache_folder() where an earlier run kept it (one file per Python version), else
    built and kept there. Where the folder cannot be written, it is built each time."""
    path = os.path.join(cache_folder(), f"lab-corpus-python{platform.python_version()}.txt")
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        pass
    text = fallback_corpus()
    try:
        write_atomically(path, lambda file: file.write(text.encode("utf-8")))
    except OSError:
        pass
    return text


def generate(parameters, tokenizer, prompt, length, seed=0):
    """`prompt` and `length` characters more, each drawn from the model's softmax."""
    rng = np.random.default_rng(seed)
    ids = list(tokenizer.encode(prompt))
    with tg.no_grad():
        for _ in range(length):
            scores = logits_of(parameters, np.array(ids[-BLOCK:])).data[-1].astype(np.float64)
            p = np.exp(scores - scores.max())
            ids.append(rng.choice(len(p), p=p / p.sum()))
    return tokenizer.decode(ids)


def loss_falls(steps=150):
    """check.py's test of the whole: in `steps` steps the loss falls by 1 at least from its
    first value (about ln V: a model that knows nothing gives each character 1/V)."""
    lab.preparing(say("preparing_text"))   # the text and the model: the time limit counts from step 1
    losses, _, _ = train(steps, on_step=lambda step: lab.tell(say("training_step", step=step + 1, steps=steps)))
    first, last = losses[0], np.mean(losses[-10:])
    assert last < first - 1.0, say("loss_did_not_fall", steps=steps, first=first, last=last)


# V = 7 rows, T = 5 ids, C = 3: no two alike, so g (T, C) returned as it is has the wrong shape
CHECKS = [lab.Case(embedding, table=(7, 3), ids=np.array([1, 3, 1, 0, 1])), loss_falls]


if __name__ == "__main__":
    losses, parameters, tokenizer = train(1000, report_every=100)
    print("--- text from the trained model ---")
    print(generate(parameters, tokenizer, "The ", 300))
