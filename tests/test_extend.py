"""Vocabulary extension (cnfmce.extend, initial_embeddings, `cnfmce extend`): ids kept, the
MCE cost never above the base's (against the reference DP), pieces, determinism, errors."""

from __future__ import annotations

import gzip
import json
import math
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import cnfmce
from cnfmce import _core
from cnfmce.extend import extension_info

import reference as ref
from conftest import REPO, shared_path

SAMPLE = REPO / "python" / "cnfmce" / "data" / "sample.jsonl.gz"


def _sample_docs():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="module")
def docs():
    return _sample_docs()


@pytest.fixture(scope="module")
def base(docs):
    return cnfmce.train(docs[::3], vocab_size=700, special_tokens=["<|end|>", "<|pad|>"], progress=False)


@pytest.fixture(scope="module")
def extended(base, docs):
    return cnfmce.extend(base, docs[1::3], 150, progress=False)


def _cost(tokens, ids, data: bytes, lam: float, eps_on: bool) -> float:
    """The MCE cost (SPEC 2) of the encoding ``ids`` of ``data``, by the reference's rules."""
    starts = ref.unit_starts(data)
    w = ref.unit_indices(starts)
    total, i = 0.0, 0
    for t in ids:
        j = i + len(tokens[t])
        p = ref.boundary_penalty(starts, w, i, j, lam)
        assert p is not None, "a forbidden token in the encoding"
        total += 1.0 + p + (ref.token_preference(t) if eps_on else 0.0)
        i = j
    assert i == len(data)
    return total


def test_ids_kept_new_ids_after_the_largest(base, extended):
    info = extension_info(extended)
    n_base = base.vocab_size
    # every base token and special token keeps its id and bytes
    for i, t in base.token_bytes().items():
        assert extended.id_to_token(i) == t
    assert {k: v for k, v in extended.special_tokens.items()} == base.special_tokens
    first = max(max(base.token_bytes()), max(base.special_tokens.values())) + 1
    assert info["first_new_id"] == first == 700
    assert info["new_tokens"] == 150 and extended.vocab_size == n_base + 150
    new = [extended.id_to_token(first + k) for k in range(150)]
    have = set(base.token_bytes().values()) | {s.encode() for s in base.special_tokens}
    assert not have & set(new) and len(set(new)) == 150
    # options carry over; pieces spell each new token with base ids, as MCE on the base encodes it
    assert extended.options == base.options
    for k, t in enumerate(new):
        assert info["pieces"][k] == base.encode_bytes(t)
        assert all(p < first for p in info["pieces"][k])
    # the new tokens shorten the text they were counted on
    text = " ".join(_sample_docs()[1::3][:40])
    assert len(extended.encode(text)) < len(base.encode(text))


def test_unused_ids_stay_unused_and_specials_keep_theirs():
    toks = [bytes([b]) for b in range(256)] + [b"the", b" cat"]
    ids = list(range(256)) + [300, 302]  # 256..299 and 301 unused
    core = _core.CoreTokenizer(toks, ids, [(b"<|s|>", 500)], _core.Options.default())
    b = cnfmce.Tokenizer(core)
    docs = ["the cat sat on the mat, the dog sat on the log"] * 30
    x = cnfmce.extend(b, docs, 5, progress=False)
    assert extension_info(x)["first_new_id"] == 501
    assert x.special_tokens == {"<|s|>": 500}
    for i in list(range(256, 300)) + [301]:
        with pytest.raises(cnfmce.UnknownIdError):
            x.id_to_token(i)
    assert [x.id_to_token(i) for i in (300, 302)] == [b"the", b" cat"]
    assert sorted(x.token_bytes())[-5:] == [501, 502, 503, 504, 505]


def test_cost_never_above_the_base_reference(base, extended):
    """Property: on random texts, the MCE cost with the extension (by the reference DP) is at
    most the cost with the base, and cnfmce's encodings have the reference's cost."""
    btoks = base.token_bytes()
    xtoks = extended.token_bytes()
    bvocab = {t: i for i, t in btoks.items()}
    xvocab = {t: i for i, t in xtoks.items()}
    rng = random.Random(7)
    docs = _sample_docs()
    pool = "".join(docs[1::3][:20])
    for _ in range(40):
        a = rng.randrange(len(pool) - 200)
        text = pool[a:a + rng.randrange(1, 200)].encode()
        rb = ref.mce_encode(bvocab, text)
        rx = ref.mce_encode(xvocab, text)
        cb, cx = _cost(btoks, rb, text, 0.05, True), _cost(xtoks, rx, text, 0.05, True)
        assert cx <= cb + 1e-9
        got = extended.encode_bytes(text)
        assert math.isclose(_cost(xtoks, got, text, 0.05, True), cx, abs_tol=1e-9)


