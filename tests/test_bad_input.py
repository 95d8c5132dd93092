"""SPEC section 1, bad input: a clear exception of the documented kind (ValueError, TypeError,
KeyError, OSError; the project's subclasses in cnfmce.errors inherit them). Never a crash, a hang
or a silently wrong result. Also big inputs."""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import cnfmce
from cnfmce.errors import CnfmceError, TokenizerFileError, UnknownIdError
from cnfmce.formats import bytes_to_unicode

BYTES = [bytes([b]) for b in range(256)]
T = cnfmce.Tokenizer


def small(**kw):
    return T.from_tokens(BYTES + [b"ab", "中文".encode(), b"aaaa", b"    ", "中中".encode()],
                         special_tokens={"<s>": 400}, **kw)


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def tiktoken_text(pairs) -> str:
    return "".join(f"{b64(t)} {i}\n" for t, i in pairs)


def hf_vocab(tokens_ids):
    b2u = bytes_to_unicode()
    return {"".join(b2u[x] for x in t): i for t, i in tokens_ids}


def hf_doc(extra=(), model_type="BPE", added=()):
    pairs = [(bytes([b]), b) for b in range(256)] + [(t, 256 + k) for k, t in enumerate(extra)]
    return {"model": {"type": model_type, "vocab": hf_vocab(pairs), "merges": []}, "added_tokens": list(added)}


# --- vocabularies -----------------------------------------------------------------------------------

@pytest.mark.parametrize("drop", [0, 97, 255])
def test_missing_single_byte(drop, tmp_path):
    tokens = [b for b in BYTES if b != bytes([drop])] + [b"ab"]
    with pytest.raises(ValueError, match=r"(?i)single-byte|256"):
        T.from_tokens(tokens)
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text((t, i) for i, t in enumerate(tokens)))
    with pytest.raises(ValueError, match=r"(?i)single-byte|256"):
        T.from_tiktoken(p)
    doc = {"model": {"type": "BPE", "vocab": hf_vocab((t, i) for i, t in enumerate(tokens))}}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"(?i)single-byte|256"):
        T.from_hf(p)
    doc = {"format": "cnfmce", "version": 1, "tokens": [b64(t) for t in tokens]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"(?i)single-byte|256"):
        T.load(p)


def test_empty_vocabulary():
    with pytest.raises(ValueError):
        T.from_tokens([])


@pytest.mark.parametrize("extra", [[b"ab", b"ab"], [b"a"], [b"\x00"]])
def test_duplicate_tokens(extra):
    with pytest.raises(ValueError, match="twice"):
        T.from_tokens(BYTES + extra)


def test_duplicate_ids_in_tiktoken(tmp_path):
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text([(t, i) for i, t in enumerate(BYTES)] + [(b"ab", 5)]))
    with pytest.raises(ValueError, match="5"):
        T.from_tiktoken(p)


def test_empty_token():
    with pytest.raises(ValueError, match="empty"):
        T.from_tokens(BYTES + [b""])


@pytest.mark.parametrize("bad", ["ab", 5, None, bytearray(b"ab"), [97, 98]])
def test_non_bytes_token(bad):
    with pytest.raises(TypeError):
        T.from_tokens(BYTES + [bad])


@pytest.mark.parametrize("bad", [None, b"abc", "abc", 5])
def test_tokens_not_a_list(bad):
    with pytest.raises(TypeError):
        T.from_tokens(bad)


@pytest.mark.parametrize("specials", [
    {"<a>": 97},            # id of a regular token
    {"<a>": 300, "<b>": 300},
    {"": 300},
    {"<a>": -1},
    {"<a>": 2**40},
    {b"<a>": 300},
    {"<a>": "300"},
])
def test_bad_special_tokens(specials):
    with pytest.raises((ValueError, TypeError)):
        T.from_tokens(BYTES, special_tokens=specials)


def test_special_tokens_as_plain_string():
    with pytest.raises(TypeError):
        T.from_tokens(BYTES, special_tokens="<s>")


# --- ids ------------------------------------------------------------------------------------------------

UNKNOWN_IDS = [401, 1000, -1, -400, 2**31, 2**32 - 1, 2**32, 2**32 + 97, 2**63 - 1, 2**63, 2**64 + 97, 10**30, -10**30]


