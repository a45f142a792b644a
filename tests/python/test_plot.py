"""Figures: one colour per arm in every panel, a fixed colour per kernel path,
titles in words with units, scale and seed, --x for sweeps, the paper style
and the published measurement beside the prediction. Checked on the figure
objects (the images themselves were looked at when this was written)."""
import pytest

pytest.importorskip("matplotlib")

from matplotlib.colors import to_hex  # noqa: E402

from vmsim import _api, cli, plot  # noqa: E402


def _metrics(tp, sys_clear, sys_fault, cycles):
    return {"throughput_bytes_per_s": tp, "elapsed_s": 1.0, "sys_s": sys_clear + sys_fault, "llc_misses": 5e7,
            "sys_s_clear_page": sys_clear, "sys_s_exc_page_fault": sys_fault, "sys_s_tick": 1e-6,
            "per_cpu": [{"cpu": c, "user_cycles": cycles, "sys_cycles": cycles / 2} for c in range(2)]}


def _case(order):
    """A compare result whose arms come in ``order`` (baseline first)."""
    tp = {"base": 1e10, "fast": 1.3e10, "slow": 0.9e10}
    return {"baseline_name": order[0], "baseline": _metrics(tp[order[0]], 0.4, 0.1, 100),
            "variant_order": list(order[1:]),
            "variants": {n: _metrics(tp[n], 0.3, 0.1, 90) for n in order[1:]}}


def _with_cases():
    return {"experiment": "e", "machine": {"name": "m"}, "case_order": ["one", "two"],
            "cases": {"one": dict(_case(["base", "fast", "slow"]), machine={"name": "m"}),
                      # Another case whose panels hold "slow" only: it keeps its colour.
                      "two": dict(_case(["base", "slow"]), machine={"name": "m"})},
            "provenance": {"scale": 0.5, "seeds": [3]}, "seed": 3}


def _bar_colors(ax):
    return [to_hex(b.get_facecolor()) for b in ax.patches]


def test_an_arm_has_one_colour_in_every_panel():
    fig = plot.figure(_with_cases())
    try:
        colors = plot.arm_colors([(None, [("base", []), ("fast", []), ("slow", [])])])
        want_one = [colors["base"], colors["fast"], colors["slow"]]
        want_two = [colors["base"], colors["slow"]]
        axes = [ax for ax in fig.axes if ax.get_visible()]
        bars = [ax for ax in axes if ax.get_title().split(": ", 1)[1].startswith(("Throughput", "Elapsed", "System time ("))]
        assert len(bars) == 6
        for ax in bars:
            want = want_one if ax.get_title().startswith("one:") else want_two
            assert _bar_colors(ax) == [to_hex(c) for c in want], ax.get_title()
        # The per-CPU lines take the arms' colours too.
        lines = [ax for ax in axes if "per CPU" in ax.get_title()]
        for ax in lines:
            for line in ax.get_lines():
                arm = line.get_label().rsplit(" ", 1)[0]
                assert to_hex(line.get_color()) == to_hex(colors[arm])
        assert colors["base"] == plot.BASELINE_COLOR and len(set(colors.values())) == 3
    finally:
        plot._pyplot().close(fig)


