"""SPEC section 1: every public name exists and behaves; files, pickling, options; the CLI."""

from __future__ import annotations

import base64
import gzip
import json
import math
import pickle
import subprocess
import sys

import pytest

import cnfmce
from cnfmce.formats import bytes_to_unicode, unicode_to_bytes

import reference as ref

BYTES = [bytes([b]) for b in range(256)]
EXTRA = [b"ab", b" the", "中文".encode(), b"hello", b" world", "caf\u00e9".encode(), b"\xe4\xb8", b"<|"]
SPECIALS = {"<|end|>": 300, "<|pad|>": 301, "<|end|>x": 305}


def make(**kw) -> cnfmce.Tokenizer:
    return cnfmce.Tokenizer.from_tokens(BYTES + EXTRA, special_tokens=SPECIALS, **kw)


def same_tokenizer(a: cnfmce.Tokenizer, b: cnfmce.Tokenizer) -> None:
    assert a.token_bytes() == b.token_bytes()
    assert a.special_tokens == b.special_tokens
    assert a.options == b.options
    assert a.vocab_size == b.vocab_size == len(a) == len(b)
    for text in ["hello world", "ab the 中文 café <|end|> x", "x<|end|>xy<|pad|>", "\u00e9\u0301\n\t"]:
        assert a.encode(text) == b.encode(text)
        assert a.encode(text, allowed_special="all") == b.encode(text, allowed_special="all")
    data = b"ab\xe4\xb8\xff the"
    assert a.encode_bytes(data) == b.encode_bytes(data)


# --- names ------------------------------------------------------------------------------------------

def test_public_names_exist():
    T = cnfmce.Tokenizer
    for name in ("from_tokens", "from_tiktoken", "from_hf", "load"):
        assert callable(getattr(T, name))
    for name in ("encode", "encode_bytes", "encode_batch", "decode", "decode_bytes", "id_to_token",
                 "token_to_id", "save", "with_options"):
        assert callable(getattr(T, name))
    assert isinstance(T.vocab_size, property) and isinstance(T.special_tokens, property)
    for name in ("train", "count", "train_from_counts"):
        assert callable(getattr(cnfmce, name))
    assert isinstance(cnfmce.__version__, str) and cnfmce.__version__
    for name in ("CnfmceError", "UnknownIdError", "TokenizerFileError", "CorpusError"):
        assert issubclass(getattr(cnfmce, name), Exception)
    assert issubclass(cnfmce.UnknownIdError, KeyError)
    assert issubclass(cnfmce.TokenizerFileError, ValueError) and issubclass(cnfmce.TokenizerFileError, OSError)


def test_constructor_is_not_public():
    with pytest.raises(TypeError):
        cnfmce.Tokenizer(None)


# --- from_tokens ------------------------------------------------------------------------------------

def test_from_tokens_ids_are_list_indices():
    tokens = BYTES[::-1] + EXTRA  # byte b at id 255 - b
    tok = cnfmce.Tokenizer.from_tokens(tokens)
    for i, t in enumerate(tokens):
        assert tok.id_to_token(i) == t
        assert tok.token_to_id(t) == i
    assert tok.encode("a") == [255 - ord("a")]
    assert tok.vocab_size == len(tok) == len(tokens)
    assert tok.special_tokens == {}
    assert tok.options == {"algorithm": "mce", "boundary_penalty": 0.05, "token_preference": True}


def test_token_to_id_and_id_to_token():
    tok = make()
    assert tok.token_to_id(b"ab") == 256
    assert tok.token_to_id(b"zzz") is None
    assert tok.token_to_id(b"") is None
    assert tok.token_to_id(b"a") == 97
    assert tok.token_to_id("中文") == 258  # a str is taken as its UTF-8 bytes
    assert tok.id_to_token(258) == "中文".encode()
    assert tok.id_to_token(300) == b"<|end|>"
    assert tok.token_to_id(b"<|end|>") == 300


