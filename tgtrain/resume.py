"""--resume: the run state a checkpoint's metadata holds, read back as input, then merged with
the flags given now.

    checkpoint = tgtrain.start.load_checkpoint(config.out)   # (model, tokenizer, meta)
    config = tgtrain.resume.resumed_config(config, given, checkpoint)

A checkpoint's checksum proves only that the file is as it was written, not who wrote it:
anyone who edits the metadata can compute a new one. So every field the job reads back is
checked for its type and its range before it is used (check_run_state): each setting of
`config` as its flag checks it (tgtrain.flags.setting), `step` a whole number >= 0, `history`
rows [step, train loss, val loss, learning rate] of finite numbers with rising steps,
`best_val_loss` null or a finite number, `rng` and `batch_rng` the states of numpy's PCG64.
A field that fails is a CheckpointError naming the file and the field; nothing is written.
"""
from dataclasses import replace

import nn
from nn import checks

from .flags import MODEL_FIELDS, Config, FIELDS, combination_error, setting
from .stops import JobError

RUN_STATE = ("config", "step", "history", "best_val_loss", "rng", "batch_rng")   # what --resume reads


def resumed_config(config, given, checkpoint):
    """The Config of a resumed run: the checkpoint's settings (checked, with the rest of its
    run state: check_run_state), overridden by the flags given now (except the model's
    shape, which the checkpoint fixes), then checked together (a usage error, exit status 2).
    The device is this run's (--device, else cpu), never the checkpoint's: a GPU run goes on
    on a CPU, and back (in one process on cuda; a GPU run's one process is not kept)."""
    path, (model, _, meta) = config.out, checkpoint
    saved = check_run_state(path, meta)
    if saved.pop("device", "cpu") != "cpu":   # its --processes 1 was the GPU's, not a choice
        saved.pop("processes", None)
    shape = {name: model.config[name] for name in MODEL_FIELDS}
    changed = [f"--{name} {given[name]} (the checkpoint has {shape[name]})"
               for name in MODEL_FIELDS if name in given and given[name] != shape[name]]
    if changed:
        raise JobError(f"--resume cannot change the model's shape: {', '.join(changed)}; drop those flags")
    merged = Config(**{**saved, **shape, **given, "out": path, "overwrite": False})
    if merged.device == "cuda":   # an explicit --processes above 1 was refused with the flags
        merged = replace(merged, processes=1)
    problem = combination_error(merged)
    if problem:
        raise JobError(f"--resume: {problem} (the flags given now over the checkpoint's settings)", status=2)
    return merged


def check_run_state(path, meta):
    """The checkpoint's settings, each as its flag checks it ({name: value}; a setting an older
    version had is dropped); raises CheckpointError, naming `path` and the first field that
    fails, unless the metadata holds the run state as train_chargpt.py writes it (see the
    module's docstring)."""
    missing = [key for key in RUN_STATE if key not in meta]
    if missing:
        raise nn.CheckpointError(f"{path}: cannot resume from it: its metadata lacks {', '.join(missing)} (it was "
                                 "not written by train_chargpt.py; sample from it, or train a new model)")

    def refuse(field, expected, value):
        raise nn.CheckpointError(f"{path}: cannot resume from it: its metadata's {field} must be {expected}, got "
                                 f"{repr(value)[:60]}")
    if not isinstance(meta["config"], dict):
        refuse("config", "an object of the job's settings", meta["config"])
    saved = {}
    for name, value in meta["config"].items():
        if name in FIELDS:
            try:
                saved[name] = setting(name, value)
            except ValueError as error:
                refuse(f"config.{name}", error, value)
    step = meta["step"]
    if not checks.COUNT(step):   # a whole number >= 0, and not true or false (which Python counts as 1 and 0)
        refuse("step", checks.COUNT.expected, step)
    if not is_history(meta["history"], step):
        refuse("history", f"rows [step, train loss, val loss, learning rate] of finite numbers, their steps rising "
                          f"from 0 to at most the step, {step}", meta["history"])
    best = checks.or_none(checks.FINITE)
    if not best(meta["best_val_loss"]):
        refuse("best_val_loss", best.expected, meta["best_val_loss"])
    for key in ("rng", "batch_rng"):
        if not is_pcg64_state(meta[key]):
            refuse(key, "the state of numpy's PCG64 generator, {bit_generator: 'PCG64', state: {state, inc}, "
                        "has_uint32, uinteger}", meta[key])
    return saved


def is_history(rows, step):
    """Whether `rows` are the job's evaluations: [step, train loss, val loss, learning rate]
    each, the steps whole numbers rising from 0 to at most `step`, the rest finite numbers."""
    if not isinstance(rows, list) or not all(isinstance(row, list) and len(row) == 4 for row in rows):
        return False
    steps = [row[0] for row in rows]
    return (all(checks.is_whole(s) for s in steps) and steps == sorted(set(steps))
            and all(0 <= s <= step for s in steps) and all(checks.FINITE(value) for row in rows for value in row[1:]))


def is_pcg64_state(state):
    """Whether `state` is what numpy's PCG64 bit generator takes as its state (and gives as
    JSON): its 128-bit state and increment, and its buffered 32-bit half."""
    if not (isinstance(state, dict) and state.keys() == {"bit_generator", "state", "has_uint32", "uinteger"}):
        return False
    inner = state["state"]
    return (state["bit_generator"] == "PCG64" and isinstance(inner, dict) and inner.keys() == {"state", "inc"}
            and all(checks.is_whole(n) and 0 <= n < 2**128 for n in inner.values())
            and checks.is_whole(state["has_uint32"]) and state["has_uint32"] in (0, 1)
            and checks.is_whole(state["uinteger"]) and 0 <= state["uinteger"] < 2**32)
