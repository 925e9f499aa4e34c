"""A training process's memory: freed memory kept for reuse instead of re-faulted
(keep_freed_memory), how much a process needed at most (peak_resident_mib), how much the
machine has to give (available_bytes) and how much one training step will take (step_bytes).

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

    import tgtrain
    tgtrain.keep_freed_memory()   # each step's freed activations are reused, not re-faulted
"""
import ctypes
import ctypes.util
import os
import sys

from nn import data

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


def available_bytes():
    """The memory this process can still take without swapping, in bytes: Linux's own
    estimate (MemAvailable in /proc/meminfo: free memory plus the caches it can drop), lowered
    to what a cgroup memory limit leaves (a container's); elsewhere the free physical memory
    (os.sysconf), which leaves the caches out. None where neither can be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            available = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):   # no such sysconf name here (macOS, Windows)
            return None
    try:   # cgroup v2: the limit ("max" when there is none) less what the group already uses
        with open("/sys/fs/cgroup/memory.max") as limit, open("/sys/fs/cgroup/memory.current") as used:
            available = min(available, int(limit.read()) - int(used.read()))
    except (OSError, ValueError):
        pass
    return available


def corpus_limit():
    """The largest corpus file the main job reads, in bytes: one that takes at most half the
    memory available while it becomes ids (nn.data.MEMORY_PER_BYTE bytes of memory per byte),
    leaving the other half to the model and its steps. None where the memory available is
    unknown: then any size is read."""
    available = available_bytes()
    return None if available is None else available // (2 * data.MEMORY_PER_BYTE)


def gpt_parameters(vocab_size, block_size, n_layer, n_head, n_embd, pos="learned", tie_weights=False, **_):
    """How many parameters nn.GPT(**config) has, counted from its shape without building it:
    the token table (V, C), a learned position table (T, C), per block two LayerNorms (2 * 2C),
    qkv (C, 3C) + 3C, the attention's projection (C, C) + C, fc (C, 4C) + 4C and its
    projection (4C, C) + C, then ln_f (2C) and an untied head (C, V)."""
    C = n_embd
    block = 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C)
    positions = block_size * C if pos == "learned" else 0
    return vocab_size * C + positions + n_layer * block + 2 * C + (0 if tie_weights else C * vocab_size)


def step_bytes(model_config, batch_size, processes=1):
    """The memory a training step of nn.GPT(**model_config) takes at its peak, in bytes
    (float32), counted from the shapes alone (no array is made): {"parameters": ...,
    "activations": ..., "checkpoint": ...}, and the peak is the parameters' plus the larger of
    the other two (a checkpoint is written after backward has let go of the activations). An
    estimate, within a factor of what a step takes (tests/test_hostile_runs.py measures it).

    Parameter-sized arrays: the weights, AdamW's two moments and the gradients (4 in all);
    split across processes, each process's gradients and its buffer for them, their sums,
    and the copy of the weights and moments kept before each update (2 * processes + 7).

    Activations: GPT.forward keeps for backward, per token, in floats:
      per block   ln1 and ln2 their normalised input and output (2 * 2C), qkv (3C), the scaled
                  kᵀ of attention (C), its weights (n_head * T), its output (C), the two
                  projections (2C), the two residual sums (2C), fc (4C) and GELU's output and
                  its 1 + tanh (2 * 4C): 25C + n_head * T
      outside     the token and position embeddings (2C), ln_f (2C), the logits and
                  cross-entropy's shifted logits (2V)
    and backward holds up to half as much again at its peak (the gradients in flight and the
    fused ops' temporaries): 1.5 times that, for each of the batch_size * block_size tokens.

    Checkpoint: at an evaluation's step nn.save copies the weights and both moments (the
    state dicts) and streams them to the file, beside the copy of the weights the gradient
    health takes: 3 + 1 parameter-sized arrays."""
    c = model_config
    kept = c["n_layer"] * (25 * c["n_embd"] + c["n_head"] * c["block_size"]) + 4 * c["n_embd"] + 2 * c["vocab_size"]
    parameters = gpt_parameters(**c)
    copies = 4 if processes == 1 else 2 * processes + 7
    return {"parameters": 4 * copies * parameters,
            "activations": 4 * 3 * kept * batch_size * c["block_size"] // 2,
            "checkpoint": 4 * 4 * parameters}


def peak_bytes(need):
    """The peak of step_bytes' parts: the parameters' arrays, then the activations or the
    checkpoint, whichever is larger (they are never held at once)."""
    return need["parameters"] + max(need["activations"], need["checkpoint"])
