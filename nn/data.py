"""Text data for the character-level GPT: a tokenizer, corpora, nanoGPT's split, batches.

    from nn import data
    text, about = data.load_corpus("shakespeare")   # or the path of any UTF-8 text file
    corpus = data.prepare(text, block_size=64)      # vocabulary, first 90% train, last 10% val
    print(corpus.summary())                         # nanoGPT's counts
    x, y = data.get_batch(corpus.train, 64, 12, rng)  # (B, T) int64 each; y is x shifted by one
    corpus.tokenizer.encode("ROMEO:"), corpus.tokenizer.decode(ids)

Corpora (load_corpus):
- "shakespeare": tiny shakespeare, downloaded on first use from SHAKESPEARE.url into
  cache_folder() ($TENSORGRAD_CACHE, else the platform's user cache folder), and accepted
  only with the expected size and sha256: checked before it is written (through a temporary
  file and a rename), so the cache never holds a bad or half-written file, and again whenever
  the cached copy is read. A download's checksum mismatch is a DataError naming both sums; a
  cached copy that differs (edited by its user, say) is never removed: renamed (after its
  sha256) when the real one is downloaded, left as it is when that cannot be, and the
  description says which.
- When the download cannot reach the server and nothing is cached, the corpus is built on
  the spot from text every Python installation has: the docstrings of the standard library
  (fallback_corpus), and the returned description says so in one line. The project ships
  no third-party text.
- Anything else is the path of a UTF-8 text file; an empty, binary or non-UTF-8 file is a
  DataError, and prepare() refuses a text too short to give each split one block.
- Every file is read as input (nn.atomic.open_regular): it must be a regular file (a device
  such as /dev/zero, a FIFO or a socket is refused before it is read, and without waiting), and no
  larger than the max_bytes a caller gives (the main job's is tied to the memory available:
  a text takes up to MEMORY_PER_BYTE bytes of memory per byte while it becomes ids).

The preparation matches nanoGPT's shakespeare_char, so losses are comparable: the
vocabulary is the sorted set of characters, the first 90% of the text is the training
split and the last 10% the validation split.
"""
import ast
import hashlib
import http.client
import os
import sys
import sysconfig
import urllib.request
from dataclasses import dataclass

import numpy as np

from .atomic import NotAFile, open_regular, write_atomically


class DataError(ValueError):
    """A corpus that cannot be used: missing, empty, not UTF-8 text, too short, or a
    download that does not match its checksum."""


# ---- the tokenizer ------------------------------------------------------------------

class CharTokenizer:
    """One token per character; the vocabulary is the sorted set of characters of a text,
    so the same text always gives the same ids. `chars` (a str) is all a checkpoint needs
    to rebuild it: CharTokenizer.from_chars(chars)."""

    def __init__(self, text):
        if not text:
            raise DataError("CharTokenizer: the text is empty, so there is no vocabulary")
        self.chars = "".join(sorted(set(text)))
        self._ids = {char: i for i, char in enumerate(self.chars)}

    @classmethod
    def from_chars(cls, chars):
        """The tokenizer whose vocabulary is `chars`, as stored by `tokenizer.chars`."""
        chars = "".join(chars)
        if chars != "".join(sorted(set(chars))):
            raise DataError(f"CharTokenizer.from_chars: the vocabulary must be sorted unique "
                            f"characters (as tokenizer.chars stores it), got {chars[:40]!r}")
        return cls(chars)

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        """str -> int64 ndarray of ids. Characters outside the vocabulary are an error
        that lists them: a model can only read the characters it was trained on."""
        unknown = "".join(sorted(set(text) - self._ids.keys()))
        if unknown:
            raise ValueError(f"CharTokenizer.encode: {len(unknown)} character(s) not in the vocabulary of "
                             f"{self.vocab_size}: {shown(unknown)}")
        return np.array([self._ids[char] for char in text], dtype=np.int64)

    def decode(self, ids):
        """A 1-D sequence of ids (list, ndarray) -> str."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(f"CharTokenizer.decode: expected a 1-D sequence of integer ids, "
                             f"got shape {ids.shape} and dtype {ids.dtype}")
        bad = ids[(ids < 0) | (ids >= self.vocab_size)]
        if bad.size:
            raise IndexError(f"CharTokenizer.decode: id {bad[0]} is out of range for a "
                             f"vocabulary of {self.vocab_size}")
        return "".join(self.chars[i] for i in ids.tolist())

    def __eq__(self, other):
        return isinstance(other, CharTokenizer) and self.chars == other.chars

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def shown(chars, limit=80):
    """Characters for a message, bounded: the first `limit` of them, each as repr writes it
    ('a', '\\n'), and how many more there are. A vocabulary can hold a million."""
    rest = f" and {len(chars) - limit:,} more" if len(chars) > limit else ""
    return ", ".join(map(repr, chars[:limit])) + rest


# ---- the splits and batches ---------------------------------------------------------

@dataclass
class CharData:
    """A corpus ready to train on: its tokenizer and the two splits as int64 id arrays."""
    tokenizer: CharTokenizer
    train: np.ndarray
    val: np.ndarray

    def summary(self):
        """nanoGPT's counts, one per line."""
        return (f"length of dataset in characters: {len(self.train) + len(self.val):,}\n"
                f"vocab size: {self.tokenizer.vocab_size}\n"
                f"train has {len(self.train):,} tokens\n"
                f"val has {len(self.val):,} tokens")