@pytest.mark.parametrize("bad", UNKNOWN_IDS)
def test_unknown_id(bad):
    tok = small()
    for f in (lambda: tok.decode([97, bad]), lambda: tok.decode_bytes([bad]), lambda: tok.id_to_token(bad)):
        with pytest.raises(KeyError) as ei:
            f()
        assert isinstance(ei.value, UnknownIdError) and isinstance(ei.value, CnfmceError)
        assert "unknown token id" in str(ei.value)


# Was a bug (fixed in 8b79e91): an id outside the i64 range was reported as
# 'unknown token id -9223372036854775808', not the id that was given.
@pytest.mark.parametrize("bad", [2**63, 2**64 + 97, 10**30, -10**30])
def test_unknown_huge_id_message_names_the_id(bad):
    tok = small()
    with pytest.raises(KeyError, match=str(bad)):
        tok.decode([bad])


def test_unknown_id_between_sparse_ids(tmp_path):
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text([(t, 2 * i) for i, t in enumerate(BYTES)]))
    tok = T.from_tiktoken(p)
    assert tok.decode([2 * 97]) == "a"
    for bad in (1, 3, 511, 512):
        with pytest.raises(KeyError):
            tok.decode([bad])


@pytest.mark.parametrize("bad", [1.0, "1", None, b"1", [1], object()])
def test_non_int_ids(bad):
    tok = small()
    with pytest.raises(TypeError):
        tok.decode([97, bad])
    with pytest.raises(TypeError):
        tok.decode_bytes([bad])
    with pytest.raises(TypeError):
        tok.id_to_token(bad)


@pytest.mark.parametrize("bad", ["abc", b"abc", None, 5])
def test_ids_not_a_sequence(bad):
    tok = small()
    with pytest.raises(TypeError):
        tok.decode(bad)
    with pytest.raises(TypeError):
        tok.decode_bytes(bad)


def test_numpy_ids_work():
    np = pytest.importorskip("numpy")
    tok = small()
    ids = tok.encode("ab中文")
    for dtype in (np.int64, np.int32, np.uint32, np.uint64):
        assert tok.decode(np.array(ids, dtype=dtype)) == "ab中文"
    with pytest.raises(KeyError):
        tok.decode(np.array([2**63], dtype=np.uint64))


# --- files --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loader", ["load", "from_tiktoken", "from_hf"])
def test_missing_file(tmp_path, loader):
    with pytest.raises(FileNotFoundError, match="nope"):
        getattr(T, loader)(tmp_path / "nope.json")
    with pytest.raises(OSError):
        getattr(T, loader)(str(tmp_path / "nope.json.gz"))


@pytest.mark.parametrize("loader", ["load", "from_tiktoken", "from_hf"])
def test_directory_instead_of_file(tmp_path, loader):
    with pytest.raises((OSError, ValueError)):
        getattr(T, loader)(tmp_path)


@pytest.fixture
def saved(tmp_path):
    tok = small(boundary_penalty=math.inf)
    plain, gz = tmp_path / "t.json", tmp_path / "t.json.gz"
    tok.save(plain)
    tok.save(gz)
    return plain, gz


@pytest.mark.parametrize("which", ["plain", "gz"])
@pytest.mark.parametrize("fraction", [0.5, 0.9, 0.1, 0.0])
def test_truncated_saved_file(saved, tmp_path, which, fraction):
    src = saved[0] if which == "plain" else saved[1]
    data = src.read_bytes()
    cut = tmp_path / ("cut.json" if which == "plain" else "cut.json.gz")
    cut.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(TokenizerFileError) as ei:
        T.load(cut)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, OSError)
    assert str(cut) in str(ei.value)


