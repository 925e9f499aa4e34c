"""The files a run writes: none may be one of its inputs or another of its outputs, and only
one run at a time may write each of them.

    train.outputs.outputs("out/chargpt.safetensors")   # every file the main job writes, named after it

    train.outputs.check_clashes({"checkpoint": out, "loss log": out.with_suffix(".csv")},
                             {"corpus": "input.txt"})   # OutputError if two name one file
    with train.outputs.RunLock(f"{out}.lock"):   # Busy if another run holds it, naming its pid
        ...train, writing the output...

Each output has a lock of its own (train.run.claim_outputs takes them all): runs whose --out
differ can still name one file, run.safetensors and run.pt both a loss log run.csv.

Two paths name one file when they resolve to the same path (symlinks and ".." followed) or,
for files that exist, when they are the same file on disk (a hard link: two names, one inode).

The lock is the operating system's (flock) on an open file, so it goes away with the process
that holds it, however that process ends: a run killed with kill -9 leaves its lock file
behind, with its pid inside, but not the lock, and the next run takes the file over. A
forked child (train.parallel's workers) shares its parent's lock until it exits. Windows has no
flock: there the lock is not taken (a warning says so).
"""
import os
import warnings
from collections import namedtuple
from pathlib import Path

try:
    import fcntl
except ImportError:   # Windows
    fcntl = None


Outputs = namedtuple("Outputs", "checkpoint loss_csv loss_png health_csv health_png")
DESCRIBED = Outputs("checkpoint", "loss log", "loss plot", "gradient health log", "gradient health plot")


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
    the file at `path` holds the holder's pid. Raises Busy when another process holds it."""

    def __init__(self, path):
        self.path, self.fd = os.fspath(path), None
        if fcntl is None:
            warnings.warn(f"RunLock: this platform has no flock; {self.path} is not locked")
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                raise Busy(self.path, int(pid) if pid.isdigit() else None) from None
            if _names(self.path, fd):
                break
            os.close(fd)   # its holder removed it between our open and our lock: lock the new one
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self.fd = fd

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


def _names(path, fd):
    """Whether `path` still names the file open as fd."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except FileNotFoundError:
        return False