def test_kernel_paths_have_fixed_distinct_colours():
    reported = set()
    for experiment in ("clear-target-last", "copy-target-last", "multipage-clear", "numa-delay-map",
                       "batched-tlb-flush"):
        for case in _api.experiment_plan(experiment)["cases"]:
            for arm in case["arms"]:
                reported.update(m[len("sys_s_"):] for m in arm["metrics"] if m.startswith("sys_s_"))
    assert reported <= set(plot.KERNEL_PATHS), f"paths without a fixed colour: {reported - set(plot.KERNEL_PATHS)}"
    colors = [to_hex(plot.path_color(p)) for p in plot.KERNEL_PATHS] + [plot.OTHER_PATHS_COLOR]
    assert len(set(colors)) == len(colors)
    arm_colors = {to_hex(c) for c in list(plot.VARIANT_COLORS) + [plot.BASELINE_COLOR]}
    assert not arm_colors & set(colors), "a kernel path shares a colour with an arm"
    # The stack: clear_page and exc_page_fault drawn in their colours, the
    # tick (under 2% of system time) as "other".
    fig = plot.figure(_with_cases())
    try:
        ax = next(a for a in fig.axes if a.get_title() == "one: System time by path (s)")
        handles, labels = ax.get_legend_handles_labels()
        assert labels == ["clear_page", "exc_page_fault", "other"]
        assert [to_hex(h.patches[0].get_facecolor()) for h in handles] == [
            to_hex(plot.path_color("clear_page")), to_hex(plot.path_color("exc_page_fault")), plot.OTHER_PATHS_COLOR]
    finally:
        plot._pyplot().close(fig)


def test_titles_in_words_with_units_scale_and_seed():
    fig = plot.figure(_with_cases())
    try:
        assert fig._suptitle.get_text() == "e on m — scale 1/2, seed 3"
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        assert "one: Throughput (GB/s)" in titles and "two: Elapsed time (s)" in titles
        assert "one: LLC misses (millions)" in titles  # a count: in millions, no offset label
    finally:
        plot._pyplot().close(fig)
    runs = {"kind": "compare-runs", "experiment": "e", "seeds": [0, 1, 2], "runs": [_with_cases()] * 3,
            "provenance": {"scale": 0.0625}}
    fig = plot.figure(runs)
    try:
        assert fig._suptitle.get_text() == "e on m — scale 1/16, seeds 0..2; bars: mean, whiskers: min..max over 3 runs"
    finally:
        plot._pyplot().close(fig)
    assert plot.metric_title("sys_s_clear_page") == "System time in clear_page (s)"
    assert plot.metric_title("dram_bytes_read") == "DRAM bytes read (GB)"


def test_paper_style_is_a_column_wide_with_readable_text(tmp_path):
    fig = plot.figure(_with_cases(), style="paper")
    try:
        width, height = fig.get_size_inches()
        assert width == pytest.approx(3.5)
        texts = [t for ax in fig.axes if ax.get_visible() for t in [ax.title, ax.xaxis.label, ax.yaxis.label]
                 + ax.get_xticklabels() if t.get_text()]
        assert texts and min(t.get_fontsize() for t in texts) >= 6
        # Two panels a row: the 5 panels of a case take 3 rows.
        assert len({ax.get_position().x0 for ax in fig.axes if ax.get_visible()}) == 2
    finally:
        plot._pyplot().close(fig)
    for suffix, magic in (("pdf", b"%PDF"), ("svg", b"<?xml")):
        out = tmp_path / f"f.{suffix}"
        assert plot.plot(_with_cases(), out, style="paper") == [str(out)]
        assert out.read_bytes()[:len(magic)] == magic
    with pytest.raises(plot.PlotError, match="style 'poster' is not one of screen, paper"):
        plot.figure(_with_cases(), style="poster")


def _sweep():
    rows = [{"workload.nr_task": n, "kernel.clear_huge_page": c, "workload.size_per_task_mib": 8, "seed": s,
             "status": "ok", "throughput_bytes_per_s": n * (2 if c == "target-last" else 1) * 1e9 + s * 1e7}
            for n in (1, 2, 4) for c in ("sequential", "target-last") for s in (0, 1)]
    keys = ["workload.nr_task", "kernel.clear_huge_page", "workload.size_per_task_mib", "seed"]
    return {"kind": "sweep", "grid_keys": keys, "grid": {k: sorted({r[k] for r in rows}, key=str) for k in keys},
            "config": {"machine": "m"}, "rows": rows}


