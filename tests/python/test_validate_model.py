"""`vmsim validate`: microbenchmark tables of the presets' models."""

import json

import pytest

import vmsim
from vmsim import cli
from vmsim.model_validate import validate_model


def test_one_preset_rows_have_sources_and_errors():
    result = validate_model("xeon-8358-icx")
    rows = result["rows"]
    assert rows and all(r["preset"] == "xeon-8358-icx" for r in rows)
    for r in rows:
        assert r["source"] and r["published"] > 0 and r["model"] > 0
        assert r["error"] == pytest.approx((r["model"] - r["published"]) / r["published"])
    assert "xeon-8358-icx" in result["table"]
    # The rows a parameter was fitted to or derived from say so, in the JSON
    # and the table: the superqueue's DRAM rows, the grant's long rep stosb
    # calls, the posted-write hold's movnti rows, the start-up's 4 KiB calls.
    fitted = {}
    for r in rows:
        if r["calibrates"]:
            fitted.setdefault(r["calibrates"], []).append(r["description"])
    assert set(fitted) == {"l2.superqueue", "string.no_rfo_grant", "memory.posted_write_ns",
                           "string.startup_cycles"}
    assert fitted["string.startup_cycles"] == ["1 core rep stosb in 4 KiB calls over 128 MiB (GB/s)"]
    assert all("128 MiB" in d for d in fitted["l2.superqueue"])
    assert all("rep stosb" in d for d in fitted["string.no_rfo_grant"])
    assert not any("4 KiB calls" in d or "64 KiB calls" in d for d in fitted["string.no_rfo_grant"])
    assert all("movnti" in d for d in fitted["memory.posted_write_ns"])
    for k in fitted:
        assert f"[calibrates {k}]" in result["table"]
    assert any(r["calibrates"] is None for r in rows)


def test_unknown_preset_is_a_config_error_naming_the_field():
    with pytest.raises(vmsim.ConfigError, match="machine"):
        validate_model("no-such-chip")


def test_cli_validate_json(capsys):
    # The cheapest preset's rows (the Ice Lake-SP rows are checked above).
    assert cli.main(["validate", "--machine", "xeon-6238m-clx", "--json", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert any("idle latency" in r["description"] for r in rows)
    assert cli.main(["validate", "--machine", "nope"]) == 2
    assert "machine" in capsys.readouterr().err
