"""tensorgrad.threads: every core on the elementwise work of the fused ops and the optimizer.

numpy runs each call on one core; the matrix products go to BLAS, which uses them all. The
passes in between (GELU, layer norm, softmax, an optimizer's update) run on one core unless
the work is cut up: `split(work, count)` cuts range(count), rows of an array or a list of
parameters, into one contiguous block per thread and runs work(start, stop) on each block at
once, in a small pool of threads that wait for work between calls. numpy lets go of Python's
lock (the GIL) inside each call, so the blocks really run together.

Each row (each element, each parameter) goes through the same numpy calls whatever block or
tile it lands in, so the results are bit-identical for any number of threads.

The tiles are the CPU's: on a GPU (CuPy arrays) by_rows runs work once on the whole arrays,
since the GPU parallelises each call itself.

How many: `set_num_threads(n)` and `get_num_threads()`, as `torch.set_num_threads`. By default,
as OpenBLAS counts its own: OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the cores this
process may run on. They are tensorgrad's threads only: BLAS keeps its own count (set it with
threadpoolctl, or its environment variables before Python starts).
"""
import os
import queue
import threading

import numpy as np

# below this many elements per thread, handing a block to another thread costs more than it
# saves (measured by bench/threads.py)
MIN_ELEMENTS_PER_THREAD = 1 << 18
# by_rows hands work its rows in tiles of about this many elements, all its arrays' together
# (1 MiB of float32): a pass over a tile leaves it in the core's cache for the next pass, where a
# pass over a whole large array would push out its start before the next pass reads it again
TILE_ELEMENTS = 1 << 18


def default_threads():
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_threads = default_threads()
_pool = []                      # one queue of blocks per waiting thread, started as first needed
_worker = threading.local()     # .active on the pool's own threads


def set_num_threads(n):
    """Run the elementwise work on n threads: this one and n - 1 waiting ones."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a whole number >= 1, got {n!r}")
    _threads = n


def get_num_threads():
    return _threads


def _serve(blocks):
    _worker.active = True
    while True:
        work, start, stop, done = blocks.get()
        try:
            work(start, stop)
            done.put(None)
        except BaseException as error:   # handed to the caller, which raises it
            done.put(error)


os.register_at_fork(after_in_child=_pool.clear)   # a forked child has none of its parent's threads


def split(work, sizes):
    """Call work(start, stop) on contiguous blocks of items that cover range(len(sizes)), one
    block per thread and of about equal work, sizes[i] being item i's (in array elements), all
    at once; returns when every block is done, raising any block's error."""
    count, elements = len(sizes), sum(sizes)
    threads = min(_threads, count, max(1, elements // MIN_ELEMENTS_PER_THREAD))
    if threads <= 1 or getattr(_worker, "active", False):   # a block that splits again runs in place
        return work(0, count)
    while len(_pool) < threads - 1:
        _pool.append(queue.SimpleQueue())
        threading.Thread(target=_serve, args=(_pool[-1],), name=f"tensorgrad-split-{len(_pool)}", daemon=True).start()
    running_total = np.cumsum(sizes)   # block i ends where the work done passes i/threads of it
    bounds = [0, *(int(np.searchsorted(running_total, elements * i / threads)) + 1 for i in range(1, threads)),
              count]
    done = queue.SimpleQueue()
    for blocks, start, stop in zip(_pool, bounds[1:-1], bounds[2:]):
        blocks.put((work, start, stop, done))
    try:
        work(bounds[0], bounds[1])   # this thread takes the first block
    finally:
        errors = [error for error in (done.get() for _ in range(threads - 1)) if error is not None]
    if errors:
        raise errors[0]


def by_rows(work, *arrays):
    """work(*tiles) on matching tiles of rows (the first axis) of equally long arrays, each tile
    about TILE_ELEMENTS, the tiles split across the threads: for work that treats each row on
    its own. The tiles are the same for any number of threads, so is every call work makes."""
    if type(arrays[0]) is not np.ndarray:   # on the GPU: one call, over the whole arrays
        return work(*arrays)
    count = len(arrays[0])
    row = sum(array[0].size for array in arrays) if count else 0
    tile = max(1, TILE_ELEMENTS // max(row, 1))       # rows a tile
    starts = range(0, max(count, 1), tile)            # an empty array: one empty tile

    def tiles(first, last):
        for start in starts[first:last]:
            work(*(array[start:start + tile] for array in arrays))
    split(tiles, [row * min(tile, count - start) for start in starts])


def each(work, items, sizes):
    """work(item) for each item (a parameter, a gradient), split across the threads in blocks
    of about equal work, sizes[i] being item i's; each item is worked on by one thread."""
    items = list(items)
    split(lambda start, stop: [work(item) for item in items[start:stop]], sizes)


def rows(array):
    """An array as its rows along the last axis, (N, last), for by_rows (a 0-d or empty one as
    a single row): a view of a C-contiguous array, so work may write into it; a copy of any
    other, fine only for one that work reads."""
    return array.reshape(-1, array.shape[-1]) if array.ndim and array.size else array.reshape(1, -1)
