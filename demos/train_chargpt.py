"""Train a character-level GPT on tensorgrad, the way nanoGPT trains shakespeare_char.

    python demos/train_chargpt.py                        # tiny shakespeare, nanoGPT's CPU configuration
    python demos/train_chargpt.py --data my.txt --max_iters 500
    python demos/train_chargpt.py --resume --max_iters 3000   # continue from --out
    python demos/train_chargpt.py --preset shakespeare_char --device cuda   # nanoGPT's GPU configuration
    python demos/sample_chargpt.py out/chargpt.safetensors --prompt "ROMEO:"
    python demos/export_gpt2.py out/chargpt.safetensors out/chargpt-gpt2   # for PyTorch / Hugging Face

Every eval_interval steps (and at the end) it prints `step N: train loss X, val loss Y`,
each the mean loss of eval_iters random batches, and writes the checkpoint --out; at the
end it prints the loss over the whole validation split and a sample. The loss log goes
beside the checkpoint (.csv, and .png when matplotlib is installed), and so does the
gradient health measured at each evaluation's step (.health.csv and .health.png). Ctrl-C
stops after the current step, writes the checkpoint and exits with status 130 (SIGTERM: the
same, 143); --resume continues from it exactly as if the run had never stopped (from an
.npz checkpoint of tensorgrad 0.1 too). --device cuda trains on the GPU with CuPy, in this
one process: each batch is copied there (x.to(device)), the loss read back (.item()), and
the checkpoint holds host arrays, so it resumes, samples and exports on a CPU too.

This file is the loop; the machinery around it is the tgtrain package: the flags and their
checks (tgtrain/flags.py), the outputs claimed and locked before step 0 (tgtrain/start.py), the
run's state and its checkpoint (tgtrain/run.py), its stops (tgtrain/stops.py), a checkpoint's run
state checked on --resume (tgtrain/resume.py), the memory a step needs (tgtrain/memory.py), the
batch split across processes (tgtrain/parallel.py), the gradient health (tgtrain/health.py).
Exit status: 0 done, 1 an error, 2 a bad flag (or one the machine cannot hold), 3 a nan or
inf loss or gradient (the checkpoint on disk stays the last finite one), 130 Ctrl-C, 143
SIGTERM.
"""
import sys
import time

from threadpoolctl import threadpool_limits
from tqdm import tqdm

import nn
import tensorgrad as tg
import tgtrain
from nn import data
from tgtrain.evaluate import full_split_loss, on_a_terminal, sample
from tgtrain.outputs import printable_output
from tgtrain.stops import JobError, NonFinite, Stopped


def main(argv=None):
    printable_output()   # a file name that is not UTF-8, Korean text in a Latin-1 locale: escaped, not a traceback
    config, given = tgtrain.flags.parse_config(argv, __doc__)
    tgtrain.keep_freed_memory()   # each step's graph is freed whole: reuse its memory, don't re-fault it
    interrupt = tgtrain.stops.Interrupt()   # from now on, Ctrl-C and SIGTERM end the job with their status and one line
    with tgtrain.start.claim_outputs(config):   # first: a resumed run reads a checkpoint that no other run writes
        checkpoint = None
        if config.resume:   # a resumed run takes its model, tokenizer and settings from the checkpoint
            checkpoint = tgtrain.start.load_checkpoint(config.out)   # (model, tokenizer, meta)
            config = tgtrain.resume.resumed_config(config, given, checkpoint)   # its run state checked first
        tgtrain.start.check_outputs(config)   # now that the corpus is known: not one of the outputs
        run_job(tgtrain.flags.within_cores(config), interrupt, checkpoint)


