"""tools/pgo/profile, the profile data of `VMSIM_PGO=1 make setup`: it
must never fail the build that asked, and it refuses what it does not know."""

import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent.parent / "tools" / "pgo" / "profile"


def run(*args, **env):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=60)


def test_vmsim_pgo_0_gives_no_data_and_succeeds():
    for kind in ((), ("extension",), ("bench",)):
        r = run(*kind, VMSIM_PGO="0")
        assert r.returncode == 0
        assert r.stdout == ""
        assert "VMSIM_PGO=0" in r.stderr


def test_an_unknown_build_is_refused_by_name():
    r = run("wheel")
    assert r.returncode != 0
    assert "extension|bench" in r.stderr and "'wheel'" in r.stderr
