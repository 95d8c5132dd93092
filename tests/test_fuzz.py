"""A short, seeded fuzz run (issue 14): random inputs against the reference DP, and mutated files
for every loader. Unlike the structured generators of test_mce_reference.py, the inputs here are
raw: any code point (controls, unassigned, private use, every script), random bytes, random λ of
every numeric type, special tokens with random allowed and disallowed sets. Every case derives
from a fixed seed; a failure message holds what reproduces it.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import math
import random
import sys
from fractions import Fraction
from typing import Any, Callable, List

import pytest

import cnfmce
from cnfmce import cli
from cnfmce.formats import bytes_to_unicode

import reference as ref

BYTES = [bytes([b]) for b in range(256)]
T = cnfmce.Tokenizer
SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<|im_start|>", "[SEP]"]


# --- random inputs against the reference DP -----------------------------------------------------------

def _rand_char(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        return chr(rng.randrange(0x20, 0x7F))
    if r < 0.45:
        return chr(rng.randrange(0, 0x20))
    if r < 0.75:
        return chr(rng.randrange(0xA0, 0x3000))
    if r < 0.9:
        return chr(rng.randrange(0x3000, 0xD800))
    if r < 0.95:
        return chr(rng.randrange(0xE000, 0x10000))
    return chr(rng.randrange(0x10000, 0x110000))


def _rand_text(rng: random.Random, alphabet: List[str], n: int) -> str:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            out.append(rng.choice(alphabet))
        elif r < 0.7 and SPECIALS:
            out.append(rng.choice(SPECIALS))
        else:
            out.append(_rand_char(rng))
    return "".join(out)


def _rand_lambda(rng: random.Random) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return 0
    if choice == 1:
        return math.inf
    if choice == 2:
        return rng.random() * 1e-6
    if choice == 3:
        return rng.random() * 3
    if choice == 4:
        return Fraction(rng.randrange(1, 9), rng.randrange(1, 9))
    if choice == 5:
        return rng.randrange(0, 4)
    if choice == 6:
        return -0.0
    if choice == 7:
        return 1e300
    return 0.05


def _rand_vocab(rng: random.Random, alphabet: List[str]) -> List[bytes]:
    extra = set()
    for _ in range(rng.randrange(1, 120)):
        k = rng.randrange(1, 6)
        s = "".join(rng.choice(alphabet) if rng.random() < 0.8 else _rand_char(rng) for _ in range(k))
        b = s.encode("utf-8", "surrogatepass")
        if rng.random() < 0.2 and len(b) > 1:  # cut inside a character
            b = b[rng.randrange(1, len(b)):] if rng.random() < 0.5 else b[:rng.randrange(1, len(b))]
        if rng.random() < 0.05:
            b = bytes(rng.randrange(256) for _ in range(rng.randrange(2, 5)))
        if len(b) > 1:
            extra.add(b)
    tokens = BYTES + sorted(extra)
    if rng.random() < 0.5:
        rng.shuffle(tokens)
    return tokens


N_VOCABS = 120
TEXTS_PER_VOCAB = 25   # 3,000 inputs, each through several entry points


@pytest.mark.parametrize("chunk", range(6))
def test_fuzz_against_reference(chunk):
    for v in range(N_VOCABS // 6):
        seed = 7_000_000 + chunk * 1000 + v
        rng = random.Random(seed)
        alphabet = [_rand_char(rng) for _ in range(rng.randrange(3, 12))]
        tokens = _rand_vocab(rng, alphabet)
        algorithm = "fmm" if rng.random() < 0.15 else "mce"
        lam = _rand_lambda(rng)
        eps = rng.random() < 0.7
        n = len(tokens)
        specials = {s: n + k for k, s in enumerate(SPECIALS)}
        tok = T.from_tokens(tokens, special_tokens=specials, algorithm=algorithm,
                            boundary_penalty=lam, token_preference=eps)
        lam_f = float(lam) + 0.0
        assert tok.boundary_penalty == lam_f and math.copysign(1, tok.boundary_penalty) == 1
        refc = ref.RefTokenizer(tokens, algorithm, lam_f, eps, specials)
        texts = []
        for t in range(TEXTS_PER_VOCAB):
            text = _rand_text(rng, alphabet, rng.randrange(0, 40))
            texts.append(text)
            allowed = rng.sample(SPECIALS, rng.randrange(0, 3)) if rng.random() < 0.5 else []
            want = refc.encode(text, allowed)
            where = f"seed {seed} text {t} {text!r} allowed {allowed} options {algorithm}/{lam!r}/{eps}"
            got = tok.encode(text, allowed_special=set(allowed))
            assert got == want, where
            assert tok.decode(got) == text, where
            assert tok.encode_bytes(text.encode(), allowed_special=set(allowed)) == want, where
            ids, offs = tok.encode_with_offsets(text, allowed_special=set(allowed))
            assert ids == want and len(offs) == len(ids), where
            # disallowed_special: raises exactly when a forbidden special's text occurs
            forbidden = [s for s in SPECIALS if s not in allowed]
            if any(s in text for s in forbidden):
                with pytest.raises(ValueError, match="disallowed_special"):
                    tok.encode(text, allowed_special=set(allowed), disallowed_special="all")
            else:
                assert tok.encode(text, allowed_special=set(allowed), disallowed_special="all") == want
        # random bytes, invalid UTF-8 included
        for t in range(5):
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 30)))
            want = refc.encode_bytes(data)
            assert tok.encode_bytes(data) == want, f"seed {seed} bytes {data!r}"
            assert tok.decode_bytes(want) == data
        # the batch equals one by one, whatever the thread count
        want = [refc.encode(t) for t in texts]
        assert tok.encode_batch(texts, num_threads=rng.choice([None, 1, 2, 3, 10**6])) == want, seed


def test_fuzz_bpe_snippets(bpe):
    """Random slices of real text and random characters on a real vocabulary (only the tokens
    that can occur in the snippet go into the reference's vocabulary, which changes nothing)."""
    rng = random.Random(99)
    vocab = bpe.get_vocab()
    longest = max(len(t) for t in vocab)
    base = ("The quick brown fox — naïve café, 中文字符 and ひらがな; def f(x): return x**2\n"
            "Ünïcödé ẞ Ωmega 😀👍🏽 1234567 ٣٤٥ ….")
    for k in range(150):
        a = rng.randrange(len(base))
        text = base[a:a + rng.randrange(1, 40)] + "".join(_rand_char(rng) for _ in range(rng.randrange(0, 4)))
        data = text.encode()
        sub = {data[i:j]: vocab[data[i:j]] for i in range(len(data))
               for j in range(i + 1, min(len(data), i + longest) + 1) if data[i:j] in vocab}
        want = ref.mce_encode(sub, data, 0.05, True)
        assert bpe.encode(text) == want, (k, text)


# --- mutated files, every loader ----------------------------------------------------------------------

def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _valid_files():
    extra = [b"ab", b"abc", "中文".encode(), b" the", b"\xe4\xb8"]
    tok = T.from_tokens(BYTES + extra, special_tokens={"<s>": 300})
    native = tok.to_bytes()
    b2u = bytes_to_unicode()
    hf = json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {
        "".join(b2u[x] for x in t): i for i, t in enumerate(BYTES + extra)}, "merges": ["a b"]},
        "added_tokens": [{"id": 300, "content": "<s>", "special": True},
                         {"id": 301, "content": "hello", "special": False}]}).encode()
    tiktoken = "".join(f"{_b64(t)} {i}\n" for i, t in enumerate(BYTES + extra)).encode()
    counts = ("# cnfmce counts v1\n# " + json.dumps({"rounds": [[1, 4, 0]]}) + "\n" +
              "".join(f"{_b64(t)}\t{100 - k}\n" for k, t in enumerate(extra))).encode()
    return {"native": native, "hf": hf, "tiktoken": tiktoken, "counts": counts}


