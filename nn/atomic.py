"""Files as input and output: read only what is a regular file, write a file so that a crash
never leaves half of it behind, and clean up after a writer that was killed before it could.

Every path here may have been planted: a symlink to another file, a hard link to the corpus,
a FIFO that never ends, a user's file whose name looks like ours. So a file is opened first
and checked as opened (os.fstat: what it is, how many names it has, whose it is), a file is
created only where nothing was (O_EXCL), and nothing is removed unless it is provably ours.
"""
import os
import re
import secrets
import stat

# A temporary file is named .tmp-<writer's pid>-<32 random hex digits>-<target's name>: the
# pid says whether its writer is still running, the random digits make it a name no user file
# has (.tmp-2024-05-corpus.txt is not one), and the target's name says what it was going to be.
TEMPORARY = re.compile(r"\.tmp-(\d+)-[0-9a-f]{32}-(.+)")
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)   # (POSIX; Windows has no symlinks to plant)
# what a path names, when it is not a regular file
NOT_FILES = {stat.S_ISDIR: "a folder", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
             stat.S_ISFIFO: "a FIFO (a named pipe)", stat.S_ISSOCK: "a socket"}


class NotAFile(OSError):
    """A path read as a file that names something else: a FIFO, a device, a folder, a socket."""


def open_regular(path):
    """The file at `path` open to read bytes, refused (NotAFile naming it and what it is)
    unless it is a regular file: a device never ends (/dev/zero, /dev/urandom) and opening a
    FIFO waits for a writer. It is opened without waiting (O_NONBLOCK, which a regular file
    ignores) and checked once open (os.fstat), so a path that changes in between cannot slip
    by (and it is checked before it is opened too: opening some devices does something).
    FileNotFoundError when nothing is there. A caller bounds what it reads: the size os.fstat
    gives, or a limit of its own, and one byte more (a file that grows meanwhile shows)."""
    _refuse_irregular(path, os.stat(path))
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))   # (POSIX, Windows)
    try:
        _refuse_irregular(path, os.fstat(fd))
    except NotAFile:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _refuse_irregular(path, info):
    kind = what_it_is(info)
    if kind:
        raise NotAFile(f"{path}: is {kind}, not a regular file")


def what_it_is(info):
    """None for a regular file, else what it is ("a FIFO (a named pipe)"), from its os.stat."""
    if stat.S_ISREG(info.st_mode):
        return None
    return next((name for test, name in NOT_FILES.items() if test(info.st_mode)), "not a file")


def not_ours(info):
    """Why a file (its os.fstat) may not be written over or removed by us, or None: it must be a
    regular file with one name (not a hard link to the corpus) that this user owns."""
    kind = what_it_is(info)
    if kind:
        return f"is {kind}"
    if info.st_nlink != 1:
        return f"has {info.st_nlink} names (a hard link to another file)"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return "belongs to another user"
    return None


def write_atomically(path, write):
    """Call write(file) on a new temporary file in path's folder, then rename it over path.
    A rename within one folder is atomic: readers see the old file or the new one, never a
    mix, and a crash (or Ctrl-C) mid-write leaves the old file behind. Only a kill that
    gives no chance to clean up (SIGKILL, a power cut) leaves the temporary file too:
    remove_stale_temporaries() removes it later. The temporary is created where nothing was
    (O_EXCL: no planted link is followed)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".tmp-{os.getpid()}-{secrets.token_hex(16)}-{os.path.basename(path)}")
    # 0o666: the umask then takes away what it takes from any new file
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_FOLLOW | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def remove_stale_temporaries(folder, keep=(), in_use=lambda target: False):
    """Delete the temporary files that write_atomically left in `folder` when its writer was
    killed mid-write: only files of its naming scheme, only when they are provably abandoned
    (the process that wrote them is gone, and in_use(target path) says no one may still be
    writing the file it was to become: train passes "another run holds its lock", which a
    writer in another pid namespace does), only regular files with one name that this user
    owns, and never one of `keep` (the paths a run reads or claims: its corpus, its outputs,
    their locks), under any name. Returns their paths."""
    removed = []
    try:
        names = os.listdir(folder or ".")
    except FileNotFoundError:
        return removed
    keeping = [os.stat(path) for path in keep if os.path.exists(path)]
    for name in names:
        match = TEMPORARY.fullmatch(name)
        path = os.path.join(folder, name)
        if (match and not _running(int(match.group(1))) and not in_use(os.path.join(folder, match.group(2)))
                and _remove_ours(path, keeping)):
            removed.append(path)
    return removed


def _remove_ours(path, keeping):
    """Remove the temporary at `path` if it is ours to remove: a regular file (not a symlink:
    os.lstat) with one name, this user's, none of `keeping` (os.stat results); True if it was."""
    try:
        info = os.lstat(path)
        if not_ours(info) or any(os.path.samestat(info, other) for other in keeping):
            return False
        os.unlink(path)
        return True
    except FileNotFoundError:   # another run cleaned it first
        return False


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
    except OverflowError:   # a pid larger than any: no such process
        return False
    return True
