"""nn.data: the tokenizer, the split, batches, corpus files, the download and its fallback.

The download is tested against a local HTTP server serving a generated file; nothing
is fetched from the internet.
"""
import functools
import hashlib
import http.server
import os
import socket
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from nn import data

SHARED_SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


# ---- the tokenizer ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["Hello, tensorgrad! Characters in, characters out: 42 ~{[|]}\n",
                                  "안녕하세요, 세계! 한국어 텍스트도 글자 단위로 읽습니다.\n"])
def test_tokenizer_round_trip(text):
    tokenizer = data.CharTokenizer(text)
    ids = tokenizer.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (len(text),)
    assert tokenizer.decode(ids) == text
    assert tokenizer.chars == "".join(sorted(set(text))) and tokenizer.vocab_size == len(set(text))
    assert data.CharTokenizer.from_chars(tokenizer.chars) == tokenizer   # as a checkpoint rebuilds it


def test_tokenizer_ids_follow_sorted_characters():
    tokenizer = data.CharTokenizer("cab\n")
    assert tokenizer.encode("\nabc").tolist() == [0, 1, 2, 3]


def test_encode_lists_every_unknown_character():
    tokenizer = data.CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"2 character\(s\) not in the vocabulary of 3: 'Z', 'é'"):
        tokenizer.encode("abZcéZ")


def test_decode_and_from_chars_reject_bad_input():
    tokenizer = data.CharTokenizer("abc")
    with pytest.raises(IndexError, match="id 3 is out of range for a vocabulary of 3"):
        tokenizer.decode([0, 3])
    with pytest.raises(ValueError, match="1-D sequence of integer ids"):
        tokenizer.decode(np.array([0.0, 1.0]))
    with pytest.raises(data.DataError, match="sorted unique"):
        data.CharTokenizer.from_chars("ba")
    with pytest.raises(data.DataError, match="empty"):
        data.CharTokenizer("")


# ---- the split and batches ----------------------------------------------------------

def test_prepare_splits_ninety_ten():
    text = "".join(chr(ord("a") + i % 7) for i in range(1000))
    corpus = data.prepare(text, block_size=8)
    assert (len(corpus.train), len(corpus.val)) == (900, 100)
    assert corpus.tokenizer.decode(np.concatenate([corpus.train, corpus.val])) == text
    assert corpus.summary().splitlines() == ["length of dataset in characters: 1,000", "vocab size: 7",
                                             "train has 900 tokens", "val has 100 tokens"]


@pytest.mark.skipif(not SHARED_SHAKESPEARE.exists(), reason="the team's shared copy of tiny shakespeare is absent")
def test_shakespeare_is_prepared_as_nanogpt_prepares_it():
    raw = SHARED_SHAKESPEARE.read_bytes()
    assert (len(raw), hashlib.sha256(raw).hexdigest()) == (data.SHAKESPEARE.size, data.SHAKESPEARE.sha256)
    corpus = data.prepare(data.read_text(SHARED_SHAKESPEARE), block_size=64)
    assert corpus.tokenizer.vocab_size == 65
    assert (len(corpus.train), len(corpus.val)) == (1_003_854, 111_540)
    assert "length of dataset in characters: 1,115,394" in corpus.summary()


def test_get_batch_draws_shifted_windows_reproducibly():
    split = np.arange(100, dtype=np.int64)   # token i is i: a window's ids show where it came from
    x, y = data.get_batch(split, 8, 5, np.random.default_rng(0))
    assert x.shape == y.shape == (5, 8) and x.dtype == y.dtype == np.int64
    assert (np.diff(x, axis=1) == 1).all() and (y == x + 1).all()   # consecutive; y is x shifted
    assert x.min() >= 0 and y.max() <= 99
    x2, _ = data.get_batch(split, 8, 5, np.random.default_rng(0))
    assert np.array_equal(x, x2)
    assert data.get_batch(split, 99, 3, np.random.default_rng(0))[1].max() == 99   # the last token is reachable
    with pytest.raises(ValueError, match="no window of block_size"):
        data.get_batch(split[:8], 8, 1, np.random.default_rng(0))


# ---- corpus files -------------------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"PK\x03\x04\x00\x00binary", "looks binary"),
    (b"caf\xe9 latin-1", "is not UTF-8 text"),
])
def test_unusable_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(data.DataError, match=message) as error:
        data.load_corpus(str(path))
    assert str(path) in str(error.value)


def test_missing_file_and_folder_are_clear_errors(tmp_path):
    with pytest.raises(data.DataError, match="no such file"):
        data.load_corpus(str(tmp_path / "missing.txt"))
    with pytest.raises(data.DataError, match="is a folder"):
        data.load_corpus(str(tmp_path))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="a POSIX device")
def test_a_device_is_refused_before_it_is_read():
    # max_bytes bounds the read should the check ever fail: /dev/zero never ends
    with pytest.raises(data.DataError, match="/dev/zero: is a character device, not a regular file"):
        data.load_corpus("/dev/zero", max_bytes=1000)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a POSIX FIFO")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    refused = []
    reader = threading.Thread(target=lambda: refused.append(pytest.raises(data.DataError, data.load_corpus, str(path))),
                              daemon=True)   # a reader blocked in open() would stay there: daemon, not joined forever
    reader.start()
    reader.join(10)
    assert refused and "is a FIFO (a named pipe), not a regular file" in str(refused[0].value)


