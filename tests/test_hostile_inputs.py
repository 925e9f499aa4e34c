"""Every file the tools read is input, opened as the corpus is, and every value is checked as
input; names and locales never end a tool in a traceback. One section per promise:

4. a GPT-2 shard, a tokenizer or a gradient health log that is a FIFO is refused at once,
   naming it (a FIFO once hung the sampler, and --resume past its first SIGTERM); a damaged
   health log names its file, and a larger one than a run can write is refused by its size;
6. a file name that is not UTF-8, a C or Latin-1 locale with a Korean vocabulary: output, or
   one line, never a traceback; a vocabulary in a message is bounded (80 characters and the
   count); a one-character vocabulary draws its plots without a warning;
7. a checkpoint's values: no negative step count or second moment in its optimizer state, and
   weights whose logits stay finite, each refusal naming the tensor with advice that helps;
and GPT-2 folders: a subword tokenizer is refused by the exporter in one line, and one whose
ids pass the model's vocabulary by the sampler.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors

import nn
import tgtrain
from test_faults import good, job, trained  # noqa: F401 (fixtures)
from test_hostile_files import (CHARS, assert_one_line_refusal, checkpoint, folder,  # noqa: F401 (folder: a fixture)
                                subword_tokenizer_json, tiny_gpt)
from test_hostile_runs import one_line_error
from test_train_chargpt import TINY, command, corpus, environment  # noqa: F401 (corpus: a fixture)

LINUX = sys.platform.startswith("linux")
needs_fifo = pytest.mark.skipif(not LINUX, reason="FIFOs of a POSIX system")
KOREAN = "가나다라마바사 아자차카타파하 " * 300


def script(name, *args, env=None, timeout=60):
    """demos/<name> as a user runs it, with `env` added to the environment: the finished process."""
    return subprocess.run(command(name, *args), capture_output=True, text=True, timeout=timeout,
                          env={**environment(), **(env or {})})


def fifo_instead(path):
    """Replace the file at `path` with a FIFO of that name (reading it would wait for a writer)."""
    path.unlink()
    os.mkfifo(path)


# ---- 4. every file read is opened as the corpus is -------------------------------------------
@needs_fifo
def test_a_gpt2_shard_that_is_a_fifo_is_refused_at_once(folder):
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    with safetensors.safe_open(folder / "model-00001-of-00002.safetensors", "np") as weights_file:
        weights = list(weights_file.keys())
    os.mkfifo(folder / "model-00002-of-00002.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {**{name: "model-00001-of-00002.safetensors" for name in weights},
                        "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    result = script("sample_chargpt.py", folder)
    assert_one_line_refusal(result, f"{folder / 'model-00002-of-00002.safetensors'}: is a FIFO (a named pipe), not a "
                                    "regular file")


@needs_fifo
@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json"])
def test_a_gpt2_folders_file_that_is_a_fifo_is_refused_at_once_by_name(folder, name):
    fifo_instead(folder / name)
    assert_one_line_refusal(script("sample_chargpt.py", folder), f"{folder / name}: is a FIFO (a named pipe), not a "
                                                                 "regular file")


@needs_fifo
def test_a_health_log_that_is_a_fifo_is_refused_at_once_on_resume(good):
    log = good.with_suffix(".health.csv")
    fifo_instead(log)
    before = good.read_bytes()
    result = script("train_chargpt.py", "--resume", "--out", good, "--max_iters", 30)   # once: it waited for ever
    assert result.returncode == 1
    assert (f"{log}: is a FIFO (a named pipe), not a regular file; move it away to start a new gradient health log"
            in one_line_error(result))
    assert good.read_bytes() == before


@pytest.mark.parametrize("damage, message", [
    (b"\xff\xfe not text", "the gradient health log is damaged (byte 0 is not UTF-8)"),
    ("step,name,grad_norm,update_ratio,residual_std,gelu_tail_fraction\n0,x," + "9" * 200_000 + ",,,\n",
     "line 2 of the gradient health log is damaged (field larger than field limit"),
    ("step,name,grad_norm,update_ratio,residual_std,gelu_tail_fraction\n0,x," + "x" * 100_000 + ",,,\n",
     "line 2 of the gradient health log is damaged (could not convert string to float"),
], ids=["not-utf-8", "a-cell-of-200-kb", "a-cell-of-100-kb-not-a-number"])
def test_a_damaged_health_log_names_the_file_in_a_bounded_line(good, damage, message):
    log = good.with_suffix(".health.csv")
    log.write_bytes(damage if isinstance(damage, bytes) else damage.encode())
    result = job("--resume", "--out", good, "--max_iters", 30)
    assert result.returncode == 1 and f"{log}: {message}" in one_line_error(result) and len(result.stderr) < 1000
    assert log.read_bytes() == (damage if isinstance(damage, bytes) else damage.encode())


def test_a_health_log_larger_than_a_run_can_write_is_refused_by_its_size(good):
    """The job's bound is the corpus's (tgtrain.memory.corpus_limit); here one of 100 bytes."""
    log, model = good.with_suffix(".health.csv"), nn.checkpoint.load_gpt(good)[0]
    with pytest.raises(ValueError, match=f"{log}: more than 100 bytes, more than a gradient health log"):
        tgtrain.health.HealthLog(model, log, resume_step=20, max_bytes=100)


# ---- 6. names and locales ---------------------------------------------------------------------
@pytest.mark.skipif(not LINUX, reason="file names of bytes that are not UTF-8")
def test_file_names_that_are_not_utf8_train_and_print_escaped(corpus, tmp_path):
    """Python keeps such a name's bytes as lone surrogates: printing one to a UTF-8 stdout, or
    drawing it as a plot's title, was a UnicodeEncodeError."""
    data = os.fsdecode(bytes(tmp_path) + b"/\xff-corpus.txt")
    out = os.fsdecode(bytes(tmp_path) + b"/out-\xfe/\xfe.safetensors")
    with open(data, "wb") as file:
        file.write(open(corpus, "rb").read())
    result = script("train_chargpt.py", "--data", data, *TINY, "--max_iters", 2, "--eval_interval", 1, "--out", out,
                    env={"PYTHONIOENCODING": "utf-8:strict"})   # a UTF-8 locale's stdout: strict
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "corpus: " in result.stdout and "\\udcff-corpus.txt" in result.stdout
    assert nn.load(out)[1]["config"]["data"] == data
    sampled = script("sample_chargpt.py", out, env={"PYTHONIOENCODING": "utf-8:strict"})
    assert sampled.returncode == 0 and sampled.stdout


