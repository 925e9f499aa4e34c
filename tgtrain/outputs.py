"""The files a run writes: none may be one of its inputs or another of its outputs, and only
one run at a time may write each of them.

    tgtrain.outputs.outputs("out/chargpt.safetensors")   # every file the main job writes, named after it
    tgtrain.outputs.claimed("out/chargpt.safetensors")   # and their locks: every path a run writes

    tgtrain.outputs.check_clashes({"checkpoint": out, "loss log": out.with_suffix(".csv")},
                             {"corpus": "input.txt"})   # OutputError if two name one file
    with tgtrain.outputs.RunLock(f"{out}.lock"):   # Busy if another run holds it, naming its pid
        ...train, writing the output...

Each output has a lock of its own (tgtrain.start.claim_outputs takes them all): runs whose --out
differ can still name one file, run.safetensors and run.pt both a loss log run.csv.

Two paths name one file when they resolve to the same path (symlinks and ".." followed) or,
for files that exist, when they are the same file on disk (a hard link: two names, one inode).

The lock is the operating system's (flock) on an open file, so it goes away with the process
that holds it, however that process ends: a run killed with kill -9 leaves its lock file
behind, with its pid inside, but not the lock, and the next run removes that file and makes
its own. A lock file is only ever written by the run that created it (O_EXCL): a path that
holds anything else (a symlink planted in a folder others can write to, a hard link to the
corpus, a FIFO, another user's file, a file of other text) is refused, never followed,
truncated or removed. A forked child (tgtrain.parallel's workers) shares its parent's lock
until it exits. Windows has no flock: there the lock is not taken (a warning says so).
"""
import errno
import os
import re
import sys
import warnings
from collections import namedtuple
from pathlib import Path

from nn.atomic import NO_FOLLOW, not_ours

try:
    import fcntl
except ImportError:   # Windows
    fcntl = None


Outputs = namedtuple("Outputs", "checkpoint loss_csv loss_png health_csv health_png")
DESCRIBED = Outputs("checkpoint", "loss log", "loss plot", "gradient health log", "gradient health plot")
LOCK_TEXT = re.compile(rb"(\d{1,20}\n)?")   # what a lock file holds: its holder's pid, or nothing yet


def outputs(out):
    """Every file the main job writes, named after --out: for out/chargpt.safetensors, the
    checkpoint itself, the loss log out/chargpt.csv and .png, the gradient health
    out/chargpt.health.csv and .health.png. (Their locks, out/chargpt.safetensors.lock,
    out/chargpt.csv.lock, ..., live only while the run does.)"""
    out = Path(out)
    return Outputs(out, out.with_suffix(".csv"), out.with_suffix(".png"), out.with_suffix(".health.csv"),
                   out.with_suffix(".health.png"))


def described(files):
    """{"checkpoint": path, "loss log": path, ...}: the outputs by what they are, for messages."""
    return dict(zip(DESCRIBED, files))


def printable_output():
    """Let stdout show what its encoding cannot (a file name that is not UTF-8, Korean text in
    a Latin-1 locale) as backslash escapes, \\udcff or \\uac00, rather than end the program
    with a UnicodeEncodeError: what stderr does already. For the job, the sampler, the exporter."""
    sys.stdout.reconfigure(errors="backslashreplace")


def printable(name):
    """A file name as text that every font and terminal shows: a name that is not UTF-8 (its
    bytes kept by Python as lone surrogates) with those bytes written as \\xff."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def lock_of(path):
    """The lock of an output, <file>.lock beside it."""
    return Path(f"{path}.lock")


def claimed(out):
    """{what: path} of every path a run on --out writes: its outputs and their locks."""
    files = described(outputs(out))
    return {**files, **{f"lock of the {what}": lock_of(path) for what, path in files.items()}}


class OutputError(ValueError):
    """Outputs that would overwrite an input, or each other."""


class Busy(RuntimeError):
    """Another process holds the lock. `pid`: the holder's, as its lock file says (None if unreadable)."""

    def __init__(self, path, pid):
        self.path, self.pid = path, pid
        holder = f"process {pid}" if pid else "another process (its pid unreadable)"
        super().__init__(f"{path} is held by {holder}, another run writing the same outputs")


