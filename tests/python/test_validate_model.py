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
    # The rows the superqueue was fitted to say so, in the JSON and the table.
    fitted = [r for r in rows if r["calibrates"]]
    assert fitted and all(r["calibrates"] == "l2.superqueue" for r in fitted)
    assert all("128 MiB" in r["description"] for r in fitted)
    assert "[calibrates l2.superqueue]" in result["table"]
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