@pytest.mark.parametrize("loader", ["from_hf", "from_tiktoken"])
def test_truncated_gzip_foreign_formats(tmp_path, loader):
    if loader == "from_hf":
        data = json.dumps(hf_doc([b"ab"])).encode()
    else:
        data = tiktoken_text((t, i) for i, t in enumerate(BYTES)).encode()
    p = tmp_path / "v.gz"
    p.write_bytes(gzip.compress(data)[: len(gzip.compress(data)) // 2])
    with pytest.raises(TokenizerFileError, match="(?i)gzip"):
        getattr(T, loader)(p)
    if loader == "from_hf":
        p = tmp_path / "tokenizer.json"
        p.write_bytes(data[: len(data) // 2])
        with pytest.raises(TokenizerFileError):
            T.from_hf(p)


def test_corrupt_gzip(saved, tmp_path):
    data = bytearray(saved[1].read_bytes())
    for k in range(20, min(len(data) - 8, 120)):
        data[k] ^= 0xA5
    p = tmp_path / "corrupt.json.gz"
    p.write_bytes(bytes(data))
    for loader in (T.load, T.from_hf, T.from_tiktoken):
        with pytest.raises(TokenizerFileError):
            loader(p)


def test_gz_name_but_not_gzip(saved, tmp_path):
    p = tmp_path / "plain.json.gz"
    p.write_bytes(saved[0].read_bytes())
    with pytest.raises((ValueError, OSError)):
        T.load(p)


@pytest.mark.parametrize("garbage", [os.urandom(2000), b"\x1f\x8b" + os.urandom(500), b"", b"\x00" * 100,
                                     "ünïcode garbage".encode("latin-1"), b"null", b"[1, 2, 3]", b"\"x\"",
                                     b"{}", b"42"])
def test_garbage_files(tmp_path, garbage):
    p = tmp_path / "g.bin"
    p.write_bytes(garbage)
    for loader in (T.load, T.from_hf, T.from_tiktoken):
        with pytest.raises(ValueError):  # TokenizerFileError is a ValueError (and an OSError)
            loader(p)


def _native(**fields):
    doc = {"format": "cnfmce", "version": 1, "tokens": [b64(t) for t in BYTES]}
    doc.update(fields)
    return {k: v for k, v in doc.items() if v is not ...}


WRONG_SHAPES = [
    ("not an object", [1, 2]),
    ("other format", _native(format="tiktoken")),
    ("no format", _native(format=...)),
    ("no version", _native(version=...)),
    ("future version", _native(version=99)),
    ("version as string", _native(version="1")),
    ("tokens missing", _native(tokens=...)),
    ("tokens not a list", _native(tokens="AAEC")),
    ("tokens not strings", _native(tokens=list(range(256)))),
    ("tokens bad base64", _native(tokens=[b64(t) for t in BYTES] + ["!!notbase64!!"])),
    ("ids wrong length", _native(ids=[0, 1])),
    ("ids not ints", _native(ids=[str(i) for i in range(256)])),
    ("ids negative", _native(ids=list(range(-1, 255)))),
    ("ids duplicate", _native(ids=[0] * 256)),
    ("special_tokens not a dict", _native(special_tokens=["<s>"])),
    ("special id not int", _native(special_tokens={"<s>": "300"})),
    ("special id clashes", _native(special_tokens={"<s>": 97})),
    ("options not a dict", _native(options=[])),
    ("bad algorithm", _native(options={"algorithm": "xyz"})),
    ("negative penalty", _native(options={"boundary_penalty": -1})),
    ("penalty string", _native(options={"boundary_penalty": "big"})),
    ("token_preference not bool", _native(options={"token_preference": "yes"})),
    ("missing bytes", _native(tokens=[b64(t) for t in BYTES[1:]])),
    ("duplicate tokens", _native(tokens=[b64(t) for t in BYTES] + [b64(b"a")])),
    ("empty token", _native(tokens=[b64(t) for t in BYTES] + [""])),
]


@pytest.mark.parametrize("name,doc", WRONG_SHAPES, ids=[w[0] for w in WRONG_SHAPES])
def test_native_file_of_wrong_shape(tmp_path, name, doc):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFileError) as ei:
        T.load(p)
    assert str(p) in str(ei.value)
    with pytest.raises(ValueError):
        T.from_bytes(json.dumps(doc).encode())


def test_nan_penalty_in_file(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_native(options={"boundary_penalty": float("nan")})))  # writes NaN
    with pytest.raises(TokenizerFileError, match="(?i)boundary_penalty"):
        T.load(p)


def test_loading_never_executes_code(tmp_path):
    """A pickle (or anything else) given as a tokenizer file is rejected, not run."""
    marker = tmp_path / "executed"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    p = tmp_path / "evil.json"
    p.write_bytes(pickle.dumps(Evil()))
    for loader in (T.load, T.from_hf, T.from_tiktoken):
        with pytest.raises(ValueError):
            loader(p)
    with pytest.raises(ValueError):
        T.from_bytes(pickle.dumps(Evil()))
    assert not marker.exists()


def test_pickle_with_tampered_state_is_rejected():
    state = b'{"format": "cnfmce", "version": 1, "tokens": []}'
    obj = T.__new__(T)
    with pytest.raises(ValueError):
        obj.__setstate__(state)


@pytest.mark.parametrize("model_type,vocab", [
    ("WordPiece", {"[UNK]": 0, "a": 1, "##b": 2}),
    ("Unigram", [["a", -1.0], ["b", -2.0]]),
    ("WordLevel", {"a": 0}),
])
def test_unsupported_tokenizer_json(tmp_path, model_type, vocab):
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps({"model": {"type": model_type, "vocab": vocab}}))
    with pytest.raises(TokenizerFileError, match="(?i)unsupported"):
        T.from_hf(p)


@pytest.mark.parametrize("bad_token", ["hello world", "a\u00e9\u4e2d", "\n", "<unk>\u0000"])
def test_tokenizer_json_outside_byte_alphabet(tmp_path, bad_token):
    doc = hf_doc([b"ab"])
    doc["model"]["vocab"][bad_token] = 999
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFileError, match="(?i)byte"):
        T.from_hf(p)


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("model"),
    lambda d: d.__setitem__("model", "BPE"),
    lambda d: d["model"].__setitem__("vocab", [1, 2]),
    lambda d: d["model"]["vocab"].__setitem__("ab", "257"),
    lambda d: d["model"]["vocab"].__setitem__("ab", -5),
    lambda d: d["model"]["vocab"].__setitem__("ab", 97),       # id used twice
    lambda d: d.__setitem__("added_tokens", [{"id": "x", "content": "<s>"}]),
    lambda d: d.__setitem__("added_tokens", [{"id": 300, "content": "", "special": True}]),
    lambda d: d.__setitem__("added_tokens", [{"id": -3, "content": "<s>", "special": True}]),
    lambda d: d.__setitem__("added_tokens", "nope"),
])
def test_tokenizer_json_of_wrong_shape(tmp_path, mutate):
    doc = hf_doc([b"ab"])
    mutate(doc)
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError):
        T.from_hf(p)


