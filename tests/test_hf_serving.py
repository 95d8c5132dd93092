"""Serving: incremental detokenization of a CnfmceTokenizer loaded through AutoTokenizer.

Ids arrive one at a time; the text emitted so far must never change and never hold a broken UTF-8
character. Checked for :class:`cnfmce.hf.DecodeStream` and for the tokenizer calls of the published
incremental detokenizers of vLLM (its path for tokenizers that are not ``PreTrainedTokenizerFast``:
``convert_ids_to_tokens`` / ``convert_tokens_to_string`` with prefix and read offsets), Text
Generation Inference (``decode`` of the ids from the prefix offset) and SGLang (``batch_decode``
of the "surrounding" and "read" ids). The three drivers below are written from those projects'
documented algorithms; none of their code is copied.
"""

from __future__ import annotations

import random

import pytest

transformers = pytest.importorskip("transformers")

import cnfmce  # noqa: E402
from cnfmce.demo import load_sample  # noqa: E402
from cnfmce.hf import CnfmceTokenizer, DecodeStream  # noqa: E402

TEXTS = ["The cat sat on the mat. 😀 Ünïcödé ñ", "日本語のテキストと한국어 텍스트 🇫🇷🎉",
         "mixed: abc 😀😀 def\n\ttab", "ascii only, nothing special", "é" * 7 + "𝔘𝔫𝔦" + "中" * 5]
BROKEN = "\ufffd"


@pytest.fixture(scope="module", params=["trained", "partial"])
def auto(request, tmp_path_factory) -> CnfmceTokenizer:
    """A tokenizer saved with save_pretrained and loaded as serving engines load it."""
    if request.param == "trained":
        core = cnfmce.train([d["text"] for d in load_sample()][:300], vocab_size=1200,
                            raw_vocab_size=12000, progress=False)
    else:
        # Tokens that end inside a character and tokens that cross character boundaries.
        toks = [bytes([b]) for b in range(256)]
        for text in ("日本", "語の", "😀", "é", "텍스트"):
            data = text.encode()
            for a in range(len(data)):
                for b in range(a + 2, min(len(data), a + 4) + 1):
                    if data[a:b] not in toks:
                        toks.append(data[a:b])
        core = cnfmce.Tokenizer.from_tokens(toks)
    hf = core.to_transformers(eos_token="<|endoftext|>", extra_special_tokens=["<|im_end|>"])
    d = tmp_path_factory.mktemp(f"serve-{request.param}")
    hf.save_pretrained(d)
    return transformers.AutoTokenizer.from_pretrained(str(d), trust_remote_code=True)


def _generations(tok):
    """(prompt ids, generated ids) pairs: text tokens, a special token in the middle and at the
    end, an unused id (past the end of the vocabulary)."""
    out = []
    rng = random.Random(0)
    eos, im_end = tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    for k, text in enumerate(TEXTS):
        prompt = tok.encode(TEXTS[(k + 1) % len(TEXTS)])
        ids = tok.encode(text)
        # The special token goes between two characters (a model that emits one inside a
        # character breaks it, and U+FFFD is then the right text).
        cuts = [c for c in range(len(ids) + 1)
                if BROKEN not in tok.cnfmce_tokenizer.decode_bytes(ids[:c]).decode("utf-8", "replace")]
        cut = rng.choice(cuts)
        gen = ids[:cut] + [im_end] + ids[cut:] + [len(tok) + 3] + [eos]
        out.append((prompt, gen, text))
    return out


def _assert_stream(pieces, final, expected):
    so_far = ""
    for p in pieces:
        assert BROKEN not in p, pieces
        so_far += p
        assert expected.startswith(so_far)
    assert so_far + final == expected


@pytest.mark.parametrize("skip", [False, True])
def test_decode_stream(auto, skip):
    for _, gen, text in _generations(auto):
        stream = auto.decode_stream(skip_special_tokens=skip)
        assert isinstance(stream, DecodeStream)
        pieces = [p for p in (stream.step(i) for i in gen) if p is not None]
        expected = auto.decode(gen, skip_special_tokens=skip)
        assert (text in expected) if skip else ("<|im_end|>" in expected)
        _assert_stream(pieces, stream.flush(), expected)
    # A token that ends inside a character gives nothing until the character is complete.
    data = "😀".encode()
    core = auto.cnfmce_tokenizer
    ids = core.encode_bytes(data[:2]) + core.encode_bytes(data[2:])
    stream = auto.decode_stream()
    assert [stream.step(i) for i in ids][:-1] == [None] * (len(ids) - 1)
    stream = auto.decode_stream()
    for i in ids[:-1]:
        stream.step(i)
    assert stream.flush() == BROKEN


