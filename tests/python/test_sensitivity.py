"""vmsim sensitivity: the screened values of an experiment, the restricted
experiments each value's machine runs, the tornado rows, and bad input
(a pattern matching nothing, a range end the field refuses)."""

import json
import subprocess
import sys

import pytest

import vmsim
from vmsim import _core
from vmsim import ledger
from vmsim import sensitivity as sens
from vmsim._config import parse_toml

EXPERIMENT = """\
name = "tiny-sensitivity"
description = "two cases on two machines, a small usemem"
reference = "a test"

[config]
machine = "xeon-e5-2699v3-2s"

[config.kernel]
thp = "always"

[config.workload]
kind = "usemem"
nr_task = 2
size_per_task_mib = 4

[[cases]]
name = "hsw"
set = { "machine" = "xeon-e5-2699v3-2s" }

[[cases]]
name = "mine"
set = { "machine" = "mine.toml" }

[baseline]
name = "target-last"
set = { "kernel.clear_huge_page" = "target-last" }

[[variants]]
name = "sequential"
set = { "kernel.clear_huge_page" = "sequential" }

[[published]]
case = "hsw"
arm = "sequential"
metric = "throughput_bytes_per_s"
change_percent = -5.0
source = "a test"
"""

LATENCY = 'local_latency_ns = { value = '


def user_preset(tmp_path, line=None):
    """The Haswell-EP preset as a user's file, one leaf's line replaced."""
    text = _core.builtin_toml("machine", "xeon-e5-2699v3-2s")
    if line is not None:
        key = line.split(" = ", 1)[0]
        lines = [line if l.startswith(f"{key} = ") else l for l in text.splitlines()]
        assert lines != text.splitlines()
        text = "\n".join(lines) + "\n"
    (tmp_path / "mine.toml").write_text(text)


@pytest.fixture
def experiment(tmp_path):
    user_preset(tmp_path, 'posted_write_ns = { value = 20.0, source = "mine", class = "judgement", '
                          'range = [10.0, 30.0], range_reason = "a test" }')
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    return str(path)


def test_the_screened_values_are_the_ranged_ones_of_the_experiments_machines(experiment):
    params = sens.parameters(experiment)
    names = {p.name for p in params}
    assert "xeon-e5-2699v3-2s:l2.superqueue" in names
    for p in params:
        assert p.klass in sens.SCREENED and p.points
    # The user's file is screened apart from the built-in it copies, on its own case.
    mine = [p for p in params if p.key == "memory.posted_write_ns" and "mine" in p.cases]
    assert [(p.klass, p.points) for p in mine] == [("judgement", [10.0, 30.0])]
    only = sens.parameters(experiment, patterns=["l2.superqueue"])
    assert {p.key for p in only} == {"l2.superqueue"} and len(only) == 2
    assert [(p.ref, p.cases) for p in only] == [("xeon-e5-2699v3-2s", ["hsw"]), ("mine.toml", ["mine"])]


def test_a_pattern_matching_nothing_is_refused_naming_it(experiment):
    with pytest.raises(vmsim.ConfigError) as e:
        sens.parameters(experiment, patterns=["l2.superqueu"])
    assert e.value.key == "params" and "l2.superqueu" in str(e.value) and "\n" not in str(e.value)
    sourced = next(k for k, p in json.loads(_core.preset_json("xeon-e5-2699v3-2s", None))["provenance"].items()
                   if p["class"] == "sourced")
    with pytest.raises(vmsim.ConfigError, match="no plausible range"):
        sens.parameters(experiment, patterns=[sourced])


def test_a_restricted_experiment_keeps_its_cases_and_their_published_figures():
    doc = parse_toml(EXPERIMENT)
    sub = sens.restricted(doc, ["mine"])
    assert [c["name"] for c in sub["cases"]] == ["mine"] and sub["published"] == []
    assert sens.restricted(doc, ["hsw", "mine"])["cases"] == doc["cases"]
    for name in vmsim.experiments():
        d = parse_toml(_core.builtin_toml("experiment", name))
        assert parse_toml(sens.to_toml(d)) == d, name


