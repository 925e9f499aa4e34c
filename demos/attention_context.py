"""Claim 9: a word's meaning comes from its neighbours, and attention is how it gets them.

The article opens with "나는 배를 탔다" (I took a boat) and "나는 배가 아프다" (my belly
hurts): the same word '배', a boat or a belly, told apart only by the words around it.
English has the same: "river bank" and "bank account". An embedding table cannot tell
them apart (it has one row per token, the same row in every sentence); attention can,
since each position's output is a weighted average of what its neighbours offer.

We generate a small corpus (sentences from templates with '배' as a boat and as a belly,
"bank" as a river's and as money's; the four test sentences left out; each particle, 를
and 가, as common in both senses, so it is the rest of the sentence that tells), and train
a small bidirectional encoder (one transformer block, attention not causal, no positional
encoding) for one job: name the word's sense, from the block's output at the word. Then,
for the word in each test sentence: its embedding (identical in both sentences of a pair:
one row of the table, and without positions nothing else is added), the attention output
at the word, the weights it put on each neighbour, and the sense the model reads; next to
the same model untrained. Tokens are Hangul syllables and English words.

    python demos/attention_context.py [--out DIR] [--quick]
"""
import itertools
import re
import time

import numpy as np
from threadpoolctl import threadpool_limits

import nn
import tensorgrad as tg
from nn import functional as F

from _common import SLIDE, finish, parse_args, pyplot, save_figure, table, write_report
from attention_order import Encoder

NAME = "attention_context"
TOKEN = re.compile(r"[가-힣]|[a-z]+")   # one token per Hangul syllable, one per English word
# (sentence A, sentence B, the word, its sense in A, its sense in B)
PAIRS = [("나는 배를 탔다", "나는 배가 아프다", "배", "boat", "belly"),
         ("river bank", "bank account", "bank", "river", "money")]
SENSES = ["boat", "belly", "river", "money"]


# ---- the corpus -------------------------------------------------------------------------------
def templates():
    """[(template, {slot: words}, the sense of 배 or bank in it)]. Each {slot} is filled with
    every combination of its words."""
    who = dict(who=["나는", "우리는", "그는", "동생은", "친구는", "아이는"])
    boat = dict(what=["큰", "작은", "흰"])
    sea = ["바다", "섬", "항구"]
    return [
        ("{who} 배를 탔다", who, "boat"),                                 # boat, with 를
        ("{who} 배를 타고 {sea}에 갔다", dict(who, sea=sea), "boat"),
        ("{who} 배를 저었다", who, "boat"),
        ("{what} 배가 {where} 떠 있다", dict(boat, where=["바다 위에", "항구에"]), "boat"),   # boat, with 가
        ("{what} 배가 {sea}로 떠났다", dict(boat, sea=sea), "boat"),
        ("{what} 배가 {event}", dict(boat, event=["항구에 들어왔다", "바다에 가라앉았다", "섬에 닿았다"]), "boat"),
        ("{who} 배가 아프다", who, "belly"),                              # belly, with 가
        ("{who} 배가 아파서 병원에 갔다", who, "belly"),
        ("{who} 배가 {state}", dict(who, state=["고프다", "부르다", "고파서 밥을 먹었다"]), "belly"),
        ("{who} 배를 {touch}", dict(who, touch=["잡고 웃었다", "만졌다", "문질렀다", "감싸 쥐었다"]), "belly"),
        ("{who} walked along the river bank", dict(who=["we", "they", "she"]), "river"),   # bank, a river's edge
        ("the river bank was {state}", dict(state=["muddy", "green", "steep", "wet"]), "river"),
        ("{who} fished from the river bank", dict(who=["we", "they", "he"]), "river"),
        ("grass grew on the river bank", {}, "river"),
        ("{who} opened a bank account", dict(who=["i", "she", "he"]), "money"),   # bank, money's place
        ("the bank account was {state}", dict(state=["empty", "full", "closed", "new"]), "money"),
        ("{who} put money in the bank", dict(who=["i", "she", "he"]), "money"),
        ("{who} took a loan from the bank", dict(who=["i", "she", "he"]), "money"),
    ]


def corpus():
    """[(sentence, the sense of 배 or bank in it)]: every filling of every template, without
    the test sentences (PAIRS)."""
    held_out = {sentence for pair in PAIRS for sentence in pair[:2]}
    sentences = [(template.format(**dict(zip(slots, words))), sense) for template, slots, sense in templates()
                 for words in itertools.product(*slots.values())]
    return [(sentence, sense) for sentence, sense in sentences if sentence not in held_out]


def tokens(sentence):
    return TOKEN.findall(sentence)


def encode(sentence, vocab):
    """(token ids (T,), the position of 배 or bank)."""
    words = tokens(sentence)
    return np.array([vocab[w] for w in words]), next(i for i, w in enumerate(words) if w in ("배", "bank"))


