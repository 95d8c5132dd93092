"""encode_batch / encode_bytes_batch with more than one thread build each document's id list on
the calling thread while the pool still encodes the rest (src/python/stream.rs). Randomized
comparison: the batch equals per-document encode (itself compared with the reference DP), for
any num_threads, on batches with empty, tiny, huge and non-ASCII (UCS-1/2/4) documents."""

from __future__ import annotations

import random

import pytest

import cnfmce

import reference as ref

BYTES = [bytes([b]) for b in range(256)]
EXTRA = [b"ab", b" the", "中文".encode(), b"hello", b" world", "caf\u00e9".encode(), b"\xe4\xb8", b"<|",
         "😀".encode(), b"  ", b"\n\n"]
SPECIALS = {"<|end|>": 300, "<|pad|>": 301}
ALPHABET = ["a", "b", " ", "the", "hello", " world", "é", "café", "中", "文", "😀", "\n", "  ", "<|end|>", "x"]


def make() -> cnfmce.Tokenizer:
    return cnfmce.Tokenizer.from_tokens(BYTES + EXTRA, special_tokens=SPECIALS)


def random_doc(rng: random.Random, n: int) -> str:
    alpha = rng.choice([ALPHABET[:8], ALPHABET[:10], ALPHABET])  # ASCII/UCS-1, UCS-2, UCS-4 strs
    return "".join(rng.choice(alpha) for _ in range(n))


def random_batch(rng: random.Random) -> list:
    sizes = [0, 1, 3, 20, 200, 3000]
    docs = [random_doc(rng, rng.choice(sizes)) for _ in range(rng.randint(2, 80))]
    if rng.random() < 0.4:
        docs.insert(rng.randrange(len(docs) + 1), random_doc(rng, rng.choice([40_000, 120_000])))
    if rng.random() < 0.3:
        docs.append("")
    return docs


@pytest.mark.parametrize("seed", range(6))
def test_batch_equals_encode_any_threads(seed):
    tok = make()
    rng = random.Random(seed)
    for _ in range(4):
        docs = random_batch(rng)
        single = [tok.encode(d) for d in docs]
        for n in (None, 1, 2, 3, 5):
            assert tok.encode_batch(docs, num_threads=n) == single, n
        assert tok.encode_batch(docs, allowed_special="all", num_threads=2) == \
            [tok.encode(d, allowed_special="all") for d in docs]
        data = [d.encode("utf-8") for d in docs]
        assert tok.encode_bytes_batch(data, num_threads=2) == single
        assert tok.encode_bytes_batch(data, num_threads=4) == single


def test_small_docs_match_reference():
    tok = make()
    rt = ref.RefTokenizer(BYTES + EXTRA)
    rng = random.Random(7)
    docs = [random_doc(rng, rng.choice([0, 1, 5, 30])).replace("<|end|>", "<|") for _ in range(60)]
    want = [rt.encode(d) for d in docs]
    assert tok.encode_batch(docs, num_threads=2) == want
    assert tok.encode_bytes_batch([d.encode("utf-8") for d in docs], num_threads=3) == want


def test_many_tiny_docs_and_a_huge_one():
    """Thousands of documents handed over in groups, one document far larger than the rest."""
    tok = make()
    rng = random.Random(3)
    docs = [random_doc(rng, rng.randint(0, 6)) for _ in range(5000)]
    docs[1234] = random_doc(rng, 400_000)
    single = [tok.encode(d) for d in docs]
    for n in (2, 3):
        out = tok.encode_batch(docs, num_threads=n)
        assert out == single
        assert all(type(x) is list for x in out) and len(out) == len(docs)


def test_first_bad_text_in_index_order_is_reported():
    tok = make()
    rng = random.Random(11)
    for _ in range(10):
        docs = [random_doc(rng, rng.choice([1, 50, 5000])) for _ in range(30)]
        bad = sorted(rng.sample(range(30), rng.randint(1, 4)))
        for k in bad:  # a lone surrogate; the bad documents have different sizes (work order)
            docs[k] = random_doc(rng, rng.choice([0, 10, 20_000])) + "\ud800"
        for n in (2, 3):
            with pytest.raises(ValueError, match=rf"^text {bad[0]} is not valid Unicode"):
                tok.encode_batch(docs, num_threads=n)
    # the tokenizer is still usable afterwards
    assert tok.encode_batch(["ab", "the"], num_threads=2) == [tok.encode("ab"), tok.encode("the")]


