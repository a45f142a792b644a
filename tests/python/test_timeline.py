"""The huge-page timeline (`sim.timeline`): off, a run reports none and its
other metrics are the same bytes; on, every THP copy-on-write of
bench/prof/copy.toml's children is there once, in time order, and
`vmsim.timeline.in_step` sets the children's copies side by side; asking
for it from a run without one, or for an unknown event, is a ConfigError
naming the key."""
import copy
import tomllib
from pathlib import Path

import pytest

import vmsim

ROOT = Path(__file__).resolve().parents[2]


def _config(timeline):
    cfg = tomllib.loads((ROOT / "bench" / "prof" / "copy.toml").read_text())
    if timeline:
        cfg.setdefault("sim", {})["timeline"] = True
    return cfg


def test_the_timeline_records_each_copy_and_changes_nothing_else():
    off = vmsim.run(_config(False), cache=False)["metrics"]
    on = vmsim.run(_config(True), cache=False)["metrics"]
    assert "thp_timeline" not in off
    rows = on.pop("thp_timeline")
    assert on == off
    cows = [r for r in rows if r[2] == "thp_cow"]
    assert len(cows) == off["thp_cow_copies"] > 0
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    # Each child copies its one huge page once; the parent's fault made it.
    assert len({r[1] for r in cows}) == len(cows)
    assert [r[2] for r in rows].count("thp_fault") == off["thp_fault_alloc"]
    s = vmsim.timeline.in_step(copy.deepcopy({"thp_timeline": rows}))
    assert s["tasks"] == len(cows) and s["per_task"] == 1
    (r0,) = s["rows"]
    assert r0["first_us"] <= r0["median_us"] <= r0["last_us"] and r0["same_page"]
    assert r0["spread_us"] == pytest.approx(r0["last_us"] - r0["first_us"])
    assert "| 0 |" in vmsim.timeline.format_markdown(s)


def test_no_timeline_or_an_unknown_event_is_a_config_error():
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.timeline.in_step({"elapsed_s": 1.0})
    assert e.value.key == "thp_timeline"
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.timeline.in_step({"thp_timeline": []}, event="clear")
    assert e.value.key == "event"


def test_a_timeline_that_is_no_bool_is_refused():
    cfg = _config(False)
    cfg["sim"] = {"timeline": "yes"}
    with pytest.raises(vmsim.ConfigError) as e:
        vmsim.run(cfg, cache=False)
    assert e.value.key == "sim.timeline"
