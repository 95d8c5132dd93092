"""cnfmce show (fixed terminal output, ANSI and --no-color) and cnfmce view (the HTML page,
rendered by headless Chromium: screenshot, DOM with one element per token, no network)."""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

import cnfmce
from cnfmce.cli import main as cli_main
from cnfmce.viewer import HTML_BACKGROUNDS, TERMINAL_BACKGROUNDS, display_piece, render_html, segment

TEXT = "is ancient. 中"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """Bytes + "is a" (crosses a unit boundary in "is ancient"), "ncient", " ancient", "is" and
    half of 中 (e4 b8): FMM takes "is a|ncient", MCE "is| ancient"."""
    toks = [bytes([b]) for b in range(256)] + [b"is a", b"ncient", b" ancient", b"is", b"\xe4\xb8"]
    path = tmp_path_factory.mktemp("tok") / "tiny.json"
    cnfmce.Tokenizer.from_tokens(toks, special_tokens={"<|endoftext|>": 300}).save(path)
    return path


def run_cli(args: List[str], capsys) -> str:
    assert cli_main(args) == 0
    return capsys.readouterr().out


def test_show_plain(tiny, capsys):
    out = run_cli(["show", "-t", f"fmm:{tiny}", "-t", os.fspath(tiny), "--no-color", "--ids", TEXT], capsys)
    assert out == (
        "fmm:tiny: 6 tokens, 2.17 chars/token, 1 boundary-crossing\n"
        "is a|ncient|.| |\\xe4\\xb8|\\xad\n"
        "ids: 256 257 46 32 260 173\n"
        "\n"
        "mce:tiny: 6 tokens, 2.17 chars/token, 0 boundary-crossing\n"
        "is| ancient|.| |\\xe4\\xb8|\\xad\n"
        "ids: 259 258 46 32 260 173\n"
        "\n"
        "tokenizer    tokens  chars/token  crossing\n"
        "fmm:tiny          6         2.17         1\n"
        "mce:tiny          6         2.17         0\n")
    # without --ids there is no ids line
    out = run_cli(["show", "-t", os.fspath(tiny), "--no-color", "is"], capsys)
    assert out == "mce:tiny: 1 tokens, 2.00 chars/token, 0 boundary-crossing\nis\n"


def test_show_ansi(tiny, capsys):
    out = run_cli(["show", "-t", f"fmm:{tiny}", "--color", "--ids", "is ancient.\nx"], capsys)
    c = [f"\x1b[30;48;5;{b}" for b in TERMINAL_BACKGROUNDS]
    r = "\x1b[0m"
    assert out == (
        "fmm:tiny: 5 tokens, 2.60 chars/token, 1 boundary-crossing\n"
        f"{c[0]};4mis a{r}{c[1]}mncient{r}{c[2]}m.{r}{c[3]}m\u21b5{r}\n{c[0]}mx{r}\n"
        f"ids: {c[0]}m256{r} {c[1]}m257{r} {c[2]}m46{r} {c[3]}m10{r} {c[0]}m120{r}\n")


