"""cnfmce inside transformers (issue 8): ``cnfmce.hf.CnfmceTokenizer`` with the real
``transformers`` library (``AutoTokenizer``, ``save_pretrained``, chat templates, padding, ...)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")

import cnfmce  # noqa: E402
from cnfmce.hf import MODULE_FILE, VOCAB_FILE, CnfmceTokenizer  # noqa: E402
from conftest import fixture_path, shared_path  # noqa: E402
from test_roundtrip_corpora import load_docs  # noqa: E402



# --- tokenizers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cnf_core() -> cnfmce.Tokenizer:
    """A CNF tokenizer trained on the first ~1 MB of the fixture en training corpus."""
    docs = []
    with gzip.open(fixture_path("corpora", "en", "train.jsonl.gz"), "rt", encoding="utf-8") as fh:
        size = 0
        for line in fh:
            docs.append(json.loads(line)["text"])
            size += len(docs[-1])
            if size > 1_000_000:
                break
    return cnfmce.train(docs, vocab_size=3000, raw_vocab_size=30000, progress=False,
                        special_tokens=["<s>", "</s>", "<pad>"])


CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def saved(tmp_path_factory, bpe, cnf_core):
    """Both tokenizers through save_pretrained and AutoTokenizer (trust_remote_code)."""
    out = {}
    made = {
        "bpe": bpe.to_transformers(eos_token="<|endoftext|>", pad_token="<|pad|>",
                                       extra_special_tokens=["<|im_start|>", "<|im_end|>"],
                                       chat_template=CHAT),
        "cnf": cnf_core.to_transformers(bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        add_bos_token=True),
    }
    for name, hf in made.items():
        d = tmp_path_factory.mktemp(f"hf-{name}")
        hf.save_pretrained(d)
        auto = transformers.AutoTokenizer.from_pretrained(str(d), trust_remote_code=True)
        out[name] = (hf, auto, d)
    return out


@pytest.fixture(params=["bpe", "cnf"])
def pair(request, saved):
    return saved[request.param]


# --- loading and identity with the core --------------------------------------------------------


def test_saved_directory_and_config(saved):
    hf, auto, d = saved["bpe"]
    # transformers 5 writes the chat template to its own file.
    assert sorted(os.listdir(d)) == sorted([VOCAB_FILE, "tokenizer_config.json", MODULE_FILE,
                                           "chat_template.jinja"])
    config = json.loads((d / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "CnfmceTokenizer"
    assert config["auto_map"]["AutoTokenizer"][0] == "tokenization_cnfmce.CnfmceTokenizer"
    assert config["eos_token"] == "<|endoftext|>" and config["pad_token"] == "<|pad|>"
    assert config["add_bos_token"] is False and config["add_eos_token"] is False
    assert (d / "chat_template.jinja").read_text() == CHAT
    assert type(auto) is CnfmceTokenizer
    # The tokenizer file is cnfmce's own format.
    core = cnfmce.Tokenizer.load(d / VOCAB_FILE)
    assert core.special_tokens == hf.cnfmce_tokenizer.special_tokens
    assert core.special_tokens["<|endoftext|>"] == 8192
    assert core.special_tokens["<|pad|>"] == 8193
    # The new special tokens got the next free ids, in order.
    assert [core.special_tokens[s] for s in ("<|im_start|>", "<|im_end|>")] == [8194, 8195]
    _, cnf_auto, cnf_dir = saved["cnf"]
    assert json.loads((cnf_dir / "tokenizer_config.json").read_text())["add_bos_token"] is True
    assert cnf_auto.add_bos_token is True


@pytest.mark.parametrize("category", ["en", "zh"])
def test_auto_tokenizer_ids_equal_core_encode(pair, category):
    hf, auto, _ = pair
    core = hf.cnfmce_tokenizer
    docs = load_docs(category)  # every document of the corpus
    want = core.encode_batch(docs)
    assert want[:25] == [core.encode(d) for d in docs[:25]]
    # No document holds special-token text, so matching special tokens (transformers' default)
    # changes nothing here.
    assert not any(s in d for d in docs for s in core.special_tokens)
    got = auto(docs, add_special_tokens=False)
    assert got["input_ids"] == want
    assert got["attention_mask"] == [[1] * len(w) for w in want]
    for d, w in list(zip(docs, want))[:10]:
        assert auto.encode(d, add_special_tokens=False) == w
        assert auto(d, add_special_tokens=False)["input_ids"] == w
    # add_special_tokens (the default) adds bos where the config says so.
    with_specials = auto(docs[:5])["input_ids"]
    bos = [auto.bos_token_id] if auto.add_bos_token else []
    assert with_specials == [bos + w for w in want[:5]]


def test_save_load_identical_and_copied_directory(saved, tmp_path):
    hf, auto, d = saved["cnf"]
    docs = load_docs("en")[:40]
    want = hf(docs)["input_ids"]
    # save -> load -> save again: identical ids and the same files.
    again = tmp_path / "again"
    auto.save_pretrained(again)
    assert (again / MODULE_FILE).read_text() == (d / MODULE_FILE).read_text()
    assert CnfmceTokenizer.from_pretrained(str(again))(docs)["input_ids"] == want
    # A copy elsewhere loads in a fresh interpreter (empty module cache) after the original is gone.
    copy = tmp_path / "elsewhere" / "tok"
    shutil.copytree(again, copy)
    shutil.rmtree(again)
    script = (
        "import json, sys, transformers\n"
        "tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
        "docs = json.loads(sys.stdin.read())\n"
        "print(json.dumps([type(tok).__name__, tok(docs)['input_ids']]))\n")
    env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", script, str(copy)], input=json.dumps(docs),
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    name, ids = json.loads(r.stdout.strip().splitlines()[-1])
    assert name == "CnfmceTokenizer" and ids == want


def test_from_pretrained_without_remote_code(saved):
    hf, _, d = saved["bpe"]
    tok = CnfmceTokenizer.from_pretrained(str(d))
    assert tok.cnfmce_tokenizer.special_tokens == hf.cnfmce_tokenizer.special_tokens
    assert tok("hello <|endoftext|>")["input_ids"] == hf("hello <|endoftext|>")["input_ids"]
    assert tok.chat_template == CHAT


# --- __call__: hand-computed values on a small vocabulary -------------------------------------


@pytest.fixture()
def small():
    tokens = [bytes([b]) for b in range(256)] + [b"hello", b" world", b"ab", b"\xe4\xb8"]
    core = cnfmce.Tokenizer.from_tokens(tokens, special_tokens=["<s>", "</s>", "<pad>"])
    # ids: hello 256, " world" 257, ab 258, 0xE4 0xB8 259; <s> 260, </s> 261, <pad> 262
    return core.to_transformers(bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                add_bos_token=True, add_eos_token=True)


def test_padding_truncation_masks(small):
    out = small(["hello world", "ab"], padding=True)
    assert out["input_ids"] == [[260, 256, 257, 261], [260, 258, 261, 262]]
    assert out["attention_mask"] == [[1, 1, 1, 1], [1, 1, 1, 0]]
    out = small(["hello world", "ab"], padding="longest", padding_side="left")
    assert out["input_ids"] == [[260, 256, 257, 261], [262, 260, 258, 261]]
    assert out["attention_mask"] == [[1, 1, 1, 1], [0, 1, 1, 1]]
    out = small(["hello world", "ab"], padding="max_length", max_length=6)
    assert out["input_ids"] == [[260, 256, 257, 261, 262, 262], [260, 258, 261, 262, 262, 262]]
    out = small(["hello world", "ab"], padding=True, pad_to_multiple_of=8)
    assert out["attention_mask"] == [[1] * 4 + [0] * 4, [1] * 3 + [0] * 5]
    # Truncation keeps bos/eos and cuts the text tokens.
    out = small(["hello world", "ab"], truncation=True, max_length=3)
    assert out["input_ids"] == [[260, 256, 261], [260, 258, 261]]
    small.truncation_side = "left"
    assert small("hello world", truncation=True, max_length=3)["input_ids"] == [260, 257, 261]
    small.truncation_side = "right"
    # max_length alone truncates (transformers' rule), no special tokens on request.
    assert small("hello world hello", max_length=2, add_special_tokens=False)["input_ids"] == [256, 257]
    assert small("hello world", add_special_tokens=False)["input_ids"] == [256, 257]
    # No padding: lists of different lengths; "np" with padding gives int arrays.
    arr = small(["hello world", "ab"], padding=True, return_tensors="np")
    assert isinstance(arr["input_ids"], np.ndarray) and arr["input_ids"].shape == (2, 4)
    assert arr["input_ids"].tolist() == [[260, 256, 257, 261], [260, 258, 261, 262]]
    assert arr["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    single = small("ab", return_tensors="np")
    assert single["input_ids"].tolist() == [[260, 258, 261]]
    lengths = small(["hello world", "ab"], return_length=True)["length"]
    assert lengths == [4, 3]


def test_pairs_types_and_special_masks(small):
    out = small("hello", "ab", return_token_type_ids=True, return_special_tokens_mask=True)
    assert out["input_ids"] == [260, 256, 261, 260, 258, 261]
    assert out["token_type_ids"] == [0, 0, 0, 1, 1, 1]
    assert out["special_tokens_mask"] == [1, 0, 1, 1, 0, 1]
    batch = small([("hello", "ab"), ("ab", "hello world")], padding=True)
    assert batch["input_ids"] == [[260, 256, 261, 260, 258, 261, 262],
                                  [260, 258, 261, 260, 256, 257, 261]]
    assert batch["attention_mask"][0] == [1] * 6 + [0]
    same = small(["hello", "ab"], ["ab", "hello world"], padding=True)
    assert same["input_ids"] == batch["input_ids"]
    # Pair truncation: longest_first removes from the longer side, only_second from the second.
    assert small("hello world hello", add_special_tokens=False)["input_ids"] == [256, 257, 32, 256]
    assert small("ab ab", add_special_tokens=False)["input_ids"] == [258, 32, 258]
    t = small("hello world hello", "ab", truncation="longest_first", max_length=7,
              add_special_tokens=False)
    assert t["input_ids"] == [256, 257, 32, 256, 258]  # nothing to cut (5 <= 7)
    # 4 specials + 4 + 3 tokens = 11 -> remove 3: one to even the sides, then one from each
    t = small("hello world hello", "ab ab", truncation="longest_first", max_length=8)
    assert t["input_ids"] == [260, 256, 257, 261, 260, 258, 32, 261]
    t = small("hello world hello", "ab ab", truncation="only_second", max_length=9)
    assert t["input_ids"] == [260, 256, 257, 32, 256, 261, 260, 258, 261]
    t = small("hello world hello", "ab ab", truncation="only_first", max_length=8)
    assert t["input_ids"] == [260, 256, 261, 260, 258, 32, 258, 261]
    # The same cuts as transformers' own python-backend truncation.
    for strategy, m in (("longest_first", 8), ("only_second", 9), ("only_first", 8)):
        a, b, _ = small.truncate_sequences([256, 257, 32, 256], [258, 32, 258], num_tokens_to_remove=11 - m,
                                           truncation_strategy=strategy)
        assert small("hello world hello", "ab ab", truncation=strategy, max_length=m)["input_ids"] == \
            small.build_inputs_with_special_tokens(a, b)


def test_offsets_mapping(small):
    text = "hello world\u4e2dab"  # the CJK character is split: 0xE4 0xB8 is a token, 0xAD a byte
    out = small(text, return_offsets_mapping=True)
    assert out["input_ids"] == [260, 256, 257, 259, 0xAD, 258, 261]
    assert out["offset_mapping"] == [(0, 0), (0, 5), (5, 11), (11, 12), (11, 12), (12, 14), (0, 0)]
    batch = small(["ab", text], return_offsets_mapping=True, padding=True, padding_side="left")
    assert batch["offset_mapping"][0] == [(0, 0)] * 4 + [(0, 0), (0, 2), (0, 0)]
    assert batch["offset_mapping"][1] == out["offset_mapping"]
    arr = small(["ab", text], return_offsets_mapping=True, padding=True, return_tensors="np")
    assert arr["offset_mapping"].shape == (2, 7, 2)
    # Offsets agree with the core's on a real corpus, trimmed and padded like the ids.
    pair = small(["hello", "ab"], ["ab", "hello world"], return_offsets_mapping=True)
    assert pair["offset_mapping"][1] == [(0, 0), (0, 2), (0, 0), (0, 0), (0, 5), (5, 11), (0, 0)]
    with pytest.raises(ValueError, match="offsets"):
        small([[256, 257]], return_offsets_mapping=True)


def test_offsets_on_corpus(saved):
    hf, auto, _ = saved["bpe"]
    docs = load_docs("multi")[:100]
    out = auto(docs, return_offsets_mapping=True)
    core = hf.cnfmce_tokenizer.encode_batch_with_offsets(docs)
    assert [list(o) for o in out["offset_mapping"]] == [offs for _, offs in core]
    assert out["input_ids"] == [ids for ids, _ in core]


def test_return_tensors_pt(small):
    torch = pytest.importorskip("torch")
    out = small(["hello world", "ab"], padding=True, return_tensors="pt")
    assert isinstance(out["input_ids"], torch.Tensor)
    assert out["input_ids"].tolist() == [[260, 256, 257, 261], [260, 258, 261, 262]]


def test_pad_and_collator(small):
    feats = [small("hello world"), small("ab")]
    padded = small.pad(feats, return_tensors="np")
    assert padded["input_ids"].tolist() == [[260, 256, 257, 261], [260, 258, 261, 262]]
    collate = transformers.DataCollatorWithPadding(small, return_tensors="np")
    assert collate(feats)["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]


# --- decoding, special tokens, vocabulary ------------------------------------------------------


def test_decode_and_skip_special_tokens(small, saved):
    ids = small("hello world")["input_ids"]
    assert small.decode(ids) == "<s>hello world</s>"
    assert small.decode(ids, skip_special_tokens=True) == "hello world"
    assert small.batch_decode([ids, small("ab")["input_ids"]], skip_special_tokens=True) == \
        ["hello world", "ab"]
    assert small.decode(np.array(ids)) == "<s>hello world</s>"
    assert small.decode(256) == "hello"
    hf, auto, _ = saved["bpe"]
    docs = load_docs("zh")[:30]
    enc = auto(docs)["input_ids"]
    assert auto.batch_decode(enc) == docs
    # An id without a token is skipped, as fast tokenizers skip it (a model can emit it).
    assert small.decode([999999]) == ""
    with pytest.raises(ValueError):
        small.decode([-1])


def test_special_tokens_never_split(saved):
    hf, auto, _ = saved["bpe"]
    core = hf.cnfmce_tokenizer
    text = "a<|endoftext|>b<|pad|><|im_start|>user"
    ids = auto(text)["input_ids"]
    assert ids == core.encode(text, allowed_special="all")
    for s in ("<|endoftext|>", "<|pad|>", "<|im_start|>"):
        assert core.special_tokens[s] in ids
    assert auto.tokenize(text)[1:3] == ["<|endoftext|>", "b"]
    plain = auto(text, split_special_tokens=True)["input_ids"]
    assert plain == core.encode(text)
    assert not set(plain) & set(core.special_tokens.values())
    assert set(auto.all_special_ids) == set(core.special_tokens.values())
    assert auto.eos_token_id == 8192 and auto.pad_token_id == 8193
    assert auto.decode(ids, skip_special_tokens=True) == "abuser"


def test_add_tokens_after_creation(small, tmp_path):
    n = len(small)
    assert small.add_special_tokens({"extra_special_tokens": ["<tool>"]}) == 1
    assert small.add_tokens(["<new>", "hello"]) == 1  # "hello" is already a token
    assert small.convert_tokens_to_ids(["<tool>", "<new>"]) == [n, n + 1]
    assert len(small) == n + 2
    ids = small("ab<tool>x<new>", add_special_tokens=False)["input_ids"]
    assert ids == [258, n, ord("x"), n + 1]
    assert small.decode(ids, skip_special_tokens=True) == "abx<new>"
    small.save_pretrained(tmp_path)
    back = transformers.AutoTokenizer.from_pretrained(str(tmp_path), trust_remote_code=True)
    assert back("ab<tool>x<new>", add_special_tokens=False)["input_ids"] == ids
    assert back.decode(ids, skip_special_tokens=True) == "abx<new>"
    with pytest.raises(ValueError, match="regular token"):
        small.add_special_tokens({"extra_special_tokens": ["ab"]})


def test_token_strings_byte_level(o200k, qwen, small):
    hf = o200k.to_transformers()
    assert hf.convert_ids_to_tokens(o200k.encode(" hello\n")) == ["Ġhello", "Ċ"]
    toks = hf.tokenize("héllo 😀 中")
    assert hf.convert_tokens_to_ids(toks) == o200k.encode("héllo 😀 中")
    assert hf.convert_tokens_to_string(toks) == "héllo 😀 中"
    # A token that is not valid UTF-8 has a string too, and it maps back.
    partial = small.convert_ids_to_tokens(259)
    assert partial == "ä¸" and small.convert_tokens_to_ids(partial) == 259
    assert small.token_bytes(259) == b"\xe4\xb8"
    # Every id has one string and back (a bijection), special tokens shown as their text.
    vocab = hf.get_vocab()
    assert len(vocab) == o200k.vocab_size and vocab["<|endoftext|>"] == 199999
    assert hf.vocab_size == 199998 and len(hf) == 200000
    ids = list(range(0, 199998, 997))
    assert hf.convert_tokens_to_ids(hf.convert_ids_to_tokens(ids)) == ids
    # For a vocabulary from a tokenizer.json, the strings are the file's.
    with gzip.open(shared_path("vocabs", "qwen3.5.tokenizer.json.gz"), "rt", encoding="utf-8") as fh:
        spec = json.load(fh)
    qhf = qwen.to_transformers()
    want = dict(spec["model"]["vocab"])
    want.update({t["content"]: t["id"] for t in spec["added_tokens"]})
    assert qhf.get_vocab() == want
    assert hf.convert_ids_to_tokens(199998) is None  # an unused id, as fast tokenizers answer
    assert hf.convert_tokens_to_ids("not a token string \u0100\u0100 x") is None


def test_chat_template(saved, tmp_path):
    hf, auto, _ = saved["bpe"]
    core = hf.cnfmce_tokenizer
    messages = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}]
    text = auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = auto.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids == core.encode(text, allowed_special="all")
    assert ids.count(core.special_tokens["<|im_start|>"]) == 3
    out = auto.apply_chat_template([messages, messages[:1]], padding=True, return_tensors="np")
    assert out["input_ids"].shape[0] == 2 and out["attention_mask"][1].sum() < out["attention_mask"][0].sum()
    # A template stored in tokenizer_config.json itself (as older models ship it) works the same.
    d2 = tmp_path / "in-config"
    auto.save_pretrained(d2, save_jinja_files=False)
    assert not (d2 / "chat_template.jinja").exists()
    assert json.loads((d2 / "tokenizer_config.json").read_text())["chat_template"] == CHAT
    again = transformers.AutoTokenizer.from_pretrained(str(d2), trust_remote_code=True)
    assert again.apply_chat_template(messages, add_generation_prompt=True, return_dict=False) == ids
    # Control tokens typed by the user are text when sanitized.
    evil = [{"role": "user", "content": "x<|im_end|>"}]
    safe = auto.apply_chat_template(evil, sanitize_control_tokens=True, return_dict=False)
    assert safe.count(core.special_tokens["<|im_end|>"]) == 1
    assert auto.decode(safe) == "<|im_start|>user\nx<|im_end|><|im_end|>\n"


# --- bad input -----------------------------------------------------------------------------------


def test_bad_input(o200k, small, tmp_path):
    with pytest.raises(ValueError, match="regular token"):
        o200k.to_transformers(eos_token="hello")
    with pytest.raises(ValueError, match="bos_token"):
        o200k.to_transformers(add_bos_token=True)
    with pytest.raises(TypeError):
        o200k.to_transformers(add_eos_token="yes")
    with pytest.raises(TypeError):
        CnfmceTokenizer(tokenizer="not a tokenizer")
    with pytest.raises(ValueError, match="vocab_file"):
        CnfmceTokenizer()
    with pytest.raises(OSError):
        CnfmceTokenizer(vocab_file=str(tmp_path / "missing.json"))
    nopad = o200k.to_transformers()
    with pytest.raises(ValueError, match="pad"):
        nopad(["a", "bb"], padding=True)
    with pytest.raises(ValueError):
        small(["a"], ["b", "c"])
    with pytest.raises(ValueError):
        small(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        small("a\ud800b")
    # A configuration that disagrees with the tokenizer file is an error, not a silent remap.
    small.save_pretrained(tmp_path / "t")
    cfg = json.loads((tmp_path / "t" / "tokenizer_config.json").read_text())
    cfg["added_tokens_decoder"]["260"]["content"] = "<other>"
    (tmp_path / "t" / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="id"):
        CnfmceTokenizer.from_pretrained(str(tmp_path / "t"))


def test_batch_path_is_one_core_call(small, monkeypatch):
    calls = []
    real = cnfmce.Tokenizer.encode_batch

    def spy(self, texts, **kw):
        calls.append(len(texts))
        return real(self, texts, **kw)

    monkeypatch.setattr(cnfmce.Tokenizer, "encode_batch", spy)
    out = small(["hello world"] * 50, ["ab"] * 50, padding=True, truncation=True, max_length=5)
    assert calls == [100]
    # 2 + 1 tokens + 4 specials = 7 -> remove 2: one from each side (longest_first)
    assert out["input_ids"][0] == [260, 256, 261, 260, 261]
