"""cnfmce inside transformers: the cost of the `transformers` tokenizer class.

Measures, on the shared en test set, in the same run and interleaved (one round = every case once,
in a rotating order), MB/s of UTF-8 input:

* `encode_batch`    — cnfmce's own `Tokenizer.encode_batch(texts)` (MCE, Qwen3.5's vocabulary);
* `wrapper`         — `tok(texts)` through `cnfmce.hf.CnfmceTokenizer` over the same tokenizer
                      (input_ids + attention_mask, offsets off);
* `hf-fast`         — `tok(texts)` through `transformers.PreTrainedTokenizerFast` loaded from
                      Qwen3.5's tokenizer.json (Hugging Face `tokenizers`, BPE);
* with `--offsets`, the last two again with `return_offsets_mapping=True`;
* with `--padded`, both with `padding=True, return_tensors="np"`;
* with `--word-ids`, both with `return_offsets_mapping=True` and then `word_ids(i)` of every row
  (the wrapper's encodings are made on that first request, from the core's offsets and units).

Reports the median and the range of `--repeats` rounds (>= 3), the per-round ratio
wrapper / encode_batch (target: <= 1.3x time) and wrapper vs hf-fast (target: faster), the machine
load during each case (other processes' cores from /proc/stat) and the library versions.

    python benches/hf.py [--repeats 5] [--offsets] [--padded] [--word-ids] [--wait-quiet 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
import harness  # noqa: E402
from harness import OUT, CpuWatch, f1, f2, log, machine_info, table, wait_quiet  # noqa: E402

SHARED = Path(os.environ.get("CNFMCE_SHARED", str(Path(__file__).resolve().parent.parent.parent / "shared")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(SHARED), help="the shared data directory")
    ap.add_argument("--repeats", type=int, default=5, help="rounds (>= 3)")
    ap.add_argument("--offsets", action="store_true", help="also with return_offsets_mapping=True")
    ap.add_argument("--padded", action="store_true", help="also with padding=True, return_tensors='np'")
    ap.add_argument("--word-ids", action="store_true",
                    help="also with return_offsets_mapping=True and word_ids() of every row")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="before each round, wait up to S s for the machine to be quiet")
    ap.add_argument("--json", default=str(OUT / "hf.json"), help="where to write the results")
    args = ap.parse_args()
    if args.repeats < 3:
        ap.error("--repeats must be >= 3")
    harness.WAIT_QUIET["max_s"] = args.wait_quiet

    import tokenizers
    import transformers

    import cnfmce

    info = machine_info(["transformers", "tokenizers", "datasets"])
    shared = Path(args.shared)
    docs, nbytes = harness.read_jsonl_docs(shared / "corpora" / "en" / "test.jsonl.gz")
    vocab = shared / "vocabs" / "qwen3.5.tokenizer.json.gz"
    log(f"{len(docs)} documents, {nbytes / 1e6:.2f} MB; loading Qwen3.5 ({vocab.name})")
    core = cnfmce.Tokenizer.from_hf(vocab)
    wrapper = core.to_transformers()
    with gzip.open(vocab, "rt", encoding="utf-8") as fh:
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer.from_str(fh.read()))

    # Sanity: the wrapper gives the core's ids; both give masks.
    want = core.encode_batch(docs)
    got = wrapper(docs)
    assert got["input_ids"] == want and got["attention_mask"] == [[1] * len(w) for w in want]
    n_tokens = {"cnfmce-mce": sum(map(len, want)),
                "hf-bpe": sum(map(len, fast(docs, add_special_tokens=False)["input_ids"]))}

    cases: Dict[str, Callable[[], Any]] = {
        "encode_batch": lambda: core.encode_batch(docs),
        "wrapper": lambda: wrapper(docs),
        "hf-fast": lambda: fast(docs),
    }
    if args.offsets:
        cases["wrapper+offsets"] = lambda: wrapper(docs, return_offsets_mapping=True)
        cases["hf-fast+offsets"] = lambda: fast(docs, return_offsets_mapping=True)
    if args.word_ids:
        def with_word_ids(t: Any) -> Any:
            enc = t(docs, return_offsets_mapping=True)
            return [enc.word_ids(i) for i in range(len(docs))]
        cases["wrapper+offsets+word_ids"] = lambda: with_word_ids(wrapper)
        cases["hf-fast+offsets+word_ids"] = lambda: with_word_ids(fast)
    if args.padded:
        cases["wrapper+pad+np"] = lambda: wrapper(docs, padding=True, return_tensors="np")
        cases["hf-fast+pad+np"] = lambda: fast(docs, padding=True, return_tensors="np")
    wrapper.pad_token = wrapper.pad_token or "<|endoftext|>"
    fast.pad_token = fast.pad_token or "<|endoftext|>"
    for fn in cases.values():  # warm up (int caches, thread pools, lazy tables)
        fn()

    names = list(cases)
    times: Dict[str, List[float]] = {k: [] for k in names}
    load: Dict[str, List[float]] = {k: [] for k in names}
    for r in range(args.repeats):
        wait_quiet(f"round {r + 1}", key="round")
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            gc.collect()
            w = CpuWatch()
            t0 = time.perf_counter()
            out = cases[name]()
            dt = time.perf_counter() - t0
            stats = w.stop()
            del out
            times[name].append(dt)
            load[name].append(stats["other_cores"])
        log("round {}: ".format(r + 1) + ", ".join(f"{k} {nbytes / 1e6 / times[k][-1]:.1f}" for k in names)
            + " MB/s")

    def mbs(t: float) -> float:
        return nbytes / 1e6 / t

    rows = []
    for name in names:
        ts = times[name]
        rows.append([name, f1(mbs(statistics.median(ts))), f"{f1(mbs(max(ts)))}–{f1(mbs(min(ts)))}",
                     f2(statistics.median(load[name]))])
    ratio_enc = [w / e for w, e in zip(times["wrapper"], times["encode_batch"])]
    ratio_fast = [f / w for f, w in zip(times["hf-fast"], times["wrapper"])]
    result = {
        "docs": len(docs), "bytes": nbytes, "repeats": args.repeats, "tokens": n_tokens,
        "seconds": times, "other_cores": load,
        "median_mb_s": {k: mbs(statistics.median(v)) for k, v in times.items()},
        "wrapper_over_encode_batch": {"median": statistics.median(ratio_enc), "max": max(ratio_enc),
                                      "per_round": ratio_enc},
        "hf_fast_over_wrapper": {"median": statistics.median(ratio_fast), "min": min(ratio_fast),
                                 "per_round": ratio_fast},
        "wait_quiet": harness.WAIT_QUIET["log"], "machine": info, "loadavg_at_end": harness.loadavg(),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))
    print(f"en test set: {len(docs)} documents, {nbytes / 1e6:.2f} MB; Qwen3.5 vocabulary; "
          f"{args.repeats} rounds; transformers {info['transformers']}, tokenizers {info['tokenizers']}; "
          f"cnfmce core {info['cnfmce_core_sha256']} (git {info.get('git', '?')})\n")
    print(table(["case", "MB/s (median)", "range", "other cores (median)"], rows, align="lrrr"))
    print(f"\nwrapper time / encode_batch time, per round: median {ratio_enc and statistics.median(ratio_enc):.3f}, "
          f"max {max(ratio_enc):.3f} (target <= 1.3)")
    print(f"hf-fast time / wrapper time, per round: median {statistics.median(ratio_fast):.2f}, "
          f"min {min(ratio_fast):.2f} (target > 1)")
    print(f"tokens: {n_tokens}; load average {info['loadavg_at_start']} -> {harness.loadavg()}")


if __name__ == "__main__":
    main()