def test_show_file_and_errors(tiny, tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text("is", encoding="utf-8")
    assert run_cli(["show", "-t", os.fspath(tiny), "--no-color", "--file", os.fspath(f)], capsys) \
        .endswith("\nis\n")
    assert cli_main(["show", "-t", os.fspath(tiny), "--file", os.fspath(f), "text too"]) == 1
    assert "one of them" in capsys.readouterr().err
    assert cli_main(["show", "-t", os.fspath(tmp_path / "missing.json"), "x"]) == 1
    assert "no such tokenizer file" in capsys.readouterr().err
    f.write_bytes(b"\xff\xfe")
    assert cli_main(["view", "-t", os.fspath(tiny), "--file", os.fspath(f), "-o", os.fspath(tmp_path / "p.html")]) == 1
    assert "not valid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()


def test_display_piece():
    assert display_piece(b"a\tb\r\n") == "a\u21e5b\u240d\u21b5\n"
    assert display_piece(b"\x00\xe4\xb8") == "\\x00\\xe4\\xb8"
    assert display_piece("中".encode()) == "中"


def test_segmentation_of_normalising_tokenizer(qwen):
    """Spans and crossings follow the tokens' own bytes; an HF tokenizer that normalises is
    flagged (its pieces need not spell the text)."""
    seg = segment(cnfmce.adapters.CnfmceEncoder(qwen), "Hello world")
    assert seg.matches_text and b"".join(seg.pieces) == b"Hello world"
    assert seg.starts == [0, 5] and seg.ids == qwen.encode("Hello world")


# --- the HTML page --------------------------------------------------------------------------------

class _Tokens(html.parser.HTMLParser):
    """The token spans of each panel of a page (or of Chromium's --dump-dom)."""

    def __init__(self) -> None:
        super().__init__()
        self.panels: Dict[str, List[Tuple[int, Set[str], str]]] = {}
        self._panel = None
        self._span = None
        self.urls: List[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href", "action", "data", "poster", "srcset"):
            if k in a:
                self.urls.append(a[k])
        if tag == "section" and "panel" in (a.get("class") or ""):
            self._panel = a["data-tokenizer"]
            self.panels[self._panel] = []
        elif tag == "span" and self._panel and "t" in (a.get("class") or "").split():
            self._span = [int(a["data-id"]), set(a["class"].split()), a["data-b"], ""]

    def handle_data(self, data):
        if self._span is not None:
            self._span[3] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._span is not None:
            i, cls, b, text = self._span
            self.panels[self._panel].append((i, cls, b, text))
            self._span = None
        elif tag == "section":
            self._panel = None


def parse_tokens(page: str) -> _Tokens:
    p = _Tokens()
    p.feed(page)
    return p


def test_page_structure(tiny):
    seg_f = segment(f"fmm:{tiny}", TEXT)
    seg_m = segment(os.fspath(tiny), TEXT)
    page = render_html([seg_f, seg_m], TEXT)
    p = parse_tokens(page)
    assert list(p.panels) == ["fmm:tiny", "mce:tiny"]
    for seg in (seg_f, seg_m):
        toks = p.panels[seg.name]
        assert [t[0] for t in toks] == seg.ids
        assert [bytes.fromhex(t[2]) for t in toks] == seg.pieces
        assert [("x" in t[1]) for t in toks] == seg.crossing
    assert [t[0] for t in p.panels["fmm:tiny"] if "x" in t[1]] == [256]  # "is a"


def chromium() -> str:
    exe = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if exe is None:
        if os.environ.get("CNFMCE_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required here (CNFMCE_REQUIRE_CHROMIUM=1)")
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    return exe


def render(page: Path, tmp: Path, tag: str) -> Tuple[str, Path, List[str]]:
    """Loads ``page`` in headless Chromium: (DOM after scripts ran, screenshot, URLs that the
    page itself requested, from Chromium's NetLog)."""
    shot, netlog = tmp / f"{tag}.png", tmp / f"{tag}.netlog.json"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--hide-scrollbars",
           f"--user-data-dir={tmp / (tag + '-profile')}", "--window-size=1200,800",
           f"--screenshot={shot}", "--dump-dom", f"--log-net-log={netlog}", page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    log = json.loads(netlog.read_text())
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requested = []
    for e in log["events"]:
        p = e.get("params") or {}
        # requests made by a page carry its origin; the browser's own background requests
        # (component updates, ...) have "not an origin"
        if types.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in p \
                and p.get("initiator") != "not an origin":
            requested.append(p["url"])
    return r.stdout, shot, requested


def png_pixels(path: Path) -> Tuple[int, int, Set[Tuple[int, int, int]]]:
    """The set of RGB colours of an 8-bit RGB/RGBA PNG (a small decoder: no imaging library)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colours = set()
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(tuple(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return w, h, colours


def test_view_in_headless_chromium(tiny, tmp_path, capsys):
    text = "The co-advisor said: is ancient.\nSecond line 12345 and 中文."
    page = tmp_path / "page.html"
    assert cli_main(["view", "-t", f"fmm:{tiny}", "-t", os.fspath(tiny), "--text", text,
                     "-o", os.fspath(page)]) == 0
    src = page.read_text(encoding="utf-8")
    # self-contained: no URL to load anything from, and a policy that forbids every fetch
    static = parse_tokens(src)
    assert static.urls == []
    assert not re.search(r"https?:|//[a-z0-9]|url\(|@import|<link|<img|<iframe|<object", src, re.I)
    assert re.search(r"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';", src)

    dom, shot, requested = render(page, tmp_path, "page")
    assert requested == []
    assert re.search(r'<body[^>]*data-script="ran"', dom)  # the inline script ran under the policy
    p = parse_tokens(dom)
    want = {n: cnfmce.Tokenizer.load(tiny, algorithm=a).encode(text) for n, a in
            (("fmm:tiny", "fmm"), ("mce:tiny", "mce"))}
    assert {n: [t[0] for t in toks] for n, toks in p.panels.items()} == want
    joined = {n: b"".join(bytes.fromhex(t[2]) for t in toks) for n, toks in p.panels.items()}
    assert set(joined.values()) == {text.encode()}
    assert any("x" in t[1] for t in p.panels["fmm:tiny"])
    assert not any("x" in t[1] for t in p.panels["mce:tiny"])
    w, h, colours = png_pixels(shot)
    assert (w, h) == (1200, 800)
    for hexcol in HTML_BACKGROUNDS:  # the token backgrounds are on screen
        rgb = tuple(int(hexcol[k:k + 2], 16) for k in (1, 3, 5))
        assert any(max(abs(x - y) for x, y in zip(rgb, c)) <= 2 for c in colours), hexcol

    # the check above can fail: the same page without its policy and with one external image
    # makes Chromium request that image (and nothing else)
    probe = "http://127.0.0.1:9/probe.png"
    leaky = tmp_path / "leaky.html"
    leaky.write_text(re.sub(r"<meta http-equiv=\"Content-Security-Policy\"[^>]*>", "", src)
                     .replace("</body>", f'<img src="{probe}"></body>'), encoding="utf-8")
    _, _, requested = render(leaky, tmp_path, "leaky")
    assert requested == [probe]
