"""docs/results/ and experiments/: every page lists the command that made it; each command names
a script that is still in experiments/, or a finished trial kept only as its recorded page
(``common.FINISHED_TRIALS``: a frozen record that names the retired script and a commit that has
it); every remaining script has its page, which lists its command; every script imports, uses the
one argument parser and runner of experiments/common.py, and every page of a remaining script with
a JSON renders from that JSON byte for byte as it is committed (no training: the renderers read
only the recorded JSON); the index links every page."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"
RESULTS = REPO / "docs" / "results"
sys.path.insert(0, str(EXPERIMENTS))
C = pytest.importorskip("common")

PAGES = sorted(p for p in RESULTS.glob("*.md"))
SCRIPTS = sorted(p.stem for p in EXPERIMENTS.glob("*.py"))
LIBRARIES = {"common"}  # helpers of the scripts, no page of their own
PAGE_OF = {"summary": "README"}  # scripts whose page has another name (the index)
COMMAND = re.compile(r"python experiments/([a-z_0-9]+)\.py")
# pages not rendered from their own JSON: the index (summary.py reads the four experiments' JSON)
NOT_FROM_OWN_JSON = {"README"}


def script_of(page: str) -> str:
    """The script of a page: same name, or the name less a size suffix (``byte_fallback_128k``)."""
    if page in SCRIPTS:
        return page
    for s, p in PAGE_OF.items():
        if p == page:
            return s
    return page.rsplit("_", 1)[0]


def test_every_page_lists_its_commands():
    assert len(PAGES) > 20
    for page in PAGES:
        names = set(COMMAND.findall(page.read_text(encoding="utf-8")))
        assert names, f"{page.name} names no `python experiments/...` command"
        for n in names:
            finished = [k for k, (files, _, _) in C.FINISHED_TRIALS.items() if f"{n}.py" in files.split(", ")]
            assert n in SCRIPTS or finished, f"{page.name}: experiments/{n}.py is neither there nor a finished trial"


def test_finished_trials_are_recorded_pages_without_scripts():
    for page, (files, commit, what) in C.FINISHED_TRIALS.items():
        assert (RESULTS / f"{page}.md").exists() and re.fullmatch(r"[0-9a-f]{7,40}", commit) and what
        for f in files.split(", "):
            assert not (EXPERIMENTS / f).exists(), f"{f} of a finished trial is still in experiments/"
        assert script_of(page) not in SCRIPTS, f"{page}.md is a finished trial's page and a script's"


@pytest.mark.parametrize("page", sorted(C.FINISHED_TRIALS))
def test_a_finished_trials_page_says_how_it_was_made(page):
    """In its header (a bullet before the first section) and in its JSON: the retired files that
    made it and the commit that has them."""
    files, commit, _ = C.FINISHED_TRIALS[page]
    line = C.retired_line(page)
    for f in files.split(", "):
        assert f"experiments/{f}" in line
    assert f"`git show {commit}:experiments/{files.split(', ')[0]}`" in line
    lines = (RESULTS / f"{page}.md").read_text(encoding="utf-8").splitlines()
    header = lines[:next((i for i, x in enumerate(lines) if x.startswith("## ")), len(lines))][:6]
    assert f"* {line}" in header, f"{page}.md: no '* {line}' in its header"
    js = RESULTS / f"{page}.json"
    if js.exists():
        assert json.loads(js.read_text(encoding="utf-8"))["retired"] == line


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=60)


def test_the_named_commits_have_the_retired_scripts():
    """``git cat-file -e COMMIT:experiments/FILE`` for every retired file; skipped outside a git
    checkout (or in a shallow clone, which lacks the history)."""
    if shutil.which("git") is None or _git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        pytest.skip("not a git checkout")
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone: the retired scripts' commits are not here")
    for page, (files, commit, _) in C.FINISHED_TRIALS.items():
        for f in files.split(", "):
            r = _git("cat-file", "-e", f"{commit}:experiments/{f}")
            assert r.returncode == 0, f"{page}: commit {commit} has no experiments/{f}"


def test_every_script_has_a_page_that_lists_its_command_or_is_a_library():
    pages = {p.stem for p in PAGES}
    for s in SCRIPTS:
        if s in LIBRARIES:
            continue
        own = {p for p in pages if script_of(p) == s}
        assert own, f"experiments/{s}.py regenerates no docs/results page"
        for p in own:
            text = (RESULTS / f"{p}.md").read_text(encoding="utf-8")
            assert s in COMMAND.findall(text), f"{p}.md does not list `python experiments/{s}.py`"


def test_the_index_links_every_page():
    index = (RESULTS / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.stem != "README":
            assert f"]({page.name})" in index, f"docs/results/README.md does not link {page.name}"


def test_one_argument_parser_and_one_runner():
    for s in SCRIPTS:
        src = (EXPERIMENTS / f"{s}.py").read_text(encoding="utf-8")
        if s == "common":
            continue
        assert "ArgumentParser(" not in src, f"{s}.py builds its own argument parser"
        assert "sys.argv" not in src, f"{s}.py reads sys.argv itself (use common.experiment_main)"
        assert "Popen(" not in src and "os.wait4" not in src, f"{s}.py runs trainings itself"


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_imports(script):
    importlib.import_module(script)


@pytest.mark.parametrize("page", [p.stem for p in PAGES
                                  if p.with_suffix(".json").exists() and p.stem not in NOT_FROM_OWN_JSON
                                  and p.stem not in C.FINISHED_TRIALS])
def test_page_renders_from_its_json(page, tmp_path):
    mod = importlib.import_module(script_of(page))
    render = mod.render
    assert len(inspect.signature(render).parameters) == 2
    out = tmp_path / f"{page}.md"
    render(json.loads((RESULTS / f"{page}.json").read_text(encoding="utf-8")), out)
    assert out.read_bytes() == (RESULTS / f"{page}.md").read_bytes()


def test_index_renders_from_the_experiments_json(tmp_path, monkeypatch):
    import shutil
    for p in RESULTS.glob("*.json"):
        shutil.copy(p, tmp_path / p.name)
    monkeypatch.setattr(C, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["summary.py"])
    summary = importlib.import_module("summary")
    summary.main()
    assert (tmp_path / "README.md").read_bytes() == (RESULTS / "README.md").read_bytes()


def test_the_training_runner_records_a_worker_run(tmp_path, monkeypatch):
    """common.run_training starts ``script --worker ARGS OUT`` (dispatched by experiment_main) and
    reads back what common.train_worker wrote: here on a tiny training of the bundled sample."""
    script = tmp_path / "tiny.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(EXPERIMENTS)!r})\n"
        "import common as C\n"
        "def worker(size, out):\n"
        "    import cnfmce\n"
        "    from cnfmce.demo import load_sample\n"
        "    docs = [d['text'] for d in load_sample()][:100]\n"
        "    C.train_worker(out, lambda: cnfmce.train(cnfmce.Documents(docs), vocab_size=int(size),\n"
        "                                             progress=False), size=int(size))\n"
        "if __name__ == '__main__':\n"
        "    C.experiment_main('tiny', None, None, None, commands={'--worker': worker})\n")
    base = tmp_path / "run"
    info = C.run_training(str(script), ["400"], base, {"size": 400}, "tiny")
    assert info["size"] == 400 and info["selection"] == "refined-non-ascii" and info["seconds"] >= 0
    assert info["params"] == {"size": 400} and info["peak_rss"] > 0
    import cnfmce
    assert cnfmce.Tokenizer.load(str(base) + ".run.cnfmce.json.gz").vocab_size == 400
    assert C.cached_training(base, {"size": 400}) == json.loads(json.dumps(info))  # as recorded
    assert C.cached_training(base, {"size": 500}) is None