def test_vocab_size_counts_special_tokens():
    tok = make()
    assert tok.vocab_size == len(tok) == 256 + len(EXTRA) + len(SPECIALS)
    assert tok.special_tokens == SPECIALS
    # the returned dict is a copy
    tok.special_tokens["<x>"] = 1
    assert "<x>" not in tok.special_tokens


def test_special_tokens_as_a_list_get_the_next_ids():
    tok = cnfmce.Tokenizer.from_tokens(BYTES + EXTRA, special_tokens=["<a>", "<b>"])
    n = 256 + len(EXTRA)
    assert tok.special_tokens == {"<a>": n, "<b>": n + 1}


# --- encode and allowed_special ----------------------------------------------------------------------

def test_encode_basic():
    tok = make()
    ids = tok.encode("hello world")
    assert [tok.id_to_token(i) for i in ids] == [b"hello", b" world"]
    assert tok.encode("") == []
    assert tok.encode_bytes(b"") == []
    assert tok.encode_batch([]) == []


def test_special_text_is_ordinary_by_default():
    tok = make()
    text = "a<|end|>b"
    ids = tok.encode(text)
    assert 300 not in ids
    assert tok.decode(ids) == text
    # "<|" (two whole units) is a regular token; "end" has no token, so single bytes
    assert [tok.id_to_token(i) for i in ids] == [b"a", b"<|", b"e", b"n", b"d", b"|", b">", b"b"]
    assert tok.encode(text, allowed_special=set()) == ids
    assert tok.encode(text, allowed_special=frozenset()) == ids


def test_allowed_special_all_and_sets():
    tok = make()
    text = "ab<|end|>ab<|pad|><|end|>x"
    ab = 256
    assert tok.encode(text, allowed_special="all") == [ab, 300, ab, 301, 305]
    assert tok.encode(text, allowed_special={"<|end|>"}) == \
        [ab, 300, ab] + tok.encode("<|pad|>") + [300, ord("x")]
    assert tok.encode(text, allowed_special={"<|pad|>"}) == \
        tok.encode("ab<|end|>ab") + [301] + tok.encode("<|end|>x")
    assert tok.encode(text, allowed_special=["<|end|>", "<|pad|>"]) == [ab, 300, ab, 301, 300, ord("x")]
    for allowed in ("all", {"<|end|>"}):
        assert tok.decode(tok.encode(text, allowed_special=allowed)) == text
    # encode_bytes and encode_batch honour allowed_special as well
    assert tok.encode_bytes(text.encode(), allowed_special="all") == [ab, 300, ab, 301, 305]
    assert tok.encode_batch([text, "x"], allowed_special="all") == [[ab, 300, ab, 301, 305], [ord("x")]]


def test_specials_cut_the_text_into_independent_pieces():
    # the pieces around a special token are encoded on their own: compare with the reference
    tokens = BYTES + [b"a<", b">b", b"ab", b"a<s>b"]
    tok = cnfmce.Tokenizer.from_tokens(tokens, special_tokens={"<s>": 400})
    r = ref.RefTokenizer(tokens, special_tokens={"<s>": 400})
    for text in ["a<s>b", "xa<s>bx<s><s>", "<s>", "a<s"]:
        assert tok.encode(text, allowed_special="all") == r.encode(text, ["<s>"]), text
        assert tok.encode(text) == r.encode(text), text
    assert tok.encode("a<s>b") == [tokens.index(b"a<s>b")]
    assert tok.encode("a<s>b", allowed_special="all") == [ord("a"), 400, ord("b")]


# --- decode -------------------------------------------------------------------------------------------

def test_decode_and_decode_bytes():
    tok = make()
    ids = tok.encode("café 中文")
    assert tok.decode(ids) == "café 中文"
    assert tok.decode_bytes(ids) == "café 中文".encode()
    assert tok.decode([]) == "" and tok.decode_bytes([]) == b""
    assert tok.decode((i for i in ids)) == "café 中文"  # any iterable
    assert tok.decode([300]) == "<|end|>"


def test_decode_replaces_invalid_utf8():
    tok = make()
    partial = tok.token_to_id(b"\xe4\xb8")
    assert tok.decode([partial]) == "\ufffd"
    assert tok.decode([ord("a"), 0xFF, ord("b")]) == "a\ufffdb"
    assert tok.decode_bytes([partial, 0xAD]) == "中".encode()
    assert tok.decode([partial, 0xAD]) == "中"


