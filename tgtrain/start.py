"""What a run claims and checks before its step 0.

- its outputs, all named after --out, and their locks: none may be the corpus or another of
  them; a new run does not replace existing files without --overwrite; a run that would write
  a file another running job writes is refused, naming the file and the pid of the run that
  holds its lock; the locks are taken first, so --resume reads a checkpoint no other run is
  writing (claim_outputs, then check_outputs);
- the checkpoint --resume continues (load_checkpoint; tgtrain/resume.py checks its run state);
- the memory one training step needs: a run that cannot fit is refused before it allocates
  (require_memory).

The temporary files a killed run left are removed here too (check_outputs: only provably
abandoned ones, never a file the run reads or claims).
"""
from contextlib import ExitStack, contextmanager
from pathlib import Path

import nn
from nn import data

from . import memory
from .flags import MODEL_FIELDS
from .outputs import Busy, OutputError, RunLock, check_clashes, claimed, described, lock_of, outputs, written_elsewhere
from .stops import JobError


@contextmanager
def claim_outputs(config):
    """Every path a run on --out writes, claimed for the block: its outputs and their locks
    (out/chargpt.safetensors.lock, out/chargpt.csv.lock, ...) apart from each other and from
    folders, and no other run writing any of them at once (a lock for each, naming this run's
    pid, released however the run ends: two runs whose --out differ may still share a log,
    run.safetensors and run.pt both write run.csv). Taken before anything is read: a resumed
    run reads only a checkpoint that no other run is writing. Then check_outputs. None of them
    may be the corpus named so far (on --resume, again once the checkpoint names its own)."""
    out = Path(config.out)
    refuse_clashes(config)   # before a lock is taken: a lock file left by a killed run is removed
    out.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as locks:   # each lock taken is let go when the block ends, or when the next one is refused
        for what, path in described(outputs(out)).items():
            try:
                locks.enter_context(RunLock(lock_of(path)))
            except Busy as busy:
                which = f"--out {out} is busy" if path == out else f"--out {out}: its {what} {path} is busy"
                raise JobError(f"{which}: {busy}; wait for that run to end, or choose another --out") from None
            except OutputError as error:
                raise JobError(f"--out {out}: {error}") from None
        yield


def check_outputs(config):
    """What a run's outputs need before anything is read or written, once the corpus is known
    (on --resume, from the checkpoint's settings): none of them, nor their locks, is the corpus
    (the same file under another name included: a symlink, a hard link); a new run replaces no
    existing file unless --overwrite. Then it removes the temporary files a killed run left in
    the folder (nn.atomic), saying so: never one the run reads or claims, nor one of a file
    another running job holds the lock of (its writer may live in another pid namespace)."""
    out = Path(config.out)
    refuse_clashes(config)
    existing = [str(path) for path in outputs(out) if path.exists()]
    if existing and not (config.resume or config.overwrite):
        raise JobError(f"{out} already holds a checkpoint: pass --resume to continue it, or --overwrite to "
                       "start over and replace it and its logs" if out.exists() else
                       f"{', '.join(existing)} already exist(s) and a new run would replace them: pass "
                       "--overwrite, or choose another --out", status=2)
    keep = [data.corpus_file(config.data), *claimed(out).values()]
    for path in nn.atomic.remove_stale_temporaries(out.parent, keep, lambda target: written_elsewhere(target, out)):
        print(f"removed {path}, a temporary file left by a run that was killed while writing")


def refuse_clashes(config):
    """JobError (a usage error) if an output of --out or its lock is the corpus, under any name."""
    try:
        check_clashes(claimed(config.out), {"corpus": data.corpus_file(config.data)})
    except OutputError as error:
        raise JobError(f"--out {config.out} --data {config.data}: {error}; choose another --out", status=2) from None


def load_checkpoint(path):
    """(model, tokenizer, meta) from a checkpoint written by the main job (a .safetensors
    file, or an .npz of tensorgrad 0.1), its metadata and every tensor checked against the
    model before anything is built (nn.checkpoint.load_gpt)."""
    if not Path(path).exists():
        raise nn.CheckpointError(f"{path}: no such checkpoint; train one with demos/train_chargpt.py "
                                 f"(without --resume)")
    return nn.checkpoint.load_gpt(path)


def require_memory(config, vocab_size):
    """Refuse (JobError, a usage error) a run whose training step needs more memory than
    the machine has available (tgtrain.memory.step_bytes against available_bytes), before the
    model or a batch takes any. Where the memory available is unknown, nothing is refused."""
    model_config = {**{name: getattr(config, name) for name in MODEL_FIELDS}, "vocab_size": vocab_size}
    need, available = memory.step_bytes(model_config, config.batch_size, config.processes), memory.available_bytes()
    if available is not None and memory.peak_bytes(need) > available:
        gib = lambda n: f"{n / 2**30:,.1f} GiB"
        rest = (f"{gib(need['activations'])} for the activations of --batch_size {config.batch_size} x --block_size "
                f"{config.block_size}" if need["activations"] >= need["checkpoint"] else
                f"{gib(need['checkpoint'])} to write a checkpoint, built in memory first")
        raise JobError(f"one training step needs about {gib(memory.peak_bytes(need))} ({gib(need['parameters'])} for "
                       f"the weights, AdamW's state and the gradients, {rest}), but this machine has {gib(available)} "
                       "of memory available: lower --batch_size or --block_size (or the model's size: --n_layer, "
                       "--n_embd)", status=2)
