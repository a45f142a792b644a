"""Every key of a run's report is defined in docs/metrics.md."""
import re
from pathlib import Path

import pytest

import vmsim

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _documented(key: str, doc: str) -> bool:
    if f"`{key}`" in doc:
        return True
    generic = re.sub(r"node\d+", "node<N>", key)
    if f"`{generic}" in doc:
        return True
    return key.startswith("sys_s_") and "`sys_s_<path>`" in doc


@pytest.mark.sim
def test_every_report_key_is_in_the_glossary(tiny_config):
    doc = GLOSSARY.read_text()
    metrics = vmsim.run(tiny_config)["metrics"]
    missing = [k for k in sorted(metrics) if not _documented(k, doc)]
    assert not missing, f"report keys not defined in docs/metrics.md: {missing}"