def test_encode_bytes_invalid_utf8_roundtrip():
    tok = make()
    data = b"\xff\xfeab\xe4\xb8 the\xed\xa0\x80\xc0"
    ids = tok.encode_bytes(data)
    assert tok.decode_bytes(ids) == data
    assert tok.encode_bytes(bytearray(data)) == ids
    assert tok.encode_bytes(memoryview(data)) == ids
    assert tok.decode(ids) == data.decode("utf-8", errors="replace")


def test_encode_batch_equals_encode():
    tok = make()
    texts = ["hello world", "", "中文" * 1000, "ab<|end|>", "x" * 20000, "é\u0301"] * 5
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode_batch(tuple(texts), num_threads=2) == [tok.encode(t) for t in texts]


# --- options ------------------------------------------------------------------------------------------

def test_options_are_reported():
    tok = make(algorithm="fmm", boundary_penalty=0.3, token_preference=False)
    assert (tok.algorithm, tok.boundary_penalty, tok.token_preference) == ("fmm", 0.3, False)
    tok = make(boundary_penalty=math.inf)
    assert tok.boundary_penalty == math.inf


def test_with_options():
    tok = make()
    # a vocabulary where the options matter: "a " in "xa bc" costs λ
    t = cnfmce.Tokenizer.from_tokens(BYTES + [b"a ", b"bc"], special_tokens={"<s>": 999})
    assert [t.id_to_token(i) for i in t.encode("xa bc")] == [b"x", b"a ", b"bc"]
    t_inf = t.with_options(boundary_penalty=math.inf)
    assert [t_inf.id_to_token(i) for i in t_inf.encode("xa bc")] == [b"x", b"a", b" ", b"bc"]
    assert t_inf.options == {"algorithm": "mce", "boundary_penalty": math.inf, "token_preference": True}
    assert t_inf.special_tokens == {"<s>": 999}
    # unchanged options are kept, the original is untouched
    t2 = t_inf.with_options(token_preference=False)
    assert t2.options == {"algorithm": "mce", "boundary_penalty": math.inf, "token_preference": False}
    assert t.options["boundary_penalty"] == 0.05
    fmm = tok.with_options(algorithm="fmm")
    assert fmm.algorithm == "fmm" and fmm.token_bytes() == tok.token_bytes()
    same_tokenizer(tok.with_options(), tok)