def same_file(a, b):
    """Whether the paths a and b name one file (see the module's docstring)."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)   # same device and inode: hard links and symlinks included
    return os.path.realpath(a) == os.path.realpath(b)


def check_clashes(outputs, inputs):
    """Raise OutputError unless every output ({what: path}) is a file apart from every input
    ({what: path}) and from every other output, and none is a folder."""
    for what, path in outputs.items():
        if os.path.isdir(path):
            raise OutputError(f"the {what} {path} would replace a folder")
        for source, input_path in inputs.items():
            if input_path is not None and same_file(path, input_path):
                raise OutputError(f"the {what} {path} would overwrite the {source} {input_path}")
    names = list(outputs.items())
    for i, (what, path) in enumerate(names):
        for other, other_path in names[i + 1:]:
            if same_file(path, other_path):
                raise OutputError(f"the {what} and the {other} would be one file, {path}")


class RunLock:
    """An exclusive lock, held from construction until release() (or the with block's end):
    the file at `path` holds the holder's pid. Raises Busy when another process holds it, and
    OutputError when `path` is not a lock file (see _open_existing): a lock never writes into
    a file it did not create."""

    def __init__(self, path):
        self.path, self.fd = os.fspath(path), None
        if fcntl is None:
            warnings.warn(f"RunLock: this platform has no flock; {self.path} is not locked")
            return
        while self.fd is None:   # None: the file changed under us (another run took or removed it): again
            self.fd = self._take()

    def _take(self):
        """The lock file of this run, open and locked; or None to try again."""
        try:   # made here and now (O_EXCL), so nothing planted at the path is followed or written into
            fd, new = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | NO_FOLLOW, 0o644), True
        except FileExistsError:
            try:
                fd, new = _open_existing(self.path), False
            except FileNotFoundError:   # its holder removed it meanwhile
                return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            raise Busy(self.path, int(pid) if pid.isdigit() else None) from None
        if new and _names(self.path, fd):
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
            return fd
        if _names(self.path, fd):   # a lock file that a killed run left, its lock free: removed, then made anew
            os.unlink(self.path)
        os.close(fd)
        return None

    def release(self):
        """Remove the lock file and let go of the lock (once; later calls do nothing)."""
        if self.fd is None:
            return
        if _names(self.path, self.fd):   # removed while still locked: whoever opens the path next makes a new file
            os.unlink(self.path)
        os.close(self.fd)   # closing drops the lock
        self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def held(path):
    """Whether a process holds the lock at `path`: asked by taking it shared for a moment,
    without making or writing the file (a run that starts on that file in that very moment
    finds it busy, and says so). False when there is no lock file (or no flock)."""
    try:
        fd = os.open(path, os.O_RDONLY | NO_FOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if fcntl:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def written_elsewhere(path, out):
    """Whether another running job may be writing the file `path`: its lock is held, and it is
    not an output of --out `out` (whose locks this run holds)."""
    return Path(path).name not in {output.name for output in outputs(out)} and held(lock_of(path))


def _names(path, fd):
    """Whether `path` still names the file open as fd."""
    try:
        return os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        return False


def _open_existing(path):
    """The lock file at `path`, which another run made, open to read: refused (OutputError)
    unless it is one, a regular file with one name, this user's, holding a pid or nothing.
    A symlink is not followed (O_NOFOLLOW) and a FIFO not waited for (O_NONBLOCK): a lock
    planted in a folder others can write to, or a link to the corpus, is never written into."""
    try:
        fd = os.open(path, os.O_RDONLY | NO_FOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise OutputError(f"{path} is a symbolic link, not a lock file: remove it, or choose another --out") from None
    problem = not_ours(os.fstat(fd))
    if problem is None and not LOCK_TEXT.fullmatch(os.read(fd, 64)):
        problem = "holds something else than a pid"
    if problem:
        os.close(fd)
        raise OutputError(f"{path} {problem}, so it is not a lock file of a run: move it away, or choose another "
                          "--out")
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