def test_cost_property_random_vocabularies():
    """Random small bases, random texts: extension never costs more (reference DP)."""
    rng = random.Random(11)
    alphabet = ["a", "b", "c", " ", "é", "中", "文", ".", "1"]
    for trial in range(6):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 5))) for _ in range(60)]
        docs = [" ".join(rng.choice(words) for _ in range(rng.randrange(5, 40))) for _ in range(40)]
        extra = sorted({w.encode() for w in words[:15] if len(w.encode()) > 1})
        toks = [bytes([b]) for b in range(256)] + extra
        lam = rng.choice([0.0, 0.05, 0.5])
        b = cnfmce.Tokenizer.from_tokens(toks, boundary_penalty=lam)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # small texts may offer few candidates
            x = cnfmce.extend(b, docs, rng.randrange(5, 40), progress=False,
                              rounds=[(1, 8, 0), (9, 16, 2)])
        bt, xt = b.token_bytes(), x.token_bytes()
        bv, xv = {t: i for i, t in bt.items()}, {t: i for i, t in xt.items()}
        for _ in range(25):
            text = " ".join(rng.choice(words + ["zz", "中文字"]) for _ in range(rng.randrange(1, 12))).encode()
            cb = _cost(bt, ref.mce_encode(bv, text, lam), text, lam, True)
            cx = _cost(xt, ref.mce_encode(xv, text, lam), text, lam, True)
            assert cx <= cb + 1e-9, (trial, text)


def test_deterministic_threads_and_order(base, docs):
    part = docs[1::3]
    a = cnfmce.extend(base, part, 80, num_threads=1, progress=False)
    b = cnfmce.extend(base, list(reversed(part)), 80, num_threads=2, progress=False)
    assert a.token_bytes() == b.token_bytes()
    assert a.metadata["extension"] == b.metadata["extension"]


def test_save_load_and_pickle(extended, tmp_path):
    import pickle
    p = tmp_path / "x.json.gz"
    extended.save(p)
    y = cnfmce.Tokenizer.load(p)
    assert extension_info(y) == extension_info(extended)
    assert extension_info(pickle.loads(pickle.dumps(extended))) == extension_info(extended)
    # a loaded file is a base too (a cnfmce path)
    z = cnfmce.extend(p, _sample_docs()[2::3][:50], 10, progress=False)
    assert extension_info(z)["first_new_id"] == extended.vocab_size