def test_sweep_against_any_swept_key(tmp_path, capsys):
    fig = plot.figure(_sweep(), metrics=["throughput_bytes_per_s"], x="kernel.clear_huge_page")
    try:
        ax = fig.axes[0]
        assert ax.get_xlabel() == "kernel.clear_huge_page"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["sequential", "target-last"]
        assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == [
            "nr_task=1", "nr_task=2", "nr_task=4"]
        title = fig._suptitle.get_text()
        assert "sweep of kernel.clear_huge_page on m" in title and "seeds 0..1" in title
        assert "workload.size_per_task_mib=8" in title  # a key with one value: in the title, not the labels
    finally:
        plot._pyplot().close(fig)
    fig = plot.figure(_sweep(), metrics=["throughput_bytes_per_s"])
    try:
        assert fig.axes[0].get_xlabel() == "workload.nr_task"  # default: the first swept key
    finally:
        plot._pyplot().close(fig)
    with pytest.raises(plot.PlotError, match="x: 'nope' is not a swept key; swept: workload.nr_task"):
        plot.figure(_sweep(), x="nope")
    with pytest.raises(plot.PlotError, match="x applies to sweep results"):
        plot.figure(_with_cases(), x="seed")
    import json
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_sweep()))
    out = tmp_path / "s.svg"
    assert cli.main(["plot", "-q", str(path), "--out", str(out), "--x", "kernel.clear_huge_page",
                     "--style", "paper"]) == 0
    assert out.read_bytes()[:5] == b"<?xml"
    assert cli.main(["plot", str(path), "--out", str(out), "--x", "nope"]) == 2
    assert "x: 'nope' is not a swept key" in capsys.readouterr().err


def test_every_published_measurement_names_a_metric_its_arm_reports():
    for experiment in ("clear-target-last", "copy-target-last", "multipage-clear", "numa-delay-map",
                       "batched-tlb-flush"):
        plan = _api.experiment_plan(experiment)
        assert plan["published"], f"{experiment} states no published measurement"
        for p in plan["published"]:
            case = next(c for c in plan["cases"] if c["name"] == p["case"])
            arm = next(a for a in case["arms"] if a["name"] == p["arm"])
            assert p["metric"] in arm["metrics"], (experiment, p)
            assert p["source"].strip()


def test_the_published_change_is_drawn_beside_the_prediction():
    doc = _with_cases()
    doc["published"] = [{"case": "one", "arm": "fast", "metric": "throughput_bytes_per_s", "change_percent": 40.0,
                         "source": "s"}]
    fig = plot.figure(doc)
    try:
        assert fig._suptitle.get_text().endswith("; hatched: published")
        ax = next(a for a in fig.axes if a.get_title() == "one: Throughput (GB/s)")
        hatched = [b for b in ax.patches if b.get_hatch()]
        assert len(hatched) == 1
        # The published change applied to the model's baseline (10 GB/s), beside the "fast" bar.
        assert hatched[0].get_height() == pytest.approx(14.0)
        fast = ax.patches[1]
        assert hatched[0].get_x() == pytest.approx(fast.get_x() + fast.get_width())
        assert to_hex(hatched[0].get_edgecolor()) == to_hex(fast.get_facecolor())
        assert "+40.0%" in [t.get_text() for t in ax.texts]
        other = next(a for a in fig.axes if a.get_title() == "two: Throughput (GB/s)")
        assert not [b for b in other.patches if b.get_hatch()]
    finally:
        plot._pyplot().close(fig)


@pytest.mark.sim
def test_a_compare_result_carries_its_published_measurements():
    import vmsim

    r = vmsim.compare("clear-target-last", scale=1 / 16, set={"workload.nr_task": 2})
    assert r["published"] == [{"case": None, "arm": "target-last", "metric": "throughput_bytes_per_s",
                               "change_percent": 28.3, "source": r["published"][0]["source"]}]
    assert "c79b57e462b5" in r["published"][0]["source"]