def test_a_file_larger_than_max_bytes_is_refused_by_its_size(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("a" * 100)
    assert data.load_corpus(str(path), max_bytes=100)[0] == "a" * 100
    with pytest.raises(data.DataError, match=rf"{path}: 100 bytes, more than the 99 a corpus may have here"):
        data.load_corpus(str(path), max_bytes=99)


def test_text_too_short_for_one_block_is_a_clear_error():
    with pytest.raises(data.DataError, match=r"too few for block_size 64.*at least 650 characters"):
        data.prepare("x" * 600, block_size=64, name="short.txt")
    data.prepare("x" * 650, block_size=64)   # the size the message asks for is enough


def test_a_utf8_file_loads_as_written(tmp_path):
    path = tmp_path / "korean.txt"
    path.write_text("가나다\r\nabc\n", encoding="utf-8")
    assert data.load_corpus(str(path)) == ("가나다\r\nabc\n", str(path))


# ---- the download -------------------------------------------------------------------

@pytest.fixture
def server(tmp_path, monkeypatch):
    """(folder, base url) of a local HTTP server that serves the folder's files."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):   # talk to it directly
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "www"
    folder.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)   # quick shutdown
    thread.start()
    yield folder, f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def remote_for(folder, url, content, name="corpus.txt"):
    (folder / name).write_bytes(content)
    return data.RemoteFile(f"{url}/{name}", name, len(content), hashlib.sha256(content).hexdigest())


CONTENT = "To be downloaded, checked, and cached.\n한국어도.\n".encode() * 50


def test_download_verifies_caches_and_reuses(server, tmp_path):
    folder, url = server
    remote = remote_for(folder, url, CONTENT)
    cache = tmp_path / "cache"
    text, about = data.load_corpus(remote, cache_dir=str(cache))
    assert text == CONTENT.decode() and about.startswith("corpus.txt, downloaded from")
    assert os.listdir(cache) == ["corpus.txt"]   # no temporary file left behind
    (folder / "corpus.txt").unlink()              # the server no longer has it: the cache answers
    cached = data.load_corpus(remote, cache_dir=str(cache))
    assert cached == (text, f"corpus.txt, cached at {cache / 'corpus.txt'}")


def test_a_wrong_checksum_names_both_sums_and_keeps_nothing(server, tmp_path):
    folder, url = server
    good = remote_for(folder, url, CONTENT)
    (folder / "corpus.txt").write_bytes(CONTENT.replace(b"cached", b"CACHED"))   # same size, other bytes
    got = hashlib.sha256((folder / "corpus.txt").read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    with pytest.raises(data.DataError, match=f"expected sha256 {good.sha256}, got {got}"):
        data.load_corpus(good, cache_dir=str(cache))
    assert not cache.exists()


def test_a_wrong_size_is_refused(server, tmp_path):
    folder, url = server
    remote = remote_for(folder, url, CONTENT)
    (folder / "corpus.txt").write_bytes(CONTENT + b"more")
    cache = tmp_path / "cache"
    with pytest.raises(data.DataError, match=f"expected {len(CONTENT):,} bytes, got more than"):
        data.load_corpus(remote, cache_dir=str(cache))
    assert not cache.exists()


def test_a_damaged_cached_copy_is_replaced(server, tmp_path):
    folder, url = server
    remote = remote_for(folder, url, CONTENT)
    (tmp_path / "corpus.txt").write_bytes(CONTENT[:-1] + b"!")
    text, about = data.load_corpus(remote, cache_dir=str(tmp_path))
    assert text == CONTENT.decode() and "downloaded" in about
    assert (tmp_path / "corpus.txt").read_bytes() == CONTENT


def test_offline_without_a_cache_falls_back_to_the_standard_library(tmp_path):
    with socket.socket() as probe:   # a port that nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    remote = data.RemoteFile(f"http://127.0.0.1:{port}/input.txt", "input.txt", 10, "0" * 64)
    text, about = data.load_corpus(remote, cache_dir=str(tmp_path), timeout=2)
    assert len(text) > 100_000 and textwrap.__doc__.strip() in text   # a module's docstring
    assert about.startswith("offline: could not download") and "\n" not in about
    assert f"({len(text):,} characters)" in about
    assert "standard library" in about and os.listdir(tmp_path) == []
    # and how to get the real corpus: the file's name and place in the cache, or --data
    assert about.endswith(f"put input.txt at {tmp_path / 'input.txt'} (checked by its sha256), or pass "
                          "--data PATH to train on a copy of yours")
    corpus = data.prepare(text, block_size=64)
    assert corpus.tokenizer.decode(corpus.train[:20]) == text[:20]


def test_cache_folder_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORGRAD_CACHE", str(tmp_path))
    assert data.cache_folder() == str(tmp_path)
    monkeypatch.delenv("TENSORGRAD_CACHE")
    assert data.cache_folder().endswith("tensorgrad")


def test_whole_split_batches_predict_every_token_but_the_first_once():
    split = np.arange(23)
    batches = data.whole_split_batches(split, block_size=5, batch_size=2)
    xs = np.concatenate([x.ravel() for x, _ in batches])
    ys = np.concatenate([y.ravel() for _, y in batches])
    np.testing.assert_array_equal(xs, split[:-1])
    np.testing.assert_array_equal(ys, split[1:])
    assert [x.shape for x, _ in batches] == [(2, 5), (2, 5), (1, 2)]