def test_initial_embeddings(base, extended):
    info = extension_info(extended)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((base.vocab_size + 13, 8)).astype(np.float32)  # padded rows allowed
    rows = cnfmce.initial_embeddings(extended, m)
    assert rows.shape == (150, 8) and rows.dtype == np.float32
    for k in (0, 7, 149):
        np.testing.assert_allclose(rows[k], m[info["pieces"][k]].mean(axis=0), rtol=1e-5, atol=1e-6)
    assert cnfmce.initial_embeddings(extended, m.astype(np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match="rows"):
        cnfmce.initial_embeddings(extended, m[:100])
    with pytest.raises(ValueError, match="2-D"):
        cnfmce.initial_embeddings(extended, m[0])
    with pytest.raises(TypeError, match="floats"):
        cnfmce.initial_embeddings(extended, m.astype(np.int32))
    with pytest.raises(TypeError, match="numpy"):
        cnfmce.initial_embeddings(extended, m.tolist())
    with pytest.raises(ValueError, match="method"):
        cnfmce.initial_embeddings(extended, m, method="median")
    with pytest.raises(ValueError, match="no extension record"):
        cnfmce.initial_embeddings(base, m)
    bad = cnfmce.Tokenizer.from_bytes(extended.to_bytes())
    bad.metadata["extension"]["pieces"] = bad.metadata["extension"]["pieces"][:-8]
    with pytest.raises(ValueError, match="bad extension record"):
        extension_info(bad)


def test_default_candidates_per_new_token(base, docs, extended):
    """Without raw_vocab_size, counting keeps EXTEND_RAW_PER_NEW_TOKEN (20) candidates per new
    token: the record says so, and the result is the run with that number given."""
    assert cnfmce.EXTEND_RAW_PER_NEW_TOKEN == 20
    assert extended.metadata["counting"]["raw_vocab_size"] == 150 * 20
    explicit = cnfmce.extend(base, docs[1::3], 150, raw_vocab_size=3000, progress=False)
    assert explicit.token_bytes() == extended.token_bytes()
    fewer = cnfmce.extend(base, docs[1::3], 150, raw_vocab_size=1500, progress=False)
    assert fewer.metadata["counting"]["raw_vocab_size"] == 1500


def test_fewer_candidates_than_asked():
    b = cnfmce.Tokenizer.from_tokens([bytes([x]) for x in range(256)])
    with pytest.warns(RuntimeWarning, match="new tokens instead of 1000"):
        x = cnfmce.extend(b, ["ab ab ab cd"] * 3, 1000, progress=False)
    n = extension_info(x)["new_tokens"]
    assert 0 < n < 1000 and x.vocab_size == 256 + n


def test_bad_arguments(base, docs):
    with pytest.raises(ValueError, match="new_tokens"):
        cnfmce.extend(base, docs[:3], 0, progress=False)
    with pytest.raises(ValueError, match="new_tokens"):
        cnfmce.extend(base, docs[:3], True, progress=False)
    with pytest.raises(TypeError, match="unexpected keyword"):
        cnfmce.extend(base, docs[:3], 10, ray_address="x", progress=False)
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray'"):
        cnfmce.extend(base, docs[:3], 10, backend="spark", progress=False)
    # the Ray options are checked before any Ray is reached (tests/test_extend_ray.py runs it)
    with pytest.raises(TypeError, match=r"extend\(\) got an unexpected keyword argument 'partitions'"):
        cnfmce.extend(base, docs[:3], 10, backend="ray", partitions=2, progress=False)
    with pytest.raises(ValueError, match="num_partitions must be a positive int"):
        cnfmce.extend(base, docs[:3], 10, backend="ray", num_partitions=0, progress=False)
    with pytest.raises(TypeError, match="Tokenizer or a path"):
        cnfmce.extend(123, docs[:3], 10, progress=False)
    with pytest.raises(FileNotFoundError):
        cnfmce.extend("/nonexistent/tok.json", docs[:3], 10, progress=False)
    with pytest.raises(ValueError, match="empty"):
        cnfmce.extend(base, [""], 10, progress=False)


def test_passes_spread_over_workers_equal_local(base, docs):
    """The protocol of a distributed extension run (docs/spec.md section 6): each pass's
    vocabulary rebuilt by "workers" (Filter.from_packed, after pickling), their blocks' usage
    summed in another order, gives the run that encodes every document itself."""
    import pickle
    core = base._core
    counts = cnfmce.count(docs[1::3], raw_vocab_size=3000, progress=False)
    cands = [t for t, _ in counts.items()]
    blocks = [docs[1::3][k::5] for k in range(5)]

    def run(distributed):
        ext = _core.Extender(core.packed(), core.specials(), core.options, cands, 150)
        passes = 0
        while ext.next_pass() is not None:
            if distributed:
                f = _core.Filter.from_packed(pickle.loads(pickle.dumps(ext.pass_vocabulary())), core.options)
                total = _core.BlockUsage()
                for b in reversed(blocks):
                    total = pickle.loads(pickle.dumps(f.usage_of(b))).merge(total)
                ext.add_usage(total)
            else:
                for b in blocks:
                    ext.add(b)
            ext.end_pass()
            passes += 1
        tok, first, pieces, report = ext.finish()
        return tok.packed(), first, pieces, report, passes

    want = run(False)
    assert want[4] >= 2  # filtering and refining passes
    assert run(True) == want
    ext = _core.Extender(core.packed(), core.specials(), core.options, cands, 150)
    with pytest.raises(ValueError, match="usage"):  # usage over another vocabulary
        ext.add_usage(_core.Filter([bytes([b]) for b in range(256)], core.options).usage_of(["ab"]))


def test_non_ascii_selection(base, docs):
    """selection="refined-non-ascii" weighs the smaller group up: on mostly ASCII text it gives
    at least as many non-ASCII new tokens as the plain rule, and ids are kept the same way."""
    zh = ["数据是一种重要的资源，我们需要认真地管理和使用这些数据。" * 3,
          "今天的天气很好，我们一起去公园散步，看看美丽的花草树木。" * 3,
          "学习新的语言需要时间和耐心，每天练习才能取得进步。" * 3]
    part = docs[1::3] + zh * 6
    plain = cnfmce.extend(base, part, 150, raw_vocab_size=20_000, progress=False)
    weighted = cnfmce.extend(base, part, 150, raw_vocab_size=20_000, selection="refined-non-ascii", non_ascii_exponent=1.0,
                             progress=False)
    assert weighted.metadata["selection"] == "refined-non-ascii"
    assert weighted.metadata["non_ascii_exponent"] == 1.0
    first = extension_info(weighted)["first_new_id"]

    def non_ascii(t):
        return sum(not t.id_to_token(first + k).isascii() for k in range(150))
    assert non_ascii(weighted) > non_ascii(plain)
    for i, t in base.token_bytes().items():
        assert weighted.id_to_token(i) == t
    with pytest.raises(ValueError, match="selection"):
        cnfmce.extend(base, part, 10, selection="paper", progress=False)
    with pytest.raises(ValueError, match="non_ascii_exponent"):
        cnfmce.extend(base, part, 10, non_ascii_exponent=0.5, progress=False)
    with pytest.raises(ValueError, match="non_ascii_exponent"):
        cnfmce.extend(base, part, 10, selection="refined-non-ascii", non_ascii_exponent=-1, progress=False)


def test_cli(base, tmp_path):
    bp = tmp_path / "base.json"
    base.save(bp)
    out = tmp_path / "x.json"
    env = dict(__import__("os").environ, PYTHONPATH=str(Path(cnfmce.__file__).resolve().parent.parent))
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "extend", str(bp), "-o", str(out),
                        "--new-tokens", "40", "--quiet", "--threads", "1", str(SAMPLE)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    x = cnfmce.Tokenizer.load(out)
    assert extension_info(x)["new_tokens"] == 40 and extension_info(x)["first_new_id"] == 700
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "extend", str(bp), "-o", str(out),
                        "--new-tokens", "0", str(SAMPLE)], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "new-tokens" in r.stderr


