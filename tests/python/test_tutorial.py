"""docs/your-own-policy.md's commands run as written, and print what the
page shows. Each block after a `<!-- tutorial-command -->` marker is run:
its `$ ` lines in a shell (in a scratch folder that sees the repository's
examples/), and the lines after the last command must be its output.

When the model changes on purpose, VMSIM_TUTORIAL_WRITE=1 rewrites the
outputs in the page from the runs (then read the page again: its prose
describes them)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "your-own-policy.md")
BLOCK = re.compile(r"<!-- tutorial-command -->\n```console\n(.*?)```", re.S)

pytestmark = pytest.mark.sim


def blocks():
    text = open(PAGE).read()
    return [(m.start(1), m.end(1), m.group(1)) for m in BLOCK.finditer(text)]


def run_block(body, cwd):
    lines = body.splitlines()
    cmds = [l[2:] for l in lines if l.startswith("$ ")]
    last = max(i for i, l in enumerate(lines) if l.startswith("$ "))
    expected = "\n".join(lines[last + 1:])
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    out = ""
    for c in cmds:
        p = subprocess.run(["bash", "-c", c], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{c}\nexit {p.returncode}\n{p.stderr}"
        out = p.stdout
    return cmds, expected, out.rstrip("\n")


def test_the_tutorial_commands_run_as_written_and_print_what_it_shows(tmp_path):
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    found = blocks()
    assert len(found) >= 3
    text = open(PAGE).read()
    rewritten, shift = text, 0
    for start, end, body in found:
        cmds, expected, out = run_block(body, tmp_path)
        if os.environ.get("VMSIM_TUTORIAL_WRITE") == "1":
            keep = "\n".join(l for l in body.splitlines() if l.startswith("$ "))
            new = keep + ("\n" + out if out else "") + "\n"
            rewritten = rewritten[:start + shift] + new + rewritten[end + shift:]
            shift += len(new) - (end - start)
            continue
        assert out == expected, f"{cmds[-1]} printed:\n{out}\n\nthe page shows:\n{expected}"
    if rewritten != text:
        open(PAGE, "w").write(rewritten)
    assert (tmp_path / "target-first.png").stat().st_size > 10_000