_DEEP = "\x00deeply nested\x00"  # replaced by a deeply nested array in the JSON text


def _json_mutation(rng: random.Random, data: bytes) -> bytes:
    doc = json.loads(data)
    nodes = []

    def walk(x, parent, key, depth):
        nodes.append((parent, key))
        if depth > 6:
            return
        if isinstance(x, dict):
            for k in list(x)[:40]:
                walk(x[k], x, k, depth + 1)
        elif isinstance(x, list):
            for k in range(min(len(x), 40)):
                walk(x[k], x, k, depth + 1)

    walk(doc, None, None, 0)
    parent, key = rng.choice(nodes[1:])
    values = [None, True, -1, 0, 2**31, 2**32, 2**64, 10**400, -10**400, 1.5, -0.0, "", "x",
              "AAAA", "\ud800", [], {}, [[[[]]]], {"a": {"b": {}}}, "inf", "nan", 1e308,
              _DEEP, _DEEP]
    choice = rng.randrange(4)
    if choice == 0 or not isinstance(parent, dict):
        parent[key] = rng.choice(values)
    elif choice == 1:
        del parent[key]
    elif choice == 2:
        parent[rng.choice(["format", "version", "options", "tokens", "ids", "special_tokens",
                           "model", "added_tokens", "vocab", "type", "packed", "lengths"])] = \
            rng.choice(values)
    else:
        parent[key] = rng.choice(values)
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
    depth = rng.choice([500, 3000, 200_000])  # beyond Python's recursion limit too
    text = text.replace(json.dumps(_DEEP), "[" * depth + "]" * depth)
    return text.encode("utf-8", "surrogatepass")


