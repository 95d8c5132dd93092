"""Long runs of one byte on o200k_base: the encoder's periodic shortcut (src/runs.rs) against the
pure-Python reference of SPEC section 2, and, for runs too long for the reference, against the
encoder with the shortcut turned off (``CNFMCE_RUN_SHORTCUT=0``, read once per process: a child
process).

o200k_base's longest token has 128 bytes, so the shortcut handles runs of at least
4 * 128 + 128 = 640 bytes; the lengths below straddle that and the multiples of 128 (the period
of a run of spaces), and the long runs cross binades of D and the shortcut's 1 MiB segments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import reference as ref

SIDES = ["", "x", "def f():\n", "12", "\n", "中文", "ab", "-->", "é"]


@pytest.fixture(scope="module")
def o200k_vocab(o200k):
    return {t: i for i, t in o200k.token_bytes().items()}


def _lengths():
    out = set(range(1, 601, 23))
    for k in range(5, 12):
        out.update(128 * k + d for d in (-1, 0, 1, 63))
    out.update((639, 640, 641, 700))
    return sorted(out)


@pytest.mark.parametrize("byte,every,options", [
    (" ", 3, {}),
    (" ", 5, {"boundary_penalty": float("inf")}),
    (" ", 5, {"token_preference": False}),
    ("-", 2, {}),
    ("\t", 4, {"boundary_penalty": 0.3}),
    ("=", 5, {}),
    ("0", 6, {}),
    ("\n", 6, {}),
    ("a", 5, {}),
])
def test_runs_match_reference(o200k, o200k_vocab, byte, every, options):
    tok = o200k.with_options(**options) if options else o200k
    lam = options.get("boundary_penalty", 0.05)
    pref = options.get("token_preference", True)
    lengths = _lengths()[::every]
    for k, n in enumerate(lengths):
        pre, post = SIDES[k % len(SIDES)], SIDES[(3 * k + 1) % len(SIDES)]
        text = pre + byte * n + post
        want = ref.mce_encode(o200k_vocab, text.encode(), lam=lam, token_preference_on=pref)
        assert tok.encode(text) == want, (repr(byte), n, pre, post, options)
    # Invalid UTF-8 next to the run (encode_bytes only).
    for n in (640, 1281):
        data = b"\xff" + byte.encode() * n + b"\x80"
        want = ref.mce_encode(o200k_vocab, data, lam=lam, token_preference_on=pref)
        assert tok.encode_bytes(data) == want, (repr(byte), n, "invalid UTF-8 around")


LONG = {
    "spaces": "def f():\n" + " " * 1_000_003 + "return x",
    "segments": "-" * ((1 << 20) * 2 + 333) + "->",
    "tabs_letters": "\t" * 250_001 + "a" * 130_000 + " b",
    "mixed": ("x = 1" + " " * 70_000 + "\n" + "=" * 20_000 + "0" * 9_000 + "\n\n") * 3,
}
# Every residue class of the path modulo the period shows up in some run (one wrong copied
# choice off the path of one length is on the path of another).
LONG.update({f"spaces+{d}": "a" + " " * (200_000 + d) for d in range(0, 128, 13)})

_CHILD = """
import json, sys
import cnfmce
tok = cnfmce.Tokenizer.from_tiktoken(sys.argv[1])
texts = json.loads(sys.stdin.read())
json.dump({k: tok.encode(v) for k, v in texts.items()}, sys.stdout)
"""


def test_long_runs_match_the_plain_program(o200k):
    from conftest import shared_path
    import cnfmce
    # The child imports the same package as this process (installed or in the work tree).
    here = str(Path(cnfmce.__file__).resolve().parent.parent)
    env = dict(os.environ, CNFMCE_RUN_SHORTCUT="0",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(shared_path("vocabs", "o200k_base.tiktoken"))],
                         input=json.dumps(LONG), capture_output=True, text=True, env=env, check=True, timeout=600)
    plain = json.loads(out.stdout)
    for name, text in LONG.items():
        assert o200k.encode(text) == plain[name], name
        assert o200k.encode_bytes(text.encode()) == plain[name], name
    names = list(LONG)
    assert o200k.encode_batch([LONG[k] for k in names], num_threads=2) == [plain[k] for k in names]
    assert o200k.encode_bytes_batch([LONG[k].encode() for k in names], num_threads=2) == [plain[k] for k in names]
    # The shortcut changes nothing that decodes.
    assert o200k.decode(plain["spaces"]) == LONG["spaces"]
