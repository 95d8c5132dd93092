"""Batches that run on the calling thread (one thread asked for, one text, or a few kilobytes in
all) give exactly what the pool gives and what ``encode`` gives, with the same errors; batches
just above the size where the pool takes over are checked too."""

import random

import pytest

import cnfmce

BYTES = [bytes([b]) for b in range(256)]
# The size (UTF-8 bytes of all texts) below which a batch stays on the calling thread (the
# core's HERE_BYTES); texts are built on both sides of it.
HERE = 16 * 1024


def tokenizer():
    tokens = BYTES + [b"ab", b"abc", b" the", b"the", b" a", "中文".encode(), "é".encode(), b"  ", b"\n\n"]
    return cnfmce.Tokenizer.from_tokens(tokens, special_tokens={"<s>": 400, "<|end|>": 401})


def texts_of(rng: random.Random, count: int, total: int):
    atoms = ["ab", "abc", " the", "the", " a", "中文", "é", "  ", "\n\n", "x", "<s>", "<|end|>", "😀", "-"]
    out = []
    for k in range(count):
        size = total // count
        out.append("".join(rng.choice(atoms) for _ in range(max(0, size // 3))))
    return out


@pytest.mark.parametrize("total", [0, 5, 300, 4000, HERE - 100, HERE + 100, 4 * HERE])
@pytest.mark.parametrize("count", [1, 2, 7])
def test_batch_paths_equal_encode(total, count):
    tok = tokenizer()
    rng = random.Random(total * 31 + count)
    texts = texts_of(rng, count, total)
    for allowed in [frozenset(), "all", {"<s>"}]:
        want = [tok.encode(t, allowed_special=allowed) for t in texts]
        want_off = [tok.encode_with_offsets(t, allowed_special=allowed) for t in texts]
        for threads in [None, 1, 2, 3]:
            got = tok.encode_batch(texts, allowed_special=allowed, num_threads=threads)
            assert got == want, (total, count, allowed, threads)
            ids, starts = tok.encode_batch(texts, allowed_special=allowed, num_threads=threads,
                                           return_numpy=True)
            flat = [ids[starts[k]:starts[k + 1]].tolist() for k in range(len(texts))]
            assert flat == want
            assert tok.encode_batch_with_offsets(texts, allowed_special=allowed,
                                                 num_threads=threads) == want_off
    data = [t.encode() + b"\xff\xfe" for t in texts]
    want_b = [tok.encode_bytes(d) for d in data]
    want_bo = [tok.encode_bytes_with_offsets(d) for d in data]
    for threads in [None, 1, 2, 3]:
        assert tok.encode_bytes_batch(data, num_threads=threads) == want_b
        assert tok.encode_bytes_batch_with_offsets(data, num_threads=threads) == want_bo


@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("big", [False, True])
def test_lone_surrogate_names_the_first_bad_text(threads, big):
    tok = tokenizer()
    filler = "the " * (HERE // 4 if big else 10)
    texts = [filler, "ok", "a\ud800b", filler, "\udfff"]
    for call in [lambda: tok.encode_batch(texts, num_threads=threads),
                 lambda: tok.encode_batch(texts, num_threads=threads, allowed_special="all"),
                 lambda: tok.encode_batch(texts, num_threads=threads, return_numpy=True),
                 lambda: tok.encode_batch_with_offsets(texts, num_threads=threads)]:
        with pytest.raises(ValueError, match="text 2 is not valid Unicode"):
            call()
    # The batch still works afterwards (the calling thread's state is restored).
    assert tok.encode_batch(["ab the"], num_threads=threads) == [tok.encode("ab the")]

