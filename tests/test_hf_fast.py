"""CnfmceTokenizer: the calls code written for ``PreTrainedTokenizerFast`` makes (``word_ids``,
``char_to_token``, ``sequence_ids``, overflowing windows with ``stride``), unknown keyword
arguments, and vocabularies with unused ids. Runs without the shared data (a generated vocabulary);
o200k_base where the shared data is present."""

from __future__ import annotations

import base64
import pickle

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import cnfmce  # noqa: E402
from cnfmce.demo import load_sample  # noqa: E402
from cnfmce.hf import CnfmceTokenizer, Encoding  # noqa: E402

TEXTS = ["The cat sat on the mat, and the dog sat on the log.", "héllo wörld 😀 日本語のテキスト!",
         "", "  spaces  and\ttabs\n\nnew lines", "don't stop-me 12345 e.g. x=y+1"]


@pytest.fixture(scope="module")
def core() -> cnfmce.Tokenizer:
    return cnfmce.train([d["text"] for d in load_sample()][:300], vocab_size=1500, raw_vocab_size=15000,
                        progress=False)


@pytest.fixture(scope="module")
def tok(core) -> CnfmceTokenizer:
    return core.to_transformers(bos_token="<s>", eos_token="</s>", pad_token="<pad>")


@pytest.fixture(scope="module")
def gapped(tmp_path_factory, core) -> cnfmce.Tokenizer:
    """The trained vocabulary with ids 5, 100 and len-1 unused, read as a tiktoken file."""
    ids, toks = core._core.tokens()
    order = [t for _, t in sorted(zip(ids, toks))]
    path = tmp_path_factory.mktemp("gap") / "gapped.tiktoken"
    lines, i = [], 0
    for t in order:
        while i in (5, 100):
            i += 1
        lines.append(f"{base64.b64encode(t).decode()} {i}")
        i += 1
    path.write_text("\n".join(lines) + "\n")
    # One unused id right below the special token, as in o200k_base (199998 / <|endoftext|> 199999).
    return cnfmce.Tokenizer.from_tiktoken(path, special_tokens={"<|endoftext|>": i + 1})


