"""The packages keep to their jobs: tensorgrad never imports nn, nn never imports the
training package (tgtrain) and does no process, lock, signal or allocator work of its own,
and no module of tensorgrad, nn or tgtrain, and no demo, imports itself back in a cycle.
No package is named like a script a learner writes (train.py would hide it)."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what only the training package may do: fork processes, lock files, catch signals, tune malloc
TRAINING_ONLY = {"multiprocessing", "fcntl", "signal", "ctypes", "mmap", "threadpoolctl", "tgtrain"}


def imports(path):
    """(module names a file imports, at its top or inside a function), relative imports made
    absolute with the file's own package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.parent.name
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = f"{package}.{node.module}" if node.level and node.module else package if node.level else node.module
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}   # `from . import rng`
    return names


def sources(package):
    return sorted((REPO / package).glob("*.py"))


def module_name(path):
    return path.parent.name if path.stem == "__init__" else f"{path.parent.name}.{path.stem}"


def test_nn_does_no_process_lock_signal_or_allocator_work_and_never_imports_train():
    for path in sources("nn"):
        found = {name.split(".")[0] for name in imports(path)} & TRAINING_ONLY
        assert not found, f"{path.relative_to(REPO)} imports {sorted(found)}: that belongs in tgtrain/"
        assert "mallopt" not in path.read_text(encoding="utf-8"), path


def test_tensorgrad_never_imports_nn_and_nn_never_loads_train_at_run_time():
    for path in sources("tensorgrad"):
        assert not {name.split(".")[0] for name in imports(path)} & {"nn", "tgtrain"}, path
    done = subprocess.run([sys.executable, "-c", "import sys, nn; m = nn.GPT(11, 8, 1, 2, 16); "
                           "m(__import__('numpy').zeros((1, 8), int))[0]; "
                           "print(sorted(set(sys.modules) & {'tgtrain', 'multiprocessing', 'threadpoolctl'}))"],
                          capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("package", ["tensorgrad", "nn", "tgtrain"])
def test_no_module_imports_another_that_imports_it_back(package):
    own = {module_name(path): path for path in sources(package)}
    edges = {name: {other for other in imports(path) if other in own and other != name and other != package}
             for name, path in own.items() if name != package}
    for start in edges:   # a walk from each module along its imports must never come back to it
        seen, todo = set(), list(edges[start])
        while todo:
            name = todo.pop()
            assert name != start, f"{start} imports itself back through {sorted(seen)}"
            if name not in seen:
                seen.add(name)
                todo.extend(edges.get(name, ()))


def test_the_demos_shared_modules_import_no_demo_and_the_main_job_imports_no_other_demo():
    shared = sorted((REPO / "demos").glob("_*.py"))   # _common.py, and the modules it gathers
    demos = {path.stem for path in (REPO / "demos").glob("*.py")} - {path.stem for path in shared}
    assert len(shared) > 1
    for path in shared + [REPO / "demos" / "train_chargpt.py"]:
        assert not {name.split(".")[0] for name in imports(path)} & demos, path


def test_the_main_script_reads_like_nanogpts_train_py():
    path = REPO / "demos" / "train_chargpt.py"
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 250
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            assert node.end_lineno - node.lineno + 1 <= 70, f"{node.name} is over 70 lines"


def test_the_gpts_settings_are_described_once():
    """nn.GPTConfig's fields are nn.GPT's arguments (names, order, defaults), nn.GPT checks its
    settings with it, and the job's model flags and a checkpoint's model_config are held to its
    checks."""
    import dataclasses
    import inspect
    import textwrap

    import nn
    import tgtrain
    arguments = inspect.signature(nn.GPT).parameters
    fields = dataclasses.fields(nn.GPTConfig)
    assert [f.name for f in fields] == list(arguments)
    assert ({f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
            == {name: a.default for name, a in arguments.items() if a.default is not inspect.Parameter.empty})
    assert not hasattr(nn.GPT, "POSITIONS")   # the position encodings are nn.config.POSITIONS alone
    # nn.GPT builds its settings with GPTConfig, which checks them: one description, no checks of its own
    init = ast.parse(textwrap.dedent(inspect.getsource(nn.GPT.__init__))).body[0]
    assert any(isinstance(node, ast.Name) and node.id == "GPTConfig" for node in ast.walk(init))
    assert not any(isinstance(node, ast.Raise) for node in ast.walk(init))
    refused = []
    original = nn.config.GPTConfig.__post_init__
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nn.config.GPTConfig, "__post_init__", lambda config: refused.append(config) or original(config))
        model = nn.GPT(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=4)
    assert refused == [nn.GPTConfig(**model.config)]
    assert tgtrain.flags.MODEL_FIELDS == ("n_layer", "n_head", "n_embd", "block_size", "dropout", "tie_weights")
    for name in tgtrain.flags.MODEL_FIELDS:
        assert tgtrain.flags.FIELDS[name].metadata["check"] is nn.config.CHECKS[name], name


def test_the_optimizer_has_a_plain_step():
    import inspect

    import nn
    assert list(inspect.signature(nn.optim.Optimizer.step).parameters) == ["self"]
    assert not hasattr(nn.optim.Optimizer, "move_state")


def test_the_project_carries_the_mit_license_with_its_copyright_line():
    """pyproject says MIT; LICENSE holds the license's own text and the project's copyright
    line, and is named as the package's license file (PEP 639), so a wheel carries it."""
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the tensorgrad authors" in text
    assert "Permission is hereby granted, free of charge" in text and 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    config = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = "MIT"' in config and 'license-files = ["LICENSE"]' in config


# scripts a learner names in the folder they run from; Python puts that folder first on
# sys.path, so a package of the same name would be hidden by the learner's own file
COMMON_SCRIPT_NAMES = {"train", "trainer", "training", "run", "model", "models", "data", "dataset", "utils",
                       "util", "main", "config", "test", "eval", "evaluate", "sample", "gpt", "lib", "engine"}


def test_no_installed_package_is_named_like_a_learners_script():
    packages = re.search(r"^packages = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.M).group(1)
    installed = {name.strip(' "') for name in packages.split(",")}
    assert installed == {"tensorgrad", "nn", "tgtrain"}
    assert not installed & COMMON_SCRIPT_NAMES


def test_a_learners_train_py_does_not_hide_the_training_package(tmp_path):
    (tmp_path / "train.py").write_text("import tgtrain\nprint(tgtrain.fit.__module__)\n")
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tgtrain.fit"
