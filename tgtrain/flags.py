"""The main job's settings (Config: one command-line flag each, nanoGPT's CPU configuration
by default) and reading them from the command line, every value checked as it is read.

    config, given = tgtrain.flags.parse_config(["--max_iters", "500"])
    config.max_iters, given   # 500, {"max_iters": 500}: given names the flags on the command line

    config, _ = tgtrain.flags.parse_config(["--preset", "shakespeare_char", "--device", "cuda"])
    config.n_layer, config.processes   # 6, 1: nanoGPT's GPU configuration, in this one process

A bad flag is argparse's usage error: one line on stderr, exit status 2. A setting read from
elsewhere (a checkpoint's, on --resume) is held to its flag's own check (setting), the
settings to each other once all are known (combination_error), and --processes to the cores
this job may use (within_cores). Every check is one of nn.checks', and the model's flags are
nn.GPTConfig's fields, with its checks and help: a checkpoint's model_config is held to the same.
"""
import argparse
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from nn import checks
from nn.config import FIELDS as GPT_FIELDS
from tensorgrad import devices

from .outputs import OutputError, check_clashes, claimed


def checked(convert, check):
    """An argparse type: the flag's text through convert (int or float), refused unless it
    passes `check` (an nn.checks.Check), with argparse's usage error (exit status 2):
    "argument --lr: must be a finite number > 0, got nan"."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {check.expected}, got {text!r}") from None
        if not check(value):
            raise argparse.ArgumentTypeError(f"must be {check.expected}, got {text}")
        return value
    parse.__name__ = convert.__name__   # argparse names the type in its messages and metavars
    return parse


# the kinds of number the job's and the demos' flags take (nan fails every comparison, so each refuses it)
COUNT = checked(int, checks.COUNT)
POSITIVE_COUNT = checked(int, checks.POSITIVE_COUNT)
POSITIVE = checked(float, checks.POSITIVE)
NON_NEGATIVE = checked(float, checks.NON_NEGATIVE)
FRACTION = checked(float, checks.FRACTION)
SEED = checked(int, checks.SEED)


def cores():
    """The CPU cores this process may run on: its affinity where the platform tells it (a
    container or `taskset` may allow fewer than the machine has), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # macOS, Windows
        return os.cpu_count() or 1


DEVICE = checks.one_of(("cpu", "cuda", "cuda:0"))

# nanoGPT's config/train_shakespeare_char.py, for a GPU: its model (nanoGPT ties the head to the
# token embedding), batch, dropout, schedule (the cosine ends at max_iters) and evaluations
PRESETS = {"shakespeare_char": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, dropout=0.2, tie_weights=True,
                                    batch_size=64, max_iters=5000, lr=1e-3, min_lr=1e-4, warmup_iters=100,
                                    beta2=0.99, eval_interval=250, eval_iters=200)}


def flag(default, help, check):
    """A Config field: its default, its --help text and the values it takes (an nn.checks.Check:
    the command line's and a checkpoint's settings are held to it)."""
    return field(default=default, metadata={"help": help, "check": check})


def model_flag(name, default, note=""):
    """A Config field that is nn.GPTConfig's field `name`, with its check and its help (and a
    note of the job's own)."""
    described = GPT_FIELDS[name].metadata
    return flag(default, described["help"] + note, described["check"])