@pytest.mark.sim
def test_a_screening_moves_one_value_at_a_time(experiment):
    doc = sens.screen(experiment, params=["mine.toml:memory.posted_write_ns", "xeon-e5-2699v3-2s:costs.page_fault_handler_cycles"])
    assert doc["runs"] == 5  # the experiment, then two ends of each value
    [h] = doc["headlines"]
    assert (h["case"], h["arm"], h["metric"]) == ("hsw", "sequential", "throughput_bytes_per_s")
    # The user's value is on the other case: the hsw headline has a row for
    # the Haswell value only.
    [row] = h["rows"]
    assert row["param"] == "xeon-e5-2699v3-2s:costs.page_fault_handler_cycles"
    ends = [e["headline"] for e in row["ends"]]
    assert h["low"] <= min(ends + [h["nominal"]]) and h["high"] >= max(ends + [h["nominal"]])
    assert row["swing"] == pytest.approx(max(ends + [h["nominal"]]) - min(ends + [h["nominal"]]))
    again = sens.screen(experiment, params=["mine.toml:memory.posted_write_ns",
                                            "xeon-e5-2699v3-2s:costs.page_fault_handler_cycles"])
    assert again["headlines"] == doc["headlines"], "deterministic"
    by_metric = sens.screen(experiment, params=["mine.toml:memory.posted_write_ns"], metrics=["elapsed_s"])
    assert {(h["case"], h["arm"]) for h in by_metric["headlines"]} == {("hsw", "sequential"), ("mine", "sequential")}
    assert sens.prediction_text(h).startswith(f"{h['nominal']:+.1f}%")


@pytest.mark.sim
def test_a_range_end_its_field_refuses_is_named(tmp_path):
    user_preset(tmp_path, 'posted_write_ns = { value = 20.0, source = "mine", class = "judgement", '
                          'range = [10.0, 3000.0], range_reason = "a test" }')
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    with pytest.raises(vmsim.ConfigError) as e:
        sens.screen(str(path), params=["mine.toml:memory.posted_write_ns"])
    assert "mine.toml:memory.posted_write_ns" in str(e.value) and "3000.0" in str(e.value)
    assert not list(tmp_path.glob(".vmsim-sensitivity-*")), "the restricted copies are removed"


