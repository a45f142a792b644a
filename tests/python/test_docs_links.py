"""References to docs/mechanisms.md name sections that exist, and nothing
refers to the upper-case file name that code once cited but the repository
never had.

Code and docs point at a mechanism as `docs/mechanisms.md#<anchor>`, the
GitHub anchor of one of its headings. Pure file reading: no simulator.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MECHANISMS = ROOT / "docs" / "mechanisms.md"

# Where references can live: the crates, the Python package, the docs, the
# tools, the tests, the experiments and the top-level files.
SCANNED_DIRS = ("crates", "python", "docs", "tools", "tests", "experiments", "machines", "bench", "examples")
TEXT_SUFFIXES = {".rs", ".py", ".md", ".toml", ".txt", ".sh", ".json", ".yml", ".yaml", ".cfg", ".ini"}
SKIPPED_DIRS = {"target", "__pycache__", ".pytest_cache", "node_modules", ".venv"}

# Spelled in two pieces so that this file does not match itself.
OLD_NAME = "MECHANISMS" + ".md"
REFERENCE = re.compile(r"mechanisms\.md#([A-Za-z0-9_-]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, inline
    markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> list:
    """Every heading's anchor, in order, duplicates numbered as GitHub does."""
    seen = {}
    out = []
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else HEADING.match(line)
        if not m:
            continue
        base = github_anchor(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}-{n}")
    return out


def repository_files():
    for p in sorted(ROOT.iterdir()):
        if p.is_file() and p.suffix in TEXT_SUFFIXES:
            yield p
    for d in SCANNED_DIRS:
        base = ROOT / d
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(ROOT).parts
            if any(part in SKIPPED_DIRS or part.startswith(".") for part in rel):
                continue
            if p.is_file() and p.suffix in TEXT_SUFFIXES:
                yield p


def _lines(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    return enumerate(text.splitlines(), start=1)


def test_mechanisms_doc_exists_with_unique_anchors():
    assert MECHANISMS.is_file(), "docs/mechanisms.md is missing"
    found = anchors(MECHANISMS.read_text(encoding="utf-8"))
    assert found, "docs/mechanisms.md has no headings"
    assert len(found) == len(set(found))


def test_no_reference_to_the_old_mechanisms_file():
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in repository_files()
        for i, line in _lines(p)
        if OLD_NAME in line
    ]
    assert not hits, f"references to {OLD_NAME}, which the repository does not contain " \
        f"(point at a section of docs/mechanisms.md instead): {hits}"


def test_every_mechanisms_anchor_exists():
    known = set(anchors(MECHANISMS.read_text(encoding="utf-8")))
    missing = [
        f"{p.relative_to(ROOT)}:{i}: #{a}"
        for p in repository_files()
        for i, line in _lines(p)
        for a in REFERENCE.findall(line)
        if a not in known
    ]
    assert not missing, f"references to sections docs/mechanisms.md does not have: {missing}"


def test_references_are_found():
    # The scan must see the references it guards, or the tests above pass vacuously.
    refs = sum(
        len(REFERENCE.findall(line))
        for p in repository_files()
        for _, line in _lines(p)
    )
    assert refs >= 20


def test_github_anchor_rules():
    assert github_anchor("Clearing a huge page") == "clearing-a-huge-page"
    assert github_anchor("pf-test and perf bench mem map") == "pf-test-and-perf-bench-mem-map"
    assert github_anchor("The `clear_pages` primitive, 7.0") == "the-clear_pages-primitive-70"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == ["a", "a-1"]
