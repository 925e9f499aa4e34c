"""The safety machinery itself must not destroy what it guards: the locks, the temporary files
and their clean-up, the exporter and the sampler's outputs, the corpus cache, and --resume's
order of locking and reading. Each case is what a hostile or careless user (or a program in a
folder others can write to) does, and each ends with the files as they were:

1. a lock is made where nothing was, or is refused unless it is a lock file: a symlink, a hard
   link, a FIFO, the corpus, a user's file of that name are never written into or removed;
2. temporaries carry a name no user file has, and only provably abandoned ones are removed,
   never a file the run reads or claims (its corpus, its checkpoint, its locks);
3. no tool writes over its own input: the exporter, whatever --overwrite says, and the
   sampler's stdout; the corpus cache keeps an edited copy and says what it did;
4. --resume takes the lock first, then reads the checkpoint it holds.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nn
import tgtrain
from nn import data
from test_data import CONTENT, remote_for, server  # noqa: F401 (server: a fixture)
from test_faults import files, good, job, leftovers, start, trained, wait_for  # noqa: F401 (fixtures)
from test_hostile_runs import one_line_error
from test_train_chargpt import TINY, command, corpus, environment, run  # noqa: F401 (corpus: a fixture)

LINUX = sys.platform.startswith("linux")
TOKEN = "0123456789abcdef" * 2   # 32 hex digits, as nn.atomic names its temporaries
SHORT = [*TINY, "--max_iters", 2, "--eval_interval", 1]


def dead_pid():
    """The pid of a process that has ended."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(gone.stdout)


def corpus_copy(corpus, path):
    path.write_bytes(Path(corpus).read_bytes())
    return path


# ---- 1. locks that cannot be turned against the user ----------------------------------------------
PLANTED = {   # name: (plant(lock path, victim) ; what the refusal says)
    "symlink-to-a-file": (lambda lock, victim: lock.symlink_to(victim), "is a symbolic link, not a lock file"),
    "dangling-symlink": (lambda lock, victim: lock.symlink_to(victim.parent / "new-file"),
                         "is a symbolic link, not a lock file"),
    "hard-link-to-a-file": (lambda lock, victim: os.link(victim, lock),
                            "has 2 names (a hard link to another file), so it is not a lock file of a run"),
    "a-users-file": (lambda lock, victim: lock.write_text("my notes\n"),
                     "holds something else than a pid, so it is not a lock file of a run"),
    "a-fifo": (lambda lock, victim: os.mkfifo(lock), "is a FIFO (a named pipe), so it is not a lock file of a run"),
}


@pytest.mark.skipif(not LINUX, reason="symlinks, hard links and FIFOs of a POSIX system")
@pytest.mark.parametrize("name", PLANTED)
@pytest.mark.parametrize("which", ["run.safetensors.lock", "run.health.png.lock"])
def test_a_lock_planted_at_any_outputs_lock_is_refused_and_nothing_is_written(corpus, tmp_path, name, which):
    """The lock a run takes may be a link planted in a folder others can write to: the run
    refuses it in one line, and the file it points to keeps its bytes (it once became a pid)."""
    plant, message = PLANTED[name]
    victim = corpus_copy(corpus, tmp_path / "victim.txt")
    plant(tmp_path / which, victim)
    before = files(tmp_path)
    result = job("--data", corpus, *SHORT, "--out", tmp_path / "run.safetensors")
    assert result.returncode == 1 and f"{tmp_path / which} {message}" in one_line_error(result)
    assert files(tmp_path) == before and victim.read_bytes() == Path(corpus).read_bytes()
    assert (tmp_path / which).is_symlink() or (tmp_path / which).exists()   # refused, not removed


def test_a_corpus_named_as_an_outputs_lock_is_refused_before_any_lock_is_taken(corpus, tmp_path):
    """Its lock once truncated the corpus to the run's pid; a corpus that held only a number
    would have been taken for a lock a killed run left."""
    for text in (Path(corpus).read_text(), "25565\n"):
        lock = tmp_path / "run.csv.lock"
        lock.write_text(text)
        result = job("--data", lock, *SHORT, "--out", tmp_path / "run.safetensors")
        assert result.returncode == 2
        assert f"the lock of the loss log {lock} would overwrite the corpus {lock}" in one_line_error(result)
        assert lock.read_text() == text and sorted(os.listdir(tmp_path)) == ["run.csv.lock"]


def test_a_lock_file_a_killed_run_left_is_replaced_by_one_of_this_run(tmp_path):
    """A pid and no holder: left by kill -9. It is removed and a new file made (O_EXCL), never
    truncated; one that is still being made (empty) is taken over the same way."""
    for left in ("25565\n", ""):
        path = tmp_path / "x.lock"
        path.write_text(left)
        with open(path) as old:   # held open: its inode stays its own, and shows whether it was written into
            with tgtrain.outputs.RunLock(path):
                assert path.read_text() == f"{os.getpid()}\n"
                assert not os.path.samestat(os.fstat(old.fileno()), path.stat()) and old.read() == left
        assert not path.exists()


