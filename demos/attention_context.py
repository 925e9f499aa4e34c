"""Claim 9: a word's meaning comes from its neighbours, and attention is how it gets them.

The article opens with "나는 배를 탔다" (I took a boat) and "나는 배가 아프다" (my belly
hurts): the same word '배', a boat or a belly, told apart only by the words around it. An
embedding table cannot tell them apart (it has one row per token, the same row in every
sentence); attention can, since each position's output is a weighted average of what its
neighbours offer.

The demo writes its own small Korean text from templates: "<who> <a clause> 배<the rest>"
and "<who> 배<the rest>", where the clause and the rest are a boat's (바다에서 ... 배를 탔다)
or a belly's (밥을 굶어서 ... 배가 고팠다), with the particles 를 and 가 as common in either
sense, so that the particle alone does not tell. For each clause (and for none) one subject
is held out: no sentence "<that subject> <that clause> ..." is trained on, the article's
two among them. Two models learn from the rest:

1. A sense reader: one bidirectional transformer block (attention not causal, no positions:
   it sees the syllables around 배 as a bag) and a head that names the sense from the
   block's output at 배. It is tested on the held-out sentences and on sentences written by
   hand in other shapes (배를 타고 갔다, 배가 고프다, ...), none of which is in the training
   text, even as part of a sentence; against controls, the same model trained on the same
   sentences with their senses shuffled, which can only memorise them and must be at chance
   on new ones; and on sentences with words of both senses, 배's own phrase saying which, to
   see where a bag of neighbours stops. In the article's pair, the word's embedding
   is one and the same row of the table; its attention output is not.
2. A character language model (nn.GPT, trained by tgtrain.fit on next-character cross-entropy,
   on the same text): whether, after '배', it expects the right sense's continuations in
   each held-out context, and the attention from the '배' position over the characters before
   it in a held-out boat context and a held-out belly context. A causal model at '배' sees
   only what comes before it: in the article's own pair that is "나는 " in both sentences, so
   the contexts drawn put the telling clause first.

What this shows is the mechanism, not understanding (the article's own limit): both models
know only the cues of a few templates, a word never in them is not in their vocabulary, and
nothing in them knows what a boat is.

    python demos/attention_context.py [--out DIR] [--quick]
"""
import re
import time

import numpy as np
from threadpoolctl import threadpool_limits

import nn
import tensorgrad as tg
from nn import data
from nn import functional as F

from _common import SLIDE, finish, parse_args, pyplot, save_figure, table, train_char_model, write_report
from attention_order import Encoder

NAME = "attention_context"
SENSES = ["boat", "belly"]
WHO = ["나는", "동생은", "아이는", "그는", "친구는", "우리는"]
# (sense, clauses that come before 배, the ways the sentence goes on from 배): every clause
# with every ending of its group, after every subject
GROUPS = [
    ("boat", ["바다에서", "항구에서", "강가에서"], ["배를 탔다", "배를 기다린다", "배가 떠났다", "배가 들어온다"]),
    ("boat", ["섬에 가려고", "강을 건너려고", "낚시를 하려고"],
     ["배를 탄다", "배를 빌렸다", "배가 오기를 기다렸다", "배를 타고 떠났다"]),
    ("belly", ["밥을 굶어서", "점심을 걸러서", "아침을 못 먹어서"],
     ["배가 고팠다", "배가 고파서 울었다", "배를 움켜쥐었다", "배를 문지른다"]),
    ("belly", ["너무 많이 먹어서", "과식을 해서"], ["배가 부르다", "배가 아파서 병원에 갔다", "배를 두드렸다", "배를 문질렀다"]),
    ("belly", ["상한 우유를 마셔서", "찬 물을 마셔서"], ["배가 아프다", "배가 아파서 누웠다", "배를 움켜쥐었다", "배를 감싸 쥐었다"]),
]
ARTICLE = [("나는 배를 탔다", "boat"), ("나는 배가 아프다", "belly")]   # held out: 나는 is the clause-less one's
# new shapes of sentence, from the syllables of the text; the telling word before 배, after it, or both
HAND_WRITTEN = [
    ("배를 타고 갔다", "boat"), ("우리는 배를 타고 섬에 갔다", "boat"), ("배가 항구에 들어온다", "boat"),
    ("항구에 배가 들어온다", "boat"), ("배가 항구에서 떠났다", "boat"), ("배를 기다렸다", "boat"),
    ("배를 타고 낚시를 하러 갔다", "boat"), ("배가 섬에 갔다", "boat"), ("낚시를 하러 배를 빌렸다", "boat"),
    ("배가 고프다", "belly"), ("배가 아파서 밥을 못 먹었다", "belly"), ("점심을 굶어서 배가 고팠다", "belly"),
    ("아이가 배를 문질렀다", "belly"), ("배가 너무 부르다", "belly"), ("아이는 배를 감싸 쥐고 울었다", "belly"),
    ("배가 고파서 밥을 먹었다", "belly"), ("배를 움켜쥐고 누웠다", "belly"), ("우유를 마셔서 배가 아팠다", "belly"),
]
# words of both senses in one sentence, 배's own phrase saying which (바다에서 배가 아팠다: a belly
# that hurt at the sea), as a reader of Korean reads them: where a bag of syllables may stop
MIXED = [("바다에서 배가 아팠다", "belly"), ("항구에서 배가 고팠다", "belly"), ("강가에서 배를 움켜쥐었다", "belly"),
         ("배가 고파서 항구에 갔다", "belly"), ("밥을 먹고 배를 탔다", "boat"), ("점심을 먹고 배를 기다렸다", "boat"),
         ("배를 타고 밥을 먹었다", "boat"), ("너무 많이 먹어서 배를 빌렸다", "boat")]
