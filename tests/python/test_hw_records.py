"""`vmsim hw calibrate` with `record=FILE`: a preset rendered from a recorded
host's measurements, without measuring, on any machine (the records are
crates/vmsim-hw/tests/hosts/*.json)."""

import json
import pathlib

import pytest

import vmsim
from vmsim import cli

HOSTS = pathlib.Path(__file__).resolve().parents[2] / "crates" / "vmsim-hw" / "tests" / "hosts"
RECORDS = sorted(HOSTS.glob("*.json"))


def same(a, b):
    """Equal, numbers to the last few bits (JSON floats are read back to within an ulp)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12)
    return a == b


def test_the_recorded_hosts_are_there():
    assert {p.stem for p in RECORDS} >= {"intel-480m-llc-guest", "zen3-guest", "zen4-guest",
                                         "synthetic-512m-llc-1cpu"}


@pytest.mark.parametrize("record", RECORDS, ids=[p.stem for p in RECORDS])
def test_a_recorded_host_renders_a_preset_the_simulator_runs(record, tmp_path):
    r = vmsim.hw("calibrate", quiet=True, record=str(record), out_dir=str(tmp_path), name="rec")
    preset = pathlib.Path(r["preset_path"])
    assert preset.name == "host-rec.toml" and preset.is_file()
    assert r["options"]["record"] == str(record) and r["record_path"] is None
    assert same(r["record"], json.loads(record.read_text()))
    assert r["pinning"].startswith("no measurement")
    # Nothing but the preset is written from a record.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host-rec.toml"]
    for c in r["clamped"]:
        assert set(c) == {"key", "found", "written", "reason"} and c["reason"], c
    out = vmsim.run({
        "machine": str(preset),
        "workload": {"kind": "pf-test", "size_mib": 4, "page_size": "2m"},
    })
    assert out["metrics"]["data_verified"] is True


def test_the_intel_guests_fence_is_bounded_by_the_latency_and_said(tmp_path, capsys):
    record = HOSTS / "intel-480m-llc-guest.json"
    assert cli.main(["hw", "calibrate", "-q", "--opt", f"record={record}", "--opt", f"out_dir={tmp_path}",
                     "--json", str(tmp_path / "out.json")]) == 0
    r = json.loads((tmp_path / "out.json").read_text())
    assert [c["key"] for c in r["clamped"]] == ["string.sfence_drain_ns"]
    assert r["clamped"][0]["found"] == 186.4 and r["clamped"][0]["written"] == 90.0
    text = pathlib.Path(r["preset_path"]).read_text()
    assert "written as 90.0 ns: the preset accepts at most memory.local_latency_ns" in text


def test_a_bad_record_names_the_option(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1}')
    for opts, key in [([f"record={bad}"], "record"), ([f"record={tmp_path / 'none.json'}"], "record"),
                      ([f"record={HOSTS / 'zen4-guest.json'}", "quick=true"], "quick")]:
        args = ["hw", "calibrate", "-q", "--opt", f"out_dir={tmp_path}"]
        for o in opts:
            args += ["--opt", o]
        assert cli.main(args) == 2, opts
        err = capsys.readouterr().err
        assert err.startswith(f"vmsim: error: {key}: ") and err.count("\n") == 1, err