# --- save / load ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".cnfmce"])
@pytest.mark.parametrize("opts", [
    {},
    {"algorithm": "fmm"},
    {"boundary_penalty": math.inf},
    {"boundary_penalty": 0.3, "token_preference": False},
    {"boundary_penalty": 0.0},
])
def test_save_load_roundtrip(tmp_path, suffix, opts):
    tok = make(**opts)
    path = tmp_path / ("tok" + suffix)
    tok.save(path)
    loaded = cnfmce.Tokenizer.load(path)
    same_tokenizer(tok, loaded)
    assert loaded.options == {**{"algorithm": "mce", "boundary_penalty": 0.05, "token_preference": True}, **opts}
    raw = path.read_bytes()
    if suffix.endswith(".gz"):
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    doc = json.loads(raw)  # readable without the package
    assert doc["format"] == "cnfmce" and isinstance(doc["version"], int)
    assert [base64.b64decode(t) for t in doc["tokens"]] == BYTES + EXTRA
    assert doc["special_tokens"] == SPECIALS
    # str paths too, and no temporary file is left behind
    loaded2 = cnfmce.Tokenizer.load(str(path))
    same_tokenizer(tok, loaded2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_load_options_override(tmp_path):
    tok = make(boundary_penalty=math.inf, algorithm="fmm", token_preference=False)
    path = tmp_path / "t.json.gz"
    tok.save(path)
    assert cnfmce.Tokenizer.load(path).options == \
        {"algorithm": "fmm", "boundary_penalty": math.inf, "token_preference": False}
    over = cnfmce.Tokenizer.load(path, algorithm="mce", boundary_penalty=0.3)
    assert over.options == {"algorithm": "mce", "boundary_penalty": 0.3, "token_preference": False}
    same_tokenizer(over, make(boundary_penalty=0.3, token_preference=False))
    over = cnfmce.Tokenizer.load(path, token_preference=True)
    assert over.options == {"algorithm": "fmm", "boundary_penalty": math.inf, "token_preference": True}
    with pytest.raises(ValueError):
        cnfmce.Tokenizer.load(path, algorithm="xyz")


def test_save_load_sparse_ids(tmp_path):
    """A tiktoken vocabulary with gaps in its ids survives save/load with the same ids."""
    lines = [f"{base64.b64encode(b).decode()} {i * 2}" for i, b in enumerate(BYTES)]
    lines.append(f"{base64.b64encode(b'hello').decode()} 1000")
    p = tmp_path / "v.tiktoken"
    p.write_text("\n".join(lines) + "\n")
    tok = cnfmce.Tokenizer.from_tiktoken(p, special_tokens={"<|eot|>": 1001})
    assert tok.id_to_token(2 * ord("a")) == b"a"
    assert tok.encode("hello a") == [1000, 2 * 32, 2 * ord("a")]
    assert tok.vocab_size == 258
    with pytest.raises(KeyError):
        tok.id_to_token(1)
    tok.save(tmp_path / "v.json")
    loaded = cnfmce.Tokenizer.load(tmp_path / "v.json")
    same_tokenizer(tok, loaded)
    assert loaded.encode("hello a") == [1000, 64, 194]


def test_pickle_roundtrip():
    for tok in (make(), make(algorithm="fmm", boundary_penalty=math.inf, token_preference=False)):
        clone = pickle.loads(pickle.dumps(tok))
        same_tokenizer(tok, clone)
        assert clone is not tok


# --- from_tiktoken / from_hf on the shared vocabularies ----------------------------------------------------

def test_from_tiktoken_o200k(o200k, shared_dir):
    path = shared_dir / "vocabs" / "o200k_base.tiktoken"
    lines = path.read_bytes().splitlines()
    assert o200k.vocab_size == len(lines) + 1  # + <|endoftext|> passed as special token
    for line in lines[::9973]:
        b64, rank = line.split()
        assert o200k.id_to_token(int(rank)) == base64.b64decode(b64)
        assert o200k.token_to_id(base64.b64decode(b64)) == int(rank)
    assert o200k.special_tokens == {"<|endoftext|>": 199999}
    assert o200k.encode("<|endoftext|>", allowed_special="all") == [199999]
    assert o200k.encode("hello world") == [24912, 2375]  # same as tiktoken's o200k_base here


def test_from_tiktoken_gzip(tmp_path):
    lines = [f"{base64.b64encode(b).decode()} {i}" for i, b in enumerate(BYTES + EXTRA)]
    data = ("\n".join(lines) + "\n").encode()
    (tmp_path / "v.tiktoken").write_bytes(data)
    (tmp_path / "v.tiktoken.gz").write_bytes(gzip.compress(data))
    a = cnfmce.Tokenizer.from_tiktoken(tmp_path / "v.tiktoken")
    b = cnfmce.Tokenizer.from_tiktoken(tmp_path / "v.tiktoken.gz", boundary_penalty=0.3)
    assert a.token_bytes() == b.token_bytes() == dict(enumerate(BYTES + EXTRA))
    assert b.boundary_penalty == 0.3


def test_from_hf_qwen(qwen, shared_dir):
    doc = json.loads(gzip.decompress((shared_dir / "vocabs" / "qwen3.5.tokenizer.json.gz").read_bytes()))
    inverse = unicode_to_bytes()
    vocab = doc["model"]["vocab"]
    for s, i in list(vocab.items())[::7919]:
        assert qwen.id_to_token(i) == bytes(inverse[c] for c in s)
    specials = {a["content"]: a["id"] for a in doc["added_tokens"] if a["special"]}
    assert qwen.special_tokens == specials and "<|endoftext|>" in specials
    others = [a for a in doc["added_tokens"] if not a["special"]]
    for a in others:  # non-special added tokens are regular tokens
        assert qwen.token_to_id(a["content"].encode()) == a["id"]
    assert qwen.vocab_size == len(vocab) + len(doc["added_tokens"])
    assert qwen.encode("<|im_start|>", allowed_special="all") == [specials["<|im_start|>"]]
    assert specials["<|im_start|>"] not in qwen.encode("<|im_start|>")


def _hf_doc(extra_vocab=None, added=None, model_type="BPE"):
    b2u = bytes_to_unicode()
    vocab = {"".join(b2u[x] for x in bytes([b])): b for b in range(256)}
    for i, t in enumerate([b"ab", " the".encode(), "中文".encode()] + list(extra_vocab or [])):
        vocab["".join(b2u[x] for x in t)] = 256 + i
    return {"version": "1.0", "model": {"type": model_type, "vocab": vocab, "merges": []},
            "added_tokens": added if added is not None else [
                {"id": 300, "content": "<|end|>", "special": True},
                {"id": 301, "content": "<tool>", "special": False}]}


@pytest.mark.parametrize("gz", [False, True])
def test_from_hf_small(tmp_path, gz):
    data = json.dumps(_hf_doc()).encode()
    path = tmp_path / ("tokenizer.json.gz" if gz else "tokenizer.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    tok = cnfmce.Tokenizer.from_hf(path, token_preference=False)
    assert tok.token_preference is False
    assert tok.special_tokens == {"<|end|>": 300}
    assert tok.token_to_id(b"<tool>") == 301
    assert tok.vocab_size == 261
    assert tok.encode(" the ab<tool>中文") == [257, 32, 256, 301, 258]
    assert tok.encode("<|end|>", allowed_special="all") == [300]


# --- train (SPEC section 4), only a smoke test here ----------------------------------------------------------

def test_train_smoke():
    docs = ["hello world, hello there. " * 20, "the quick brown fox " * 30, "中文中文"]
    tok = cnfmce.train(docs, vocab_size=300, progress=False, num_threads=1)
    assert isinstance(tok, cnfmce.Tokenizer)
    assert tok.vocab_size == 300
    assert all(tok.token_to_id(bytes([b])) is not None for b in range(256))
    for d in docs:
        assert tok.decode(tok.encode(d)) == d
        assert len(tok.encode(d)) < len(d.encode())


# --- the command line --------------------------------------------------------------------------------------

def _run(args, **kw):
    return subprocess.run(args, capture_output=True, timeout=120, **kw)


def test_cli_version():
    r = _run(["cnfmce", "--version"])
    assert r.returncode == 0, r.stderr
    assert cnfmce.__version__ in r.stdout.decode()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_cli_encode_jsonl(tmp_path, suffix):
    tok = make()
    tpath = tmp_path / ("tok" + suffix)
    tok.save(tpath)
    docs = ["hello world", "", "ab the 中文 café", "x<|end|>y", "é\n\nline\n", "\u3000\t"]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    r = _run([sys.executable, "-m", "cnfmce.cli", "encode", "-t", str(tpath), str(inp)])
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert out == [tok.encode(d) for d in docs]
    r = _run(["cnfmce", "encode", "-t", str(tpath), "--allow-special", str(inp)])
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert out == [tok.encode(d, allowed_special="all") for d in docs]
    assert out[3] == [ord("x"), 300, ord("y")]


def test_cli_encode_saved_options_are_used(tmp_path):
    tok = cnfmce.Tokenizer.from_tokens(BYTES + [b"a ", b"bc"], boundary_penalty=math.inf)
    tok.save(tmp_path / "t.json")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"text": "xa bc"}) + "\n")
    r = _run(["cnfmce", "encode", "-t", str(tmp_path / "t.json"), str(inp)])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tok.encode("xa bc") == [ord("x"), ord("a"), 32, 257]