@pytest.mark.parametrize("line", ["YQ==", "!!! 1", "YQ== -1", "YQ== x", "YQ== 1 2", "= 3"])
def test_bad_tiktoken_lines(tmp_path, line):
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text((t, i) for i, t in enumerate(BYTES)) + line + "\n")
    with pytest.raises(TokenizerFileError, match=":257"):
        T.from_tiktoken(p)


def test_empty_tiktoken(tmp_path):
    p = tmp_path / "v.tiktoken"
    p.write_text("\n\n")
    with pytest.raises(TokenizerFileError):
        T.from_tiktoken(p)


# Was a bug (fixed in 8b79e91): a rank >= 2**32 raised OverflowError ('out of range integral type
# conversion attempted'), which is none of the documented kinds.
def test_tiktoken_rank_too_large(tmp_path):
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text([(t, i) for i, t in enumerate(BYTES)] + [(b"ab", 2**40)]))
    with pytest.raises(ValueError):
        T.from_tiktoken(p)


# Was a bug (fixed in 8b79e91): OverflowError instead of ValueError.
@pytest.mark.parametrize("where", ["vocab", "added"])
def test_tokenizer_json_id_too_large(tmp_path, where):
    doc = hf_doc([b"ab"])
    if where == "vocab":
        doc["model"]["vocab"]["xy"] = 2**40
    else:
        doc["added_tokens"] = [{"id": 2**40, "content": "<tool>", "special": False}]
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError):
        T.from_hf(p)


# A large sparse id made the core allocate a dense offset table of (max id + 1) words: an id near
# 2**32 asked for 32 GiB and the process aborted (Rust allocation failure, SIGABRT), which no Python
# code can catch; an id of 3e8 silently took 2.4 GB. Fixed in 8b79e91 (such id spaces are refused).
# Run in a subprocess so that a regression cannot take the test session down.
_BIG_ID_SCRIPT = textwrap.dedent("""
    import base64, json, sys
    import cnfmce
    from cnfmce.formats import bytes_to_unicode
    kind, path = sys.argv[1], sys.argv[2]
    BIG = int(sys.argv[3])
    b64 = lambda b: base64.b64encode(b).decode()
    if kind == "native":
        doc = {"format": "cnfmce", "version": 1, "tokens": [b64(bytes([b])) for b in range(256)] + [b64(b"ab")],
               "ids": list(range(256)) + [BIG]}
        open(path, "w").write(json.dumps(doc))
        load = cnfmce.Tokenizer.load
    elif kind == "tiktoken":
        open(path, "w").write("".join(f"{b64(bytes([b]))} {b}\\n" for b in range(256)) + f"{b64(b'ab')} {BIG}\\n")
        load = cnfmce.Tokenizer.from_tiktoken
    else:
        b2u = bytes_to_unicode()
        vocab = {b2u[b]: b for b in range(256)}
        vocab[b2u[97] + b2u[98]] = BIG
        open(path, "w").write(json.dumps({"model": {"type": "BPE", "vocab": vocab}}))
        load = cnfmce.Tokenizer.from_hf
    try:
        tok = load(path)
    except (ValueError, OSError, TypeError, KeyError) as e:
        print("raised", type(e).__name__, e)
    else:
        assert tok.encode("ab") == [BIG], tok.encode("ab")
        print("loaded")
""")