SYLLABLE = re.compile(r"[가-힣]")   # the sense reader's tokens: one per Hangul syllable
CONTROLS = 3                        # shuffled-label controls, each its own shuffle: one could be lucky


# ---- the text ---------------------------------------------------------------------------------
def sentences():
    """(training, held_out), each [(sentence, sense)]: every subject with every clause and
    ending of each group, and with each ending alone (no clause: the shape of the article's
    sentences). Held out: those whose subject is the one held out for their clause, WHO[i % 6]
    for the i-th clause (no clause is the 0th); so each subject is held out with some clause
    and trained on with the others."""
    fillings = [(clause, end, sense) for sense, group, endings in GROUPS for clause in group for end in endings]
    fillings = list(dict.fromkeys((None, end, sense) for _, end, sense in fillings)) + fillings
    clauses = list(dict.fromkeys(clause for clause, _, _ in fillings))
    training, held_out = [], []
    for clause, end, sense in fillings:
        kept_out = WHO[clauses.index(clause) % len(WHO)]
        for who in WHO:
            words = (who, clause, end) if clause else (who, end)
            (held_out if who == kept_out else training).append((" ".join(words), sense))
    return training, held_out


def check_hand_written(training, vocab):
    """Each hand-written sentence (HAND_WRITTEN, MIXED) is new (not in the training text, even
    as part of a sentence) and made of syllables the reader has an embedding for."""
    text = "\n".join(sentence for sentence, _ in training)
    for sentence, _ in HAND_WRITTEN + MIXED:
        unknown = set(SYLLABLE.findall(sentence)) - set(vocab)
        assert not unknown, f"hand-written {sentence!r} has syllables the training text never has: {unknown}"
        assert sentence not in text, f"hand-written {sentence!r} is in the training text: it would not be new"


# ---- part 1: a sense reader -------------------------------------------------------------------
def encode(sentence, vocab):
    """(syllable ids (T,), the position of 배)."""
    syllables = SYLLABLE.findall(sentence)
    return np.array([vocab[s] for s in syllables]), syllables.index("배")


class SenseReader(nn.Module):
    """A bidirectional encoder (attention not causal, no positions) and a head that reads,
    from the encoder's output at one position, which of SENSES the word there has."""

    def __init__(self, vocab_size, dim, n_heads):
        self.encoder = Encoder(vocab_size, dim, n_heads, n_layer=1, pos="none", max_len=1, causal=False)
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, len(SENSES))

    def forward(self, ids, at):
        h = self.ln_f(self.encoder(ids))                          # (B, T, C)
        return self.head(h[np.arange(len(at)), at])               # (B, senses): the output at each word