def test_cli_encode_tiktoken_and_stdin(tmp_path):
    lines = [f"{base64.b64encode(b).decode()} {i}" for i, b in enumerate(BYTES + EXTRA)]
    p = tmp_path / "v.tiktoken"
    p.write_text("\n".join(lines) + "\n")
    tok = cnfmce.Tokenizer.from_tiktoken(p)
    r = _run(["cnfmce", "encode", "-t", str(p)], input=b"hello\xff world")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tok.encode_bytes(b"hello\xff world")


def test_cli_errors_are_messages_not_tracebacks(tmp_path):
    r = _run(["cnfmce", "encode", "-t", str(tmp_path / "missing.json"), str(tmp_path / "x.jsonl")])
    assert r.returncode != 0
    assert b"Traceback" not in r.stderr and b"missing.json" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = _run(["cnfmce", "encode", "-t", str(bad)], input=b"x")
    assert r.returncode != 0 and b"Traceback" not in r.stderr


# --- every shared tokenizer.json is a byte-level BPE vocabulary that from_hf must load ---------------------

SAMPLE = "Hello wörld, 中文 text ｜ <|endoftext|> \n\tdef f(x): return x**2  # ok 😀"


@pytest.mark.parametrize("name", [
    "llama3.tokenizer.json.gz", "minimax-m3.tokenizer.json.gz", "qwen2.5.tokenizer.json",
    # was a bug (fixed in 8b79e91): from_hf rejected DeepSeek-V4's tokenizer.json because 3 special
    # tokens (also in added_tokens with special=true) appear raw in model.vocab
    "deepseek-v4.tokenizer.json",
])
def test_from_hf_shared_vocabularies(shared_dir, name):
    path = shared_dir / "vocabs" / name
    if not path.exists():
        pytest.skip(f"missing {path}")
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
    tok = cnfmce.Tokenizer.from_hf(path)
    ids = set(doc["model"]["vocab"].values()) | {a["id"] for a in doc["added_tokens"]}
    assert tok.vocab_size == len(ids)
    specials = {a["content"]: a["id"] for a in doc["added_tokens"] if a["special"]}
    assert tok.special_tokens == specials
    assert tok.decode(tok.encode(SAMPLE)) == SAMPLE
    for s, i in list(specials.items())[:20]:
        assert tok.encode(s, allowed_special="all") == [i]
        assert tok.id_to_token(i) == s.encode()


