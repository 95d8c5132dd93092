"""The distributed-training steps of the bindings (docs/spec.md section 6): counting and filtering
blocks of the corpus apart (any partition, merged in any order, every value sent through pickle as
it would be between processes) gives the tokenizer of the local ``cnfmce.train``, byte for byte;
and the same for ``cnfmce.count`` through ``_core.Counter``."""

import pickle
import random

import pytest

import cnfmce
from cnfmce import _core

from train_helpers import SENTENCES

ROUNDS = ((1, 6, 0), (7, 12, 2), (13, 20, 2))


def _docs():
    rng = random.Random(7)
    docs = [" ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 4))) for _ in range(120)]
    return docs + ["co-advisor 漢字かな e\u0301te\u0301 " * 3, "    code() { return x; }\n" * 4]


def _blocks(docs, rng):
    docs = docs[:]
    rng.shuffle(docs)
    cuts = sorted(rng.sample(range(1, len(docs)), 5))
    return [docs[a:b] for a, b in zip([0] + cuts, cuts + [len(docs)])]


def _ship(x):
    return pickle.loads(pickle.dumps(x))


def _merged(parts, empty):
    total = empty
    for p in parts:
        total = _ship(p).merge(total)
    return total


def test_blocks_give_the_local_tokenizer():
    docs = _docs()
    kw = dict(vocab_size=320, raw_vocab_size=2000, rounds=ROUNDS, special_tokens=["<|end|>"],
              boundary_penalty=0.1, progress=False, selection="paper")  # the core Trainer's default
    local = cnfmce.train(docs, **kw)
    opts = _core.Options("mce", 0.1, True)
    rng = random.Random(1)
    trainer = _core.Trainer(320, 2000, ROUNDS, ["<|end|>"], opts)
    while trainer.next_pass() is not None:
        kind, _, round_ = trainer.begin_pass()
        if kind == "count":
            survivors = _ship(trainer.survivors())
            parts = [_core.count_block(b, round_, survivors) for b in _blocks(docs, rng)]
            trainer.end_pass_with_counts(_merged(parts, _core.BlockCounts()))
        else:
            raw = trainer.raw_tokens()
            worker = _core.Filter(raw, _ship(opts))
            parts = [worker.usage_of(b) for b in _blocks(docs, rng)]
            total = _merged(parts, _core.BlockUsage())
            assert total.bytes == sum(len(d.encode()) for d in docs)
            trainer.end_pass_with_usage(total)
    core, report = trainer.finish()
    got = cnfmce.Tokenizer(core)
    assert got.token_bytes() == local.token_bytes()
    assert got.special_tokens == local.special_tokens == {"<|end|>": 319}
    assert got.options == local.options
    assert report["used_tokens"] == local.metadata["filtering"]["used_tokens"]


def test_counting_blocks_equal_count():
    docs = _docs()
    want = cnfmce.count(docs, raw_vocab_size=500, rounds=ROUNDS, progress=False)
    counter = _core.Counter(ROUNDS, 500, 1 << 30, "/nonexistent-never-spilled")
    rng = random.Random(3)
    for r in ROUNDS:
        counter.begin_round()
        survivors = _ship(counter.survivors())
        counter.end_round_with(_merged([_core.count_block(b, r, survivors) for b in _blocks(docs, rng)],
                                       _core.BlockCounts()))
    toks, counts = counter.result()
    assert list(zip(toks, counts)) == list(want.items())


def test_steps_refuse_bad_input():
    opts = _core.Options.default()
    with pytest.raises(ValueError, match="block counts"):
        _core.BlockCounts.from_bytes(b"\x05\x00ab")          # truncated record
    with pytest.raises(ValueError, match="block usage"):
        _core.BlockUsage.from_bytes(b"\x00" * 12)
    with pytest.raises(ValueError):
        _core.count_block(["x"], (0, 3, 0), _core.Survivors.from_bytes(b""))
    t = _core.Trainer(300, options=opts)
    with pytest.raises(ValueError, match="no pass"):
        t.survivors()
    t.begin_pass()
    with pytest.raises(ValueError, match="not the filtering pass"):
        t.end_pass_with_usage(_core.BlockUsage())
    with pytest.raises(ValueError, match="empty"):
        t.end_pass_with_counts(_core.BlockCounts())           # no candidate at all: no text
    u = _core.Filter([bytes([b]) for b in range(256)], opts).usage_of(["ab"])
    with pytest.raises(ValueError, match="different sizes"):
        u.merge(_core.Filter([bytes([b]) for b in range(256)] + [b"ab"], opts).usage_of(["ab"]))
