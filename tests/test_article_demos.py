"""Smoke tests of the attention-article demos (demos/attention_*.py): each runs with --quick
as a user would run it (a subprocess, from the repository root) and must print its table
and conclusion and write its text table, and its figure when matplotlib is installed."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ["attention_dot_product", "attention_scaling", "attention_expectation", "attention_order",
         "attention_heads", "attention_deep_gradients", "attention_cost", "attention_length", "attention_context",
         "attention_scale"]
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run(args, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("name", DEMOS)
def test_demo_runs_quick(name, tmp_path):
    out = run([f"demos/{name}.py", "--quick", "--out", str(tmp_path)], tmp_path)
    assert "Conclusion:" in out
    assert "done in" in out
    report = (tmp_path / f"{name}.txt").read_text(encoding="utf-8")
    assert "Conclusion:" in report and "---" in report      # a table and what it supports
    assert (tmp_path / f"{name}.png").exists() == HAVE_MATPLOTLIB


def test_demo_without_matplotlib_writes_the_table_only(tmp_path):
    # None in sys.modules makes `import matplotlib` raise ImportError, as if it were not installed
    script = ("import runpy, sys; sys.modules['matplotlib'] = None; "
              f"sys.argv = ['demos/attention_order.py', '--quick', '--out', {str(tmp_path)!r}]; "
              "sys.path.insert(0, 'demos'); runpy.run_path('demos/attention_order.py', run_name='__main__')")
    out = run(["-c", script], tmp_path)
    assert "matplotlib is not installed" in out
    assert (tmp_path / "attention_order.txt").exists()
    assert not (tmp_path / "attention_order.png").exists()


def test_attention_heads_reads_a_train_chargpt_checkpoint(tmp_path):
    import nn
    from nn import data
    text = "the cat sat on the mat. "
    tokenizer = data.CharTokenizer(text)
    nn.manual_seed(0)
    model = nn.GPT(tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16)
    checkpoint = tmp_path / "tiny.safetensors"
    # the metadata demos/train_chargpt.py writes and reads back
    nn.save(str(checkpoint), model, model_config=model.config, tokenizer=tokenizer.chars, step=0, val_loss=None)
    out = run(["demos/attention_heads.py", "--checkpoint", str(checkpoint), "--text", "the cat sat",
               "--out", str(tmp_path)], tmp_path)
    assert f"checkpoint {checkpoint}" in out
    report = (tmp_path / "attention_heads.txt").read_text(encoding="utf-8")
    assert report.count("\n    1     1 ") == 1      # a row for layer 1, head 1: every head of every layer
    assert np.isfinite(float(report.split("trained ")[1].split(",")[0]))


def test_attention_cost_gives_the_same_verdict_and_memory_exponents_every_run(tmp_path):
    """Its verdict rests on peak memory, which tracemalloc counts exactly; time only informs."""
    def verdict_and_memory(out):
        conclusion = out.split("Conclusion: ")[1]
        memory = re.findall(r"^ *(\w+ peak memory) +([\d.]+) +exact", out, flags=re.MULTILINE)
        return conclusion.split(":")[0], conclusion.split(" Time,")[0], memory
    first, second = (verdict_and_memory(run(["demos/attention_cost.py", "--quick", "--out", str(tmp_path / name)],
                                            tmp_path)) for name in ("a", "b"))
    assert first == second and len(first[2]) == 2


def test_attention_heads_reads_a_gpt2_folder_as_it_reads_the_checkpoint(tmp_path):
    """The same model as a train_chargpt.py checkpoint and exported as a GPT-2 folder (its
    characters in tokenizer.json): the same table."""
    import nn
    from nn import data
    tokenizer = data.CharTokenizer("the cat sat on the mat. ")
    nn.manual_seed(0)
    model = nn.GPT(tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16)
    checkpoint = nn.save(tmp_path / "tiny.safetensors", model, model_config=model.config, tokenizer=tokenizer.chars)
    folder = nn.export.to_gpt2(model, tmp_path / "gpt2", tokenizer)
    tables = []
    for path in (checkpoint, folder):
        run(["demos/attention_heads.py", "--checkpoint", str(path), "--text", "the cat sat", "--out", str(tmp_path)],
            tmp_path)
        tables.append((tmp_path / "attention_heads.txt").read_text(encoding="utf-8").split("\nmodel: ")[0])
    assert tables[0] == tables[1] and "(11 characters)" in tables[0]


def test_attention_heads_reads_a_gpt2_folder_with_a_subword_tokenizer(tmp_path):
    """A GPT-2 layout folder whose tokenizer.json is a byte-level BPE, as GPT-2's own is
    (trained here on a few sentences): the maps are drawn over its subword tokens."""
    tokenizers = pytest.importorskip("tokenizers")
    import nn
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["Return the sum of a and b, or of all the items."] * 20, trainer)
    nn.manual_seed(0)
    model = nn.GPT(bpe.get_vocab_size(), block_size=32, n_layer=2, n_head=2, n_embd=16, tie_weights=True)
    folder = nn.export.to_gpt2(model, tmp_path / "gpt2")
    bpe.save(str(folder / "tokenizer.json"))
    out = run(["demos/attention_heads.py", "--checkpoint", str(folder), "--out", str(tmp_path)], tmp_path)
    assert f"checkpoint {folder}" in out
    report = (tmp_path / "attention_heads.txt").read_text(encoding="utf-8")
    count = len(bpe.encode("Return the sum of a and b.").ids)   # the demo's default sentence
    assert f"input: 'Return the sum of a and b.' ({count} tokens)" in report
    assert count < 20 and report.count("\n    1     1 ") == 1


# ---- claim 10, scale: parts of the text, and the count table beside the models ----------------
def test_attention_scale_takes_a_part_from_every_stretch_of_the_text():
    sys.path.insert(0, str(ROOT / "demos"))
    import attention_scale
    split = np.arange(1_000_000)
    part = attention_scale.part(split, 0.01)
    assert len(part) == 10_000 and set(part // 10_000) == set(range(100))   # 1%, from each of 100 stretches
    assert attention_scale.part(split, 1.0) is split


def test_attention_scale_count_table_knows_what_it_counted_and_nothing_else():
    sys.path.insert(0, str(ROOT / "demos"))
    import attention_scale
    seen = np.tile([0, 1, 2], 1000)                  # "abcabc...": after "ab" always "c"
    assert attention_scale.ngram_loss(seen, seen, 3, alpha=1e-6) < 1e-4
    unseen = np.tile([2, 1, 0], 1000)                # "cbacba...": no context it has counted
    assert np.isclose(attention_scale.ngram_loss(seen, unseen, 3), np.log(3))   # uniform: ln V


# ---- claim 9, '배': new sentences, a control that must fail, a language model ----------------
def context_module():
    sys.path.insert(0, str(ROOT / "demos"))
    import attention_context
    return attention_context


def test_attention_context_tests_on_sentences_it_never_trained_on():
    ctx = context_module()
    training, held_out = ctx.sentences()
    trained = {sentence for sentence, _ in training}
    assert held_out and not trained & {sentence for sentence, _ in held_out}
    assert all(pair in held_out for pair in ctx.ARTICLE)
    assert {sentence.split()[0] for sentence in trained} == set(ctx.WHO)   # each subject still trained on
    vocab = {s for sentence in trained for s in ctx.SYLLABLE.findall(sentence)}
    ctx.check_hand_written(training, vocab)            # new, and spelt with syllables it has embeddings for
    with pytest.raises(AssertionError, match="is in the training text"):
        ctx.check_hand_written(training + [(ctx.HAND_WRITTEN[0][0] + " 그리고", "boat")], vocab)


def test_attention_context_reader_reads_new_sentences_and_its_shuffled_controls_cannot():
    """Part 1 at the demo's default settings (a few seconds): the trained reader names the
    sense of new sentences; the same model trained on shuffled senses is near chance there,
    though it learned some of its own labels."""
    ctx = context_module()
    reader = ctx.sense_reader(*ctx.sentences(), quick=False)
    accuracy = reader["accuracy"]
    for new in ("held out", "hand-written"):
        assert accuracy["trained", new] >= ctx.NEEDS["reader"], reader["rows"]
        assert accuracy["shuffled-label control", new] <= ctx.NEEDS["control"], reader["rows"]
    assert accuracy["shuffled-label control", "training"] > accuracy["shuffled-label control", "held out"]
    assert reader["pair"]["same_input"] and reader["pair"]["apart"] > 0.1 and (reader["pair"]["p"] > 0.5).all()


@pytest.mark.slow
def test_attention_context_default_run_supports_the_claim_and_says_its_limits(tmp_path):
    out = run(["demos/attention_context.py", "--out", str(tmp_path)], tmp_path)
    conclusion = out.split("Conclusion: ")[1]
    assert conclusion.startswith("supported") and "embedding is identical" in conclusion, conclusion
    assert "What it does not show: understanding" in conclusion
    report = (tmp_path / "attention_context.txt").read_text(encoding="utf-8")
    for line in ("    held out ", "hand-written ", "  mixed cues ", "shuffled-label controls",
                 "part 2, the language model", "expects its sense"):
        assert line in report, line
    assert (tmp_path / "attention_context.png").exists() == HAVE_MATPLOTLIB