def _byte_mutation(rng: random.Random, data: bytes) -> bytes:
    d = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(7)
        i = rng.randrange(len(d) + 1)
        if op == 0 and d:
            d[min(i, len(d) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            d[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif op == 2:
            del d[i:i + rng.randrange(1, 64)]
        elif op == 3:
            d = d[:i]
        elif op == 4:
            j = rng.randrange(len(d) + 1)
            d[i:i] = d[j:j + rng.randrange(1, 200)]
        elif op == 5:
            d[i:i] = rng.choice([b"\n", b"\t", b" ", b"=", b"\x00", b"\xff", b"{", b"]", b'"', b"-",
                                 b"99999999999999999999", b"\xed\xa0\x80"])
        else:
            d[i:i] = b"[" * rng.randrange(1000, 100_000)
    return bytes(d)


def _loader(kind: str) -> Callable[[str], Any]:
    return {"native": T.load, "hf": T.from_hf, "tiktoken": T.from_tiktoken,
            "counts": cnfmce.load_counts}[kind]


ALLOWED = (ValueError, TypeError, KeyError, OSError)  # documented kinds (cnfmce.errors inherit them)
N_MUTATIONS = 250


@pytest.mark.parametrize("kind", ["native", "hf", "tiktoken", "counts"])
def test_fuzz_mutated_files(kind, tmp_path, monkeypatch):
    base = _valid_files()[kind]
    load = _loader(kind)
    rng = random.Random({"native": 1, "hf": 2, "tiktoken": 3, "counts": 4}[kind])
    accepted = rejected = 0
    for k in range(N_MUTATIONS):
        if kind in ("native", "hf", "counts") and rng.random() < 0.5:
            if kind == "counts":
                head, _, rest = base.partition(b"\n# ")
                meta, _, body = rest.partition(b"\n")
                data = head + b"\n# " + _json_mutation(rng, meta) + b"\n" + body
            else:
                data = _json_mutation(rng, base)
        else:
            data = _byte_mutation(rng, base)
        gz = rng.random() < 0.3
        name = {"native": "t.json", "hf": "tokenizer.json", "tiktoken": "v.tiktoken",
                "counts": "c.tsv"}[kind] + (".gz" if gz else "")
        p = tmp_path / name
        if gz:
            blob = gzip.compress(data, mtime=0)
            if rng.random() < 0.3:  # damaged compressed data
                blob = _byte_mutation(rng, blob)
            p.write_bytes(blob)
        else:
            p.write_bytes(data)
        where = f"{kind} mutation {k}: {data[:300]!r}"
        try:
            obj = load(p)
        except ALLOWED as e:
            rejected += 1
            assert not isinstance(e, (RecursionError, OverflowError)), where
            assert str(e), where
            continue
        except BaseException as e:  # a crash, a RecursionError, a panic...
            pytest.fail(f"{where}\n raised {type(e).__name__}: {e}")
        accepted += 1
        if kind == "counts":
            assert all(isinstance(t, bytes) and t and isinstance(c, int) and c >= 0
                       for t, c in obj.items()), where
        else:
            text = "ab abc 中文 the <s> hello"
            assert obj.decode(obj.encode(text)) == text, where
            assert obj.decode_bytes(obj.encode_bytes(b"\xff\xe4\xb8")) == b"\xff\xe4\xb8", where
    assert rejected >= N_MUTATIONS // 4 and accepted >= 1, (accepted, rejected)
    # the command line on a few of them: a one-line error or a result, never a traceback
    if kind != "counts":
        for k in range(8):
            data = _byte_mutation(random.Random(k), base)
            p = tmp_path / ("cli-" + {"native": "t.json", "hf": "tokenizer.json",
                                      "tiktoken": "v.tiktoken"}[kind])
            p.write_bytes(data)
            out, err = io.StringIO(), io.StringIO()
            monkeypatch.setattr(sys, "stdout", out)
            monkeypatch.setattr(sys, "stderr", err)
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ab abc")))
            code = cli.main(["encode", "-t", str(p)])
            monkeypatch.undo()
            assert code in (0, 1), err.getvalue()
            if code:
                lines = err.getvalue().strip().splitlines()
                assert len(lines) == 1 and lines[0].startswith("cnfmce: error:"), err.getvalue()
