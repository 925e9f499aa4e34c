"""nn.GPT's settings, described once: GPTConfig.

Each field has its type, the values it may take (a check of nn/checks.py) and a line of help;
the fields are nn.GPT's arguments, in its order, and the required ones are its sizes:

    config = nn.GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    model = nn.GPT(**asdict(config))
    nn.GPTConfig(**model.config) == config

A wrong value is a ValueError naming the field, one of the wrong type (a text for a size, "yes"
for a flag) a TypeError, in nn.checks.refuse's words. Every reader of a GPT's settings checks them
with this description: a checkpoint's model_config (nn/checkpoint.py, gpt_config), the keys of
a GPT-2 config.json that become these fields (nn/gpt2.py) and the main job's flags, which take
each field's check and help (tgtrain/flags.py).
"""
from dataclasses import MISSING, asdict, dataclass, field, fields

from . import checks

POSITIONS = ("learned", "sinusoidal", "none")   # the position encodings nn.GPT builds


def setting(check, help, default=MISSING):
    """A GPTConfig field: its check (nn.checks), a line of help, its default (none: required)."""
    return field(default=default, metadata={"check": check, "help": help})


@dataclass(frozen=True)
class GPTConfig:
    """The settings of an nn.GPT."""
    vocab_size: int = setting(checks.POSITIVE_COUNT, "tokens in the vocabulary")
    block_size: int = setting(checks.POSITIVE_COUNT, "context length in tokens (characters, in a character model)")
    n_layer: int = setting(checks.POSITIVE_COUNT, "transformer blocks")
    n_head: int = setting(checks.POSITIVE_COUNT, "attention heads per block (they split n_embd)")
    n_embd: int = setting(checks.POSITIVE_COUNT, "embedding width (channels)")
    dropout: float = setting(checks.FRACTION, "dropout probability in training", 0.0)
    pos: str = setting(checks.one_of(POSITIONS), "the positions: a learned table, sinusoidal, or none", "learned")
    tie_weights: bool = setting(checks.SWITCH, "the head reuses the token embedding's table, as GPT-2 and nanoGPT "
                                               "do", False)

    def __post_init__(self):
        values = asdict(self)
        wrong = first_wrong(values)
        if wrong:
            checks.refuse("GPTConfig", wrong, values[wrong], CHECKS[wrong], IS_TYPE[FIELDS[wrong].type])
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd {self.n_embd} must be divisible by n_head {self.n_head}")


FIELDS = {f.name: f for f in fields(GPTConfig)}
CHECKS = {name: f.metadata["check"] for name, f in FIELDS.items()}   # {field: its nn.checks.Check}
REQUIRED = tuple(name for name, f in FIELDS.items() if f.default is MISSING)   # the sizes
DEFAULTS = {name: f.default for name, f in FIELDS.items() if f.default is not MISSING}
IS_TYPE = {int: checks.is_whole, float: checks.is_number, str: lambda s: isinstance(s, str),   # a field's type
           bool: lambda b: isinstance(b, bool)}


def first_wrong(values):
    """The first field, in GPTConfig's order, whose value in `values` ({field: value}, every
    field given) fails its check; None when all pass."""
    return next((name for name, check in CHECKS.items() if not check(values[name])), None)
