"""tgtrain: the main job's machinery, beside the network package nn (which never imports it).

    flags.py      the job's settings (Config), read from the command line, every value checked
    outputs.py    the files a run writes: named after --out, apart from its inputs, locked while it runs
    start.py      what a run claims and checks before step 0: its outputs, the checkpoint --resume
                  continues, the memory a step needs
    resume.py     a checkpoint's run state read back as input (each field checked) and merged with the flags
    run.py        the run from step to step: its step, evaluations and random streams, saved as the checkpoint
    stops.py      how a run ends: its exit statuses, Ctrl-C and SIGTERM, the last completed step saved
    loss_log.py   the loss log beside the checkpoint (.csv, .png)
    evaluate.py   the loss of each split, and a sample
    parallel.py   data parallelism: each batch and each update split across forked processes
    workers.py    worker processes: started on their own, answering in time, ended with the job
    health.py     gradient health (HealthLog), with its numbers (health_measures.py), its log
                  (health_csv.py) and its plot (health_plot.py)
    memory.py     glibc's freed memory kept for reuse (keep_freed_memory), peak memory, the memory
                  available and the memory a training step needs (checked before a run starts)
    fit.py        a short run in memory (the demos' models)

nn does no process, lock, signal or allocator work; everything of that kind is here. A
training loop of your own needs only one line from it:

    import tgtrain
    tgtrain.keep_freed_memory()   # each step's freed activations are reused, not re-faulted
"""
from . import evaluate, flags, health, loss_log, memory, outputs, parallel, resume, run, start, stops, workers
from .fit import fit
from .memory import keep_freed_memory, peak_resident_mib
from .parallel import DataParallel
from .workers import WorkerDied

__all__ = ["evaluate", "flags", "health", "loss_log", "memory", "outputs", "parallel", "resume", "run", "start",
           "stops", "workers", "fit", "keep_freed_memory", "peak_resident_mib", "DataParallel", "WorkerDied"]