def prepare(text, block_size, name="the text"):
    """Tokenize `text` and split it as nanoGPT does: the first 90% trains, the last 10%
    validates. Each split must hold one window of block_size + 1 tokens (inputs and
    their next-token targets); `name` says which corpus an error is about."""
    if not text:
        raise DataError(f"{name}: the text is empty: nothing to train on")
    tokenizer = CharTokenizer(text)
    ids = tokenizer.encode(text)
    n = int(len(ids) * 0.9)
    data = CharData(tokenizer, ids[:n], ids[n:])
    if len(data.val) < block_size + 1:
        raise DataError(f"{name}: {len(text):,} characters are too few for block_size {block_size}: "
                        f"the validation split (the last 10%, {len(data.val):,} characters) needs "
                        f"{block_size + 1}; use a text of at least {10 * (block_size + 1):,} "
                        f"characters or a smaller block_size")
    return data


def get_batch(split, block_size, batch_size, rng):
    """batch_size windows of block_size + 1 consecutive tokens at random places of `split`
    (drawn from the numpy Generator `rng`): x is each window but its last token and y each
    window but its first, so y[b, t] is the token that follows x[b, :t + 1]. Both (B, T) int64."""
    if len(split) < block_size + 1:
        raise ValueError(f"get_batch: a split of {len(split)} tokens has no window of "
                         f"block_size + 1 = {block_size + 1} tokens")
    starts = rng.integers(0, len(split) - block_size, size=batch_size)   # last start: len - T - 1
    windows = split[starts[:, None] + np.arange(block_size + 1)]         # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def whole_split_batches(split, block_size, batch_size):
    """Every next-token prediction of `split` once, as (x, y) batches of int64 windows: the
    windows are consecutive, non-overlapping block_size slices (the last one shorter), so
    each of the len(split) - 1 predictions sees 0 to block_size - 1 earlier tokens."""
    n = len(split) - 1
    whole = n // block_size * block_size
    x = split[:whole].reshape(-1, block_size)          # (windows, T)
    y = split[1:whole + 1].reshape(-1, block_size)     # each input's next token
    batches = [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)]
    if whole < n:                                      # the tail: one shorter window
        batches.append((split[whole:n][None], split[whole + 1:][None]))
    return batches


# ---- corpora ------------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteFile:
    """A file on the web and what it must be: its exact size in bytes and its sha256."""
    url: str
    filename: str   # its name in the cache folder
    size: int
    sha256: str