LOCALES = {"latin-1": {"PYTHONIOENCODING": "latin-1"},
           "C": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}}


@pytest.mark.parametrize("locale", LOCALES)
def test_a_korean_vocabulary_prints_escaped_in_a_locale_that_cannot_show_it(tmp_path, locale):
    text = tmp_path / "ko.txt"
    text.write_text(KOREAN, encoding="utf-8")
    out = tmp_path / "ko.safetensors"
    result = script("train_chargpt.py", "--data", text, *TINY, "--max_iters", 2, "--eval_interval", 1, "--out", out,
                    env=LOCALES[locale])
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "--- sample ---" in result.stdout and "\\u" in result.stdout   # Hangul, as escapes
    sampled = script("sample_chargpt.py", out, "--prompt", " ", env=LOCALES[locale])   # (C: argv is ASCII)
    assert sampled.returncode == 0 and "\\u" in sampled.stdout, sampled.stderr


def test_a_vocabulary_in_a_message_is_bounded_to_80_characters_and_the_count(tmp_path):
    """A 10 MB "one line" once listed a vocabulary of 1.1M characters, and every unknown one."""
    chars = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 20_000))   # 20,000 CJK characters
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=len(chars), block_size=8, n_layer=1, n_head=1, n_embd=4)
    path = nn.save(tmp_path / "wide.safetensors", model, model_config=dict(model.config), tokenizer=chars)
    unknown = "".join(chr(c) for c in range(0xAC00, 0xAC00 + 5_000))   # 5,000 Hangul syllables
    result = script("sample_chargpt.py", path, "--prompt", unknown)
    assert result.returncode == 2 and len(result.stderr) < 2_000, len(result.stderr)
    assert "5000 character(s) not in the vocabulary of 20000: '가', '각'" in result.stderr
    assert "and 4,920 more" in result.stderr and "and 19,920 more" in result.stderr


def test_a_one_character_vocabulary_draws_its_plots_without_a_warning(tmp_path):
    pytest.importorskip("matplotlib")
    text = tmp_path / "a.txt"
    text.write_text("a" * 3000)
    out = tmp_path / "a.safetensors"
    result = script("train_chargpt.py", "--data", text, *TINY, "--max_iters", 3, "--eval_interval", 2, "--out", out)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert out.with_suffix(".health.png").exists() and out.with_suffix(".png").exists()