@pytest.fixture(scope="module")
def hf_fast(core) -> "transformers.PreTrainedTokenizerFast":
    """A byte-level BPE trained with `tokenizers` on the same text: the reference for structure."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator([d["text"] for d in load_sample()][:300],
                          trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                              special_tokens=["<s>", "</s>", "<pad>"]))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>")


# --- defect: unknown keyword arguments ------------------------------------------------------------


def test_unknown_keyword_arguments_are_ignored(tok, hf_fast):
    assert tok("hello", foo=1)["input_ids"] == tok("hello")["input_ids"]
    hf_fast("hello", foo=1)  # the fast tokenizer accepts it too
    out = tok(["a cat"], text_target=["a dog"], src_lang="en_XX")
    assert out["labels"] == tok(["a dog"])["input_ids"]
    assert out["input_ids"] == tok(["a cat"])["input_ids"]
    # max_target_length (handled by transformers) still applies to the labels.
    out = tok(["a cat sat"], text_target=["a dog sat on the mat"], max_length=2, max_target_length=4,
              truncation=True)
    assert len(out["input_ids"][0]) == 2 and len(out["labels"][0]) == 4


# --- defect: unused ids below len(tok) ------------------------------------------------------------


def _check_gaps(hf: CnfmceTokenizer, unused: list) -> None:
    for i in unused:
        assert i < len(hf)
        assert hf.convert_ids_to_tokens(i) is None
        assert hf.convert_ids_to_tokens([40, i, 41]) == [hf.convert_ids_to_tokens(40), None,
                                                          hf.convert_ids_to_tokens(41)]
        assert hf.decode([40, i, 41]) == hf.decode([40, 41])
        assert hf.batch_decode([[i], [40, i]]) == ["", hf.decode([40])]
    assert hf.convert_ids_to_tokens(len(hf) + 10) is None
    assert hf.decode([40, len(hf) + 10]) == hf.decode([40])
    # Every id below len(tok) converts without raising (transformers' test_get_vocab).
    assert len([hf.convert_ids_to_tokens(i) for i in range(len(hf))]) == len(hf)
    assert hf.convert_tokens_to_string(hf.convert_ids_to_tokens([40] + unused)) == hf.decode([40])
    with pytest.raises(ValueError):
        hf.decode([-1])


def test_unused_ids_generated_vocabulary(gapped):
    hf = gapped.to_transformers(eos_token="<|endoftext|>")
    unused = [5, 100, hf.eos_token_id - 1]
    _check_gaps(hf, unused)


def test_unused_ids_o200k(o200k):
    hf = o200k.to_transformers(eos_token="<|endoftext|>")
    assert hf.eos_token_id == 199999
    _check_gaps(hf, [199998])


# --- the fast surface ---------------------------------------------------------------------------


def _invariants(enc, texts, n_rows, tok_or_fast) -> None:
    """What holds for the encodings of both our tokenizer and a fast byte-level BPE."""
    assert enc.is_fast
    assert len(enc.encodings) == n_rows
    for b in range(n_rows):
        words = enc.word_ids(b)
        seqs = enc.sequence_ids(b)
        offs = enc["offset_mapping"][b]
        ids = enc["input_ids"][b]
        assert len(words) == len(seqs) == len(offs) == len(ids)
        assert enc.tokens(b) == tok_or_fast.convert_ids_to_tokens(ids)
        real = [w for w in words if w is not None]
        # Word ids start at 0 and never decrease (text input), without holes.
        if real:
            assert real[0] == 0 and all(0 <= y - x <= 1 for x, y in zip(real, real[1:]))
        text = texts[b]
        for t, (w, s) in enumerate(zip(words, seqs)):
            if s is None:
                assert w is None and enc.token_to_chars(b, t) is None
                continue
            a, e = offs[t]
            assert 0 <= a < e <= len(text)
            span = enc.token_to_chars(b, t)
            assert (span.start, span.end) == (a, e)
            assert enc.token_to_word(b, t) == w
            # The token that holds a character: the first token of its span.
            c = enc.char_to_token(b, a)
            assert c is not None and c <= t and offs[c][0] <= a < offs[c][1]
            assert enc.char_to_word(b, a) == words[c]
            first, end = enc.word_to_tokens(b, w)
            assert first <= t < end
            ws = enc.word_to_chars(b, w)
            assert ws.start <= a and e <= ws.end
        # Every character of the text is in some token.
        for c in range(len(text)):
            assert enc.char_to_token(b, c) is not None, (b, c)


def test_word_ids_and_offsets_structure_like_fast(tok, hf_fast):
    for t in (tok, hf_fast):
        enc = t(TEXTS, return_offsets_mapping=True, padding=True)
        _invariants(enc, TEXTS, len(TEXTS), t)
    enc = tok(TEXTS, return_offsets_mapping=True)
    # The offsets of the encodings are the offsets of the call, which are the core's.
    for b, text in enumerate(TEXTS):
        assert enc.encodings[b].offsets == enc["offset_mapping"][b]
        assert enc.encodings[b].offsets == tok.cnfmce_tokenizer.encode_with_offsets(text)[1]
    # Without return_offsets_mapping the encodings are the same.
    plain = tok(TEXTS)
    for b in range(len(TEXTS)):
        assert plain.word_ids(b) == enc.word_ids(b)
        assert plain.encodings[b].offsets == enc["offset_mapping"][b]


def test_word_definition(tok):
    core = tok.cnfmce_tokenizer
    text = "Hello, the cat!"
    enc = tok(text)
    ids = enc["input_ids"]
    spans = core.encode_bytes_with_offsets(text.encode())[1]
    units = cnfmce._core.unit_starts(text.encode())
    # A token starts a word exactly when it starts at a unit boundary.
    expect, w = [], -1
    for t, (a, _) in enumerate(spans):
        w += 1 if t == 0 or units[a] else 0
        expect.append(w)
    assert enc.word_ids() == expect and len(ids) == len(expect)
    # A multi-word token is one word: build a vocabulary with " of the" as a token.
    toks = [bytes([b]) for b in range(256)] + [b" of the", b"cat", b"ca"]
    hf = cnfmce.Tokenizer.from_tokens(toks).to_transformers()
    enc = hf("ca cat of the cat")
    assert enc.tokens() == ["ca", "Ġ", "cat", "ĠofĠthe", "Ġ", "cat"]
    assert enc.word_ids() == [0, 1, 2, 3, 4, 5]
    enc = hf("cats")  # "cat" + "s": the token "s" starts inside the unit "cats"
    assert enc.tokens() == ["cat", "s"] and enc.word_ids() == [0, 0]
    assert enc.word_to_chars(0) == (0, 4)


def test_split_into_words_word_ids_are_input_words(tok, hf_fast):
    words = ["Paris", "est", "la", "capitale", "de", "France", "."]
    enc = tok(words, is_split_into_words=True, return_offsets_mapping=True, add_special_tokens=False)
    ids_by_word = [tok.cnfmce_tokenizer.encode(w) for w in words]
    assert enc["input_ids"] == [i for ids in ids_by_word for i in ids]
    assert enc.word_ids() == [w for w, ids in enumerate(ids_by_word) for _ in ids]
    # Offsets are relative to each word, as for fast tokenizers with pre-split input.
    for t, w in enumerate(enc.word_ids()):
        a, e = enc["offset_mapping"][t]
        assert 0 <= a < e <= len(words[w])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=hf_fast.backend_tokenizer)
    ref = fast(words, is_split_into_words=True, return_offsets_mapping=True)
    assert sorted(set(ref.word_ids())) == sorted(set(enc.word_ids())) == list(range(len(words)))
    # The label alignment of the token-classification examples runs unchanged.
    labels = [1, 0, 0, 0, 0, 2, 0]
    aligned = [-100 if w is None else labels[w] for w in enc.word_ids()]
    assert aligned.count(1) == len(ids_by_word[0]) and aligned.count(2) == len(ids_by_word[5])


def test_pairs_sequence_ids_and_bos_eos(core):
    hf = core.to_transformers(bos_token="<s>", eos_token="</s>", add_bos_token=True, add_eos_token=True)
    enc = hf("what is it?", "it is a cat.", return_offsets_mapping=True)
    n0 = len(core.encode("what is it?"))
    n1 = len(core.encode("it is a cat."))
    assert enc.sequence_ids() == [None] + [0] * n0 + [None, None] + [1] * n1 + [None]
    assert enc.word_ids()[0] is None and enc.word_ids()[-1] is None
    assert enc.char_to_token(0, sequence_index=1) == n0 + 3
    assert enc.char_to_token(0) == 1
    assert enc.token_to_sequence(n0 + 3) == 1
    assert enc.encodings[0].n_sequences == 2 and enc.n_sequences == 2


def _qa_preprocess(t, questions, contexts, max_length, stride):
    """The preprocessing of transformers' question-answering examples (run_qa.py): windows over
    the context, the offsets of non-context tokens set to None."""
    inputs = t(questions, contexts, max_length=max_length, truncation="only_second", stride=stride,
               return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    sample_map = inputs.pop("overflow_to_sample_mapping")
    for i in range(len(inputs["input_ids"])):
        seq = inputs.sequence_ids(i)
        inputs["offset_mapping"][i] = [o if seq[k] == 1 else None
                                       for k, o in enumerate(inputs["offset_mapping"][i])]
    return inputs, sample_map


def test_overflowing_windows_like_fast(tok, hf_fast):
    questions = ["Where does the cat sit?", "Who?"]
    context = " ".join(["The cat sat on the mat while the dog slept on the log."] * 6)
    contexts = [context, "Nobody."]
    for t in (tok, hf_fast):
        inputs, sample_map = _qa_preprocess(t, questions, contexts, max_length=40, stride=8)
        assert sample_map[0] == 0 and sample_map[-1] == 1 and sample_map == sorted(sample_map)
        assert len(sample_map) == len(inputs["input_ids"]) > 2
        assert all(len(r) == 40 for r in inputs["input_ids"])
        rows = [k for k, s in enumerate(sample_map) if s == 0]
        # Consecutive windows of the context overlap by exactly `stride` tokens.
        ctx = [[i for i, s in zip(inputs["input_ids"][k], inputs.sequence_ids(k)) if s == 1] for k in rows]
        for a, b in zip(ctx, ctx[1:]):
            assert a[-8:] == b[:8]
        # The windows together cover the whole context, and the offsets point into it.
        covered = set()
        for k in rows:
            for o in inputs["offset_mapping"][k]:
                if o is not None:
                    covered.update(range(*o))
        assert covered == set(range(len(context)))
    # Ours: the windows' tokens are the context's tokens, in order.
    inputs, sample_map = _qa_preprocess(tok, questions, contexts, 40, 8)
    full = tok.cnfmce_tokenizer.encode(context)
    step = None
    rows = [k for k, s in enumerate(sample_map) if s == 0]
    for j, k in enumerate(rows):
        ctx = [i for i, s in zip(inputs["input_ids"][k], inputs.sequence_ids(k)) if s == 1]
        if step is None:
            step = len(ctx) - 8
        assert ctx == full[j * step:j * step + len(ctx)]
    assert ctx == full[-len(ctx):]


def test_overflow_single_sequence_and_left_side(tok):
    text = "one two three four five six seven eight nine ten " * 3
    full = tok.cnfmce_tokenizer.encode(text)
    enc = tok(text, max_length=10, stride=3, truncation=True, return_overflowing_tokens=True)
    rows = enc["input_ids"]
    assert rows[0] == full[:10] and enc["overflow_to_sample_mapping"] == [0] * len(rows)
    assert all(rows[k][:3] == rows[k - 1][-3:] for k in range(1, len(rows)))
    assert rows[-1] == full[-len(rows[-1]):]
    assert [enc.word_ids(k)[0] for k in range(len(rows))] == sorted(enc.word_ids(k)[0] for k in range(len(rows)))
    tok.truncation_side = "left"
    try:
        enc = tok(text, max_length=10, stride=3, truncation=True, return_overflowing_tokens=True)
    finally:
        tok.truncation_side = "right"
    assert enc["input_ids"][0] == full[-10:] and enc["input_ids"][-1] == full[:len(enc["input_ids"][-1])]
    with pytest.raises(ValueError, match="stride"):
        tok(text, max_length=10, stride=10, truncation=True, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="longest_first"):
        tok(text, text, max_length=10, truncation=True, return_overflowing_tokens=True)


def test_encodings_pickle_and_tensors(tok):
    enc = tok(TEXTS[:2], padding=True, return_tensors="np")
    words = enc.word_ids(1)
    back = pickle.loads(pickle.dumps(enc))
    assert back.word_ids(1) == words and back.is_fast
    assert isinstance(enc.encodings[0], Encoding)
    # Padding: no word, no sequence; the left side too.
    tok.padding_side = "left"
    try:
        enc = tok(TEXTS[:2], padding=True)
    finally:
        tok.padding_side = "right"
    short = 0 if len(enc.encodings[0]) and enc["attention_mask"][0][0] == 0 else 1
    assert enc.word_ids(short)[0] is None and enc.sequence_ids(short)[0] is None
    assert enc.encodings[short].attention_mask == enc["attention_mask"][short]


def test_is_fast_stays_honest(tok):
    # The tokenizer is not a tokenizers-backed one; its BatchEncodings carry encodings.
    assert tok.is_fast is False
    assert tok("a cat").is_fast is True
    # Token-id input has no text, hence no encodings (as for the python backend).
    assert tok.pad({"input_ids": [[1, 2]]}).is_fast is False


# --- the suite's branches for fast tokenizers and for torch, run here with numpy -----------------


def test_pair_overflow_as_fast_tokenizers(tok):
    """The assertions transformers' test_maximum_encoding_length_pair_input makes for fast
    tokenizers: with `only_first` / `only_second`, the second row holds the last 2 + stride tokens
    of the truncated sequence and the whole other sequence."""
    seq_0 = "This is a sentence to be encoded. " * 3
    seq_1 = "This one is shorter."
    ids0, ids1 = tok.encode(seq_0, add_special_tokens=False), tok.encode(seq_1, add_special_tokens=False)
    stride, n = 2, len(ids0) + len(ids1)
    first = tok(seq_0, seq_1, max_length=n - 2, add_special_tokens=False, stride=stride,
                truncation="only_first", return_overflowing_tokens=True)
    assert len(first["input_ids"]) == 2
    assert first["input_ids"][0] == ids0[:-2] + ids1
    assert first["input_ids"][1] == ids0[-(2 + stride):] + ids1
    second = tok(seq_0, seq_1, max_length=n - 2, add_special_tokens=False, stride=stride,
                 truncation="only_second", return_overflowing_tokens=True)
    assert len(second["input_ids"]) == 2
    assert second["input_ids"][0] == ids0 + ids1[:-2]
    assert second["input_ids"][1] == ids0 + ids1[-(2 + stride):]
    single = tok(seq_0, max_length=len(ids0) - 2, add_special_tokens=False, stride=stride,
                 truncation="longest_first", return_overflowing_tokens=True)
    assert single["input_ids"][0] == ids0[:-2] and single["input_ids"][1] == ids0[-(2 + stride):]


def test_sequence_ids_as_the_suite_checks(core):
    """transformers' test_sequence_ids (run there only for the tokenizers backend)."""
    for hf in (core.to_transformers(), core.to_transformers(bos_token="<s>", add_bos_token=True)):
        out = hf("Test this method.")
        assert 0 in out.sequence_ids()
        out = hf("Test this method.", "With these inputs.")
        assert 0 in out.sequence_ids() and 1 in out.sequence_ids()
        if hf.num_special_tokens_to_add(pair=True):
            assert None in out.sequence_ids()


