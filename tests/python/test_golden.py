"""The extension module gives the bytes stored in tests/golden for each
configuration there, as the Rust tests check the core does: the extension
as `make setup` built it (profile-guided and whole-crate optimised with
VMSIM_PGO=1) computes what a plain release build computes."""

import json
from pathlib import Path

import pytest

from vmsim import _core

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CONFIGS = sorted(GOLDEN.glob("*.toml"))


def test_golden_configurations_exist():
    assert len(CONFIGS) >= 3


@pytest.mark.sim
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_golden_run_gives_the_stored_bytes(config):
    out = _core.run_config(config.read_text(), "toml", str(config.parent), None, 1)
    want = config.with_suffix(".json").read_text().rstrip("\n")
    if out != want:
        got, stored = json.loads(out)["metrics"], json.loads(want)["metrics"]
        moved = {k: (got.get(k), v) for k, v in stored.items() if got.get(k) != v}
        pytest.fail(f"{config.name}: differs from the stored run (now, stored): {moved}")
