"""The core's corpus reader (``cnfmce._core.CorpusReader``, ``src/read.rs``) that ``cnfmce
tokenize`` uses for ``.jsonl`` / ``.jsonl.gz`` / ``.txt``: its JSON fast path against Python's
``json.loads`` on many generated lines, and every bad input giving the Python readers' error
(type and message) with no partial shard."""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

import cnfmce
import cnfmce.shards as shards
from cnfmce._core import CorpusReader, TextBlock
from cnfmce.corpus import parse_jsonl_line
from cnfmce.errors import CorpusError

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def tok() -> cnfmce.Tokenizer:
    toks = [bytes([b]) for b in range(256)] + [b"the", b" the", "中".encode(), b"  "]
    return cnfmce.Tokenizer.from_tokens(toks, special_tokens={EOT: len(toks)})


# --- the JSON fast path against json.loads ---------------------------------------------------------

_RAW = ["a", "Z", " ", "é", "中", "🙂", "\u2028", "\x7f", "'", "{", "}", "[", ":", ",", "ß"]
_ESC = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
        "\t": "\\t"}


def _string(rng: random.Random, lone: bool) -> Tuple[str, str]:
    """(JSON text, its value): raw characters, short escapes, \\u escapes (either case, pairs),
    and lone surrogates when ``lone``."""
    src, val = ['"'], []
    for _ in range(rng.randrange(0, 12)):
        r = rng.random()
        if r < 0.4:
            c = rng.choice(_RAW)
            src.append(c)
        elif r < 0.6:
            c = rng.choice(list(_ESC))
            src.append(_ESC[c])
        elif r < 0.8:
            c = chr(rng.choice([0, 1, 0x1f, 0x41, 0xe9, 0x4e2d, 0xfffd, 0xffff, rng.randrange(0x20, 0xd800)]))
            h = f"{ord(c):04x}"
            src.append("\\u" + (h.upper() if rng.random() < 0.5 else h))
        elif r < 0.9:
            c = chr(rng.randrange(0x10000, 0x110000))
            hi, lo = divmod(ord(c) - 0x10000, 0x400)
            src.append(f"\\u{0xd800 + hi:04x}\\u{0xdc00 + lo:04X}")
        elif lone:
            c = chr(rng.choice([0xd800, 0xdbff, 0xdc00, 0xdfff]))
            src.append(f"\\u{ord(c):04x}")
        else:
            c = "q"
            src.append(c)
        val.append(c)
    src.append('"')
    return "".join(src), "".join(val)


def _ws(rng: random.Random) -> str:
    return rng.choice(["", "", " ", "\t", "\r", "  ", " \t "])