@pytest.mark.parametrize("big", [2**32 - 2, 300_000_000])  # 2**32 - 2: the largest id the format accepts
@pytest.mark.parametrize("kind", ["native", "tiktoken", "hf"])
def test_huge_sparse_id_does_not_crash(tmp_path, kind, big):
    r = subprocess.run([sys.executable, "-c", _BIG_ID_SCRIPT, kind, str(tmp_path / "v"), str(big)],
                       capture_output=True, timeout=120, env={**os.environ, "RUST_BACKTRACE": "0"})
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.decode(errors='replace')[-500:]}"
    assert r.stdout.startswith((b"raised", b"loaded"))


# --- options ---------------------------------------------------------------------------------------------

BAD_OPTIONS = [
    ({"algorithm": "xyz"}, ValueError),
    ({"algorithm": "MCE"}, ValueError),
    ({"algorithm": None}, ValueError),
    ({"boundary_penalty": -0.1}, ValueError),
    ({"boundary_penalty": -math.inf}, ValueError),
    ({"boundary_penalty": float("nan")}, ValueError),
    ({"boundary_penalty": "0.1"}, TypeError),
    ({"boundary_penalty": None}, TypeError),
    ({"boundary_penalty": True}, TypeError),
    ({"token_preference": 1}, TypeError),
    ({"token_preference": "yes"}, TypeError),
    ({"token_preference": None}, TypeError),
]


@pytest.mark.parametrize("opts,exc", BAD_OPTIONS, ids=[repr(o) for o, _ in BAD_OPTIONS])
def test_bad_options(tmp_path, opts, exc):
    with pytest.raises(exc):
        T.from_tokens(BYTES, **opts)
    p = tmp_path / "v.tiktoken"
    p.write_text(tiktoken_text((t, i) for i, t in enumerate(BYTES)))
    with pytest.raises(exc):
        T.from_tiktoken(p, **opts)
    h = tmp_path / "tokenizer.json"
    h.write_text(json.dumps(hf_doc()))
    with pytest.raises(exc):
        T.from_hf(h, **opts)
    tok = small()
    if list(opts.values())[0] is not None:  # None means "keep" for with_options and load
        with pytest.raises(exc):
            tok.with_options(**opts)
        tok.save(tmp_path / "t.json")
        with pytest.raises(ValueError):
            T.load(tmp_path / "t.json", **opts)


def test_penalty_accepts_ints_and_inf():
    assert T.from_tokens(BYTES, boundary_penalty=0).boundary_penalty == 0.0
    assert T.from_tokens(BYTES, boundary_penalty=2).boundary_penalty == 2.0
    assert T.from_tokens(BYTES, boundary_penalty=math.inf).boundary_penalty == math.inf


# --- encode arguments ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [b"ab", bytearray(b"ab"), None, 5, ["ab"]])
def test_encode_rejects_non_str(bad):
    with pytest.raises(TypeError):
        small().encode(bad)


@pytest.mark.parametrize("bad", ["ab", None, 5, ["ab"]])
def test_encode_bytes_rejects_non_bytes(bad):
    with pytest.raises(TypeError):
        small().encode_bytes(bad)


@pytest.mark.parametrize("bad", ["ab", b"ab", [b"ab"], ["ok", None], 5])
def test_encode_batch_rejects_bad_items(bad):
    with pytest.raises(TypeError):
        small().encode_batch(bad)


@pytest.mark.parametrize("n", [0, -1, "2"])
def test_encode_batch_bad_num_threads(n):
    with pytest.raises(ValueError):
        small().encode_batch(["a"], num_threads=n)