def _vllm_slow_path(tok, prompt, gen, skip, offset=5):
    """vLLM's incremental detokenization for tokenizers that are not PreTrainedTokenizerFast:
    token strings from convert_ids_to_tokens (None -> ""), text from convert_tokens_to_string with
    added tokens written as their text, emitted when it grew and does not end in U+FFFD."""
    def to_text(tokens):
        if not tok.get_added_vocab():
            return tok.convert_tokens_to_string(tokens)
        parts, run = [], []
        specials = set(tok.all_special_tokens)
        for t in tokens:
            if skip and t in specials:
                continue
            if t in tok.get_added_vocab():
                if run:
                    parts.append(tok.convert_tokens_to_string(run))
                    run = []
                parts.append(t)
            else:
                run.append(t)
        if run:
            parts.append(tok.convert_tokens_to_string(run))
        return "".join(parts)  # spaces_between_special_tokens=False

    tokens = [t or "" for t in tok.convert_ids_to_tokens(prompt[-offset - 2:], skip_special_tokens=skip)]
    read = len(tokens)
    prefix = max(read - offset, 0)
    pieces = []
    for i in gen:
        new = [t or "" for t in tok.convert_ids_to_tokens([i], skip_special_tokens=skip)]
        tokens += new
        prefix_text = to_text(tokens[prefix:read])
        new_text = to_text(tokens[prefix:])
        if len(new_text) <= len(prefix_text) or new_text.endswith(BROKEN):
            continue
        pieces.append(new_text[len(prefix_text):])
        prefix, read = read, len(tokens)
    return pieces


def _tgi(tok, prompt, gen, skip):
    """Text Generation Inference's python server: decode of the ids from the prefix offset, minus
    the decode of the ids up to the read offset, emitted unless it ends in U+FFFD."""
    ids = list(prompt)
    prefix, read = max(len(ids) - 5, 0), len(ids)
    pieces = []
    for i in gen:
        ids.append(i)
        prefix_text = tok.decode(ids[prefix:read], skip_special_tokens=skip)
        new_text = tok.decode(ids[prefix:], skip_special_tokens=skip)
        if len(new_text) > len(prefix_text) and not new_text.endswith(BROKEN):
            pieces.append(new_text[len(prefix_text):])
            prefix, read = read, len(ids)
    return pieces


def _sglang(tok, gen, skip):
    """SGLang's detokenizer manager: batch_decode of the surrounding ids and of the read ids; the
    difference is committed when it does not end in U+FFFD (it streams only committed text)."""
    ids, surr, read, committed, pieces = [], 0, 0, "", []
    for i in gen:
        ids.append(i)
        surr_text, read_text = tok.batch_decode([ids[surr:read], ids[surr:]], skip_special_tokens=skip,
                                                spaces_between_special_tokens=False)
        new_text = read_text[len(surr_text):]
        if new_text and not new_text.endswith(BROKEN):
            committed += new_text
            pieces.append(new_text)
            surr, read = read, len(ids)
    return pieces


@pytest.mark.parametrize("skip", [False, True])
def test_engine_detokenizer_paths(auto, skip):
    assert not auto.is_fast  # vLLM and SGLang take their slow-tokenizer path for this class
    for prompt, gen, _ in _generations(auto):
        expected = auto.decode(gen, skip_special_tokens=skip)
        for pieces in (_vllm_slow_path(auto, prompt, gen, skip), _tgi(auto, prompt, gen, skip),
                       _sglang(auto, gen, skip)):
            _assert_stream(pieces, "", expected)
        # The same text, piece by piece, as DecodeStream.
        stream = auto.decode_stream(skip_special_tokens=skip)
        assert "".join(p for p in (stream.step(i) for i in gen) if p) == expected


def test_convert_tokens_to_string_is_decode(auto):
    for _, gen, _ in _generations(auto):
        for skip in (False, True):
            tokens = auto.convert_ids_to_tokens(gen, skip_special_tokens=skip)
            assert auto.convert_tokens_to_string(tokens) == auto.decode(gen, skip_special_tokens=skip)
