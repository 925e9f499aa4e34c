"""Export a checkpoint of demos/train_chargpt.py as a Hugging Face GPT-2 folder.

    python demos/export_gpt2.py out/chargpt.safetensors out/chargpt-gpt2

writes config.json, model.safetensors (GPT-2's tensor names) and the character vocabulary
as a tokenizer (tokenizer.json, tokenizer_config.json) into the folder; then, with torch and
transformers installed, the model carries on in PyTorch:

    from transformers import AutoTokenizer, GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained("out/chargpt-gpt2")
    tokenizer = AutoTokenizer.from_pretrained("out/chargpt-gpt2")
    prompt = tokenizer("ROMEO:", return_tensors="pt")
    ids = model.generate(**prompt, do_sample=True, max_new_tokens=200, top_k=200, temperature=0.8)
    print(tokenizer.decode(ids[0]))

nn.GPT.from_gpt2("out/chargpt-gpt2") reads the folder back, tensor for tensor.
"""
import argparse
import os
import sys

import nn
from _models import load_model   # demos/ is on the path when a demo runs
from tgtrain.outputs import printable_output, same_file

WRITES = (nn.export.CONFIG, nn.export.WEIGHTS, nn.export.TOKENIZER, nn.export.TOKENIZER_CONFIG)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a checkpoint written by demos/train_chargpt.py")
    parser.add_argument("directory", help="the folder to write (created if missing)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the files of an earlier export in the folder")
    args = parser.parse_args(argv)
    printable_output()   # a file name that is not UTF-8: escaped, not a traceback

    try:
        refuse_own_input(args.checkpoint, args.directory)
        model, tokenizer, meta = load_model(args.checkpoint)
    except (ValueError, OSError) as error:   # CheckpointError is a ValueError
        parser.exit(1, f"{parser.prog}: error: {error}\n")   # one line, status 1: the file is wrong, not the usage
    if not isinstance(tokenizer, nn.data.CharTokenizer):   # a GPT-2 folder's own subword tokenizer
        parser.exit(1, f"{parser.prog}: error: {args.checkpoint}: its tokenizer is not a character vocabulary, the "
                       "only kind this exporter writes; the folder is in GPT-2's layout already: copy it instead\n")
    there = [name for name in WRITES if os.path.exists(os.path.join(args.directory, name))]
    if there and not args.overwrite:
        parser.error(f"{args.directory} already holds {', '.join(there)}; add --overwrite to replace them")
    try:
        nn.export.to_gpt2(model, args.directory, tokenizer)
    except (ValueError, OSError) as error:   # what GPT-2 cannot express, named; a folder not writable
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    c = model.config
    print(f"exported {args.checkpoint} (step {meta.get('step', '?')}, {model.num_parameters():,} parameters: "
          f"n_layer {c['n_layer']}, n_head {c['n_head']}, n_embd {c['n_embd']}, block_size {c['block_size']}, "
          f"vocabulary {c['vocab_size']}, tie_weights {c['tie_weights']})")
    for name in WRITES:
        print(f"wrote {os.path.join(args.directory, name)}")
    print(f"load it with transformers: GPT2LMHeadModel.from_pretrained({args.directory!r}) and "
          f"AutoTokenizer.from_pretrained({args.directory!r})")


def refuse_own_input(checkpoint, directory):
    """Refuse (ValueError), whatever --overwrite says, a folder to write that is what is read:
    the GPT-2 folder itself, or a folder where one of the files written would replace the
    checkpoint (export_gpt2.py run/model.safetensors run), under any name (a link counts)."""
    if same_file(directory, checkpoint) or any(same_file(os.path.join(directory, name), checkpoint)
                                               for name in WRITES):
        raise ValueError(f"{directory} would be written over {checkpoint}, the model this export reads; choose "
                         "another folder")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:   # each file is written whole (renamed into place), but maybe not all of them
        print("export_gpt2.py: interrupted; the folder may hold part of the export", file=sys.stderr)
        sys.exit(130)
