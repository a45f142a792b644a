"""The ledger (python/vmsim/ledger.py, docs/ledger.json): made at this
model, carried by the documents, and complete."""

import json
import pathlib
import re

import pytest

from vmsim import cli, ledger

ROOT = pathlib.Path(__file__).resolve().parents[2]
LED = json.loads((ROOT / "docs" / "ledger.json").read_text())


def test_the_ledger_is_of_this_model():
    # A change to the model moves the fingerprint: regenerate the ledger
    # (make ledger) and say in the commit which rows moved.
    assert ledger.fingerprint() == LED["fingerprint"], (
        "the model's fingerprint is not docs/ledger.json's: run `make ledger` and commit the rows that moved")


def test_the_documents_carry_the_ledger():
    for rel, body in ledger.documents(LED).items():
        text = (ROOT / rel).read_text()
        assert ledger.section(text, ledger.MARKS[rel]) == body, f"{rel}: not the ledger's; run `make ledger`"


def test_every_figure_has_a_model_figure_or_the_reason():
    assert {r["experiment"] for r in LED["figures"]} == set(ledger.EXPERIMENTS)
    for r in LED["figures"]:
        assert (r["model"] is not None and r["ratio"] is not None) or r["why_none"], r
        assert r["class"] == "check" or r["class"].startswith("calibrated: "), r


def test_each_change_is_split_into_at_least_three_terms():
    for exp in ledger.EXPERIMENTS:
        cases = {t["case"] for t in LED["terms"] if t["experiment"] == exp}
        for case in cases:
            n = sum(1 for t in LED["terms"] if t["experiment"] == exp and t["case"] == case)
            assert n >= 3, (exp, case)


def test_every_default_is_in_the_real_regime_or_says_why():
    for g in LED["regimes"]:
        assert g.get("in_regime") or g.get("departure"), g


def test_each_regime_sets_the_window_against_periodic_work_and_the_llc():
    for g in LED["regimes"]:
        m, r = g["model"], g.get("real")
        assert m["window_s"] > 0 and m["periodic"], g
        assert m["llc_fills"] is not None and 0 < m["cold_share"] <= 1, g
        assert abs(m["cold_share"] - min(1, 1 / m["llc_fills"])) < 1e-12 if m["llc_fills"] else m["cold_share"] == 1
        assert r is not None and r["traffic_bytes"] and r["periodic"], g
        assert 0 < r["cold_share"] <= 1 and r["llc_fills"] == r["traffic_bytes"] / r["llc_bytes"], g
    # The scanner's settings are those of the run, at its scale.
    numa = next(g for g in LED["regimes"] if g["experiment"] == "numa-delay-map")
    assert numa["model"]["periodic"].startswith(f"the NUMA scanner: {1000 * numa['scale'] / 1000:.3g} s delay")


def test_the_readme_has_one_figure_per_cell_from_the_ledger():
    body = ledger.section((ROOT / "README.md").read_text(), ledger.MARKS["README.md"])
    rows = [line for line in body.splitlines() if line.startswith("| [`")]
    assert len(rows) == len(LED["predictions"])
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert re.fullmatch(r"[+-]\d+\.\d%", cells[3]) and re.fullmatch(r"[+-]\d+\.\d%", cells[4]), line


BASELINES = ROOT.parent / "shared" / "BASELINES.md"


@pytest.mark.skipif(not BASELINES.exists(), reason="shared/BASELINES.md is beside the project's checkout only")
def test_each_quoted_figure_is_the_baselines():
    text = BASELINES.read_text()
    for f in ledger.FIGURES:
        if "derived" in f.source:
            continue
        forms = [f.quoted] if f.quoted else [f"{f.published:g}", f"{f.published:.2f}", f"{f.published:.1f}"]
        assert any(q in text for q in forms), (f.name, forms)


def test_no_check_row_is_a_figure_a_preset_was_calibrated_to():
    # A preset value whose source says it was calibrated names what it was
    # calibrated against; none of them may be a figure the ledger checks.
    # (The value itself, which its source may quote as what it derived, is
    # left out: it is the result of the calibration, not what it matched.)
    import tomllib

    calibrated = []

    def walk(t):
        for v in t.values():
            if isinstance(v, dict) and "value" in v and "source" in v:
                if v.get("class") == "calibrated" or "calibrat" in v["source"]:
                    calibrated.append(v["source"].replace(str(v["value"]), ""))
            elif isinstance(v, dict):
                walk(v)

    for p in (ROOT / "machines").glob("*.toml"):
        walk(tomllib.loads(p.read_text()))
    sources = "\n".join(calibrated)
    for f in ledger.FIGURES:
        if f.klass == "check" and "derived" not in f.source:
            q = f.quoted or f"{f.published:g}"
            # A number with another unit after it is another quantity
            # (Milan's 33.4 ns posted-write hold is not a 33.4 % miss rate).
            for m in re.finditer(rf"(?<![\d.]){re.escape(q)}(?![\d]|\.\d)\s*([A-Za-z/%]+)?", sources):
                unit = m.group(1)
                assert unit is not None and unit not in f.unit, (f.experiment, f.name, m.group(0))


def test_the_command_reads_saved_results_and_names_a_missing_one(tmp_path, capsys):
    assert cli.main(["ledger", "-q", "--from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vmsim: error: ") and "clear-target-last.json" in err and err.count("\n") == 1


def test_reclaims_system_time_is_decomposed_on_both_boxes():
    decomp = {d["case"]: d for d in LED["decomposition"] if d["experiment"] == ledger.BTF}
    assert {ledger.BTF_4N, ledger.BTF_1S} <= set(decomp)
    for case, d in decomp.items():
        for arm in ("baseline", "variant"):
            # The parts, "other" included, add up to the arm's system time per page.
            total = sum(r[arm] for r in d["parts"])
            assert abs(total - d[f"{arm}_sys_us"]) <= 1e-9 * d[f"{arm}_sys_us"], (case, arm, total)
            assert all(r[arm] >= 0 for r in d["parts"]), (case, arm)
        # A reclaim part's kswapd and direct shares are no more than the part.
        for r in d["parts"]:
            if "baseline_kswapd" in r:
                assert r["baseline_kswapd"] + r["baseline_direct"] <= r["baseline"] * (1 + 1e-9), (case, r)
            for c in r["costs"]:
                assert c["class"] in {"sourced", "measured", "calibrated", "judgement", "copied"}, c
    assert decomp[ledger.BTF_4N]["published_sys_us"] == 34.6


def test_the_copy_baselines_cycles_are_decomposed():
    d = next(d for d in LED["decomposition"] if d["experiment"] == "copy-target-last")
    for arm in ("baseline", "variant"):
        total = sum(r[arm] for r in d["parts"])
        assert abs(total - d[arm]["busy_cycles_per_4k"]) <= 1e-9 * total, (arm, total)
        assert all(r[arm] >= 0 for r in d["parts"]), arm
        assert 0 <= d[arm]["idle_share"] < 1 and d[arm]["user_ipc"] > 0, d[arm]
    assert d["baseline"]["ipc"] == next(r["model"] for r in LED["figures"]
                                        if r["experiment"] == "copy-target-last" and r["figure"] == "IPC")