def test_bpe_batch_threads(bpe):
    rng = random.Random(5)
    docs = [random_doc(rng, rng.choice([0, 10, 1000, 30_000])) for _ in range(40)]
    single = [bpe.encode(d) for d in docs]
    assert bpe.encode_batch(docs) == single
    assert bpe.encode_batch(docs, num_threads=1) == single
    assert bpe.encode_batch(docs, num_threads=2) == single


@pytest.mark.parametrize("seed", range(3))
def test_batch_with_offsets_equals_single(seed):
    tok = make()
    rng = random.Random(100 + seed)
    for _ in range(3):
        docs = random_batch(rng)
        single = [tok.encode_with_offsets(d) for d in docs]
        for n in (None, 1, 2, 3):
            assert tok.encode_batch_with_offsets(docs, num_threads=n) == single, n
        data = [d.encode("utf-8") for d in docs]
        single_b = [tok.encode_bytes_with_offsets(d) for d in data]
        for n in (1, 2, 4):
            assert tok.encode_bytes_batch_with_offsets(data, num_threads=n) == single_b, n
        got = tok.encode_batch_with_offsets(docs, allowed_special="all", num_threads=2)
        assert got == [tok.encode_with_offsets(d, allowed_special="all") for d in docs]
        assert all(type(x) is tuple and len(x) == 2 for x in got)


def test_batch_with_offsets_bad_text():
    tok = make()
    docs = ["ab" * 3000, "x", "caf\u00e9\ud800", "中文" * 100, "\udfff"]
    for n in (2, 3):
        with pytest.raises(ValueError, match=r"^text 2 is not valid Unicode"):
            tok.encode_batch_with_offsets(docs, num_threads=n)


def test_other_python_threads_run_during_a_batch():
    """The calling thread holds the GIL only while it builds lists: another Python thread keeps
    running during a long batch."""
    import threading
    tok = make()
    rng = random.Random(9)
    docs = [random_doc(rng, 20_000) for _ in range(60)]
    ticks = [0]
    running = threading.Event()
    stop = threading.Event()

    def spin():
        running.set()
        while not stop.is_set():
            ticks[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    running.wait()
    try:
        before = ticks[0]
        out = tok.encode_batch(docs, num_threads=2)
        during = ticks[0] - before
    finally:
        stop.set()
        th.join()
    assert out == [tok.encode(d) for d in docs]
    assert during > 0


def test_result_lists_are_tracked_and_collected():
    """The result lists are kept from the cyclic garbage collector while a batch is built (a
    batch of more than ~700 documents set off a collection in the middle of it) and tracked
    again before it is returned: a cycle made through one of them is still collected."""
    import gc
    import weakref

    class Node:
        pass

    tok = make()
    rng = random.Random(13)
    docs = [random_doc(rng, rng.choice([0, 3, 50])) for _ in range(1500)]
    single = [tok.encode(d) for d in docs]
    data = [d.encode("utf-8") for d in docs]
    for call in (lambda n: tok.encode_batch(docs, num_threads=n),
                 lambda n: tok.encode_bytes_batch(data, num_threads=n)):
        for n in (1, 2, 3):
            out = call(n)
            assert out == single
            assert all(gc.is_tracked(x) for x in out), n
            node = Node()
            lst = out[len(out) // 2]
            lst.append(node)
            node.back = lst
            alive = weakref.ref(node)
            del out, lst, node
            gc.collect()
            assert alive() is None, n


def test_ctrl_c_interrupts_a_long_batch():
    """SIGINT during a long multi-threaded batch raises KeyboardInterrupt from the batch soon,
    not after the whole batch was encoded (the calling thread checks for signals between its
    groups of documents)."""
    import os
    import signal
    import threading
    import time
    tok = make()
    doc = random_doc(random.Random(17), 30_000)
    tok.encode_batch([doc] * 24, num_threads=2)  # warm: threads, scratch buffers, piece caches
    t0 = time.perf_counter()
    tok.encode_batch([doc] * 24, num_threads=2)
    unit = time.perf_counter() - t0  # 24 documents; the batch below holds 50 times as many
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(min(0.2, 5 * unit), os.kill, (os.getpid(), signal.SIGINT))
    try:
        t0 = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            tok.encode_batch([doc] * 1200, num_threads=2)
        took = time.perf_counter() - t0
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    # Uninterrupted, the batch takes about 50 * unit; interrupted, a few units at most.
    assert took < 0.25 + 15 * unit, (took, unit)
    assert tok.encode_batch([doc, "ab"], num_threads=2) == [tok.encode(doc), tok.encode("ab")]
