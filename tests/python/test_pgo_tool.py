"""tools/pgo/profile, the profile data of `VMSIM_PGO=1 make setup`: it
must never fail the build that asked, and it refuses what it does not know."""

import importlib.machinery
import importlib.util
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


def load_tool():
    loader = importlib.machinery.SourceFileLoader("pgo_profile", str(TOOL))
    spec = importlib.util.spec_from_loader("pgo_profile", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_a_null_device_that_is_a_regular_file_gives_no_data(tmp_path):
    # Cargo's compiler probe reads /dev/null: where it is a file, what the
    # instrumented build discarded there would break the next build.
    tool = load_tool()
    fake = tmp_path / "null"
    fake.write_text("error[E0554]: left here by a build script\n")
    tool.NULL_DEVICE = str(fake)
    data, why = tool.make("extension")
    assert data is None
    assert "not the null device" in why and "mknod" in why