# ---- the model ------------------------------------------------------------------------------
class SenseReader(nn.Module):
    """A bidirectional encoder (attention not causal, no positions) and a head that reads,
    from the encoder's output at one position, which of SENSES the word there has."""

    def __init__(self, vocab_size, dim, n_heads, n_layer):
        self.encoder = Encoder(vocab_size, dim, n_heads, n_layer, pos="none", max_len=1, causal=False)
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, len(SENSES))

    def forward(self, ids, at):
        h = self.ln_f(self.encoder(ids))                          # (B, T, C)
        return self.head(h[np.arange(len(at)), at])               # (B, senses): the output at each word


def train(model, examples, steps, batch_size, rng, lr=3e-3):
    """AdamW on the cross-entropy of the sense, batches of sentences of one length (no padding
    needed). examples: [(ids (T,), the word's position, sense id)]. Returns the mean loss of
    the last 50 steps."""
    by_length = {}
    for example in examples:
        by_length.setdefault(len(example[0]), []).append(example)
    lengths = sorted(by_length)
    share = np.array([len(by_length[n]) for n in lengths], float) / len(examples)
    optimizer = nn.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    recent = []
    for step in range(steps):
        optimizer.lr = nn.optim.cosine_lr(step, lr, lr / 10, max(1, steps // 20), steps)
        group = by_length[lengths[rng.choice(len(lengths), p=share)]]
        ids, at, sense = zip(*(group[i] for i in rng.integers(0, len(group), batch_size)))
        loss = F.cross_entropy(model(np.stack(ids), np.array(at)), np.array(sense))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recent = (recent + [loss.item()])[-50:]
    return float(np.mean(recent))


def look(model, ids, at):
    """For the word at position `at` of one sentence (ids (T,)): its embedding (C,), the
    attention output there (C,), the weights it put on each token, head by head (heads, T),
    and the model's probability of each sense."""
    encoder = model.encoder
    with tg.no_grad():
        x = encoder.tok_emb(ids[None])                          # (1, T, C)
        block = encoder.blocks[0]
        attended = block.attn(block.ln1(x))                     # the attention sub-layer, before the residual
        weights = block.attn.last_weights[0, :, at]             # (heads, T)
        senses = model(ids[None], np.array([at])).softmax(axis=-1)
    return x.data[0, at], attended.data[0, at], weights, senses.data[0]


def measure(model, vocab):
    """For each test sentence (PAIRS, in order A, B of each pair): what look() sees."""
    results = []
    for a, b, word, sense_a, sense_b in PAIRS:
        for sentence, sense, other in ((a, sense_a, sense_b), (b, sense_b, sense_a)):
            ids, at = encode(sentence, vocab)
            embedding, output, weights, p = look(model, ids, at)
            results.append(dict(sentence=sentence, words=tokens(sentence), word=word, sense=sense, other=other,
                                embedding=embedding, output=output, weights=weights,
                                p=p[SENSES.index(sense)], p_other=p[SENSES.index(other)]))
    return results


def main():
    args = parse_args(NAME, "Claim 9: the same word, told apart by its neighbours through attention")
    started = time.perf_counter()
    dim, heads, steps = (16, 2, 30) if args.quick else (32, 2, 600)
    training = corpus()
    vocab = {w: i for i, w in enumerate(sorted({w for s, _ in training for w in tokens(s)}))}
    unknown = {w for pair in PAIRS for s in pair[:2] for w in tokens(s)} - set(vocab)
    assert not unknown, f"the test sentences use tokens the corpus never has: {unknown}"
    examples = [(*encode(sentence, vocab), SENSES.index(sense)) for sentence, sense in training]
    print(f"Claim 9: the same word in two contexts; one bidirectional transformer block ({heads} heads, {dim} dims, "
          f"no positions) trained {steps} steps to name the sense of 배 / bank in {len(training)} generated "
          f"sentences ({len(vocab)} tokens)")
    nn.manual_seed(0)
    model = SenseReader(len(vocab), dim, heads, n_layer=1)
    nn.manual_seed(0)
    untrained = SenseReader(len(vocab), dim, heads, n_layer=1)
    with threadpool_limits(1):   # matrices this small multiply fastest on one BLAS thread
        loss = train(model, examples, steps, batch_size=32, rng=np.random.default_rng(0))
    model.eval()
    untrained.eval()
    results, before = measure(model, vocab), measure(untrained, vocab)

    rows, weight_lines = [], []
    for r, u in zip(results, before):
        other = other_of(results, r)
        rows.append([r["sentence"], r["word"], f"{np.abs(r['embedding'] - other['embedding']).max():.1g}",
                     f"{np.linalg.norm(r['output'] - other['output']) / np.linalg.norm(r['output']):.2f}",
                     f"{r['sense']} {r['p']:.2f}, {r['other']} {r['p_other']:.2f}",
                     f"{u['p']:.2f}, {u['p_other']:.2f}", top_neighbour(r), top_neighbour(u)])
        for head, w in enumerate(r["weights"]):
            weight_lines.append(f"  {r['sentence']:<12} head {head}: "
                                + "  ".join(f"{word} {x:.2f}" for word, x in zip(r["words"], w)))
    text = table(["sentence", "word", "max |emb - emb in the other|", "|out - out in the other| / |out|",
                  "sense read (p)", "untrained", "neighbour weighed most", "untrained"], rows)
    text += ("\n\nemb: the word's embedding, the input of the attention layer; out: the attention layer's output at "
             "the word (before the residual); the other: the other sentence of the pair\nsense read: the model's "
             "probability of the word's sense in this sentence, and of its other sense; neighbour weighed most: the "
             "token other than the word with the largest weight, mean of the heads\n"
             f"model: trained {steps} steps on {len(training)} sentences, loss {loss:.3f} (mean of the last 50 steps); "
             f"untrained: the same initial weights\n\nthe weights the word puts on each token of its sentence:\n"
             + "\n".join(weight_lines))
    same_input = all(np.array_equal(r["embedding"], other_of(results, r)["embedding"]) for r in results)
    apart = min(np.linalg.norm(r["output"] - other_of(results, r)["output"]) / np.linalg.norm(r["output"])
                for r in results)
    read = all(r["p"] > 0.5 > r["p_other"] for r in results)
    conclusion = (f"{'supported' if same_input and apart > 0.1 and read else 'not supported'}: in each pair the "
                  f"word's embedding is {'identical' if same_input else 'NOT identical'} (the same row of the table) "
                  f"while its attention output differs by {apart:.0%} of its length or more, and from that output the "
                  f"model reads {'the right sense in all four sentences' if read else 'a wrong sense at least once'} ("
                  + ", ".join(f"{r['sentence']}: {r['sense']} {r['p']:.2f}" for r in results)
                  + f"; untrained, {min(u['p'] for u in before):.2f}-{max(u['p'] for u in before):.2f}); the neighbour "
                  "each weighs most: "
                  + ", ".join(f"{r['sentence']}: {top_neighbour(r)}" for r in results) + ".")
    txt = write_report(args.out, NAME, "Claim 9: the same word, told apart by attention", text, conclusion)

    png = None
    plt = pyplot(hangul=True)
    if plt:
        png = draw(plt, results, args.out)
    finish([txt, png], started)


def other_of(results, r):
    """The result of the other sentence of r's pair."""
    return next(o for o in results if o["word"] == r["word"] and o is not r)


def top_neighbour(r):
    """The token other than the word itself that gets the most weight (mean over heads)."""
    mean = r["weights"].mean(0)
    j = max((j for j, w in enumerate(r["words"]) if w != r["word"]), key=lambda j: mean[j])
    return f"'{r['words'][j]}' {mean[j]:.2f}"


def draw(plt, results, out):
    """Per pair (a row): the weights the word puts on its sentence's tokens, head by head, in
    each sentence; and the word's embedding and attention output in both, as colours."""
    fig, axes = plt.subplots(2, 3, figsize=SLIDE, gridspec_kw=dict(width_ratios=[1.2, 1.2, 1.4]))
    for row, (a, b) in enumerate(zip(results[::2], results[1::2])):
        for ax, r in zip(axes[row, :2], (a, b)):
            weights = r["weights"]
            image = ax.imshow(weights, cmap="Greens", vmin=0, vmax=1, aspect="auto")
            for (head, j), w in np.ndenumerate(weights):
                ax.text(j, head, f"{w:.2f}", ha="center", va="center", fontsize=12,
                        color="white" if w > 0.6 else "black")
            ax.set_xticks(range(len(r["words"])), r["words"])
            ax.set_yticks(range(len(weights)), [f"head {h}" for h in range(len(weights))])
            ax.set_title(f"{r['sentence']}\nwhere '{r['word']}' ({r['sense']}) looks")
        vectors = np.stack([a["embedding"], b["embedding"], a["output"], b["output"]])
        scale = np.abs(vectors).max(axis=1, keepdims=True)          # each row to [-1, 1]: shapes, not sizes
        shown = axes[row, 2].imshow(vectors / scale, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        axes[row, 2].set_yticks(range(4), [f"embedding, {a['sense']}", f"embedding, {b['sense']}",
                                           f"attention out, {a['sense']}", f"attention out, {b['sense']}"])
        axes[row, 2].set_xticks([])
        axes[row, 2].set_title(f"'{a['word']}': one input, two outputs")
    axes[1, 2].set_xlabel("the vector's components")
    fig.colorbar(image, ax=axes[:, :2], location="bottom", shrink=0.6, label="attention weight")
    fig.colorbar(shown, ax=axes[:, 2], location="bottom", shrink=0.8, label="each row over its largest |value|")
    fig.suptitle("The same word, two meanings: the embedding is one row of a table; attention mixes in the neighbours")
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    main()
