"""nn.atomic: files written whole or not at all, and the temporaries of killed writers removed."""
import os
import signal
import sys
import time

import pytest

from nn.atomic import remove_stale_temporaries, write_atomically


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("old")

    def fail(file):
        file.write(b"half")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError):
        write_atomically(path, fail)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["run.csv"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked writer")
def test_a_writer_killed_mid_write_leaves_a_temporary_that_the_next_run_removes(tmp_path):
    path = tmp_path / "chargpt.safetensors"
    path.write_text("the last good checkpoint")
    child = os.fork()
    if child == 0:   # the writer: killed while it writes
        def slow(file):
            file.write(b"x" * 1000)
            file.flush()
            time.sleep(60)
        try:
            write_atomically(path, slow)
        finally:
            os._exit(1)
    deadline = time.monotonic() + 10
    while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    (temporary,) = [name for name in os.listdir(tmp_path) if name != path.name]
    assert temporary.startswith(f".tmp-{child}-") and temporary.endswith("-chargpt.safetensors")
    assert remove_stale_temporaries(tmp_path) == []   # its writer still runs: keep it
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    assert remove_stale_temporaries(tmp_path) == [os.path.join(tmp_path, temporary)]
    assert os.listdir(tmp_path) == [path.name] and path.read_text() == "the last good checkpoint"


def test_only_our_own_temporaries_are_removed(tmp_path):
    gone, token = 2**22 + 12345, "0123456789abcdef" * 2   # above Linux's default pid_max: no such process
    ours = tmp_path / f".tmp-{gone}-{token}-run.csv"
    others = [".tmp-notes", f".tmp-{gone}", "data.tmp-1-x-y", "corpus.txt", f".tmp-{gone}-ABC-run.csv",
              ".tmp-2024-05-corpus.txt", f".tmp-{gone}-abc123_x-run.csv"]   # a user's names, like ours once were
    for name in [ours.name, *others]:
        (tmp_path / name).write_text("x")
    running = tmp_path / f".tmp-{os.getpid()}-{token}-run.csv"   # this process is writing it
    running.write_text("x")
    if sys.platform == "win32":
        assert remove_stale_temporaries(tmp_path) == []   # no safe way to ask there: keep all
    else:
        assert remove_stale_temporaries(tmp_path) == [str(ours)]
    assert sorted(os.listdir(tmp_path)) == sorted([*others, running.name])


def test_a_missing_folder_has_nothing_to_remove(tmp_path):
    assert remove_stale_temporaries(tmp_path / "nowhere") == []
