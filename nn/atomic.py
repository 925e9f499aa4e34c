"""Writing a file so that a crash never leaves half of it behind, and cleaning up after a
writer that was killed before it could."""
import os
import re
import tempfile

# A temporary file is named .tmp-<writer's pid>-<random>-<target's name>: the pid says whether
# its writer is still running, and the target's name says what it was going to be.
TEMPORARY = re.compile(r"\.tmp-(\d+)-[a-z0-9_]+-.+")


def write_atomically(path, write):
    """Call write(file) on a new temporary file in path's folder, then rename it over path.
    A rename within one folder is atomic: readers see the old file or the new one, never a
    mix, and a crash (or Ctrl-C) mid-write leaves the old file behind. Only a kill that
    gives no chance to clean up (SIGKILL, a power cut) leaves the temporary file too:
    remove_stale_temporaries() removes it later."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".tmp-{os.getpid()}-",
                                         suffix=f"-{os.path.basename(path)}")
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        umask = os.umask(0)   # mkstemp makes the file private (0600); give it the usual mode
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def remove_stale_temporaries(folder):
    """Delete the temporary files that write_atomically left in `folder` when its writer was
    killed mid-write: only files of its naming scheme, and only when the process that wrote
    them is gone (a running writer's file is still being written). Returns their paths."""
    removed = []
    try:
        names = os.listdir(folder or ".")
    except FileNotFoundError:
        return removed
    for name in names:
        match = TEMPORARY.fullmatch(name)
        if match and not _running(int(match.group(1))):
            path = os.path.join(folder, name)
            try:
                os.unlink(path)
                removed.append(path)
            except FileNotFoundError:   # another run cleaned it first
                pass
    return removed


def _running(pid):
    """Whether a process with this pid exists (a recycled pid keeps a stale file: harmless)."""
    if pid == os.getpid() or os.name == "nt":   # Windows' os.kill would end the process: never ask
        return True
    try:
        os.kill(pid, 0)   # signal 0: no signal sent, only the check that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:   # someone else's process
        return True
    return True
