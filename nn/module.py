"""Module: a named tree of layers and their parameters.

A Module finds its parameters and sub-modules by looking at its own attributes, in the
order they were assigned, so names are stable and dotted ("h.0.attn.qkv.weight") and a
subclass needs no registration calls (and no super().__init__()). Calling a module runs
its forward() inside tg.scope(<its name>), which is how graph drawings group ops by layer;
the outermost call also labels unlabelled parameters with their dotted names.
"""
import threading
import weakref

import numpy as np

import tensorgrad as tg
from tensorgrad import Tensor


class Parameter(Tensor):
    """A Tensor that a Module trains: it always requires grad."""
    __slots__ = ()

    def __init__(self, data, dtype=None):
        super().__init__(data, requires_grad=True, dtype=dtype)


class _Calls(threading.local):
    def __init__(self):
        self.running = []   # this thread's modules whose forward() is running, innermost last


_calls = _Calls()
_child_names = weakref.WeakKeyDictionary()   # module -> {id(descendant): dotted name}
_labelled = weakref.WeakSet()                # modules whose parameters carry their names


class Module:
    training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        running = _calls.running
        caller = running[-1] if running else None
        running.append(self)
        try:
            if caller is None:  # the outermost call: its ops are the graph's top level
                self._label_parameters()
                return self.forward(*args, **kwargs)
            with tg.scope(caller._name_of(self)):
                return self.forward(*args, **kwargs)
        finally:
            running.pop()

    def _name_of(self, module):
        """The dotted name of `module` inside this one ("h.0"), or its class name if not
        inside. Remembered per module, since a training step asks it for every layer."""
        names = _child_names.setdefault(self, {})
        if id(module) not in names:
            found = (name for name, child in self.named_modules() if child is module)
            names[id(module)] = next(found, type(module).__name__)
        return names[id(module)]

    def _label_parameters(self):
        """Label unlabelled parameters with their dotted names, so drawings and traces show
        "h.0.attn.qkv.weight" rather than a number (once: names do not change)."""
        if self not in _labelled:
            for name, p in self.named_parameters():
                p.label = p.label or name
            _labelled.add(self)

    # ---- the tree ---------------------------------------------------------------------
    def named_children(self):
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value

    def named_modules(self, prefix=""):
        """(dotted name, module) for every module below this one, depth first, each once."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            if module is not self:
                yield name, module
            children = [(f"{name}.{child_name}" if name else child_name, child)
                        for child_name, child in module.named_children()]
            stack.extend(reversed(children))

    def named_parameters(self):
        """(dotted name, Parameter) for every parameter, in assignment order, each once."""
        seen = set()
        for prefix, module in [("", self), *self.named_modules()]:
            for name, value in vars(module).items():
                if isinstance(value, Parameter) and id(value) not in seen:
                    seen.add(id(value))
                    yield (f"{prefix}.{name}" if prefix else name), value

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def num_parameters(self):
        return sum(p.size for p in self.parameters())

    # ---- modes and gradients ----------------------------------------------------------
    def train(self, mode=True):
        """Training mode (dropout on); eval() turns it off. Applies to every sub-module."""
        for module in [self, *(m for _, m in self.named_modules())]:
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def to(self, dtype):
        """Cast every parameter to `dtype` (np.float64 for gradcheck). Returns self."""
        for p in self.parameters():
            p.data = p.data.astype(dtype)
            p.grad = None
        return self

    # ---- state ------------------------------------------------------------------------
    def state_dict(self):
        """{dotted name: a copy of the parameter's array}."""
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state, assign=False):
        """Copy arrays into the parameters. Every name and shape is checked before anything
        is written, so a mismatch loads nothing. assign=True (as in PyTorch) makes the
        state's arrays the parameters' own, cast only where the dtype differs: no copy of a
        model read from a file (nn.GPT.from_gpt2)."""
        params = dict(self.named_parameters())
        missing = [n for n in params if n not in state]
        unexpected = [n for n in state if n not in params]
        if missing or unexpected:
            raise KeyError(f"load_state_dict: {type(self).__name__} state names differ: "
                           f"missing {missing or 'none'}, unexpected {unexpected or 'none'}")
        for name, p in params.items():
            value = np.asarray(state[name])
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: '{name}' has shape {value.shape} in the state "
                                 f"but {p.shape} in the model")
            if not np.can_cast(value.dtype, p.dtype, casting="same_kind"):
                raise TypeError(f"load_state_dict: '{name}' has dtype {value.dtype} in the state "
                                f"but {p.dtype} in the model")
        for name, p in params.items():
            if assign:
                p.data = np.ascontiguousarray(state[name], dtype=p.dtype)
            else:
                np.copyto(p.data, state[name], casting="same_kind")

    # ---- repr -------------------------------------------------------------------------
    def extra_repr(self):
        """What goes between the parentheses of this module's line in repr()."""
        return ""

    def __repr__(self):
        count = self.num_parameters()
        tail = f"  # {count:,} parameters" if count else ""
        children = list(self.named_children())
        if not children:
            return f"{type(self).__name__}({self.extra_repr()}){tail}"
        lines = [f"{type(self).__name__}("] + ([f"  {self.extra_repr()}"] if self.extra_repr() else [])
        lines += [f"  ({name}): " + repr(child).replace("\n", "\n  ") for name, child in children]
        return "\n".join(lines) + f"\n){tail}"


class ModuleList(Module):
    """A list of modules whose parameters belong to the owner (named "0", "1", ...)."""

    def __init__(self, modules=()):
        for module in modules:
            self.append(module)

    def __getitem__(self, i):
        return list(self.named_children())[i][1]

    def __len__(self):
        return sum(1 for _ in self.named_children())

    def __iter__(self):
        return (module for _, module in self.named_children())

    def append(self, module):
        setattr(self, str(len(self)), module)
        return self


class Sequential(ModuleList):
    """Modules applied one after another: Sequential(a, b)(x) = b(a(x))."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for module in self:
            x = module(x)
        return x