def test_tiktoken_base_with_special_ids_cli(tmp_path):
    """A .tiktoken base through the CLI, its special token placed with S=ID."""
    import base64
    toks = [bytes([b]) for b in range(256)] + [b"the", b" sat"]
    tk = tmp_path / "b.tiktoken"
    tk.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(toks)))
    out = tmp_path / "x.json"
    env = dict(__import__("os").environ, PYTHONPATH=str(Path(cnfmce.__file__).resolve().parent.parent))
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "extend", str(tk), "-o", str(out),
                        "--new-tokens", "20", "--special-token", "<|endoftext|>=260", "--quiet",
                        str(SAMPLE)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    x = cnfmce.Tokenizer.load(out)
    assert x.special_tokens == {"<|endoftext|>": 260}
    assert extension_info(x)["first_new_id"] == 261


# --- shared data: o200k_base, the guarantee on the shared test sets -------------------------------

@pytest.fixture(scope="module")
def o200k_extended():
    o200k = cnfmce.Tokenizer.from_tiktoken(shared_path("vocabs", "o200k_base.tiktoken"),
                                           special_tokens={"<|endoftext|>": 199999})
    train = []
    for cat in ("en", "zh", "code"):
        with gzip.open(shared_path("corpora", cat, "train.jsonl.gz"), "rt", encoding="utf-8") as f:
            for k, line in enumerate(f):
                if k >= 150:
                    break
                train.append(json.loads(line)["text"])
    return o200k, cnfmce.extend(o200k, train, 2000, progress=False)