def _visible(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_compare_panels_are_a_grid_that_fits():
    # Six panels were drawn in one row 2040 x 335 px.
    fig = plot.figure(_case(["base", "fast", "slow"]))
    try:
        axes = _visible(fig)
        assert len(axes) == 6
        assert len({round(ax.get_position().x0, 3) for ax in axes}) == 3
        assert len({round(ax.get_position().y0, 3) for ax in axes}) == 2
        width, height = fig.get_size_inches()
        assert width <= 3 * 3.4 + 0.01 and width / height < 2
    finally:
        plot._pyplot().close(fig)


def test_metrics_asked_for_are_drawn_alone_and_paper_adds_nothing():
    # The paper style drew the breakdown panels too, whatever --metrics said.
    for style, metrics in (("paper", ["throughput_bytes_per_s", "llc_misses"]), ("screen", ["llc_misses"]),
                           ("paper", None)):
        fig = plot.figure(_case(["base", "fast"]), metrics=metrics, style=style)
        try:
            titles = [ax.get_title().replace("\n", " ") for ax in _visible(fig)]
            assert not any("by path" in t or "per CPU" in t for t in titles), (style, titles)
            if metrics:
                assert len(titles) == len(metrics)
        finally:
            plot._pyplot().close(fig)


def test_legends_are_outside_the_data():
    fig = plot.figure(_case(["base", "fast", "slow"]))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [(ax, ax.get_legend()) for ax in _visible(fig) if ax.get_legend() is not None]
        assert len(legends) == 2
        for ax, legend in legends:
            assert not _overlaps(legend.get_window_extent(renderer), ax.get_window_extent(renderer)), ax.get_title()
    finally:
        plot._pyplot().close(fig)


def _sweep_over(values):
    rows = [{"kernel.tlb_single_page_flush_ceiling": v, "kernel.migrate_tlb_flush": f, "seed": 0, "status": "ok",
             "throughput_bytes_per_s": (2e9 if v >= 64 else 1e9) * (1.1 if f == "b" else 1), "elapsed_s": 1.0}
            for v in values for f in ("a", "b")]
    keys = ["kernel.tlb_single_page_flush_ceiling", "kernel.migrate_tlb_flush"]
    return {"kind": "sweep", "grid_keys": keys, "grid": {keys[0]: list(values), keys[1]: ["a", "b"]},
            "config": {"machine": "m", "seed": 0}, "rows": rows}


def test_a_sweep_over_orders_of_magnitude_has_a_log_axis_and_points():
    # 0/16/64/1024 was drawn on a linear axis with a line through the step.
    fig = plot.figure(_sweep_over([0, 16, 64, 1024]), metrics=["throughput_bytes_per_s"])
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "symlog"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "16", "64", "1024"]
        series = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        assert len(series) == 2 and all(line.get_linestyle() == "None" and line.get_marker() for line in series)
        assert len({line.get_marker() for line in series}) == 2
    finally:
        plot._pyplot().close(fig)
    assert plot.x_scale([16, 64, 1024]) == "log"
    assert plot.x_scale([1, 2, 4]) == plot.x_scale([-1, 100]) == "linear"


@pytest.mark.parametrize("style", ["screen", "paper"])
def test_no_label_is_cut(style):
    for result, metrics in ((_sweep_over([0, 16, 64, 1024]), None), (_with_cases(), None),
                            (_case(["base", "fast", "slow"]), ["throughput_bytes_per_s", "llc_misses"])):
        fig = plot.figure(result, metrics=metrics, style=style)
        try:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            page = fig.bbox
            texts = [t for ax in _visible(fig) for t in [ax.title, ax.xaxis.label, ax.yaxis.label]
                     + ax.get_xticklabels() if t.get_text() and t.get_visible()]
            for t in texts:
                box = t.get_window_extent(renderer)
                assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0, t.get_text()
            labels = [ax.xaxis.label.get_window_extent(renderer) for ax in _visible(fig) if ax.xaxis.label.get_text()]
            for i, a in enumerate(labels):
                assert not any(_overlaps(a, b) for b in labels[i + 1:])
        finally:
            plot._pyplot().close(fig)
