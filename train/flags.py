"""The main job's settings (Config: one command-line flag each, nanoGPT's CPU configuration
by default) and reading them from the command line, every value checked as it is read.

    config, given = train.flags.parse_config(["--max_iters", "500"])
    config.max_iters, given   # 500, {"max_iters": 500}: given names the flags on the command line

A bad flag is argparse's usage error: one line on stderr, exit status 2. A setting read from
elsewhere (a checkpoint's, on --resume) is held to its flag's own check (setting), the
settings to each other once all are known (combination_error), and --processes to the cores
this job may use (within_cores).
"""
import argparse
import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .outputs import OutputError, check_clashes, claimed


def checked(convert, ok, expected):
    """An argparse type: the flag's text through convert (int or float), refused unless
    ok(value), with argparse's usage error (exit status 2): "argument --lr: must be a
    finite number > 0, got nan". It keeps ok and expected, so a value read from elsewhere (a
    checkpoint's settings) is held to the same check (setting)."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text}")
        return value
    parse.__name__ = convert.__name__   # argparse names the type in its messages and metavars
    parse.ok, parse.expected = ok, expected
    return parse


# the flags' kinds of number; nan fails every comparison, so it is refused by each
COUNT = checked(int, lambda n: n >= 0, "a whole number >= 0")
POSITIVE_COUNT = checked(int, lambda n: n >= 1, "a whole number >= 1")
POSITIVE = checked(float, lambda v: 0 < v < math.inf, "a finite number > 0")
NON_NEGATIVE = checked(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")
FRACTION = checked(float, lambda v: 0 <= v < 1, "a number in [0, 1)")
SEED = checked(int, lambda n: 0 <= n < 2**32, "a whole number from 0 to 2**32 - 1 (numpy's seed range)")


def cores():
    """The CPU cores this process may run on: its affinity where the platform tells it (a
    container or `taskset` may allow fewer than the machine has), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # macOS, Windows
        return os.cpu_count() or 1


def flag(default, help, kind=None):
    """A Config field: its default, its --help text and the kind of value it takes (one of the
    argparse types above, which refuse the rest; None: any value of the field's type)."""
    return field(default=default, metadata={"help": help, "kind": kind})


@dataclass
class Config:
    """The job's settings, one command-line flag each. The defaults are nanoGPT's CPU
    configuration for shakespeare_char (its README's "baby GPT" on a MacBook)."""
    # data
    data: str = flag("shakespeare", "'shakespeare' (downloaded once, then cached) or the path of a "
                                    "UTF-8 text file")
    # model
    n_layer: int = flag(4, "transformer blocks", POSITIVE_COUNT)
    n_head: int = flag(4, "attention heads per block (they split n_embd)", POSITIVE_COUNT)
    n_embd: int = flag(128, "embedding width (channels)", POSITIVE_COUNT)
    block_size: int = flag(64, "context length in characters", POSITIVE_COUNT)
    dropout: float = flag(0.0, "dropout probability in training", FRACTION)
    tie_weights: bool = flag(False, "the head reuses the token embedding's table, as GPT-2 and nanoGPT do "
                                    "(off by default: here the untied head reached the lower val loss)")
    # training
    batch_size: int = flag(12, "sequences per step", POSITIVE_COUNT)
    max_iters: int = flag(2000, "optimizer steps in all", COUNT)
    lr: float = flag(1e-3, "peak learning rate (AdamW)", POSITIVE)
    min_lr: float = flag(1e-4, "learning rate at the end of the cosine decay", NON_NEGATIVE)
    warmup_iters: int = flag(100, "steps of linear warmup to lr", COUNT)
    lr_decay_iters: int = flag(0, "step where the cosine decay reaches min_lr; 0 means max_iters (set "
                                  "it to the final length when a later --resume will extend this run)", COUNT)
    beta1: float = flag(0.9, "AdamW beta1", FRACTION)
    beta2: float = flag(0.99, "AdamW beta2", FRACTION)
    weight_decay: float = flag(0.1, "AdamW weight decay (matrices and embeddings only)", NON_NEGATIVE)
    grad_clip: float = flag(1.0, "clip the global gradient norm to this; 0 turns clipping off", NON_NEGATIVE)
    seed: int = flag(1337, "seed of the initial weights, the batches and the samples", SEED)
    processes: int = flag(min(4, cores()),
                          "processes that share each batch and each evaluation (data parallel, each "
                          "multiplying matrices on one core; at most the cores this job may use); 1 runs "
                          "the model on the whole batch with numpy's own BLAS threads", POSITIVE_COUNT)
    worker_timeout: float = flag(30.0, "seconds a worker process may take to answer (or 10 times its slowest "
                                       "answer so far, if longer) before the job kills it as hung", POSITIVE)
    # evaluation and output
    eval_interval: int = flag(250, "steps between evaluations (each also writes the checkpoint)", POSITIVE_COUNT)
    eval_iters: int = flag(20, "batches per split averaged at each evaluation", POSITIVE_COUNT)
    log_interval: int = flag(10, "steps between the lines `iter N: loss X, ...` printed instead of the progress "
                                 "bar when the output goes to a file or a pipe", POSITIVE_COUNT)
    sample_every: int = flag(0, "steps between printed samples; 0 samples only at the end", COUNT)
    out: str = flag("out/chargpt.safetensors", "checkpoint path; the loss log (.csv, .png) and the gradient "
                                               "health (.health.csv, .health.png) go beside it")
    resume: bool = flag(False, "continue from the checkpoint at --out (flags given now override "
                               "its settings, except the model's shape)")
    overwrite: bool = flag(False, "start a new run even where --out already holds a checkpoint (or its logs), "
                                  "replacing them")

    @property
    def decay_iters(self):
        """The step where the cosine decay ends (lr_decay_iters, or max_iters when 0)."""
        return self.lr_decay_iters or self.max_iters


MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "dropout", "tie_weights")   # fixed once a model exists
FIELDS = {f.name: f for f in fields(Config)}
EXPECTED = {bool: "true or false", str: "text"}   # what a setting of a flag without a kind must be


def setting(name, value):
    """`value` as the setting `name` when it comes from elsewhere than the command line (a
    checkpoint's settings, as JSON gives them), held to the flag's own check: it must have the
    flag's type (an int for a whole number, and not true or false; an int or a float for a
    number; true or false; text) and pass the flag's kind, else a ValueError saying what it
    must be. An int given for a number comes back a float."""
    f = FIELDS[name]
    kind = f.metadata["kind"]
    expected = kind.expected if kind else EXPECTED[f.type]
    if type(value) is not f.type and not (f.type is float and type(value) is int):   # type(): True is an int
        raise ValueError(expected)
    try:
        value = f.type(value)
    except OverflowError:   # an int beyond any float
        raise ValueError(expected) from None
    if kind and not kind.ok(value):
        raise ValueError(expected)
    return value


def combination_error(config):
    """What is wrong with the settings taken together, or None: n_head must divide n_embd,
    and min_lr, where the cosine decay ends, may not be above lr, where it starts (the
    learning rate would climb as the run goes)."""
    if config.n_embd % config.n_head:
        return f"--n_embd {config.n_embd} must be divisible by --n_head {config.n_head}"
    if config.min_lr > config.lr:
        return (f"--min_lr {config.min_lr} is above --lr {config.lr}: the cosine decay would raise the learning "
                "rate; give a --min_lr at most --lr")
    return None


def within_cores(config):
    """The config with --processes at most the cores this job may use (cores()), saying so in
    a line when it lowers it: more processes than cores only take turns, each with memory of
    its own (a flag asking for more, or a checkpoint's setting from a larger machine)."""
    available = cores()
    if config.processes <= available:
        return config
    print(f"--processes {config.processes} is more than the {available} core(s) this job may use: "
          f"running {available} processes")
    return replace(config, processes=available)


def parse_config(argv=None, description=None):
    """The Config from the command line (argv, or sys.argv's), plus the names of the flags
    actually given (a resumed run takes the rest from its checkpoint)."""
    parser = argparse.ArgumentParser(description=description, argument_default=argparse.SUPPRESS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Config):
        help = f"{f.metadata['help']} (default: {f.default})"
        if f.type is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=help)
        else:   # each value is checked as it is read: argparse refuses the rest (exit status 2)
            parser.add_argument(f"--{f.name}", type=f.metadata["kind"] or f.type, metavar=f.type.__name__.upper(),
                                help=help)
    given = vars(parser.parse_args(argv))   # only the flags on the command line (SUPPRESS)
    config = Config(**given)
    problem = None if config.resume else combination_error(config)   # resumed: once merged with the checkpoint's
    if problem:
        parser.error(problem)
    if config.resume and config.overwrite:
        parser.error("--resume continues the checkpoint at --out and --overwrite replaces it: pass one of them")
    if Path(config.out).is_dir():
        parser.error(f"--out {config.out} is a folder: give the checkpoint's file name, e.g. "
                     f"{Path(config.out) / 'chargpt.safetensors'}")
    try:   # --out names every output and its lock: they must be files of their own
        check_clashes(claimed(config.out), {})
    except OutputError as error:
        parser.error(f"--out {config.out}: {error}; name the checkpoint with a suffix of its own, "
                     f"e.g. {Path(config.out).with_suffix('.safetensors')}")
    return config, given