@pytest.mark.sim
def test_the_command_prints_the_tornado_table_and_writes_json(experiment, tmp_path):
    out = tmp_path / "s.json"
    p = subprocess.run([sys.executable, "-m", "vmsim", "sensitivity", experiment, "-q", "--params",
                        "costs.page_fault_handler_cycles", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "hsw/sequential throughput_bytes_per_s" in p.stdout and "swing" in p.stdout
    assert json.loads(out.read_text())["kind"] == "sensitivity"
    bad = subprocess.run([sys.executable, "-m", "vmsim", "sensitivity", experiment, "--params", "nope.*"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "params: nope.*" in bad.stderr


def test_the_documents_carry_the_stored_screenings():
    from vmsim import ledger

    root = sens.ROOT
    screenings = sens.load_screenings()
    page = (root / "docs" / "sensitivity.md").read_text()
    fp = json.loads((root / "docs" / "ledger.json").read_text())["fingerprint"]
    assert ledger.section(page, sens.MARKS) == sens.format_markdown(screenings, fingerprint=fp), \
        "docs/sensitivity.md is not the stored screenings': rerun vmsim sensitivity NAME --write"
    for exp, doc in screenings.items():
        assert exp in vmsim.experiments() and doc["kind"] == "sensitivity"
        for h in doc["headlines"]:
            assert h["low"] <= h["nominal"] <= h["high"]
    # README's trust table gives the spread of each screened prediction.
    body = ledger.section((root / "README.md").read_text(), ledger.MARKS["README.md"])
    for exp in screenings:
        rows = [l for l in body.splitlines() if l.startswith(f"| [`{exp}`]")]
        want = "points (" if sens.current(screenings[exp], fp) else sens.STALE
        assert rows and all(want in l for l in rows), exp


def test_a_screening_made_with_another_model_gives_no_figure():
    # A screening records the ledger fingerprint of the model it was made
    # with; one made with another model (or recording none) is marked in
    # docs/sensitivity.md, and README's trust table shows no spread from it.
    h = {"case": None, "arm": "b", "metric": "m", "nominal": 5.0, "low": 4.0, "high": 7.0,
         "rows": [{"param": "x:a", "class": "judgement", "value": 1, "swing": 3.0,
                   "ends": [{"value": 0, "headline": 4.0}, {"value": 2, "headline": 7.0}]}]}
    doc = {"experiment": "e", "kind": "sensitivity", "scale": 0.5, "seed": 0, "runs": 3, "host_seconds": 60.0,
           "params": [{"param": "x:a"}], "headlines": [h], "model": {"c.toml": "aaaa"}}
    fp = {"c.toml": "aaaa"}
    assert sens.spread({"e": doc}, "e", None, "b", "m", fp) == "-1.0 / +2.0 points (1 of 1 values move it)"
    assert sens.spread({"e": doc}, "e", None, "b", "m", {"c.toml": "bbbb"}) == sens.STALE
    assert sens.spread({"e": dict(doc, model=None)}, "e", None, "b", "m", fp) == sens.STALE
    assert "earlier model" not in sens.format_markdown({"e": doc}, fingerprint=fp)
    assert "earlier model" in sens.format_markdown({"e": doc}, fingerprint={"c.toml": "bbbb"})
    # A built-in experiment's screening follows its own fingerprint run only:
    # another experiment's run moving leaves it current.
    own = ledger.FINGERPRINT_OF["clear-target-last"]
    other = ledger.FINGERPRINT_OF["numa-delay-map"]
    built_in = dict(doc, experiment="clear-target-last", model={own: "aaaa", other: "cccc"})
    assert sens.current(built_in, {own: "aaaa", other: "dddd"})
    assert not sens.current(built_in, {own: "bbbb", other: "cccc"})
    assert not sens.current(dict(built_in, model={other: "cccc"}), {own: "aaaa", other: "cccc"})


def test_write_refuses_what_it_cannot_store(experiment):
    p = subprocess.run([sys.executable, "-m", "vmsim", "sensitivity", "clear-target-last", "--scale", "0.25",
                        "--write"], capture_output=True, text=True)
    assert p.returncode == 2 and "not with --scale" in p.stderr
    unstored = next(e for e in vmsim.experiments() if e not in sens.load_screenings())
    p = subprocess.run([sys.executable, "-m", "vmsim", "sensitivity", unstored, "--params", "l2.*", "--write"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "has none yet" in p.stderr


def test_a_coupled_value_moves_with_its_range():
    [p] = sens.parameters("clear-target-last", patterns=["xeon-e5-2699v3-2s:llc.instances_per_socket"])
    assert p.points == [2]
    assert p.with_ == [{"llc.size_kib": 23040, "memory.nodes_per_socket": 2}]


def test_a_partial_screening_merges_into_the_stored_one():
    def row(param, lo, hi):
        return {"param": param, "class": "judgement", "value": 1,
                "ends": [{"value": 0, "headline": lo}, {"value": 2, "headline": hi}],
                "swing": max(lo, hi, 5.0) - min(lo, hi, 5.0)}

    def doc(rows, nominal=5.0, runs=3):
        return {"experiment": "e", "scale": 0.5, "seed": 0, "runs": runs, "host_seconds": 10.0,
                "params": [{"param": r["param"]} for r in rows],
                "headlines": [{"case": None, "arm": "v", "metric": "m", "nominal": nominal,
                               "low": min([5.0] + [e["headline"] for r in rows for e in r["ends"]]),
                               "high": max([5.0] + [e["headline"] for r in rows for e in r["ends"]]),
                               "rows": rows}]}

    stored = doc([row("a:x", 1.0, 9.0), row("a:y", 4.0, 6.0)], runs=5)
    merged = sens.merge(stored, doc([row("a:x", 4.5, 5.5)]))
    [h] = merged["headlines"]
    assert [r["param"] for r in h["rows"]] == ["a:y", "a:x"], "re-sorted by swing"
    assert (h["low"], h["high"]) == (4.0, 6.0), "the range is remade from the rows"
    assert merged["runs"] == 8 and [p["param"] for p in merged["params"]] == ["a:y", "a:x"]
    assert stored["headlines"][0]["low"] == 1.0, "the stored screening is not changed in place"
    with pytest.raises(vmsim.ConfigError, match="the model moved"):
        sens.merge(stored, doc([row("a:x", 4.5, 5.5)], nominal=5.5))


def test_the_tornado_plot_draws_each_headline(tmp_path):
    pytest.importorskip("matplotlib")
    from vmsim.plot import plot_tornado

    row = lambda p, lo, hi: {"param": p, "class": "judgement", "value": 2,
                             "ends": [{"value": 1, "headline": lo}, {"value": 3, "headline": hi}],
                             "swing": max(lo, hi, 5.0) - min(lo, hi, 5.0)}
    doc = {"experiment": "e", "scale": 0.5, "headlines": [
        {"case": None, "arm": "v", "metric": "m", "nominal": 5.0, "low": 1.0, "high": 9.0,
         "rows": [row("a:x", 1.0, 9.0), row("a:y", 4.0, 6.0), row("a:z", 5.0, 5.0)]}]}
    out = plot_tornado(doc, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000 and out.endswith("t.png")
    with pytest.raises(Exception, match="unknown image format"):
        plot_tornado(doc, tmp_path / "t.bmp")