def build(config, checkpoint=None):
    """The corpus (a regular file, at most half the memory available as ids), the model (new,
    or the checkpoint's, once its step is known to fit in memory) and its AdamW optimizer."""
    text, about = data.load_corpus(config.data, max_bytes=tgtrain.memory.corpus_limit())
    print(f"corpus: {about}")
    corpus = data.prepare(text, config.block_size, name=config.data)
    print(corpus.summary())
    tgtrain.start.require_memory(config, corpus.tokenizer.vocab_size)
    if checkpoint:
        model, tokenizer, _ = checkpoint
        if corpus.tokenizer != tokenizer:
            raise JobError(f"--resume: the characters of {config.data} differ from the checkpoint's vocabulary, "
                           f"so the ids would mean other characters; train a new model on it instead")
    else:
        nn.manual_seed(config.seed)   # the initial weights, then dropout, draw from nn's generator
        model = nn.GPT(corpus.tokenizer.vocab_size, config.block_size, config.n_layer, config.n_head,
                       config.n_embd, config.dropout, tie_weights=config.tie_weights)
    model.to(config.device)   # its parameters, in place: the optimizer's state is made beside them
    optimizer = nn.optim.AdamW(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2),
                               weight_decay=config.weight_decay)
    return corpus, model, optimizer


def run_job(config, interrupt, checkpoint=None):
    """The run, from the corpus to the final checkpoint and sample; `checkpoint` (model,
    tokenizer, meta), when given, is the run it continues; `interrupt` (tgtrain.stops.Interrupt)
    the stops it heeds."""
    corpus, model, optimizer = build(config, checkpoint)
    if config.processes > 1:   # the processes are the parallelism: one core each, not two apiece
        threadpool_limits(1)   # for BLAS's matrix products
        tg.set_num_threads(1)  # and for tensorgrad's elementwise work
    parallel = tgtrain.DataParallel(model, config.processes, optimizer, reply_timeout=config.worker_timeout,
                                  stopping=lambda: interrupt.requested)   # forks its workers now
    run = tgtrain.run.Run(config, corpus, model, optimizer, checkpoint)   # step, history, random streams
    print(f"model: {model.num_parameters():,} parameters (n_layer {config.n_layer}, n_head {config.n_head}, "
          f"n_embd {config.n_embd}, block_size {config.block_size})"
          + (f"; resuming from {run.out} at step {run.step}" if checkpoint else ""))
    started, first_step, seconds, full, lost = time.perf_counter(), run.step, 0.0, None, None
    # from here a first stop lets the step (or the evaluation's batch) end, then saves; a second quits at once
    with interrupt.deferred(), tgtrain.stops.quitting(run):
        try:
            seconds = train_steps(run, parallel, interrupt)
            if not interrupt.requested and (run.evaluated(run.step) or run.evaluate(parallel, interrupt)):
                full = full_split_loss(parallel, corpus.val, config.block_size, config.batch_size, interrupt,
                                       config.device)
        except tgtrain.WorkerDied as died:   # died, or stopped answering: the run cannot go on without it
            lost = died
        if full is None:   # Ctrl-C, SIGTERM or a worker lost, in training or in the final evaluation
            tgtrain.stops.stop(run, interrupt, lost)   # saves the last completed step, then exits
        report(run, parallel, full, seconds, run.step - first_step, time.perf_counter() - started, interrupt)


def train_steps(run, parallel, interrupt):
    """Optimizer steps from run.step to --max_iters, each evaluation first at its step, until a
    stop (then the step in progress ends first). Returns the seconds the steps took, evaluations
    aside."""
    config, terminal, seconds = run.config, on_a_terminal(), 0.0
    bar = tqdm(total=config.max_iters, initial=run.step, unit="iter", dynamic_ncols=True, disable=not terminal)
    try:
        while run.step < config.max_iters and not interrupt.requested:
            step = run.step
            evaluating = step % config.eval_interval == 0 and not run.evaluated(step)
            if evaluating and not run.evaluate(parallel, interrupt):
                break   # stopped during the evaluation: the step is not taken (on --resume it is evaluated again)
            if config.sample_every and step % config.sample_every == 0 and step > 0:
                text = sample(run.model, run.corpus.tokenizer, config.seed, interrupt)   # None: stopped meanwhile
                if text is not None:
                    tqdm.write(f"--- sample at step {step} ---\n{text}\n---")

            t0 = time.perf_counter()
            x, y = run.next_batch()
            loss = optimizer_step(run, parallel, x, y, measure=step % config.eval_interval == 0, save=evaluating)
            dt = time.perf_counter() - t0
            seconds += dt
            progress = f"loss {loss:.4f}, {dt * 1000:.0f} ms/iter, {x.size / dt:,.0f} tokens/s"
            if terminal:
                bar.update()
                bar.set_postfix_str(progress)
            elif step % config.log_interval == 0:   # a log file gets lines, not a bar's redraws
                print(f"iter {step}: {progress}", flush=True)
            run.stepped()
    finally:
        bar.close()
    return seconds