SHAKESPEARE = RemoteFile(
    url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    filename="tinyshakespeare.txt", size=1_115_394,
    sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed")
CORPORA = {"shakespeare": SHAKESPEARE}
TIMEOUT = 10.0   # seconds to connect (and per read): an offline machine falls back quickly
# The most memory a UTF-8 file takes per byte while read_text and prepare turn it into ids: an
# ASCII text as a str (1 byte a character), the list of ids encode builds (8 bytes a reference)
# and their int64 array (8), and the file's bytes until they are decoded
MEMORY_PER_BYTE = 18


def load_corpus(source="shakespeare", cache_dir=None, timeout=TIMEOUT, max_bytes=None):
    """(text, description) of a corpus. `source` is a name in CORPORA, a RemoteFile, or the
    path of a UTF-8 text file (a name wins over a file of that name: write ./shakespeare) of
    at most max_bytes bytes (None: any size). A remote corpus comes from the cache, else from
    the web, else (offline) from fallback_corpus(); `description` is one line saying which."""
    remote, path = _remote(source), corpus_file(source, cache_dir)
    if remote is None:
        return read_text(source, max_bytes), str(source)
    cached = _read_cached(path, remote)
    if cached is not None and _matches(cached, remote):
        return cached.decode("utf-8"), f"{remote.filename}, cached at {path}"
    try:
        data = fetch(remote, timeout)
    except (OSError, http.client.HTTPException) as error:   # URLError and timeouts are OSErrors
        return _offline(remote, path, getattr(error, "reason", error), cached is not None)
    aside = "" if cached is None else f" (the copy there differed from it: kept as {_set_aside(path, cached)})"
    write_atomically(path, lambda file: file.write(data))   # only now, checked: the cache holds nothing bad
    return data.decode("utf-8"), f"{remote.filename}, downloaded from {remote.url} to {path}{aside}"


def _offline(remote, path, reason, differing):
    """(text, description) when `remote` cannot be downloaded and no real copy is cached (a
    differing one, `differing`, is left as it is): the standard library's docstrings."""
    text = fallback_corpus()
    cached = (f"the copy at {path} is not it (its sha256 differs; left as it is)" if differing else
              f"no copy is cached in {os.path.dirname(path)}")
    return text, (f"offline: could not download {remote.url} ({reason}) and {cached}; training instead on the "
                  f"docstrings of Python {sys.version_info[0]}.{sys.version_info[1]}'s standard library "
                  f"({len(text):,} characters), so no loss will match the real corpus's. For it: put "
                  f"{remote.filename} at {path} (checked by its sha256), or pass --data PATH to train "
                  f"on a copy of yours")


def corpus_file(source="shakespeare", cache_dir=None):
    """The path of the file load_corpus(source) reads: a local file's own, or a named
    corpus's copy in the cache (which may not exist yet)."""
    remote = _remote(source)
    return str(source) if remote is None else os.path.join(cache_dir or cache_folder(), remote.filename)


def _remote(source):
    """The RemoteFile that `source` names, or None when it is the path of a local file."""
    remote = CORPORA.get(source, source) if isinstance(source, str) else source
    return remote if isinstance(remote, RemoteFile) else None


def cache_folder():
    """$TENSORGRAD_CACHE, else tensorgrad/ in the platform's user cache folder."""
    if os.environ.get("TENSORGRAD_CACHE"):
        return os.environ["TENSORGRAD_CACHE"]
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(home, "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "tensorgrad")


def fetch(remote, timeout=TIMEOUT):
    """The bytes at remote.url, checked against remote's size and sha256. An unreachable
    server raises OSError (URLError, a timeout); a mismatch raises DataError."""
    with urllib.request.urlopen(remote.url, timeout=timeout) as response:
        data = response.read(remote.size + 1)   # one byte more than expected shows a longer file
    _verify(data, remote, remote.url)
    return data


def _verify(data, remote, where):
    if len(data) != remote.size:
        got = f"{len(data):,}" if len(data) <= remote.size else f"more than {remote.size:,}"
        raise DataError(f"{where}: expected {remote.size:,} bytes, got {got}: not the expected "
                        f"{remote.filename} (or a broken transfer); nothing was kept")
    digest = hashlib.sha256(data).hexdigest()
    if digest != remote.sha256:
        raise DataError(f"{where}: checksum mismatch: expected sha256 {remote.sha256}, got "
                        f"{digest}; the file is not the expected {remote.filename}, so nothing was kept")


def _read_cached(path, remote):
    """The cached file's bytes (at most remote.size + 1 of them: one more shows a longer
    file), or None when nothing is cached."""
    try:
        with _open_corpus(path) as file:
            return file.read(remote.size + 1)
    except FileNotFoundError:
        return None


def _matches(data, remote):
    return len(data) == remote.size and hashlib.sha256(data).hexdigest() == remote.sha256


def _set_aside(path, data):
    """Rename the cached copy at `path`, which is not the expected file (its user may have
    edited it), to path.<the start of its sha256>, never writing over a file of that name;
    returns the new name. The cache keeps nothing bad under the real name, and loses nothing."""
    aside = f"{path}.{hashlib.sha256(data).hexdigest()[:12]}"
    try:
        os.link(path, aside)   # a new name for it, or FileExistsError: nothing is written over
    except FileExistsError:
        raise DataError(f"{path}: the cached copy is not the expected file, and {aside}, the name to keep it "
                        "under, is taken: move one of them away") from None
    os.unlink(path)
    return aside


def read_text(path, max_bytes=None):
    """The contents of a UTF-8 text file of at most max_bytes bytes (None: any size; a
    byte-order mark is dropped), or a DataError that names the file and the problem. A
    larger file is refused by its size, before a byte of it is read."""
    try:
        file = _open_corpus(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; --data takes 'shakespeare' or the path of a "
                        f"UTF-8 text file") from None
    with file:
        size = os.fstat(file.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise _too_large(path, size, max_bytes)
        data = file.read(-1 if max_bytes is None else max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:   # it grew while it was read
        raise _too_large(path, len(data), max_bytes)
    if not data:
        raise DataError(f"{path}: the file is empty: nothing to train on")
    if b"\0" in data:
        raise DataError(f"{path}: looks binary (it holds NUL bytes); --data takes a UTF-8 text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: is not UTF-8 text (byte {error.start}: {error.reason}); "
                        f"convert it first, e.g. `iconv -t UTF-8 {path} > text.txt`") from None


def _too_large(path, size, max_bytes):
    return DataError(f"{path}: {size:,} bytes, more than the {max_bytes:,} a corpus may have here (max_bytes; a "
                     f"text takes up to {MEMORY_PER_BYTE} bytes of memory per byte as it becomes ids); train on a "
                     "part of it")


def _open_corpus(path):
    """The file at `path` open to read (nn.atomic.open_regular: a regular file, opened without
    waiting), or a DataError saying what it is instead and what --data takes."""
    try:
        return open_regular(path)
    except NotAFile as error:
        raise DataError(f"{error}; --data takes the path of a UTF-8 text file") from None


def fallback_corpus():
    """Text every Python installation has: the docstrings of the standard library's
    top-level modules (each module's, then its classes' and functions' in source order),
    files in sorted order, separated by blank lines. Read with `ast`, never imported, so
    building it runs no module code. About 0.9 MB on CPython 3.11."""
    folder = sysconfig.get_paths()["stdlib"]
    docstrings = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                tree = ast.parse(file.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):   # a file for another Python
            continue
        nodes = [node for node in ast.walk(tree)
                 if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        nodes.sort(key=lambda node: getattr(node, "lineno", 0))   # the module (no lineno) first
        docstrings += [doc for doc in map(ast.get_docstring, nodes) if doc]
    if not docstrings:
        raise DataError(f"no docstrings found in the standard library at {folder} to build an "
                        f"offline corpus from; pass --data with the path of a UTF-8 text file")
    return "\n\n".join(docstrings) + "\n"
