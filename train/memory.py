"""A training process's memory: freed memory kept for reuse instead of re-faulted
(keep_freed_memory), and how much a process needed at most (peak_resident_mib).

A tensorgrad training step allocates its activations and gradients afresh (tens of MiB for
the nanoGPT CPU model) and frees them all when the step's graph goes. glibc's malloc then
hands the freed top of the heap back to the operating system, and the next step pays the
kernel to map and zero those pages again: thousands of page faults a step (PyTorch's
allocator keeps such memory). Whether it happens depends on the process's history: a job
that once allocated and freed a large array has raised glibc's thresholds already; a small
script has not.

It is a setting of the whole process, so nn never makes it: an application chooses it. The
main job calls keep_freed_memory() before it builds its model; a training loop of your own
does the same in one line:

    import train
    train.keep_freed_memory()   # each step's freed activations are reused, not re-faulted
"""
import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1   # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3

def keep_freed_memory(limit=256 * 2**20):
    """Ask glibc's malloc to keep up to `limit` bytes of freed memory for reuse, and to serve
    arrays up to 32 MiB from that reusable heap. On other C libraries (macOS, Windows, musl)
    it does nothing. Returns True when the setting was applied."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):   # no libc to load, or one without mallopt
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, limit)) and bool(mallopt(M_MMAP_THRESHOLD, 32 * 2**20))


def peak_resident_mib(pids=()):
    """Peak resident memory, in MiB, of this process plus the processes `pids` (DataParallel's
    workers), each its own peak (Linux's VmHWM) and added up, so pages they share count
    twice. Without /proc (macOS, Windows): this process's own peak, where getrusage has it."""
    total = 0.0
    for pid in ["self", *pids]:
        try:
            with open(f"/proc/{pid}/status") as status:
                total += next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
        except OSError:
            import resource   # Unix only
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # bytes on macOS, KiB elsewhere
            return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
    return total