@pytest.mark.shared
@pytest.mark.parametrize("cat", ["en", "sci", "math", "code", "zh", "multi"])
def test_shared_cost_never_above_o200k(o200k_extended, cat):
    """On every shared test set's first documents, the MCE cost of cnfmce's encoding with
    o200k_base + 2,000 new tokens is at most the cost with o200k_base alone."""
    o200k, x = o200k_extended
    bt, xt = None, None
    with gzip.open(shared_path("corpora", cat, "test.jsonl.gz"), "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(25), f)]
    xt = x.token_bytes()
    bt = o200k.token_bytes()
    for t in texts:
        data = t.encode()[:4000]
        data = data.decode("utf-8", "ignore").encode()
        cb = _cost(bt, o200k.encode_bytes(data), data, o200k.boundary_penalty, True)
        cx = _cost(xt, x.encode_bytes(data), data, x.boundary_penalty, True)
        assert cx <= cb + 1e-6
    assert extension_info(x)["first_new_id"] == 200000


# --- transformers: one call resizes a model's embeddings and fills the new rows -----------------

@pytest.mark.parametrize("tied", [True, False])
def test_hf_resize_embeddings(base, extended, tied):
    torch = pytest.importorskip("torch", reason="torch is not installed (optional: cnfmce[hf] + torch)")
    transformers = pytest.importorskip("transformers")
    from cnfmce.hf import resize_embeddings
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=base.vocab_size + 4, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                   tie_word_embeddings=tied)
    model = transformers.LlamaForCausalLM(cfg)
    w_in = model.get_input_embeddings().weight.detach().clone()
    w_out = model.get_output_embeddings().weight.detach().clone()
    assert resize_embeddings(model, extended) is model
    info = extension_info(extended)
    first, n = info["first_new_id"], info["new_tokens"]
    e_in = model.get_input_embeddings().weight.detach()
    e_out = model.get_output_embeddings().weight.detach()
    assert e_in.shape[0] >= first + n and e_out.shape[0] == e_in.shape[0]
    assert torch.equal(e_in[:base.vocab_size], w_in[:base.vocab_size])  # old rows unchanged
    for k in (0, n // 2, n - 1):
        want = w_in[info["pieces"][k]].mean(dim=0)
        assert torch.allclose(e_in[first + k], want, atol=1e-6)
        want_out = w_out[info["pieces"][k]].mean(dim=0)
        assert torch.allclose(e_out[first + k], want_out, atol=1e-6)
    if not tied:
        assert not torch.allclose(e_in[first], e_out[first])
    # the model runs on the new ids
    ids = torch.tensor([[first, first + n - 1, 5]])
    assert model(ids).logits.shape[-1] == e_in.shape[0]
    small = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2))
    with pytest.raises(ValueError, match="rows"):
        resize_embeddings(small, extended)


# --- the benchmark numbers the user documentation quotes come from the results JSON ---------------

def test_docs_benchmark_matches_results_json():
    root = Path(__file__).resolve().parents[1]
    res = json.loads((root / "docs" / "results" / "extend.json").read_text())
    cats = ("en", "sci", "math", "code", "zh", "multi")

    def heldout_gains(name: str) -> list:
        ev = res["eval"]
        return [100 * (ev[name][f"heldout/{c}"]["cpt"] / ev["o200k-bpe"][f"heldout/{c}"]["cpt"] - 1) for c in cats]

    page = (root / "docs" / "extend.md").read_text(encoding="utf-8")
    rows = {"| `cnfmce.extend(o200k_base, ..., 32_768)` |": "o200k-ext", "| naive union:": "union",
            "| the same new tokens added with `add_tokens`": "addtok", "| BPE continued from": "bpecont",
            "| MCE on o200k_base |": "o200k-mce"}
    for prefix, name in rows.items():
        line = next(ln for ln in page.splitlines() if ln.startswith(prefix))
        cells = [c.strip().strip("*").replace("−", "-") for c in line.strip("|").split("|")[1:]]
        assert cells == [f"{g:+.1f}%" for g in heldout_gains(name)], name
    # README: the range over en, sci, math and code, in whole percent, on the test part of the
    # split whose validation part chose the default (the held-out sets above are that validation)
    readme = (root / "README.md").read_text(encoding="utf-8")
    val = res["val"]
    g = []
    for c in cats[:4]:
        (ch, tk), (bch, btk) = val["ext-raw20"]["test"]["cats"][c], val["o200k-bpe"]["test"]["cats"][c]
        g.append(100 * ((ch / tk) / (bch / btk) - 1))
    assert cnfmce.EXTEND_RAW_PER_NEW_TOKEN == 20  # the row the README quotes
    assert f"+{min(g):.0f}% to +{max(g):.0f}%" in " ".join(readme.split())