def optimizer_step(run, parallel, x, y, measure, save):
    """One optimizer step, as nanoGPT takes it: the step's learning rate, forward and backward
    (`_, loss = model(x, y); loss.backward()`, the batch split across --processes), the
    gradient clipped, the update (`optimizer.step()`, split too). At an evaluation's step the
    gradient health is measured around the update, and the checkpoint saved just before it,
    once the loss and the gradient have proved finite. Returns the loss."""
    step, optimizer, params, clip = run.step, run.optimizer, run.model.parameters(), run.config.grad_clip
    optimizer.lr = run.lr(step)
    optimizer.zero_grad()
    loss = parallel.forward_backward(x, y)
    if measure:
        run.health.before_update(step, x)   # the gradients (before clipping) and the activations
    # the gradient norm before clipping: clip_grad_norm returns it, or, clipping off, measured
    norm = nn.optim.clip_grad_norm(params, clip) if clip else nn.optim.grad_norm(params)
    run.require_finite(step, loss=loss, gradient_norm=norm)
    if save:   # only now: weights whose loss and gradient are finite, a run goes on from them
        run.save()
    parallel.step()
    if measure:
        run.health.after_update()   # how far the update moved each weight
    return loss


def report(run, parallel, full, seconds, steps, wall, interrupt):
    """The end of a finished run: the full split's loss, the speed and memory, the final
    checkpoint and plots, and a sample (dropped at once by a stop, which then ends the job
    with its status: everything else is written by then)."""
    run.require_finite(run.step, full_val_loss=full)
    print(f"final val loss (full split): {full:.4f}")
    tokens = steps * run.config.batch_size * run.config.block_size
    workers = [process.pid for _, process in parallel.workers]
    print(f"training: {seconds:.1f} s in {steps} steps, {tokens / max(seconds, 1e-9):,.0f} tokens/s; wall time "
          f"with evaluations {wall:.1f} s; peak memory {tgtrain.peak_resident_mib(workers):.0f} MiB "
          f"({1 + len(workers)} process(es) added up)")
    run.save(full_val_loss=full)
    run.plot()
    print(f"gradient health: {run.health.seconds:.2f} s measuring, writing and drawing, "
          f"{run.health.seconds / max(seconds, 1e-9):.1%} of the training time")
    print(f"checkpoint: {run.out}")
    text = sample(run.model, run.corpus.tokenizer, run.config.seed, interrupt)
    if text is None:   # a stop in the final save, plots or sample
        print(f"{tgtrain.stops.how(interrupt.signal)} at the end of the run: checkpoint written to {run.out} "
              f"(step {run.step}, the last); no sample")
        sys.exit(128 + interrupt.signal)
    print(f"--- sample ---\n{text}\n---")


if __name__ == "__main__":
    try:
        main()
    except Stopped as stop:   # at once: before training began, or a second time
        print(f"train_chargpt.py: {stop}", file=sys.stderr)
        sys.exit(128 + stop.signal)
    except NonFinite as error:
        print(f"train_chargpt.py: {error}", file=sys.stderr)
        sys.exit(3)
    except (JobError, data.DataError, nn.CheckpointError, OSError) as error:   # OSError: e.g. --out unwritable
        print(f"train_chargpt.py: error: {error}", file=sys.stderr)
        sys.exit(getattr(error, "status", 1))
    except KeyboardInterrupt:   # before the job began to handle it (Interrupt)
        print("train_chargpt.py: interrupted; no checkpoint written this time", file=sys.stderr)
        sys.exit(130)
