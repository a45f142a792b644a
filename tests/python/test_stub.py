"""The stub of the extension (python/vmsim/_core.pyi) against the built
extension, by mypy's stubtest: a name the stub declares that the extension
lacks or the other way round (``__all__`` included), a function whose
parameters, defaults or kinds differ, a class whose bases differ. mypy is
in the ``test`` extra (pyproject.toml)."""

import subprocess
import sys

import pytest


def test_the_stub_describes_the_extension(tmp_path):
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed: it comes with the `test` extra (make setup installs it)")
    # In a directory of its own: mypy leaves its cache in the working directory.
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "vmsim._core"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    report = (out.stdout + out.stderr).strip()
    assert out.returncode == 0, f"stubtest finds python/vmsim/_core.pyi wrong:\n{report}"
    assert "Success" in report, report