@dataclass
class Config:
    """The job's settings, one command-line flag each. The defaults are nanoGPT's CPU
    configuration for shakespeare_char (its README's "baby GPT" on a MacBook)."""
    # data
    data: str = flag("shakespeare", "'shakespeare' (downloaded once, then cached) or the path of a "
                                    "UTF-8 text file", checks.TEXT)
    # model: nn.GPTConfig's fields, nanoGPT's CPU sizes
    n_layer: int = model_flag("n_layer", 4)
    n_head: int = model_flag("n_head", 4)
    n_embd: int = model_flag("n_embd", 128)
    block_size: int = model_flag("block_size", 64)
    dropout: float = model_flag("dropout", 0.0)
    tie_weights: bool = model_flag("tie_weights", False, " (off by default: here the untied head reached the lower "
                                                         "val loss)")
    # training
    batch_size: int = flag(12, "sequences per step", checks.POSITIVE_COUNT)
    max_iters: int = flag(2000, "optimizer steps in all", checks.COUNT)
    lr: float = flag(1e-3, "peak learning rate (AdamW)", checks.POSITIVE)
    min_lr: float = flag(1e-4, "learning rate at the end of the cosine decay", checks.NON_NEGATIVE)
    warmup_iters: int = flag(100, "steps of linear warmup to lr", checks.COUNT)
    lr_decay_iters: int = flag(0, "step where the cosine decay reaches min_lr; 0 means max_iters (set it to the final "
                                  "length when a later --resume will extend this run)", checks.COUNT)
    beta1: float = flag(0.9, "AdamW beta1", checks.FRACTION)
    beta2: float = flag(0.99, "AdamW beta2", checks.FRACTION)
    weight_decay: float = flag(0.1, "AdamW weight decay (matrices and embeddings only)", checks.NON_NEGATIVE)
    grad_clip: float = flag(1.0, "clip the global gradient norm to this; 0 turns clipping off", checks.NON_NEGATIVE)
    seed: int = flag(1337, "seed of the initial weights, the batches and the samples", checks.SEED)
    device: str = flag("cpu", "where the model trains: cpu (numpy), or cuda (cuda:0 too: CuPy on the first GPU, "
                              f'{devices.INSTALL}); cuda runs in this one process, --processes 1', DEVICE)
    processes: int = flag(min(4, cores()),
                          "processes that share each batch and each evaluation (data parallel, each "
                          "multiplying matrices on one core; at most the cores this job may use); 1 runs "
                          "the model on the whole batch with numpy's own BLAS threads; CPU only: "
                          "--device cuda makes it 1 and refuses more", checks.POSITIVE_COUNT)
    worker_timeout: float = flag(30.0, "seconds a worker process may take to answer (or 10 times its slowest "
                                       "answer so far, if longer) before the job kills it as hung", checks.POSITIVE)
    # evaluation and output
    eval_interval: int = flag(250, "steps between evaluations (each also writes the checkpoint)",
                              checks.POSITIVE_COUNT)
    eval_iters: int = flag(20, "batches per split averaged at each evaluation", checks.POSITIVE_COUNT)
    log_interval: int = flag(10, "steps between the lines `iter N: loss X, ...` printed instead of the progress "
                                 "bar when the output goes to a file or a pipe", checks.POSITIVE_COUNT)
    sample_every: int = flag(0, "steps between printed samples; 0 samples only at the end", checks.COUNT)
    out: str = flag("out/chargpt.safetensors", "checkpoint path; the loss log (.csv, .png) and the gradient "
                                               "health (.health.csv, .health.png) go beside it", checks.TEXT)
    resume: bool = flag(False, "continue from the checkpoint at --out (flags given now override "
                               "its settings, except the model's shape)", checks.SWITCH)
    overwrite: bool = flag(False, "start a new run even where --out already holds a checkpoint (or its logs), "
                                  "replacing them", checks.SWITCH)

    @property
    def decay_iters(self):
        """The step where the cosine decay ends (lr_decay_iters, or max_iters when 0)."""
        return self.lr_decay_iters or self.max_iters


FIELDS = {f.name: f for f in fields(Config)}
MODEL_FIELDS = tuple(name for name in FIELDS if name in GPT_FIELDS)   # the model's shape: fixed once a model exists


def setting(name, value):
    """`value` as the setting `name` when it comes from elsewhere than the command line (a
    checkpoint's settings, as JSON gives them), held to the flag's own check: a whole number
    for a count (and not true or false), a number for a rate, true or false, text; else a
    ValueError saying what it must be. An int given for a number comes back a float."""
    f = FIELDS[name]
    check = f.metadata["check"]
    if not check(value):
        raise ValueError(check.expected)
    try:
        return f.type(value)   # float(5) is 5.0
    except OverflowError:   # an int beyond any float
        raise ValueError(check.expected) from None


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


def on_gpu(config, given, parser):
    """The config of a run with --device cuda: one process (the data-parallel processes are
    the CPU's, so --processes above 1 is refused, and left unsaid it is 1), CuPy importable
    and seeing a GPU (else argparse's usage error, naming how to install it)."""
    if given.get("processes", 1) > 1:
        parser.error(f"--device cuda runs in one process: --processes {given['processes']} splits each "
                     "batch across CPU processes, which only --device cpu does; drop --processes")
    try:
        devices.cupy()
    except RuntimeError as error:   # one line: "device 'cuda' needs CuPy, ...: pip install "tensorgrad[cuda]" ..."
        parser.error(f"--device cuda: {error}")
    if not devices.is_available():
        parser.error(f"--device cuda: CuPy sees no CUDA GPU on this machine (or no driver for it); "
                     "train with --device cpu")
    return replace(config, processes=1)


def parse_config(argv=None, description=None):
    """The Config from the command line (argv, or sys.argv's), plus the names of the flags
    actually given (a resumed run takes the rest from its checkpoint)."""
    parser = argparse.ArgumentParser(description=description, argument_default=argparse.SUPPRESS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), help="settings of a known configuration, the flags given "
                        "with it winning over them; shakespeare_char: nanoGPT's GPU configuration, "
                        + ", ".join(f"{name} {value}" for name, value in PRESETS["shakespeare_char"].items()))
    for f in fields(Config):
        help = f"{f.metadata['help']} (default: {f.default})"
        if f.type is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=help)
        else:   # each value is checked as it is read: argparse refuses the rest (exit status 2)
            kind = checked(f.type, f.metadata["check"])
            parser.add_argument(f"--{f.name}", type=kind, metavar=f.type.__name__.upper(), help=help)
    given = vars(parser.parse_args(argv))   # only the flags on the command line (SUPPRESS)
    given = {**PRESETS.get(given.pop("preset", None), {}), **given}   # a preset's settings count as given
    if "device" in given:
        given["device"] = devices.parse(given["device"])   # cuda:0 is cuda
    config = Config(**given)
    if config.device == "cuda":
        config = on_gpu(config, given, parser)
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