# ---- 7. checkpoint values checked as input ----------------------------------------------------
def forged_optimizer(path, edit):
    """The checkpoint at `path` written anew (its checksum computed by nn.save) with its
    optimizer state edited: edit(optimizer)."""
    model, _, meta = nn.checkpoint.load_gpt(path)
    optimizer = nn.optim.AdamW(model.parameters())
    nn.load(path, optimizer)
    edit(optimizer)
    nn.save(path, model, optimizer, **meta)
    return path.read_bytes()


@pytest.mark.parametrize("edit, tensor, what", [
    (lambda o: o.updates.__setitem__(2, -5), "optimizer/updates", "a count of steps"),
    (lambda o: o.updates.__setitem__(slice(None), -1), "optimizer/updates", "a count of steps"),
    (lambda o: o.v[3].__setitem__(0, -1.0), "optimizer/v.3", "a second moment (a running mean of squared gradients)"),
], ids=["one-negative-step-count", "every-step-count-minus-1", "a-negative-second-moment"])
def test_an_optimizer_state_no_optimizer_writes_is_refused_naming_the_tensor(good, edit, tensor, what):
    """A negative step count ended the run in `math domain error`; a negative second moment made
    nan, and the advice was "lower --lr"."""
    before = forged_optimizer(good, edit)
    result = job("--resume", "--out", good, "--max_iters", 30)
    assert result.returncode == 1
    line = one_line_error(result)
    assert f"{good}: tensor '{tensor}' holds" in line and f"but it is {what}, never negative: an edited file" in line
    assert "lower --lr" not in line.lower() and "resume from a checkpoint of your own or start a new run" in line
    assert good.read_bytes() == before
    assert script("sample_chargpt.py", good).returncode == 0   # its weights still sample


@pytest.mark.parametrize("scaled, named", [(["h.0.attn.qkv.weight"], "h.0.attn.qkv.weight"),
                                           (None, "h.0.ln1.weight")], ids=["one-tensor", "every-tensor"])
def test_weights_so_large_that_the_logits_overflow_are_refused_naming_the_tensor(tmp_path, scaled, named):
    """Finite each, times 1e30 they made nan logits, and the sampler printed one character
    forever, exit 0. The refusal names the largest (a LayerNorm's ones, times 1e30)."""
    model = tiny_gpt()
    for name, weight in model.named_parameters():
        if scaled is None or name in scaled:
            weight.data = weight.data * np.float32(1e30)
    path = checkpoint(tmp_path / "huge.safetensors", model)
    for result in (script("sample_chargpt.py", path), script("export_gpt2.py", path, tmp_path / "gpt2")):
        assert_one_line_refusal(result, f"{path}: its weights are finite but so large that the model's forward pass "
                                "overflows",
                                f"in tensor {named!r}", "sample or resume from an earlier checkpoint")
    assert not (tmp_path / "gpt2").exists()


def test_a_resume_refuses_weights_whose_logits_overflow(good):
    model, _, meta = nn.checkpoint.load_gpt(good)
    optimizer = nn.optim.AdamW(model.parameters())
    nn.load(good, optimizer)
    model.h[0].attn.qkv.weight.data = model.h[0].attn.qkv.weight.data * np.float32(1e30)
    nn.save(good, model, optimizer, **meta)
    before = good.read_bytes()
    result = job("--resume", "--out", good, "--max_iters", 30)
    assert result.returncode == 1 and "in tensor 'h.0.attn.qkv.weight'" in one_line_error(result)
    assert good.read_bytes() == before


# ---- GPT-2 folders with a subword tokenizer ---------------------------------------------------
def test_exporting_a_gpt2_folder_with_a_subword_tokenizer_is_one_line(folder, tmp_path):
    pytest.importorskip("tokenizers")
    (folder / "tokenizer.json").write_text(subword_tokenizer_json({"a": 0, "b": 1, "ab": 2}, [["a", "b"]]))
    result = script("export_gpt2.py", folder, tmp_path / "again")
    assert_one_line_refusal(result, f"{folder}: its tokenizer is not a character vocabulary")
    assert not (tmp_path / "again").exists()


def test_a_subword_tokenizer_whose_ids_pass_the_models_vocabulary_is_refused_before_sampling(folder):
    """Three tokens, but the id 200: the vocabulary counts to the largest id."""
    pytest.importorskip("tokenizers")
    (folder / "tokenizer.json").write_text(subword_tokenizer_json({"a": 0, "b": 1, "ab": 200}, [["a", "b"]]))
    assert_one_line_refusal(script("sample_chargpt.py", folder, "--prompt", "ab"),
                            f"its tokenizer has 201 tokens but the model's vocabulary is {len(CHARS)}")
