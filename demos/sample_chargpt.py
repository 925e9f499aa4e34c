"""Generate text from a checkpoint of demos/train_chargpt.py.

    python demos/sample_chargpt.py out/chargpt.safetensors --prompt "ROMEO:" --max_new_tokens 500

The checkpoint holds the model's configuration and its tokenizer, so no corpus is needed.
Prints the prompt followed by the generated characters. An .npz checkpoint of tensorgrad
0.1 works too, and so does a Hugging Face GPT-2 folder (demos/export_gpt2.py's, or GPT-2's
own, whose tokens are then subwords).
"""
import argparse
import os
import sys

import nn
from _models import load_model   # demos/ is on the path when a demo runs
from tgtrain.flags import COUNT, NON_NEGATIVE, POSITIVE_COUNT, SEED
from tgtrain.outputs import printable_output


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a checkpoint written by demos/train_chargpt.py, or a GPT-2 folder")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--max_new_tokens", type=COUNT, default=500, help="characters to generate (default: 500)")
    parser.add_argument("--temperature", type=NON_NEGATIVE, default=0.8,
                        help="below 1 sharpens the distribution, above 1 flattens it, 0 always takes "
                             "the most likely character (default: 0.8)")
    parser.add_argument("--top_k", type=POSITIVE_COUNT, default=200,
                        help="sample only among the k most likely characters (default: 200)")
    parser.add_argument("--seed", type=SEED, default=1337, help="seed of the sampling (default: 1337)")
    args = parser.parse_args(argv)   # each number checked as it is read (tgtrain/flags.py)
    if not args.prompt:
        parser.error("--prompt is empty: give at least one character to start from")
    printable_output()   # a vocabulary a terminal's encoding cannot show (Korean in Latin-1): escaped

    try:
        refuse_own_input(args.checkpoint)
        model, tokenizer, _ = load_model(args.checkpoint)
    except (ValueError, OSError) as error:   # CheckpointError is a ValueError; a missing file an OSError
        parser.exit(1, f"{parser.prog}: error: {error}\n")   # one line, status 1: the file is wrong, not the usage
    try:
        prompt = tokenizer.encode(args.prompt)
    except ValueError as error:
        known = getattr(tokenizer, "chars", None)   # a character vocabulary (a GPT-2 folder's may be subwords)
        parser.error(f"--prompt: {error}" + (f"; the model knows only these: {nn.data.shown(known)}" if known else ""))
    ids = model.generate(prompt[None, :], args.max_new_tokens, temperature=args.temperature,
                         top_k=args.top_k, seed=args.seed)
    print(tokenizer.decode(ids[0]))


def refuse_own_input(checkpoint):
    """Refuse (ValueError) a stdout that is the checkpoint itself, or a file of the folder read
    (`> run.safetensors`, `>> model/config.json`): the sample would be written into its own input."""
    try:
        written = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):   # no stdout, or not a file: nothing to compare
        return
    read = [os.path.join(checkpoint, name) for name in os.listdir(checkpoint)] if os.path.isdir(checkpoint) \
        else [checkpoint]
    if any(os.path.exists(path) and os.path.samestat(written, os.stat(path)) for path in read):
        raise ValueError(f"stdout is {checkpoint}'s own file: the sample would be written into the model it is "
                         "read from (the shell may have emptied it already); send it to another file")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:   # Ctrl-C while the model loads or generates: nothing is written, nothing lost
        print("sample_chargpt.py: interrupted", file=sys.stderr)
        sys.exit(130)