def test_from_hf_special_token_listed_raw_in_vocab(tmp_path):
    """As in DeepSeek's tokenizer.json: a special token also listed raw in model.vocab."""
    doc = _hf_doc(added=[{"id": 300, "content": "<｜end▁of▁sentence｜>", "special": True}])
    doc["model"]["vocab"]["<｜end▁of▁sentence｜>"] = 300
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    tok = cnfmce.Tokenizer.from_hf(p)
    assert tok.special_tokens == {"<｜end▁of▁sentence｜>": 300}
    assert tok.vocab_size == 260


def test_packed_file_round_trip(tmp_path, monkeypatch):
    """Large vocabularies are saved packed (one base64 blob); loading gives the same tokenizer."""
    import cnfmce.formats as formats
    toks = [bytes([b]) for b in range(256)] + [b"hello", b" world", "中文".encode(), b"\xe4\xb8"]
    tok = cnfmce.Tokenizer.from_tokens(toks, special_tokens={"<|s|>": 900}, boundary_penalty=0.2)
    monkeypatch.setattr(formats, "PACK_ABOVE", 10)
    p = tmp_path / "packed.json.gz"
    tok.save(p)
    doc = json.loads(gzip.decompress(p.read_bytes()))
    assert isinstance(doc["tokens"], dict) and doc["version"] == 2
    back = cnfmce.Tokenizer.load(p)
    assert back.token_bytes() == tok.token_bytes()
    assert back.special_tokens == {"<|s|>": 900} and back.boundary_penalty == 0.2
    text = "hello world 中文<|s|>"
    assert back.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")
    # corrupt packed data: lengths that do not add up
    doc["tokens"]["lengths"] = doc["tokens"]["lengths"][:-8]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(cnfmce.TokenizerFileError):
        cnfmce.Tokenizer.load(bad)