def test_seq2seq_batch_and_dynamic_overflow_with_numpy(tok):
    """transformers' test_prepare_seq2seq_batch and test_batch_encode_dynamic_overflowing (which
    need torch there), with return_tensors="np"."""
    src = [" UN Chief Says There Is No Military Solution in Syria",
           " Secretary-General Ban Ki-moon says his response to Russia's stepped up military support"]
    tgt = ["Şeful ONU declară că nu există o soluţie militară în Siria",
           "Secretarul General Ban Ki-moon declară că răspunsul său la intensificarea sprijinului"]
    batch = tok(src, text_target=tgt, max_length=3, max_target_length=10, return_tensors="np",
                src_lang="en_XX")
    assert batch.input_ids.shape[1] == 3 and batch.labels.shape[1] == 10
    batch = tok(src, text_target=tgt, max_length=3, return_tensors="np")
    assert batch.input_ids.shape[1] == 3 and batch.labels.shape[1] == 3
    enc_only = tok(src, max_length=3, max_target_length=10, return_tensors="np")
    assert enc_only.input_ids.shape[1] == 3 and "decoder_input_ids" not in enc_only
    for text, trunc in (("HuggingFace is solving NLP one commit at a time", True),
                        (["HuggingFace is solving NLP one commit at a time"], "only_first"),
                        (["HuggingFace is solving NLP one commit at a time", "Very tiny input"],
                         "only_first")):
        out = tok(text, max_length=6, padding=True, truncation=trunc, return_tensors="np",
                  return_overflowing_tokens=True)
        for key in out:
            if key != "overflow_to_sample_mapping":
                assert out[key].ndim == 2 and out[key].shape[-1] == 6


def test_add_prefix_space(core):
    hf = core.to_transformers(add_prefix_space=False)
    assert hf.add_prefix_space is False
    with pytest.raises(ValueError, match="add_prefix_space"):
        core.to_transformers(add_prefix_space=True)