@pytest.mark.parametrize("text", ["a\ud800b", "\udfff", "ok \udc80", "\ud83d\ude00 paired-as-two"])
def test_lone_surrogates(text):
    tok = small()
    with pytest.raises(ValueError, match="(?i)surrogate"):
        tok.encode(text)
    with pytest.raises(ValueError, match="(?i)surrogate"):
        tok.encode_batch(["fine", text])
    # the documented way out
    data = text.encode("utf-8", "surrogatepass")
    assert tok.decode_bytes(tok.encode_bytes(data)) == data


@pytest.mark.parametrize("allowed", [{"<x>"}, {"<s>", "ab"}, ["nope"]])
def test_allowed_special_not_a_special_token(allowed):
    with pytest.raises(ValueError, match="(?i)special"):
        small().encode("a<s>b", allowed_special=allowed)


@pytest.mark.parametrize("allowed,exc", [("<s>", ValueError), ("none", ValueError), (None, TypeError), (5, TypeError)])
def test_allowed_special_bad_type(allowed, exc):
    with pytest.raises(exc):
        small().encode("a<s>b", allowed_special=allowed)


def test_allowed_special_with_no_specials():
    tok = T.from_tokens(BYTES)
    assert tok.encode("a<s>b", allowed_special="all") == list(b"a<s>b")
    with pytest.raises(ValueError):
        tok.encode("a<s>b", allowed_special={"<s>"})


# --- big inputs (each must finish in a few seconds; no assertion on time) --------------------------------------

def _check_big(tok, text, expected_len=None, max_len=None):
    ids = tok.encode(text)
    if expected_len is not None:
        assert len(ids) == expected_len
    if max_len is not None:
        assert len(ids) <= max_len
    assert tok.decode(ids) == text
    return ids


def test_big_runs_small_vocab():
    tok = small()
    aaaa, spaces, zz = tok.token_to_id(b"aaaa"), tok.token_to_id(b"    "), tok.token_to_id("中中".encode())
    assert _check_big(tok, "a" * 10_000_000, 2_500_000) == [aaaa] * 2_500_000
    assert _check_big(tok, " " * 10_000_000, 2_500_000) == [spaces] * 2_500_000
    # CJK ideographs are units of their own, and a token of two whole units is fine
    assert _check_big(tok, "中" * 3_000_000, 1_500_000) == [zz] * 1_500_000
    # 4k + 1 bytes: one "a" and k "aaaa"; where the "a" goes depends on how ε sums round
    ids = _check_big(tok, "a" * 10_000_001, 2_500_001)
    assert ids.count(ord("a")) == 1 and ids.count(aaaa) == 2_500_000
    # without ε all those segmentations tie exactly, and the largest j wins at every step
    tok = tok.with_options(token_preference=False)
    assert _check_big(tok, "a" * 10_000_001) == [aaaa] * 2_500_000 + [ord("a")]


def test_big_runs_o200k(o200k):
    def longest_run(ch):
        return max(k for k in range(1, 200) if o200k.token_to_id(ch.encode() * k) is not None)

    ka, ks = longest_run("a"), longest_run(" ")
    assert ka >= 4 and ks >= 64
    _check_big(o200k, "a" * 10_000_000, max_len=10_000_000 // ka + ka)
    _check_big(o200k, " " * 10_000_000, max_len=10_000_000 // ks + ks)
    one = o200k.token_to_id("中".encode())
    assert one is not None
    ids = _check_big(o200k, "中" * 3_000_000, max_len=3_000_000)
    assert len(ids) >= 3_000_000 // longest_run("中")


def test_big_batch_and_bytes(bpe):
    texts = ["x" * 2_000_000, "\n" * 2_000_000, "é" * 1_000_000]
    assert bpe.encode_batch(texts) == [bpe.encode(t) for t in texts]
    data = b"\xff" * 3_000_000
    ids = bpe.encode_bytes(data)
    assert len(ids) == 3_000_000 and bpe.decode_bytes(ids) == data


def test_bool_ids_are_rejected():
    tok = small()
    for f in (lambda: tok.decode([True]), lambda: tok.decode_bytes([97, False]), lambda: tok.id_to_token(True)):
        with pytest.raises(TypeError, match="bool"):
            f()


def test_bool_version_is_rejected(tmp_path):
    tok = small()
    p = tmp_path / "t.json"
    tok.save(p)
    doc = json.loads(p.read_text())
    doc["version"] = True
    p.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFileError, match="version"):
        cnfmce.Tokenizer.load(p)
