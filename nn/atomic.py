"""Writing a file so that a crash never leaves half of it behind."""
import os
import tempfile


def write_atomically(path, write):
    """Call write(file) on a new temporary file in path's folder, then rename it over path.
    A rename within one folder is atomic: readers see the old file or the new one, never a
    mix, and a crash (or Ctrl-C) mid-write leaves the old file and no temporary behind."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
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
