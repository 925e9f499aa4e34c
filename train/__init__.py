"""train: the main job's machinery, beside the network package nn (which never imports it).

    flags.py     the job's settings (Config), read from the command line, every value checked
    outputs.py   the files a run writes: named after --out, apart from its inputs, locked while it runs
    run.py       the run around the loop: outputs claimed, checkpoints saved and resumed, stops
    resume.py    a checkpoint's run state read back as input (each field checked) and merged with the flags
    evaluate.py  the loss of each split, and a sample
    parallel.py  data parallelism: each batch and each update split across forked processes
    health.py    gradient health: norms, update ratios, activations; its log and its plot
    memory.py    glibc's freed memory kept for reuse (keep_freed_memory), peak memory, the memory
                 available and the memory a training step needs (checked before a run starts)
    fit.py       a short run in memory (the demos' models)

nn does no process, lock, signal or allocator work; everything of that kind is here. A
training loop of your own needs only one line from it:

    import train
    train.keep_freed_memory()   # each step's freed activations are reused, not re-faulted
"""
from . import evaluate, flags, health, memory, outputs, parallel, resume, run
from .fit import fit
from .memory import keep_freed_memory, peak_resident_mib
from .parallel import DataParallel, WorkerDied

__all__ = ["evaluate", "flags", "health", "memory", "outputs", "parallel", "resume", "run", "fit", "keep_freed_memory",
           "peak_resident_mib", "DataParallel", "WorkerDied"]
