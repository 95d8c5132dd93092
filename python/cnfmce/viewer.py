"""Seeing a segmentation: ``cnfmce show`` (terminal) and ``cnfmce view`` (one static HTML page).

:func:`segment` runs one tokenizer over a text and returns a :class:`Segmentation`: the ids, the
exact bytes of every token, where each token starts in the byte stream, and which tokens cross a
unit boundary. :func:`render_terminal` prints segmentations of the same text one after the other
(tokens in alternating background colours, ``--no-color``: tokens separated by ``|``);
:func:`render_html` writes them side by side in one self-contained page (inline CSS and one inline
script allowed by its hash, a Content-Security-Policy that forbids every fetch, no external URL),
where hovering a token shows its id and bytes and highlights the tokens of the other tokenizers
that overlap it.

Tokenizer specs (``-t``), as in ``cnfmce encode``: a cnfmce file, a ``.tiktoken`` file or a
Hugging Face ``tokenizer.json`` is a cnfmce tokenizer over that vocabulary (its own algorithm for
cnfmce files, MCE for the others). A prefix chooses otherwise: ``mce:PATH`` / ``fmm:PATH`` (cnfmce
with that algorithm), ``tiktoken:NAME`` or ``tiktoken:PATH`` (tiktoken's own BPE), ``hf:PATH``
(Hugging Face ``tokenizers``), ``sp:PATH`` (SentencePiece); see
:func:`cnfmce.adapters.load_encoder`.

Boundary crossing (SPEC section 2 units, the ``boundary_crossing_rate`` of
:mod:`cnfmce.evaluate`): a token covering bytes ``[i, j)`` crosses when it touches two or more
units and does not both start at a unit start and end at a unit end (``"s a"`` in ``"is a"``).
Tokens made of whole units (``" is"``) and tokens inside one unit are not marked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import numpy as np

from . import _core
from .errors import CorpusError

__all__ = ["Segmentation", "segment", "load_viewer_encoder", "render_terminal", "render_html",
           "read_text_file", "display_piece"]


@dataclass
class Segmentation:
    """One tokenizer's segmentation of a text.

    ``pieces[k]`` is the exact bytes of token ``ids[k]``; ``starts[k]`` its first byte in the
    concatenation of the pieces (``stream``). ``crossing[k]`` marks the boundary-crossing tokens;
    ``special[k]`` the special tokens. ``matches_text`` is False when the tokenizer normalises the
    text (its pieces do not spell the text's UTF-8 bytes), and then the crossings are computed on
    the pieces."""

    name: str
    ids: List[int]
    pieces: List[bytes]
    starts: List[int]
    crossing: List[bool]
    special: List[bool]
    stream: bytes
    matches_text: bool
    chars: int

    @property
    def tokens(self) -> int:
        return len(self.ids)

    @property
    def chars_per_token(self) -> float:
        return self.chars / len(self.ids) if self.ids else 0.0

    @property
    def crossings(self) -> int:
        return int(sum(self.crossing))


def load_viewer_encoder(spec: str) -> Any:
    """An :class:`cnfmce.adapters.Encoder` for a ``-t`` spec (see the module docstring)."""
    from .adapters import CnfmceEncoder, load_encoder
    s = os.fspath(spec)
    prefix, sep, rest = s.partition(":")
    if sep and rest and prefix.lower() in ("mce", "fmm", "cnfmce", "tiktoken", "hf", "sp",
                                           "sentencepiece"):
        return load_encoder(s)
    if not os.path.exists(s):
        raise FileNotFoundError(f"no such tokenizer file: {s}")
    if os.path.isdir(s):
        raise IsADirectoryError(f"{s} is a directory, not a tokenizer file")
    from .loading import load_tokenizer_file
    tok = load_tokenizer_file(s)
    base = os.path.basename(s)
    for ext in (".gz", ".json", ".tiktoken"):
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    return CnfmceEncoder(tok, f"{tok.algorithm}:{base}")


def _crossing_flags(stream: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per token: touches >= 2 units and is not made of whole units (module docstring)."""
    n = len(stream)
    if not len(starts):
        return np.zeros(0, dtype=bool)
    flag = np.ones(n + 1, dtype=bool)
    flag[:n] = np.frombuffer(_core.unit_starts(stream), dtype=np.uint8) != 0
    unit = np.cumsum(flag[:n]) - 1
    out = np.zeros(len(starts), dtype=bool)
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    touched = unit[e - 1] - unit[s] + 1
    out[keep] = (touched >= 2) & ~(flag[s] & flag[e])
    return out


def segment(encoder: Any, text: str, name: Optional[str] = None) -> Segmentation:
    """Encodes ``text`` with ``encoder`` (an Encoder, a :class:`cnfmce.Tokenizer` or a spec)."""
    from .adapters import Encoder, as_encoder
    if isinstance(encoder, (str, os.PathLike)):
        encoder = load_viewer_encoder(os.fspath(encoder))
    elif not isinstance(encoder, Encoder):
        encoder = as_encoder(encoder)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    ids = [int(i) for i in encoder.encode(text)]
    pieces = [encoder.token_bytes(i) for i in ids]
    specials: set = set()
    tok = getattr(encoder, "tokenizer", None)
    if encoder.kind == "cnfmce":
        specials = set(tok.special_tokens.values())
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    stream = b"".join(pieces)
    crossing = _crossing_flags(stream, starts, ends)
    return Segmentation(name=name or encoder.name, ids=ids, pieces=pieces,
                        starts=[int(x) for x in starts], crossing=[bool(x) for x in crossing],
                        special=[i in specials for i in ids], stream=stream,
                        matches_text=stream == text.encode("utf-8"), chars=len(text))


def read_text_file(path: str) -> str:
    """The UTF-8 text of ``path`` (``.gz`` decompressed); a clear error otherwise."""
    from .corpus import open_binary
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory, not a text file")
    try:
        with open_binary(path) as fh:
            data = fh.read()
    except (EOFError, OSError) as e:
        raise CorpusError(f"{path}: cannot read ({e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not valid UTF-8 at byte {e.start}") from None


# --- how a token looks --------------------------------------------------------------------------

_VISIBLE = {"\n": "\u21b5\n", "\t": "\u21e5", "\r": "\u240d"}  # ↵ (then the line break), ⇥, ␍


def display_piece(piece: bytes) -> str:
    """The text shown for one token: its characters; bytes that are not whole UTF-8 characters
    as ``\\xNN``; line breaks as ``↵`` followed by the break, tabs as ``⇥``, carriage returns as
    ``␍``, other control characters as ``\\xNN``."""
    s = piece.decode("utf-8", errors="backslashreplace")
    out = []
    for c in s:
        if c in _VISIBLE:
            out.append(_VISIBLE[c])
        elif c < " " or c == "\x7f":
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "".join(out)


def _hex(piece: bytes) -> str:
    return " ".join(f"{b:02x}" for b in piece)


# --- terminal -----------------------------------------------------------------------------------

# Pastel backgrounds (xterm 256-colour palette) with black text; alternate token by token.
TERMINAL_BACKGROUNDS = (153, 223, 157, 218)
_RESET = "\x1b[0m"


def _sgr(k: int, crossing: bool, special: bool) -> str:
    codes = ["30", f"48;5;{TERMINAL_BACKGROUNDS[k % len(TERMINAL_BACKGROUNDS)]}"]
    if crossing:
        codes.append("4")  # underlined
    if special:
        codes.append("1")  # bold
    return "\x1b[" + ";".join(codes) + "m"


def _colour_run(text: str, sgr: str) -> str:
    # Close the colour before every line break so backgrounds do not bleed to the line end.
    return "\n".join(sgr + part + _RESET if part else "" for part in text.split("\n"))


def _summary_line(seg: Segmentation) -> str:
    line = (f"{seg.name}: {seg.tokens:,} tokens, {seg.chars_per_token:.2f} chars/token, "
            f"{seg.crossings:,} boundary-crossing")
    if not seg.matches_text:
        line += " (this tokenizer normalises the text: its tokens' bytes are shown)"
    return line


def render_terminal(segs: Sequence[Segmentation], *, color: bool = True, ids: bool = False) -> str:
    """The segmentations as terminal text, one block per tokenizer.

    Each block: a summary line (tokens, characters per token, boundary-crossing tokens), then the
    text with tokens in alternating background colours (crossing tokens underlined, special
    tokens bold) or, with ``color=False``, separated by ``|``; with ``ids`` a line of ids (coloured
    like their tokens). Several tokenizers end with a comparison table."""
    blocks = []
    for seg in segs:
        lines = [_summary_line(seg)]
        if color:
            body = "".join(_colour_run(display_piece(p), _sgr(k, x, sp))
                           for k, (p, x, sp) in enumerate(zip(seg.pieces, seg.crossing, seg.special)))
        else:
            body = "|".join(display_piece(p) for p in seg.pieces)
        lines.append(body)
        if ids:
            if color:
                lines.append("ids: " + " ".join(_sgr(k, False, False) + str(i) + _RESET
                                                for k, i in enumerate(seg.ids)))
            else:
                lines.append("ids: " + " ".join(str(i) for i in seg.ids))
        blocks.append("\n".join(lines))
    out = "\n\n".join(blocks)
    if len(segs) > 1:
        w = max(9, *(len(s.name) for s in segs))
        rows = [f"{'tokenizer':<{w}}  {'tokens':>8}  {'chars/token':>11}  {'crossing':>8}"]
        for s in segs:
            rows.append(f"{s.name:<{w}}  {s.tokens:>8,}  {s.chars_per_token:>11.2f}  {s.crossings:>8,}")
        out += "\n\n" + "\n".join(rows)
    return out + "\n"


# --- HTML ---------------------------------------------------------------------------------------

# Token backgrounds in the page, alternating like the terminal's.
HTML_BACKGROUNDS = ("#cfe3ff", "#ffe1c2", "#cff5d5", "#ffd1e6")

_CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; }
body { margin: 1.2rem; background: #fafafa; }
h1 { font-size: 1.25rem; margin: 0 0 .3rem 0; }
p.note { margin: .2rem 0 .8rem 0; color: #555; font-size: .9rem; }
table.summary { border-collapse: collapse; margin-bottom: 1rem; font-size: .9rem; }
table.summary th, table.summary td { padding: .2rem .7rem; border-bottom: 1px solid #ddd; text-align: right; }
table.summary th:first-child, table.summary td:first-child { text-align: left; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(20rem, 1fr)); gap: 1rem; }
section.panel { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: .6rem .8rem; min-width: 0; }
section.panel h2 { font-size: 1rem; margin: 0; word-break: break-all; }
section.panel p.stats { margin: .15rem 0 .5rem 0; color: #555; font-size: .85rem; }
div.text { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .95rem;
  line-height: 1.75; white-space: pre-wrap; overflow-wrap: anywhere; }
span.t { position: relative; border-radius: 3px; padding: 1px 0; }
span.c0 { background: #cfe3ff; } span.c1 { background: #ffe1c2; }
span.c2 { background: #cff5d5; } span.c3 { background: #ffd1e6; }
span.t.x, span.xl { box-shadow: inset 0 -3px 0 #d7263d; }
span.t.sp { font-weight: bold; }
span.t.bytes { color: #7a3e00; }
span.t.hl { outline: 2px solid #333; }
span.t:hover { outline: 2px solid #000; z-index: 2; }
span.t:hover::after { content: "id " attr(data-id) "  \\00b7  bytes " attr(data-b) attr(data-k);
  position: absolute; left: 0; top: 1.9em; z-index: 3; white-space: pre; font-size: .8rem;
  background: #222; color: #fff; padding: .2rem .45rem; border-radius: 4px; pointer-events: none; }
span.legend { padding: 0 .3rem; border-radius: 3px; }
"""

# Hovering a token outlines the tokens of the other panels that overlap its bytes.
_SCRIPT = """
(function () {
  var panels = Array.prototype.slice.call(document.querySelectorAll("section.panel[data-aligned='1']"));
  function clear() {
    document.querySelectorAll("span.t.hl").forEach(function (e) { e.classList.remove("hl"); });
  }
  panels.forEach(function (panel) {
    panel.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest("span.t");
      if (!t) { return; }
      clear();
      var s = +t.dataset.s, e = +t.dataset.e;
      panels.forEach(function (other) {
        if (other === panel) { return; }
        other.querySelectorAll("span.t").forEach(function (u) {
          if (+u.dataset.s < e && +u.dataset.e > s) { u.classList.add("hl"); }
        });
      });
    });
    panel.addEventListener("mouseleave", clear);
  });
  document.body.dataset.script = "ran";  // lets a test see that the policy allowed the script
})();
"""


def _script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src '{hash}'; img-src 'none'; "
       "font-src 'none'; connect-src 'none'; base-uri 'none'; form-action 'none'")


def _panel(seg: Segmentation) -> str:
    esc = html.escape
    spans = []
    for k, (i, p, s, x, sp) in enumerate(zip(seg.ids, seg.pieces, seg.starts, seg.crossing, seg.special)):
        cls = f"t c{k % len(HTML_BACKGROUNDS)}"
        kind = ""
        if x:
            cls += " x"
            kind += "  \u00b7  crosses a unit boundary"
        if sp:
            cls += " sp"
            kind += "  \u00b7  special"
        shown = display_piece(p)
        if "\\x" in shown:
            cls += " bytes"
        spans.append(f'<span class="{cls}" data-id="{i}" data-s="{s}" data-e="{s + len(p)}" '
                     f'data-b="{_hex(p)}" data-k="{esc(kind)}">{esc(shown)}</span>')
    stats = (f"{seg.tokens:,} tokens \u00b7 {seg.chars_per_token:.2f} chars/token \u00b7 "
             f"{seg.crossings:,} boundary-crossing")
    if not seg.matches_text:
        stats += " \u00b7 normalises the text (its tokens' bytes are shown)"
    return (f'<section class="panel" data-tokenizer="{esc(seg.name)}" '
            f'data-aligned="{1 if seg.matches_text else 0}">\n'
            f'<h2>{esc(seg.name)}</h2>\n<p class="stats">{stats}</p>\n'
            f'<div class="text">{"".join(spans)}</div>\n</section>')


def render_html(segs: Sequence[Segmentation], text: str, *, title: str = "cnfmce segmentation") -> str:
    """One self-contained HTML page showing ``segs`` (segmentations of ``text``) side by side.

    Every token is one ``<span class="t ...">`` with ``data-id`` (its id), ``data-b`` (its bytes
    in hex) and ``data-s``/``data-e`` (its byte range); boundary-crossing tokens have the class
    ``x`` (red underline), special tokens ``sp``. The page loads nothing: no external URL, and a
    Content-Security-Policy that forbids every fetch (the one inline script is allowed by its
    SHA-256 hash)."""
    esc = html.escape
    nbytes = len(text.encode("utf-8"))
    rows = "\n".join(
        f"<tr><td>{esc(s.name)}</td><td>{s.tokens:,}</td><td>{s.chars_per_token:.2f}</td>"
        f"<td>{s.crossings:,}</td></tr>" for s in segs)
    legend = "".join(f'<span class="legend c{k}">tok</span>' for k in range(len(HTML_BACKGROUNDS)))
    panels = "\n".join(_panel(s) for s in segs)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP.format(hash=_script_hash(_SCRIPT))}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="cnfmce view">
<title>{esc(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{esc(title)}</h1>
<p class="note">{len(text):,} characters, {nbytes:,} bytes. Tokens alternate colours {legend};
hover one for its id and bytes (the overlapping tokens of the other tokenizers are outlined).
<span class="legend xl">Underlined in red</span>: the token crosses a unit boundary (it spans two or
more word-like units without starting and ending on their edges).</p>
<table class="summary">
<tr><th>tokenizer</th><th>tokens</th><th>chars/token</th><th>boundary-crossing</th></tr>
{rows}
</table>
<main>
{panels}
</main>
<script>{_SCRIPT}</script>
</body>
</html>
"""