def test_the_clash_check_covers_every_path_a_run_writes_locks_included(tmp_path):
    target = tmp_path / "corpus.txt"
    target.write_text("text")
    claimed = tgtrain.outputs.claimed(tmp_path / "run.safetensors")
    assert sorted(path.name for path in claimed.values()) == sorted(
        ["run.safetensors", "run.csv", "run.png", "run.health.csv", "run.health.png", "run.safetensors.lock",
         "run.csv.lock", "run.png.lock", "run.health.csv.lock", "run.health.png.lock"])
    os.symlink(target, tmp_path / "run.health.png.lock")
    with pytest.raises(tgtrain.outputs.OutputError, match="the lock of the gradient health plot .* would overwrite "
                                                        "the corpus"):
        tgtrain.outputs.check_clashes(claimed, {"corpus": target})


# ---- 2. temporaries: a name no user file has; only abandoned ones removed -------------------------
def test_a_users_file_named_like_an_old_temporary_is_neither_removed_nor_confused(corpus, tmp_path):
    """`.tmp-2024-05-corpus.txt` matched the old pattern (pid 2024): the corpus beside --out was
    deleted before it was read. Now it trains."""
    mine = corpus_copy(corpus, tmp_path / ".tmp-2024-05-corpus.txt")
    result = run("train_chargpt.py", "--data", mine, *SHORT, "--out", tmp_path / "run.safetensors")
    assert "removed" not in result.stdout and mine.read_bytes() == Path(corpus).read_bytes()
    assert nn.load(tmp_path / "run.safetensors")[1]["step"] == 2


def test_a_checkpoint_named_like_a_temporary_survives_resume_and_its_locks_hold(corpus, tmp_path):
    """An --out of our temporaries' very naming scheme, its writer's pid dead: the run never
    removes what it reads or claims. Once, --resume deleted the checkpoint and its logs, and a
    run deleted the locks it had just taken, so a second run wrote the same outputs at once."""
    out = tmp_path / f".tmp-{dead_pid()}-{TOKEN}-run.safetensors"
    run("train_chargpt.py", "--data", corpus, *SHORT, "--out", out)
    saved = files(tmp_path)
    first = start("--resume", "--out", out, "--max_iters", 10**6, "--eval_interval", 10**5)
    try:
        assert wait_for(first, r"model: .*; resuming from .* at step 2$")
        locks = [path for path in tgtrain.outputs.claimed(out).values() if path.name.endswith(".lock")]
        assert all(path.exists() for path in locks) and files(tmp_path).keys() >= saved.keys()
        second = job("--resume", "--out", out, "--max_iters", 10**6)
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 1 and f"--out {out} is busy: {out}.lock is held by process {first.pid}" in \
        one_line_error(second)
    assert files(tmp_path).keys() >= saved.keys()


@pytest.mark.skipif(not LINUX, reason="flock and pids")
def test_a_temporary_of_a_file_another_run_holds_the_lock_of_is_kept_though_its_pid_looks_dead(corpus, tmp_path):
    """A run in another pid namespace (a container sharing the folder): its pid means nothing
    here, but it holds the lock of the file it is writing."""
    other = tmp_path / "other.csv"
    temporary = tmp_path / f".tmp-{dead_pid()}-{TOKEN}-{other.name}"
    temporary.write_text("being written")
    with tgtrain.outputs.RunLock(tgtrain.outputs.lock_of(other)):
        result = run("train_chargpt.py", "--data", corpus, *SHORT, "--out", tmp_path / "run.safetensors")
        assert "removed" not in result.stdout and temporary.exists()
    result = run("train_chargpt.py", "--resume", "--out", tmp_path / "run.safetensors", "--max_iters", 3)
    assert f"removed {temporary}, a temporary file left by a run that was killed while writing" in result.stdout
    assert not temporary.exists()


@pytest.mark.skipif(not LINUX, reason="hard links, symlinks and FIFOs of a POSIX system")
def test_only_a_regular_temporary_with_one_name_and_not_kept_is_removed(corpus, tmp_path):
    dead = dead_pid()
    linked, symlinked, pipe, kept, used = (tmp_path / f".tmp-{dead}-{TOKEN}-{name}" for name in "abcde")
    victim = corpus_copy(corpus, tmp_path / "corpus.txt")
    os.link(victim, linked)        # a second name of the corpus
    symlinked.symlink_to(victim)   # a link to it
    os.mkfifo(pipe)
    kept.write_text("the run reads it")
    used.write_text("its target is being written")
    in_use = lambda target: target == str(tmp_path / "e")   # noqa: E731
    assert nn.atomic.remove_stale_temporaries(tmp_path, keep=[kept], in_use=in_use) == []
    assert sorted(os.listdir(tmp_path)) == sorted(["corpus.txt", *(path.name for path in (linked, symlinked, pipe,
                                                                                          kept, used))])
    assert victim.read_bytes() == Path(corpus).read_bytes()


