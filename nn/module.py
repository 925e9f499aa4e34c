"""Module: a named tree of layers and their parameters.

A Module finds its parameters and sub-modules by looking at its own attributes, in the
order they were assigned, so names are stable and dotted ("h.0.attn.qkv.weight") and a
subclass needs no registration calls (and no super().__init__()); only a buffer, a tensor
kept but not trained, is registered (register_buffer), as in PyTorch. Calling a module runs
its forward() inside tg.scope(<its name>), which is how graph drawings group ops by layer;
the outermost call also labels unlabelled parameters with their dotted names.
"""
import threading
import weakref

import numpy as np

import tensorgrad as tg
from tensorgrad import Tensor, devices


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
        return self._named_members(Module._own_parameters)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self):
        """(dotted name, Tensor) for every buffer (register_buffer), each once."""
        return self._named_members(Module._own_buffers)

    def buffers(self):
        return [b for _, b in self.named_buffers()]

    def _named_members(self, members):
        """(dotted name, tensor) for what members(module) yields, this module's first, then
        each sub-module's, depth first; each tensor once (a tied weight keeps its first name)."""
        seen = set()
        for prefix, module in [("", self), *self.named_modules()]:
            for name, value in members(module):
                if id(value) not in seen:
                    seen.add(id(value))
                    yield (f"{prefix}.{name}" if prefix else name), value

    def _own_parameters(self):
        return ((name, value) for name, value in vars(self).items() if isinstance(value, Parameter))

    def _own_buffers(self, persistent_only=False):
        """This module's buffers, in registration order; one set to None is no buffer (PyTorch's rule)."""
        for name, persistent in vars(self).get("_buffer_kinds", {}).items():
            buffer = getattr(self, name)
            if buffer is not None and (persistent or not persistent_only):
                yield name, buffer

    def _own_state(self):
        """What state_dict() saves of this module: its parameters, then its persistent buffers."""
        yield from self._own_parameters()
        yield from self._own_buffers(persistent_only=True)

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

    def apply(self, fn):
        """Call fn(module) on every sub-module, then on this one: children first, as in
        PyTorch (a model's own init: self.apply(self._init_weights)). Returns self."""
        for _, child in self.named_children():
            child.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none=True):
        """Forget every parameter's gradient (see zero_grads)."""
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, device=None, dtype=None):
        """PyTorch's module.to: to(dtype), to(device), to(device, dtype), or by keyword.
        A device ("cpu", "cuda") moves every parameter and buffer there, and a dtype casts
        every parameter and every float buffer (np.float64 for gradcheck; an integer buffer
        keeps its dtype, as in PyTorch), in place: the tensors stay the same objects, so an
        optimizer made before still holds them (its state follows them to their device at
        its next step). Returns self."""
        for arg in args:   # to("cuda"), to(np.float64), to("cuda", np.float64)
            if devices.is_device(arg):   # "cuda", or a torch.device
                device = arg
            else:
                dtype = arg
        if device is not None:
            self._move(devices.parse(device, f"{type(self).__name__}.to"))
        if dtype is not None:
            self._cast(np.dtype(dtype))
        return self

    def _move(self, device):
        """Move the parameters, their gradients and the buffers to `device`, in place."""
        for t in (*self.parameters(), *self.buffers()):
            t.data = devices.to(t.data, device)
            if t.grad is not None:
                t.grad = devices.to(t.grad, device)

    def _cast(self, dtype):
        """Cast the parameters and float buffers to the float `dtype`, in place (the tensors
        stay the same objects, so an optimizer made before still holds them)."""
        if dtype.kind != "f":   # a parameter must stay float to take gradients
            raise TypeError(f"{type(self).__name__}.to: only float dtypes cast a module, got {dtype}: "
                            "cast an integer tensor itself (tensor.long())")
        for p in self.parameters():
            p.data = p.data.astype(dtype)
            p.grad = None
        for b in self.buffers():
            if b.dtype.kind == "f":
                b.data = b.data.astype(dtype)

    # ---- state ------------------------------------------------------------------------
    def register_buffer(self, name, tensor, persistent=True):
        """Keep `tensor` as the attribute `name`, a tensor the module uses but does not train
        (a causal mask, running statistics): state_dict() saves it (unless persistent=False)
        and to() casts it, but it is no parameter, so no optimizer moves it. Its name is kept
        in the instance's own dict, made on first use: subclasses need no super().__init__()."""
        owner = f"{type(self).__name__}.register_buffer"
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{owner}: the name must be a non-empty string without dots, got {name!r}")
        if tensor is not None and (not isinstance(tensor, Tensor) or isinstance(tensor, Parameter)):
            raise TypeError(f"{owner}: '{name}' must be a Tensor (not a Parameter) or None, got "
                            f"{type(tensor).__name__}: wrap an array as tg.tensor(array)")
        kinds = vars(self).setdefault("_buffer_kinds", {})   # {name: persistent}
        if hasattr(self, name) and name not in kinds:
            raise KeyError(f"{owner}: {type(self).__name__} already has an attribute '{name}'")
        kinds[name] = persistent
        setattr(self, name, tensor)

    def state_dict(self):
        """{dotted name: a copy of its array}: each module's parameters, then its persistent
        buffers, this module first, then its sub-modules depth first (PyTorch's order)."""
        return {name: t.data.copy() for name, t in self._named_members(Module._own_state)}

    def load_state_dict(self, state, assign=False):
        """Copy arrays into the parameters and persistent buffers. Every name and shape is
        checked before anything is written, so a mismatch loads nothing. assign=True (as in
        PyTorch) makes the state's arrays the tensors' own, cast only where the dtype
        differs: no copy of a model read from a file (nn.GPT.from_gpt2)."""
        tensors = dict(self._named_members(Module._own_state))
        missing = [n for n in tensors if n not in state]
        unexpected = [n for n in state if n not in tensors]
        if missing or unexpected:
            raise KeyError(f"load_state_dict: {type(self).__name__} state names differ: "
                           f"missing {missing or 'none'}, unexpected {unexpected or 'none'}")
        for name, t in tensors.items():
            value = devices.array(state[name])
            if value.shape != t.shape:
                raise ValueError(f"load_state_dict: '{name}' has shape {value.shape} in the state "
                                 f"but {t.shape} in the model")
            if not np.can_cast(value.dtype, t.dtype, casting="same_kind"):
                raise TypeError(f"load_state_dict: '{name}' has dtype {value.dtype} in the state "
                                f"but {t.dtype} in the model")
        for name, t in tensors.items():
            value = devices.to(devices.array(state[name]), t.device)   # from a file: the host's
            if assign:
                t.data = np.ascontiguousarray(value, dtype=t.dtype, like=value)
            else:
                np.copyto(t.data, value, casting="same_kind")

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


def zero_grads(params, set_to_none=True):
    """Forget the gradients of `params` before the next backward, which adds into them.
    set_to_none=True (PyTorch's default): set them to None, so backward writes fresh arrays.
    False: fill the existing arrays with zeros in place (a missing gradient stays None)."""
    for p in params:
        if set_to_none:
            p.grad = None
        elif p.grad is not None:
            p.grad.fill(0)   # a leaf's grad is always an array of its own (autograd.Accumulator)


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
