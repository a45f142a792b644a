"""The reference documentation names no revision of this repository, and
each experiment page keeps its history in one table.

Reference docs (README.md, docs/*.md and docs/experiments/*.md) say what
is; what moved a figure, and at which revision, belongs in the dated notes
under docs/notes/, which may name revisions, or, for an experiment, in the
one history table of its page (a table under a heading containing
"History" whose header row starts with ``| date | revision |``).

A revision is a hex token of 7 to 40 characters that ``git rev-parse
--verify --quiet TOKEN^{commit}`` resolves in this checkout: a Linux commit
id cited as a source (b99a342d4f11) is not one. Pure file reading and one
batched git call; skipped where the checkout has no git history.
"""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXPERIMENTS = DOCS / "experiments"

# Reference docs this test does not hold to the rule: none.
EXEMPT: set = set()

TOKEN = re.compile(r"(?<![0-9A-Za-z_])[0-9a-fA-F]{7,40}(?![0-9A-Za-z_])")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
HISTORY_HEADER = re.compile(r"^\|\s*date\s*\|\s*revision\s*\|", re.I)


def reference_docs():
    yield ROOT / "README.md"
    yield from sorted(DOCS.glob("*.md"))
    yield from sorted(EXPERIMENTS.glob("*.md"))


def history_tables(lines):
    """(first line, last line) of each history table: a table whose header
    row starts with `| date | revision |`, under a heading that contains
    "History". Line numbers are 0-based, the range inclusive."""
    out = []
    heading = ""
    i = 0
    while i < len(lines):
        m = HEADING.match(lines[i])
        if m:
            heading = m.group(1)
        elif HISTORY_HEADER.match(lines[i]) and "history" in heading.lower():
            j = i
            while j + 1 < len(lines) and lines[j + 1].lstrip().startswith("|"):
                j += 1
            out.append((i, j))
            i = j
        i += 1
    return out


def hex_tokens(path: Path):
    """(line number, token) of every hex token outside an experiment page's
    history table."""
    lines = path.read_text(encoding="utf-8").splitlines()
    allowed = set()
    if path.parent == EXPERIMENTS:
        for a, b in history_tables(lines):
            allowed.update(range(a, b + 1))
    for n, line in enumerate(lines):
        if n in allowed:
            continue
        for t in TOKEN.findall(line):
            # A number (1048576 KiB) is not written as a revision; one
            # could still be the prefix of a future commit's hash.
            if not t.isdigit():
                yield n + 1, t


def _git(*args, **kw):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, **kw)


def revisions(tokens) -> set:
    """The tokens that name a commit of this repository: one
    `git cat-file --batch-check` for all of them, and `git rev-parse` for
    the few it calls ambiguous."""
    tokens = sorted(set(tokens))
    if not tokens:
        return set()
    p = _git("cat-file", "--batch-check", input="".join(f"{t}^{{commit}}\n" for t in tokens))
    assert p.returncode == 0, p.stderr
    answers = p.stdout.splitlines()
    assert len(answers) == len(tokens), (len(answers), len(tokens))
    found = set()
    for t, a in zip(tokens, answers):
        words = a.split()
        if len(words) >= 2 and words[1] == "commit":
            found.add(t)
        elif a.endswith(" ambiguous"):
            if _git("rev-parse", "--verify", "--quiet", f"{t}^{{commit}}").returncode == 0:
                found.add(t)
    return found


@pytest.fixture(scope="module")
def git_history():
    try:
        ok = _git("rev-parse", "--verify", "--quiet", "HEAD").returncode == 0
    except OSError:
        ok = False
    if not ok:
        pytest.skip("this checkout has no git history (git rev-parse HEAD fails), "
                    "so no token can be told to be one of its revisions")


def test_reference_docs_name_no_revision(git_history):
    hits = {}
    for path in reference_docs():
        rel = path.relative_to(ROOT).as_posix()
        if rel in EXEMPT:
            continue
        for n, t in hex_tokens(path):
            hits.setdefault(t, []).append(f"{rel}:{n}")
    named = revisions(hits)
    where = sorted(f"{place}: {t}" for t in named for place in hits[t])
    assert not where, (
        "reference docs name revisions of this repository (say what is, in the present tense, "
        "and move what moved a figure to a dated note under docs/notes/, or to the experiment "
        "page's history table): " + "; ".join(where))


def test_the_check_finds_a_revision(git_history):
    # The check above must recognise a revision when it sees one, and must
    # not take a Linux commit id cited as a source for one.
    head = _git("rev-parse", "--short=12", "HEAD").stdout.strip()
    assert revisions([head, head[:7]]) == {head, head[:7]}
    for linux in ("b99a342d4f11", "c79b57e462b5"):
        resolves = _git("rev-parse", "--verify", "--quiet", f"{linux}^{{commit}}").returncode == 0
        assert revisions([linux]) == ({linux} if resolves else set())


def test_the_exemptions_are_reference_docs():
    known = {p.relative_to(ROOT).as_posix() for p in reference_docs()}
    assert EXEMPT <= known, EXEMPT - known


def test_each_experiment_page_has_one_history_table():
    pages = sorted(EXPERIMENTS.glob("*.md"))
    assert pages, "docs/experiments/ has no pages"
    wrong = {}
    for page in pages:
        n = len(history_tables(page.read_text(encoding="utf-8").splitlines()))
        if n != 1:
            wrong[page.relative_to(ROOT).as_posix()] = n
    assert not wrong, ("each experiment page needs exactly one history table (a table under a "
                       f"heading containing 'History', header `| date | revision | ...`): {wrong}")


def test_history_table_rules():
    page = [
        "# x", "| date | revision | figure | what moved it |", "|---|---|---|---|",
        "## History", "text", "| date | revision | figure | what moved it |", "|---|---|---|---|",
        "| 2026-11-27 | abc1234 | +1% | a |", "", "## Later", "| date | revision |",
    ]
    assert history_tables(page) == [(5, 7)]