def test_a_temporary_is_created_where_nothing_was_and_named_by_a_random_token(tmp_path, monkeypatch):
    names = []
    real_open = os.open

    def spy(path, flags, *args, **kwargs):
        names.append((os.path.basename(path), flags))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", spy)
    nn.atomic.write_atomically(tmp_path / "run.csv", lambda file: file.write(b"rows"))
    (name, flags), = names
    assert nn.atomic.TEMPORARY.fullmatch(name) and name.endswith("-run.csv")
    assert flags & os.O_CREAT and flags & os.O_EXCL and flags & nn.atomic.NO_FOLLOW == nn.atomic.NO_FOLLOW
    assert (tmp_path / "run.csv").read_bytes() == b"rows" and os.listdir(tmp_path) == ["run.csv"]


# ---- 3. no tool writes over its own input --------------------------------------------------------
def test_the_exporter_never_writes_over_the_checkpoint_it_reads(good):
    """`export_gpt2.py run/model.safetensors run --overwrite` replaced the training checkpoint
    (and its optimizer and run state) with the export, and --resume then failed."""
    own = good.parent / "model.safetensors"
    good.rename(own)
    before = files(good.parent)
    for args in ([own, good.parent], [own, good.parent, "--overwrite"], [own, own, "--overwrite"]):
        result = subprocess.run(command("export_gpt2.py", *args), capture_output=True, text=True, env=environment())
        assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert f"would be written over {own}, the model this export reads; choose another folder" in result.stderr
    assert files(good.parent) == before


def test_the_exporter_never_writes_over_the_gpt2_folder_it_reads(good, tmp_path):
    folder = tmp_path / "gpt2"
    run("export_gpt2.py", good, folder)
    alias = tmp_path / "alias"
    alias.symlink_to(folder)
    before = files(folder)
    for target in (folder, alias):
        result = subprocess.run(command("export_gpt2.py", folder, target, "--overwrite"), capture_output=True,
                                text=True, env=environment())
        assert result.returncode == 1 and f"{target} would be written over {folder}" in result.stderr
    assert files(folder) == before


@pytest.mark.skipif(not LINUX, reason="a shell's redirection")
def test_the_sampler_refuses_to_write_its_sample_into_its_own_checkpoint(good):
    before = good.read_bytes()
    with open(good, "ab") as appended:   # `sample_chargpt.py run.safetensors >> run.safetensors`
        result = subprocess.run(command("sample_chargpt.py", good), stdout=appended, stderr=subprocess.PIPE,
                                text=True, env=environment())
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert f"stdout is {good}'s own file: the sample would be written into the model it is read from" in result.stderr
    assert good.read_bytes() == before


def test_an_edited_cached_corpus_is_kept_under_another_name_and_the_line_says_so(server, tmp_path):
    folder, url = server
    remote = remote_for(folder, url, CONTENT)
    edited = b"my own edit of the corpus\n"
    (tmp_path / "corpus.txt").write_bytes(edited)
    text, about = data.load_corpus(remote, cache_dir=str(tmp_path))
    (aside,) = [path for path in tmp_path.iterdir() if path.name.startswith("corpus.txt.")]
    assert text == CONTENT.decode() and (tmp_path / "corpus.txt").read_bytes() == CONTENT
    assert aside.read_bytes() == edited and "\n" not in about
    assert about.endswith(f"(the copy there differed from it: kept as {aside})")


def test_offline_an_edited_cached_corpus_is_left_as_it_is_and_the_line_says_so(tmp_path):
    """Once it was deleted without a word, and the line said that no copy was cached."""
    remote = data.RemoteFile("http://127.0.0.1:9/corpus.txt", "corpus.txt", 10, "0" * 64)   # port 9: nothing there
    (tmp_path / "corpus.txt").write_text("my own edit")
    text, about = data.load_corpus(remote, cache_dir=str(tmp_path), timeout=2)
    assert (tmp_path / "corpus.txt").read_text() == "my own edit" and os.listdir(tmp_path) == ["corpus.txt"]
    assert f"the copy at {tmp_path / 'corpus.txt'} is not it (its sha256 differs; left as it is)" in about
    assert "no copy is cached" not in about and len(text) > 100_000


# ---- 4. --resume takes the lock first -------------------------------------------------------------
def test_resume_takes_the_lock_before_it_reads_the_checkpoint(good):
    """Another run holds --out: the resumed run must not read (and later act on) the file that
    run is writing. Here the file is mid-write garbage: the refusal is the lock's, not the read's."""
    good.write_bytes(b"half of a checkpoint another run is writing")
    with tgtrain.outputs.RunLock(f"{good}.lock"):
        result = job("--resume", "--out", good)
    assert result.returncode == 1
    assert (f"--out {good} is busy: {good}.lock is held by process {os.getpid()}, another run writing the same "
            "outputs") in one_line_error(result)
    assert good.read_bytes() == b"half of a checkpoint another run is writing" and leftovers(good.parent) == []
