"""Reading GPT-2 small's shapes from a Hugging Face folder: nn.GPT.from_gpt2 against
transformers' GPT2LMHeadModel.from_pretrained (when installed), time and peak memory.

    python bench/gpt2_import.py [--repeats 3]

Builds a GPT-2 small shaped nn.GPT (n_embd 768, 12 layers, 12 heads, vocabulary 50257, 1024
positions, tied: 124M parameters, 498 MB of float32) with random weights and exports it with
nn.export.to_gpt2 into a temporary folder; then each reader loads the folder in a fresh
process, `repeats` times: the time of the call, and its peak memory above the process's
peak before it (tgtrain.memory.peak_resident_mib: Linux's VmHWM, which a new process starts
afresh). The folder is read once beforehand, so every reader finds it in the page cache.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import nn  # noqa: E402

GPT2_SMALL = dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, tie_weights=True)
READERS = {   # each one a program run in a fresh process: it prints the load's seconds and peak MiB
    "nn.GPT.from_gpt2": ("import nn", "model = nn.GPT.from_gpt2(folder)"),
    "GPT2LMHeadModel.from_pretrained": (
        "import torch, transformers; transformers.logging.set_verbosity_error(); "
        "transformers.utils.logging.disable_progress_bar()",
        "model = transformers.GPT2LMHeadModel.from_pretrained(folder, local_files_only=True)"),
}
PROGRAM = """
import json, sys, time
from tgtrain.memory import peak_resident_mib
folder = sys.argv[1]
{imports}
before = peak_resident_mib()
start = time.perf_counter()
{load}
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "mib": peak_resident_mib() - before}}))
"""


def measure(imports, load, folder):
    program = PROGRAM.format(imports=imports, load=load)
    result = subprocess.run([sys.executable, "-c", program, folder], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.path.join(HERE, ".."), "HF_HUB_OFFLINE": "1"})
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per reader (the best is shown)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    nn.manual_seed(0)
    start = time.perf_counter()
    model = nn.GPT(**GPT2_SMALL)
    built = time.perf_counter() - start
    start = time.perf_counter()
    nn.export.to_gpt2(model, folder)
    exported = time.perf_counter() - start
    weights = os.path.join(folder, nn.export.WEIGHTS)
    size = os.path.getsize(weights)
    print(f"GPT-2 small's shapes: {model.num_parameters():,} parameters, {size / 2**20:.0f} MiB file; building it "
          f"with random init {built:.1f} s, nn.export.to_gpt2 {exported:.1f} s")
    del model
    with open(weights, "rb") as file:   # into the page cache, for every reader alike
        while file.read(1 << 24):
            pass
    try:
        import transformers  # noqa: F401
        import torch  # noqa: F401
        readers = READERS
    except ImportError:
        readers = {"nn.GPT.from_gpt2": READERS["nn.GPT.from_gpt2"]}
        print("(transformers or torch is not installed: no peer to compare with)")
    results = {}
    for name, (imports, load) in readers.items():
        runs = [measure(imports, load, folder) for _ in range(args.repeats)]
        results[name] = min(runs, key=lambda run: run["seconds"]), max(run["mib"] for run in runs)
        best, mib = results[name]
        print(f"{name:32s} {best['seconds']:6.2f} s (best of {args.repeats})   peak memory +{mib:.0f} MiB "
              f"(the most of {args.repeats})")
    if len(results) == 2:
        (ours, ours_mib), (theirs, theirs_mib) = results.values()
        print(f"ratio (ours / transformers): time {ours['seconds'] / theirs['seconds']:.2f}, "
              f"memory {ours_mib / theirs_mib:.2f}")


if __name__ == "__main__":
    main()
