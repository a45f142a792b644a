import os

import pytest

# A run config small enough for a quick test on the real simulator.
TINY_CONFIG = {
    "machine": "xeon-e5-2699v3-2s",
    "seed": 0,
    "kernel": {"thp": "always", "clear_huge_page": "target-last"},
    "workload": {"kind": "usemem", "nr_task": 2, "size_per_task_mib": 4},
}

TINY_TOML = """\
machine = "xeon-e5-2699v3-2s"
seed = 0

[kernel]
thp = "always"
clear_huge_page = "target-last"

[workload]
kind = "usemem"
nr_task = 2
size_per_task_mib = 4
"""


def pytest_collection_modifyitems(config, items):
    # VMSIM_SKIP_SIM=1 skips the tests that check properties of real
    # simulation results (for a build against a stand-in core).
    if os.environ.get("VMSIM_SKIP_SIM") not in (None, "", "0"):
        skip = pytest.mark.skip(reason="VMSIM_SKIP_SIM is set")
        for item in items:
            if "sim" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def tiny_config():
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in TINY_CONFIG.items()}


@pytest.fixture
def tiny_toml(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_TOML)
    return path


@pytest.fixture(autouse=True)
def _result_cache_off(tmp_path_factory, monkeypatch):
    # Tests run with the result cache off (a cached result would stand in
    # for the run a test means to check) and never write the user's cache;
    # tests/python/test_cache.py turns it on in a folder of its own.
    monkeypatch.setenv("VMSIM_CACHE", "0")
    monkeypatch.setenv("VMSIM_CACHE_DIR", str(tmp_path_factory.mktemp("vmsim-cache")))
