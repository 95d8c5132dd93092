"""cnfmce.extend(..., backend="ray") on a real local Ray cluster started once for the module: the
extended tokenizer (tokens, ids, special tokens, the pieces of metadata["extension"]) equals the
local run's byte for byte, whatever the blocks and the partitions; progress; the command line;
Ctrl-C. The default run keeps one case; the other inputs, layouts and options are marked slow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import cnfmce
from cnfmce.extend import extension_info
from conftest import ctrl_c_as_in_a_terminal, fixture_path
from train_helpers import read_shared_docs, start_local_ray

ray = pytest.importorskip("ray")
# Ray Data's own deprecation notices
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NEW = 300
SPECIAL = {"<|endoftext|>": 9000}  # after a gap: ids 8192..8999 stay unused


@pytest.fixture(scope="module")
def cluster():
    yield start_local_ray()
    ray.shutdown()


@pytest.fixture(scope="module")
def base():
    return cnfmce.Tokenizer.from_tiktoken(str(fixture_path("vocabs", "bpe8k.tiktoken")),
                                          special_tokens=SPECIAL)


@pytest.fixture(scope="module")
def paths():
    return [str(fixture_path("corpora", c, "train.jsonl.gz")) for c in ("en", "zh", "code")]


@pytest.fixture(scope="module")
def local(base, paths):
    return cnfmce.extend(base, paths, NEW, progress=False)


def same_extension(got, want):
    """Tokens, ids, special tokens, options and the extension record (the pieces) are equal, and
    the passes saw the same candidates, tokens and bytes."""
    assert got.token_bytes() == want.token_bytes()
    assert got.special_tokens == want.special_tokens and got.options == want.options
    assert got.metadata["extension"] == want.metadata["extension"]
    assert got.metadata["used_new_tokens"] == want.metadata["used_new_tokens"]

    def passes(t):
        return [(p["candidates"], p["tokens"], p["bytes"]) for p in t.metadata["extend_passes"]]
    assert passes(got) == passes(want)
    for k in ("counted_in_base", "candidates", "documents", "bytes"):
        assert got.metadata["counting"][k] == want.metadata["counting"][k], k


def test_extend_on_ray_equals_local(cluster, base, paths, local, capsys):
    tok = cnfmce.extend(base, paths, NEW, backend="ray", block_size=200_000, num_partitions=3)
    same_extension(tok, local)
    info = extension_info(tok)
    assert info["first_new_id"] == 9001 and info["new_tokens"] == NEW
    assert all(tok.id_to_token(i) == t for i, t in base.token_bytes().items())
    assert info["pieces"] == extension_info(local)["pieces"]
    counting = tok.metadata["counting"]
    assert counting["backend"] == "ray" and counting["partitions"] == 3 and counting["blocks"] >= 6
    passes = tok.metadata["extend_passes"]
    assert len(passes) >= 2 and all(p["actors"] == 1 and p["documents"] > 0 for p in passes)
    err = capsys.readouterr().err
    assert "count 1/3" in err and "filter (ray)" in err and "refine 1 (ray)" in err
    assert "  refine 1: " in err and f"base + {passes[1]['candidates']:,} candidates" in err


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the case above
@pytest.mark.parametrize("kind,partitions,block_size", [("documents", 1, None), ("dataset", 7, 60_000)])
def test_extend_other_inputs_and_layouts(cluster, base, paths, local, kind, partitions, block_size):
    docs = [d for c in ("en", "zh", "code") for d in read_shared_docs(c, "train", max_bytes=1 << 30)]
    want = cnfmce.extend(base, docs, NEW, progress=False)
    same_extension(want, local)  # the documents of the files, in the files' order
    if kind == "documents":
        inputs, field = cnfmce.Documents(docs), "text"
    else:
        inputs = ray.data.from_items([{"body": t} for t in docs], override_num_blocks=9)
        field = "body"
    tok = cnfmce.ray.extend(base, inputs, NEW, progress=False, field=field,
                            num_partitions=partitions, block_size=block_size)
    same_extension(tok, want)


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the case above
def test_extend_options_on_ray_equal_local(cluster, base, paths, tmp_path):
    """selection="refined-non-ascii", raw_vocab_size, rounds and a worker killed mid-round; a
    text with fewer candidates than asked warns as locally."""
    kw = dict(raw_vocab_size=1500, rounds=((1, 10, 0), (11, 20, 5)), selection="refined-non-ascii",
              non_ascii_exponent=1.0, progress=False)
    want = cnfmce.extend(base, paths[:2], 200, **kw)
    marker = tmp_path / "killed"
    tok = cnfmce.extend(base, paths[:2], 200, backend="ray", num_partitions=2, block_size=150_000,
                        _kill_once=str(marker), **kw)
    assert marker.exists()  # a map task of round 2 killed its worker process; Ray retried it
    same_extension(tok, want)
    assert tok.metadata["non_ascii_exponent"] == 1.0
    few = ["ab ab ab cd ab cd"] * 3
    with pytest.warns(RuntimeWarning, match="new tokens instead of 1000") as rec:
        tok = cnfmce.extend(base, few, 1000, backend="ray", progress=False)
    assert [w.filename for w in rec if "instead of" in str(w.message)] == [__file__]  # at the caller
    with pytest.warns(RuntimeWarning, match="new tokens instead of 1000"):
        want = cnfmce.extend(base, few, 1000, progress=False)
    same_extension(tok, want)
    with pytest.raises(ValueError, match="memory_limit"):
        cnfmce.extend(base, paths, 10, backend="ray", memory_limit=1 << 50, progress=False)


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the case above
def test_cli_extend_backend_ray(cluster, paths, tmp_path):
    """cnfmce extend --backend ray --ray-address ADDR (the module's cluster): the local run's
    file, its extension record included (the rest of the metadata holds timings)."""
    from cnfmce.cli import main
    addr = ray.get_runtime_context().gcs_address
    cmd = ["extend", str(fixture_path("vocabs", "bpe8k.tiktoken")), "--new-tokens", "120",
           "--special-token", "<|endoftext|>=9000", "--rounds", "1-8:0,9-16:3", "--quiet"]
    assert main(cmd + ["-o", str(tmp_path / "local.json")] + paths[:2]) == 0
    assert main(cmd + ["-o", str(tmp_path / "ray.json"), "--backend", "ray", "--ray-address", addr]
                + paths[:2]) == 0
    got, want = (json.loads((tmp_path / f).read_text(encoding="utf-8")) for f in ("ray.json", "local.json"))
    assert got.pop("metadata")["extension"] == want.pop("metadata")["extension"]
    assert got == want


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the case above
def test_cli_extend_on_ray_interrupted(cluster, paths, tmp_path):
    """Ctrl-C during a pass on the cluster: the tasks in flight are cancelled, the command ends
    promptly with one line, no output file; the cluster runs the next job."""
    addr = ray.get_runtime_context().gcs_address
    out = tmp_path / "x.json"
    p = subprocess.Popen([sys.executable, "-m", "cnfmce.cli", "extend",
                          str(fixture_path("vocabs", "bpe8k.tiktoken")), "-o", str(out),
                          "--new-tokens", str(NEW), "--backend", "ray", "--ray-address", addr, *paths],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning"),
                         preexec_fn=ctrl_c_as_in_a_terminal)
    err = bytearray()
    reader = threading.Thread(target=lambda: [err.extend(c) for c in iter(lambda: p.stderr.read1(4096), b"")])
    reader.start()
    try:
        t0 = time.monotonic()
        while b"  filter: " not in err:  # the filtering pass is done, a refining pass starts
            assert time.monotonic() - t0 < 180 and p.poll() is None, bytes(err).decode()
            time.sleep(0.02)
        t1 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
        elapsed = time.monotonic() - t1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        reader.join()
    text = bytes(err).decode()
    assert p.returncode == 130, text
    assert "cnfmce: interrupted" in text and "Traceback" not in text, text
    assert "  refine 3: " not in text  # it stopped before the end
    assert elapsed < 45.0, elapsed
    assert not out.exists()
    assert cnfmce.ray.count(paths[:1], raw_vocab_size=100, rounds=((1, 4, 0),), progress=False)


def test_cli_extend_backend_errors(paths, tmp_path, monkeypatch, capsys):
    """One-line errors before any work: --ray-address without --backend ray; Ray not installed."""
    from cnfmce.cli import main
    out = tmp_path / "x.json"
    cmd = ["extend", str(fixture_path("vocabs", "bpe8k.tiktoken")), "-o", str(out), "--new-tokens", "10"]
    assert main(cmd + ["--ray-address", "x:1", paths[0]]) == 1
    assert "--ray-address needs --backend ray" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    assert main(cmd + ["--backend", "ray", paths[0]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cnfmce: error: --backend ray") and "pip install 'cnfmce[ray]'" in err
    assert not out.exists()