def train_reader(model, examples, steps, rng, batch_size=32, lr=3e-3):
    """AdamW on the cross-entropy of the sense, batches of sentences of one length (no padding
    needed). examples: [(ids (T,), the word's position, sense id)]. Returns the model in eval mode."""
    by_length = {}
    for example in examples:
        by_length.setdefault(len(example[0]), []).append(example)
    lengths = sorted(by_length)
    share = np.array([len(by_length[n]) for n in lengths], float) / len(examples)
    optimizer = nn.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    with threadpool_limits(1):   # matrices this small multiply fastest on one BLAS thread
        for step in range(steps):
            optimizer.lr = nn.optim.cosine_lr(step, lr, lr / 10, max(1, steps // 20), steps)
            group = by_length[lengths[rng.choice(len(lengths), p=share)]]
            ids, at, sense = zip(*(group[i] for i in rng.integers(0, len(group), batch_size)))
            loss = F.cross_entropy(model(np.stack(ids), np.array(at)), np.array(sense))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def right_sense(model, examples):
    """The model's probability of each example's sense, [(ids, at, sense)] -> (N,)."""
    with tg.no_grad():
        return np.array([model(ids[None], np.array([at])).softmax(axis=-1).data[0, sense]
                         for ids, at, sense in examples])


def look(model, ids, at):
    """For the word at position `at` of one sentence (ids (T,)): its embedding (C,), the
    attention output there (C,) and the weights it put on each syllable, head by head (heads, T)."""
    inside = {}
    with tg.no_grad():
        model.encoder(ids[None], observe=inside)
        embedding = model.encoder.tok_emb(ids[None])            # (1, T, C): the block's input (no positions)
    attended = inside["blocks.0"]["attn"]                       # (1, T, C): the attention sub-layer, before the residual
    return embedding.data[0, at], attended.data[0, at], model.encoder.blocks[0].attn.last_weights[0, :, at]


def sense_reader(training, held_out, quick):
    """Part 1: the reader and its shuffled-label controls, trained on the same sentences.
    Returns {rows: the accuracy table's, accuracy: {(model, set): fraction}, sizes: {set: n},
    pair: the article pair's numbers, pair_lines, hand_lines, wrong: the misread hand-written}."""
    dim, heads, steps = (16, 2, 30) if quick else (32, 2, 600)
    assert all(pair in held_out for pair in ARTICLE), "the article's sentences must be held out"
    vocab = {s: i for i, s in enumerate(sorted({s for sentence, _ in training for s in SYLLABLE.findall(sentence)}))}
    check_hand_written(training, vocab)
    sets = {name: [(*encode(sentence, vocab), SENSES.index(sense)) for sentence, sense in chosen]
            for name, chosen in (("training", training), ("held out", held_out), ("hand-written", HAND_WRITTEN),
                                 ("mixed cues", MIXED))}
    senses = [sense for _, _, sense in sets["training"]]
    shuffles = [[(ids, at, sense) for (ids, at, _), sense in zip(sets["training"], rng.permutation(senses))]
                for rng in map(np.random.default_rng, range(1, 1 + CONTROLS))]
    print(f"part 1: a sense reader, one bidirectional block ({heads} heads, {dim} dims, no positions), trained "
          f"{steps} steps on {len(training)} sentences ({len(vocab)} syllables); {CONTROLS} controls trained on them "
          "with their senses shuffled")

    def reader(examples):   # the same initial weights and batches for the trained reader and each control
        nn.manual_seed(0)
        return train_reader(SenseReader(len(vocab), dim, heads), examples, steps, np.random.default_rng(0))

    trained, controls = reader(sets["training"]), [reader(examples) for examples in shuffles]
    accuracy, rows = {}, []
    for set_name, examples in sets.items():
        accuracy["trained", set_name] = float(np.mean(right_sense(trained, examples) > 0.5))
        each = [float(np.mean(right_sense(control, own if set_name == "training" else examples) > 0.5))
                for control, own in zip(controls, shuffles)]
        accuracy["shuffled-label control", set_name] = float(np.mean(each))
        rows.append([set_name, str(len(examples)), f"{accuracy['trained', set_name]:.0%}",
                     f"{np.mean(each):.0%} ({min(each):.0%}-{max(each):.0%})"])

    (a, at_a), (b, at_b) = (encode(sentence, vocab) for sentence, _ in ARTICLE)
    seen = [look(trained, a, at_a), look(trained, b, at_b)]
    pair = dict(same_input=np.array_equal(seen[0][0], seen[1][0]),
                apart=min(np.linalg.norm(seen[0][1] - seen[1][1]) / np.linalg.norm(out) for _, out, _ in seen),
                p=right_sense(trained, [(a, at_a, SENSES.index(ARTICLE[0][1])),
                                        (b, at_b, SENSES.index(ARTICLE[1][1]))]))
    pair_lines = []
    for (sentence, _), (_, _, weights) in zip(ARTICLE, seen):
        syllables = SYLLABLE.findall(sentence)
        for head, w in enumerate(weights):
            pair_lines.append(f"  {sentence} head {head}: " + "  ".join(f"{s} {x:.2f}" for s, x in zip(syllables, w)))
    p = {name: right_sense(trained, sets[name]) for name in ("hand-written", "mixed cues")}
    hand_lines = [f"  {'ok   ' if q > 0.5 else 'WRONG'} p({sense}) {q:.2f}  {sentence}"
                  for (sentence, sense), q in zip(HAND_WRITTEN + MIXED, np.concatenate(list(p.values())))]
    return dict(rows=rows, accuracy=accuracy, sizes={name: len(examples) for name, examples in sets.items()},
                pair=pair, pair_lines=pair_lines, hand_lines=hand_lines,
                wrong=[sentence for (sentence, _), q in zip(HAND_WRITTEN, p["hand-written"]) if q <= 0.5])


# ---- part 2: a character language model --------------------------------------------------------
def lm_text(chosen, rng):
    """The sentences in a random order, one a line."""
    return "".join(chosen[i][0] + "\n" for i in rng.permutation(len(chosen)))


def mean_loss(model, split, block_size):
    """Mean next-character cross-entropy over all of `split` (each character predicted once)."""
    total = 0.0
    with tg.no_grad():
        for x, y in data.whole_split_batches(split, block_size, 64):
            total += model(x, y)[1].item() * x.size
    return total / (len(split) - 1)


def expectation(model, tokenizer, context, endings):
    """The mean log-probability per character of each ending (each starts with 배) after
    "\\n" + context, counting the characters after 배."""
    scores = []
    with tg.no_grad():
        for end in endings:
            ids = tokenizer.encode(f"\n{context} {end}")
            logp = model(ids[None, :-1])[0].log_softmax(axis=-1).data[0]      # (T - 1, V)
            start = len(context) + 2                                          # the first character after 배
            scores.append(np.mean(logp[np.arange(start, len(ids) - 1), ids[start + 1:]]))
    return float(np.mean(scores))


def attention_at_word(model, tokenizer, context):
    """The attention from the '배' that follows "\\n" + context over it and everything before:
    (the characters, weights (layers * heads, T), one row per head of each layer)."""
    text = f"\n{context} 배"
    with tg.no_grad():
        model(tokenizer.encode(text)[None])
    return text, np.concatenate([block.attn.last_weights[0, :, -1] for block in model.h])


def language_model(training, held_out, quick):
    """Part 2: a GPT trained on the training sentences' text. Returns (a description, its
    losses, the held-out contexts' rows and share of right expectations, the two drawn contexts)."""
    size = dict(n_layer=1, n_head=2, n_embd=16) if quick else dict(n_layer=2, n_head=2, n_embd=48)
    steps, block_size = (30, 32) if quick else (1500, 32)
    rng = np.random.default_rng(0)
    train_text, held_text = lm_text(training, rng), lm_text(held_out, rng)
    tokenizer = data.CharTokenizer(train_text)
    corpus = data.CharData(tokenizer, tokenizer.encode(train_text), tokenizer.encode(held_text))
    print(f"part 2: a character GPT ({size['n_layer']} layers, {size['n_head']} heads, {size['n_embd']} dims), "
          f"trained by tgtrain.fit {steps} steps on the same sentences as text ({len(train_text):,} characters, "
          f"{tokenizer.vocab_size} distinct)")
    model, _ = train_char_model(corpus, steps, block_size, batch_size=16, lr=3e-3, label="language model", **size)
    losses = {name: mean_loss(model, split, block_size) for name, split in (("training", corpus.train),
                                                                         ("held_out", corpus.val))}
    endings = {sense: sorted({end for s, _, ends in GROUPS if s == sense for end in ends}) for sense in SENSES}
    contexts = list(dict.fromkeys((sentence.split(" 배")[0], sense) for sentence, sense in held_out
                                  if " " in sentence.split(" 배")[0]))   # with a clause: a subject alone tells nothing
    rows, right = [], []
    for context, sense in contexts:
        score = {s: expectation(model, tokenizer, context, endings[s]) for s in SENSES}
        right.append(max(score, key=score.get) == sense)
        rows.append([f"{context} 배…", sense] + [f"{score[s]:.2f}" for s in SENSES] + ["yes" if right[-1] else "NO"])
    heads = [f"layer {layer + 1}, head {head + 1}" for layer in range(size["n_layer"])
             for head in range(size["n_head"])]
    drawn = []
    for context, sense in (next(c for c in contexts if c[1] == s) for s in SENSES):   # the first of each sense
        text, weights = attention_at_word(model, tokenizer, context)
        start = len(context.split(" ")[0]) + 2                   # the clause: after "\n<who> ", before " 배"
        row, j = np.unravel_index(np.argmax(weights[:, start:-2]), weights[:, start:-2].shape)
        drawn.append(dict(context=context, sense=sense, chars=text, weights=weights, heads=heads,
                          top=(heads[row], text[start + j], weights[row, start + j])))
    about = (f"{size['n_layer']} layers x {size['n_head']} heads, {size['n_embd']} dims, {steps} steps of "
             f"{block_size} characters")
    return about, losses, rows, float(np.mean(right)), drawn


# ---- the report ------------------------------------------------------------------------------
# The verdict's bars, on new sentences: the reader and the language model right in at least
# this share, the shuffled-label controls in at most this one (chance is half)
NEEDS = dict(reader=0.8, language_model=0.8, control=0.7)


def main():
    args = parse_args(NAME, "Claim 9: the same word, told apart by its neighbours through attention")
    started = time.perf_counter()
    training, held_out = sentences()
    print(f"Claim 9: '배', a boat or a belly; {len(training)} generated sentences to train on, "
          f"{len(held_out)} held out (a subject never trained with its clause) and {len(HAND_WRITTEN + MIXED)} "
          "written by hand")
    reader = sense_reader(training, held_out, args.quick)
    about, losses, lm_rows, lm_right, drawn = language_model(training, held_out, args.quick)
    accuracy, pair = reader["accuracy"], reader["pair"]

    text = ("part 1, the sense reader: how often it names the right sense (chance: 50%)\n"
            + table(["sentences", "n", "trained", f"shuffled-label controls: mean (range of {CONTROLS})"],
                    reader["rows"])
            + "\n(the controls' training row: their own shuffled senses, which they were trained to repeat)\n\n"
            f"the article's pair (held out): the embedding of 배 is "
            f"{'identical' if pair['same_input'] else 'NOT identical'} in both sentences; its attention output "
            f"differs by {pair['apart']:.0%} of its length or more; the reader's p(boat) in {ARTICLE[0][0]} "
            f"{pair['p'][0]:.2f}, p(belly) in {ARTICLE[1][0]} {pair['p'][1]:.2f}. The weights 배 puts on each "
            "syllable:\n" + "\n".join(reader["pair_lines"])
            + "\n\nthe hand-written sentences, then those with mixed cues, with the trained reader's probability of "
            "the right sense:\n"
            + "\n".join(reader["hand_lines"])
            + f"\n\npart 2, the language model ({about}): loss {losses['training']:.2f} on its training text, "
            f"{losses['held_out']:.2f} on the held-out sentences. After each held-out context and 배, the mean "
            "log-probability per character of the boat continuations and of the belly ones:\n"
            + table(["context", "sense", "boat", "belly", "expects its sense"], lm_rows)
            + "\n\nthe attention from 배 over the characters before it (line start first), head by head:\n"
            + "\n".join(f"  {d['context']} 배, {name}: " + " ".join(f"{w:.2f}" for w in weights)
                        for d in drawn for name, weights in zip(d["heads"], d["weights"])))
    new = ("held out", "hand-written")
    reads = min(accuracy["trained", name] for name in new) >= NEEDS["reader"]
    control_fails = max(accuracy["shuffled-label control", name] for name in new) <= NEEDS["control"]
    supported = (reads and control_fails and pair["same_input"] and pair["apart"] > 0.1
                 and lm_right >= NEEDS["language_model"])
    conclusion = (
        f"{'supported' if supported else 'not supported'}: '배' is one row of the embedding table, and its sense "
        f"is read from what attention mixes in. The reader names it in {accuracy['trained', 'held out']:.0%} of the "
        f"held-out sentences and {accuracy['trained', 'hand-written']:.0%} of the hand-written ones (it needs "
        f"{NEEDS['reader']:.0%})"
        + (f"; it misreads {', '.join(reader['wrong'])}" if reader["wrong"] else "")
        + f". Trained on the same sentences with shuffled senses, the controls repeat "
        f"{accuracy['shuffled-label control', 'training']:.0%} of their own labels but get "
        f"{accuracy['shuffled-label control', 'held out']:.0%} and "
        f"{accuracy['shuffled-label control', 'hand-written']:.0%} of new sentences (chance 50%; they must stay at "
        f"{NEEDS['control']:.0%} or under)"
        + (": what the reader uses is in the syllables around 배, not a memory of its sentences" if control_fails
           else ": the controls do better than chance, so the test sentences are too close to the training ones")
        + f". In the article's pair the embedding is {'identical' if pair['same_input'] else 'NOT identical'} and "
        f"the attention output differs by {pair['apart']:.0%} or more. The language model, trained only to predict "
        f"the next character, expects the right sense after 배 in {lm_right:.0%} of the held-out contexts (it needs "
        f"{NEEDS['language_model']:.0%}); from 배, "
        + " and ".join(f"{d['top'][0]} puts {d['top'][2]:.2f} on '{d['top'][1]}' of {d['context'].split(' ', 1)[1]} "
                       f"(even attention: {1 / len(d['chars']):.2f})" for d in drawn)
        + ". What it does not show: understanding. Both models know the cue words of a dozen templates and nothing "
        "else; a word not in them has no embedding at all; the reader sees a bag of syllables, without order, and "
        "where a sentence has words of both senses and 배's own phrase says which (바다에서 배가 아팠다: a belly "
        f"that hurt at the sea), it reads that sense in {round(accuracy['trained', 'mixed cues'] * len(MIXED))} of "
        f"{len(MIXED)} (chance: half); nothing in either knows what a boat is. Attention is the mechanism that "
        "mixes in the neighbours; what they mean comes from the data: the article's own limit.")
    txt = write_report(args.out, NAME, "Claim 9: the same word, told apart by attention", text, conclusion)
    png = None
    plt = pyplot(hangul=True)
    if plt:
        png = draw(plt, reader, drawn, args.out)
    finish([txt, png], started)


def draw(plt, reader, drawn, out):
    """Left: the language model's attention from '배' over the characters before it, head by
    head, in a boat context and a belly context. Right: the reader's accuracy, trained and
    controls, on the sentences it trained on and on new ones."""
    fig = plt.figure(figsize=SLIDE)
    grid = fig.add_gridspec(2, 2, width_ratios=[2.2, 1])
    maps = [fig.add_subplot(grid[row, 0]) for row in range(2)]
    top = np.ceil(max(d["weights"].max() for d in drawn) * 10) / 10      # one colour scale for both
    for ax, d in zip(maps, drawn):
        image = ax.imshow(d["weights"], cmap="Greens", vmin=0, vmax=top, aspect="auto")
        for (row, j), w in np.ndenumerate(d["weights"]):
            ax.text(j, row, f"{w:.2f}", ha="center", va="center", fontsize=12,
                    color="white" if w > 0.6 * top else "black")
        ax.set_xticks(range(len(d["chars"])), [{"\n": "⏎", " ": "␣"}.get(c, c) for c in d["chars"]], fontsize=16)
        ax.set_yticks(range(len(d["heads"])), d["heads"])
        ax.set_title(f"language model, {d['sense']}: where '배' looks in \"{d['context']} 배…\"")
    fig.colorbar(image, ax=maps, location="bottom", shrink=0.6,
                 label="attention weight from '배' (⏎: the line's start, ␣: a space)")
    bars = fig.add_subplot(grid[:, 1])
    names = ["training", "held out", "hand-written", "mixed cues"]
    shown = [("trained", "trained"),
             ("shuffled-label control", "shuffled-label controls\n(trained on: their own labels)")]
    for k, (model, label) in enumerate(shown):
        values = [reader["accuracy"][model, name] for name in names]
        at = np.arange(len(names)) + (k - 0.5) * 0.4
        bars.bar(at, values, width=0.4, label=label)
        for x, value in zip(at, values):
            bars.text(x, value + 0.02, f"{value:.0%}", ha="center", fontsize=12)
    bars.axhline(0.5, color="black", linestyle="--", label="chance")
    bars.set_xticks(range(len(names)), [f"{label}\n({reader['sizes'][name]})" for label, name in
                                        zip(["trained\non", "held\nout", "hand-\nwritten", "mixed\ncues"], names)])
    bars.set_yticks(np.linspace(0, 1, 5), [f"{v:.0%}" for v in np.linspace(0, 1, 5)])
    bars.set(ylim=(0, 1.45), ylabel="right sense of '배'", title="sense reader: right sense")
    bars.set_xlabel("mixed cues: words of both senses", fontsize=12)
    bars.legend(loc="upper center")
    fig.suptitle("'배', a boat or a belly: one embedding row, told apart by what attention mixes in")
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    main()