def _value(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if r < 0.3:
        return _string(rng, lone=True)[0]
    if r < 0.5:
        return rng.choice(["0", "-0", "7", "-12", "3.25", "1e5", "2E-3", "-0.5e+10", "12345678901234567890"])
    if r < 0.6:
        return rng.choice(["true", "false", "null"])
    if depth >= 4:
        return "1"
    if r < 0.8:
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
        return "[" + _ws(rng) + ("," + _ws(rng)).join(items) + _ws(rng) + "]"
    members = [f"{_string(rng, True)[0]}{_ws(rng)}:{_ws(rng)}{_value(rng, depth + 1)}"
               for _ in range(rng.randrange(0, 4))]
    return "{" + _ws(rng) + ("," + _ws(rng)).join(members) + _ws(rng) + "}"


def _line(rng: random.Random) -> Tuple[str, bool]:
    """(a JSON-lines line without its newline, whether the fast path must take it)."""
    members, has_text = [], False
    for _ in range(rng.randrange(0, 5)):
        if rng.random() < 0.45:
            key = rng.choice(['"text"', '"text"', '"te\\u0078t"', '"\\u0074ext"'])
            value = _string(rng, lone=False)[0] if rng.random() < 0.85 else _value(rng, 1)
        else:
            key = rng.choice(['"textx"', '"tex"', '"Text"', '"source"', '""', _string(rng, True)[0]])
            value = _value(rng, 1)
        members.append(f"{key}{_ws(rng)}:{_ws(rng)}{value}")
    line = _ws(rng) + "{" + _ws(rng) + ("," + _ws(rng)).join(members) + _ws(rng) + "}" + _ws(rng)
    obj = json.loads(line)
    text = obj.get("text")
    clean = isinstance(text, str) and not any(0xD800 <= ord(c) < 0xE000 for c in text)
    r = rng.random()
    if r < 0.25:  # a mutation: usually invalid, sometimes still valid
        k = rng.randrange(len(line) + 1)
        op = rng.randrange(4)
        if op == 0:
            line = line[:k] + line[k + 1:]
        elif op == 1:
            line = line[:k] + rng.choice(list('{}[]",:\\ 0a-.e\x01\x7f\u00e9')) + line[k:]
        elif op == 2:
            line = line[:k]
        else:
            line = line[:k] + rng.choice(["NaN", "Infinity", "-Infinity", "\ufeff", "\\ud800",
                                          '"text":"dup",', "[" * 70 + "]" * 70, "9" * 5000,
                                          "\x0c", "\x0b"]) + line[k:]
        clean = False
    elif r < 0.3:
        line = ""  # blank
        clean = False
    return line, clean


def _python_doc(line: bytes) -> Optional[str]:
    """The reader's document for a non-blank line, None when the Python reader raises."""
    try:
        return parse_jsonl_line(line, "f", 1, "text")["text"]
    except CorpusError:
        return None


def test_fast_path_matches_json_loads(tmp_path):
    rng = random.Random(20261201)
    lines: List[bytes] = []
    clean: List[bool] = []
    for _ in range(6000):
        s, c = _line(rng)
        b = s.encode("utf-8", "surrogatepass")
        if rng.random() < 0.01:
            b = b[: len(b) // 2] + b"\xff" + b[len(b) // 2:]  # invalid UTF-8
            c = False
        lines.append(b)
        clean.append(c)
    p = tmp_path / "lines.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    r = CorpusReader(str(p), b"text")
    want = [(n + 1, b) for n, b in enumerate(lines) if b.strip()]
    at = 0  # the next non-blank line
    fast = unsure = 0
    while True:
        block = TextBlock()
        what, lineno, detail = r.read(block, rng.randrange(1, 400))
        for k in range(len(block)):
            n, b = want[at]
            doc = block.get(k).decode("utf-8")
            assert doc == _python_doc(b), (n, b)
            fast += clean[n - 1]
            at += 1
        if what == "unsure":
            n, b = want[at]
            assert (n, b + b"\n") == (lineno, detail)
            assert not clean[n - 1], b  # the fast path takes every clean line
            unsure += 1
            at += 1
        elif what == "end":
            break
        else:
            assert what == "full"
    assert at == len(want)
    assert fast > 1800 and unsure > 1000, (fast, unsure)


def test_duplicates_escapes_and_field_names(tmp_path):
    cases = [
        ('{"text": "a", "text": "b"}', "b"),
        ('{"text": 1, "text": "b"}', "b"),
        ('{"te\\u0078t": "esc"}', "esc"),
        ('{"text": "\\ud83d\\ude00 \\u00e9\\/\\b"}', "\U0001F600 \u00e9/\b"),
        ('{"a": {"text": "inner"}, "text": "outer", "b": ["text", {"text": 1}]}', "outer"),
        (' \t{"text":"ws"} \r', "ws"),
    ]
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(c for c, _ in cases) + "\n", encoding="utf-8")
    block = TextBlock()
    assert CorpusReader(str(p), b"text").read(block, 10**9)[0] == "end"
    assert [block.get(k).decode() for k in range(len(block))] == [v for _, v in cases]
    # another field, with characters that need escaping in JSON
    p.write_text('{"a\\"b": "q", "text": "no"}\n', encoding="utf-8")
    block = TextBlock()
    assert CorpusReader(str(p), 'a"b'.encode()).read(block, 10**9)[0] == "end"
    assert block.get(0) == b"q"


# --- end to end: the core against the Python readers -----------------------------------------------

def _run(tok, paths, out, core: bool, monkeypatch, shard_size="4KB", **kw):
    with monkeypatch.context() as mp:
        if not core:
            mp.setattr(shards, "_core_mode", lambda path, field: None)
        return cnfmce.tokenize_corpus(tok, paths, out, format="npy", shard_size=shard_size, **kw)


def _files(out: Path):
    return {f: (out / f).read_bytes() for f in sorted(os.listdir(out))}


def _same_error(tok, paths, tmp_path, monkeypatch, exact: bool = True):
    """Both readers raise the same error; only complete shards are left (listed, readable)."""
    errs = []
    for core in (True, False):
        out = tmp_path / f"out-{core}-{len(os.listdir(tmp_path))}"
        with pytest.raises(Exception) as ei:
            _run(tok, paths, out, core, monkeypatch, batch_chars=2000, shard_size="20KB")
        m = shards.read_manifest(out) if (out / "manifest.json").exists() else {"shards": []}
        listed = {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}
        assert set(os.listdir(out)) <= listed
        errs.append(ei.value)
    assert type(errs[0]) is type(errs[1])
    if exact:
        assert str(errs[0]) == str(errs[1])
    return errs[0]


def _jsonl(docs: List[str]) -> bytes:
    return "".join(json.dumps({"text": d, "n": k}) + "\n" for k, d in enumerate(docs)).encode()


DOCS = [f"document {k}: the 中 text " * (k % 13 + 1) for k in range(400)]


def test_valid_oddities_give_identical_shards(tok, tmp_path, monkeypatch):
    """Lines only json.loads can take (NaN, a BOM, deep nesting, huge numbers, a lone
    surrogate outside the field), blank lines, a multi-member and a zero-padded gzip, a .txt:
    the core's output is byte-identical to the Python readers'."""
    odd = [
        '{"text": "nan line", "x": NaN}',
        '\ufeff{"text": "after a BOM"}',
        '{"text": "deep", "d": ' + "[" * 80 + "]" * 80 + "}",
        '{"text": "big", "n": ' + "7" * 1000 + "}",
        '{"src": "\\udc00", "text": "lone outside"}',
        "   ",
        '{"text": "\\u00e9t\\u00e9 \\ud83d\\ude00"}',
    ]
    a = tmp_path / "a.jsonl"
    a.write_bytes(_jsonl(DOCS[:100]) + "\n".join(odd).encode("utf-8") + b"\n" + _jsonl(DOCS[100:150]))
    b = tmp_path / "b.jsonl.gz"
    b.write_bytes(gzip.compress(_jsonl(DOCS[150:250])) + gzip.compress(_jsonl(DOCS[250:300])))
    c = tmp_path / "c.jsonl.gz"  # zero padding after the member: gzip.open reads it
    c.write_bytes(gzip.compress(_jsonl(DOCS[300:400])) + b"\x00" * 64)
    t = tmp_path / "d.txt"
    t.write_text("a whole text file \u4e2d\n" * 50, encoding="utf-8")
    paths = [a, b, c, t]
    ref = _run(tok, paths, tmp_path / "py", False, monkeypatch, batch_chars=500)
    got = _run(tok, paths, tmp_path / "core", True, monkeypatch, batch_chars=500)
    assert got == ref and ref["documents"] == 100 + 6 + 50 + 150 + 100 + 1
    assert _files(tmp_path / "core") == _files(tmp_path / "py")


def test_bad_lines_give_the_python_errors(tok, tmp_path, monkeypatch):
    for name, line in [("missing", '{"other": "x"}'), ("number", '{"text": 5}'),
                       ("malformed", '{"text": "x"'), ("list", '["text"]'),
                       ("utf8", b'{"text": "\xff"}'), ("deep", '{"text": ' + "[" * 5000 + "]" * 5000 + "}")]:
        data = _jsonl(DOCS[:70]) + (line if isinstance(line, bytes) else line.encode()) + b"\n" + _jsonl(DOCS[:5])
        for suffix in (".jsonl", ".jsonl.gz"):
            p = tmp_path / f"{name}{suffix}"
            p.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
            e = _same_error(tok, [p], tmp_path, monkeypatch)
            assert isinstance(e, CorpusError) and f"{p}:71:" in str(e), e
    # a lone surrogate in the field: a CorpusError (a ValueError) naming the file and line
    p = tmp_path / "lone.jsonl"
    p.write_bytes(_jsonl(DOCS[:3]) + b'{"text": "a\\ud800b"}\n')
    e = _same_error(tok, [p], tmp_path, monkeypatch)
    assert isinstance(e, CorpusError) and str(e).startswith(f"{p}:4: ") and "lone surrogate" in str(e)


def test_corrupt_and_truncated_gzip(tok, tmp_path, monkeypatch):
    data = gzip.compress(_jsonl(DOCS * 3), compresslevel=6)
    cases = {
        "truncated": data[: len(data) * 2 // 3],
        "no_trailer": data[:-4],
        "corrupt_midway": data[: len(data) // 2] + b"\xff" * 64 + data[len(data) // 2 + 64:],
        "bad_crc": data[:-8] + bytes(b ^ 0xFF for b in data[-8:-4]) + data[-4:],
        "not_gzip": b"this is no gzip data at all\n",
        "garbage_after": data + b"garbage!",
    }
    for name, blob in cases.items():
        p = tmp_path / f"{name}.jsonl.gz"
        p.write_bytes(blob)
        e = _same_error(tok, [p], tmp_path, monkeypatch)
        assert isinstance(e, CorpusError) and str(e).startswith(f"{p}"), (name, e)
    t = tmp_path / "bad.txt"
    t.write_bytes(b"valid then \xff invalid")
    e = _same_error(tok, [t], tmp_path, monkeypatch)
    assert str(e) == f"{t}: not valid UTF-8 at byte 11"


def test_gzip_bomb_line_is_refused(tok, tmp_path, monkeypatch):
    import cnfmce.formats as formats
    monkeypatch.setattr(formats, "INFLATE_FREE_BYTES", 1 << 20)
    p = tmp_path / "bomb.jsonl.gz"
    p.write_bytes(gzip.compress(_jsonl(DOCS[:50]) + b'{"text": "' + b"a" * (3 << 20) + b'"}\n'))
    limit = formats.inflate_limit(os.path.getsize(p))
    assert limit == 1 << 20
    out = tmp_path / "out"
    with pytest.raises(CorpusError, match=rf"{p}:51: a line inflates to more than {limit:,} bytes"):
        _run(tok, [p], out, True, monkeypatch, batch_chars=2000, shard_size="20KB")
    m = shards.read_manifest(out)
    assert set(os.listdir(out)) == {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}
    t = tmp_path / "bomb.txt.gz"
    t.write_bytes(gzip.compress(b"b" * (3 << 20)))
    with pytest.raises(CorpusError, match=r"the text inflates to more than"):
        _run(tok, [t], tmp_path / "out2", True, monkeypatch)


def test_resume_inside_a_core_read_file(tok, tmp_path, monkeypatch):
    """A manifest that ends inside a gzip file: the resumed run reads past the finished
    documents (one of them a line only json.loads takes) and ends identical."""
    p = tmp_path / "r.jsonl.gz"
    p.write_bytes(gzip.compress(_jsonl(DOCS[:30]) + b'{"text": "nan", "v": NaN}\n' + _jsonl(DOCS[30:200])))
    ref = tmp_path / "ref"
    _run(tok, [p], ref, True, monkeypatch, batch_chars=300)
    m = shards.read_manifest(ref)
    assert len(m["shards"]) > 4
    out = tmp_path / "out"
    out.mkdir()
    keep = m["shards"][:3]
    assert keep[-1]["input_end"][1] > 31
    for s in keep:
        for f in s["files"]:
            (out / f).write_bytes((ref / f).read_bytes())
    part = dict(m, shards=keep, complete=False, documents=sum(s["documents"] for s in keep),
                tokens=sum(s["tokens"] for s in keep), text_bytes=sum(s["text_bytes"] for s in keep))
    (out / "manifest.json").write_text(json.dumps(part))
    _run(tok, [p], out, True, monkeypatch, batch_chars=300, resume=True)
    assert _files(out) == _files(ref)
