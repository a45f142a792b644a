"""Studies on a dask.distributed cluster (python/vmsim/dask_backend.py): the
same JSON as a local run (apart from the documented provenance fields), a
worker that dies loses no point, progress over all workers, and the CLI's
--scheduler/--workers. Skipped where dask.distributed is not installed
(`make setup` installs the dask extra)."""

import json
import os
import subprocess
import sys

import pytest

import vmsim
from vmsim import cli, dask_backend

distributed = pytest.importorskip("distributed")

SCALE = 1 / 256
VOLATILE = ("host_seconds", "host_threads", "cached")


def text_of(result):
    doc = json.loads(json.dumps(result))
    for r in [doc] + list(doc.get("runs", [])):
        for k in VOLATILE:
            r.get("provenance", {}).pop(k, None)
    return cli._dump_json(doc)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.mark.sim
def test_sweep_on_two_workers_is_the_local_sweep(client, tiny_config):
    grid = {"seed": [0, 1, 2], "kernel.clear_huge_page": ["sequential", "target-last"]}
    seen = []
    rows = vmsim.sweep_rows(grid, tiny_config, client, progress=lambda label, f: seen.append(f))
    local = vmsim.sweep_rows(grid, tiny_config)
    assert json.dumps(rows) == json.dumps(local)
    # progress counts simulations done over both workers
    assert seen == [(i + 1) / 6 for i in range(6)]
    assert len(client.scheduler_info()["workers"]) == 2


@pytest.mark.sim
def test_compare_runs_on_two_workers_is_the_local_result(client):
    seen = []
    doc = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, runs=3, executor=client,
                        progress=lambda label, f: seen.append(f))
    local = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, runs=3)
    assert text_of(doc) == text_of(local)
    assert seen[-1] == 1.0 and len(seen) == 3
    one = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, executor=client)
    assert one.get("kind") is None and one["provenance"]["seeds"] == [0]
    assert text_of(one) == text_of(vmsim.compare("clear-target-last", scale=SCALE, force_scale=True))


@pytest.mark.sim
def test_jobs_and_an_executor_do_not_mix(client):
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, runs=2, jobs=2, executor=client)
    assert info.value.key == "jobs"


DIES_ONCE = '''\
import os

MARK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "died")


def clear(ctx):
    # The first call anywhere kills the worker process it runs in.
    if not os.path.exists(MARK):
        open(MARK, "w").close()
        os._exit(1)
    return range(ctx.nr_pages)
'''


@pytest.mark.sim
def test_a_worker_that_dies_loses_no_point(client, tmp_path, tiny_config):
    (tmp_path / "pol.py").write_text(DIES_ONCE)
    cfg = dict(tiny_config, kernel=dict(tiny_config["kernel"], clear_huge_page="pol.py:clear"))
    (tmp_path / "base.json").write_text(json.dumps(cfg))
    grid = {"seed": [0, 1, 2, 3]}
    rows = vmsim.sweep_rows(grid, tmp_path / "base.json", client)
    assert (tmp_path / "died").exists(), "a worker died"
    assert [r["status"] for r in rows] == ["ok"] * 4
    local = vmsim.sweep_rows(grid, tmp_path / "base.json")
    assert json.dumps(rows) == json.dumps(local)
    client.wait_for_workers(2, timeout=60)


def _worker_settings():
    """In a worker: what a local cluster of ``dask_backend.client`` sets."""
    import signal

    import dask

    return {"profile": dask.config.get("distributed.worker.profile.enabled"),
            "method": dask.config.get("distributed.worker.multiprocessing-method"),
            "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            "sigint": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}


@pytest.mark.sim
def test_the_local_cluster_of_workers_n_loses_no_point(tmp_path, tiny_config):
    # --workers N's own cluster (forked workers, fewer periodic checks): a
    # worker killed mid-study is restarted and its point run again.
    (tmp_path / "pol.py").write_text(DIES_ONCE)
    cfg = dict(tiny_config, kernel=dict(tiny_config["kernel"], clear_huge_page="pol.py:clear"))
    (tmp_path / "base.json").write_text(json.dumps(cfg))
    grid = {"seed": [0, 1, 2, 3]}
    with dask_backend.client(workers=2) as c:
        seen = c.run(_worker_settings)
        assert len(seen) == 2
        for s in seen.values():
            assert s == {"profile": False, "method": "fork", "sigterm": True, "sigint": True}
        rows = vmsim.sweep_rows(grid, tmp_path / "base.json", c)
        assert (tmp_path / "died").exists(), "a worker died"
        c.wait_for_workers(2, timeout=60)
        assert len(c.scheduler_info()["workers"]) == 2
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert json.dumps(rows) == json.dumps(vmsim.sweep_rows(grid, tmp_path / "base.json"))
    # the settings are the cluster's only: none is left in this process
    import dask

    assert dask.config.get("distributed.worker.multiprocessing-method") == "spawn"
    assert dask_backend._local_clusters == 0


def test_engine_options_are_checked():
    for scheduler, workers, jobs, key in ((None, 0, None, "--workers"), ("", None, None, "--scheduler"),
                                          ("tcp://x:1", 2, None, "--workers"), (None, 2, 2, "-j/--jobs"),
                                          (None, True, None, "--workers")):
        with pytest.raises(vmsim.ConfigError) as info:
            dask_backend.check_engine(scheduler, workers, jobs)
        assert info.value.key == key


def vmsim_cmd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "vmsim", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=900, cwd=cwd)


@pytest.mark.sim
def test_cli_workers_and_scheduler_give_the_local_json(client, tmp_path, tiny_toml):
    common = ["compare", "clear-target-last", "--scale", "1/256", "--force-scale", "--runs", "2", "-q"]
    p = vmsim_cmd(*common, "--json", str(tmp_path / "local.json"))
    assert p.returncode == 0, p.stderr
    p = vmsim_cmd(*common, "--workers", "2", "--json", str(tmp_path / "workers.json"))
    assert p.returncode == 0, p.stderr
    p = vmsim_cmd(*common, "--scheduler", client.scheduler.address, "--json", str(tmp_path / "sched.json"))
    assert p.returncode == 0, p.stderr
    docs = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("local", "workers", "sched")]
    assert text_of(docs[0]) == text_of(docs[1]) == text_of(docs[2])

    sweep = ["sweep", str(tiny_toml), "--set", "seed=0,1,2", "-q"]
    p = vmsim_cmd(*sweep, "--json", str(tmp_path / "s-local.json"))
    assert p.returncode == 0, p.stderr
    p = vmsim_cmd(*sweep, "--scheduler", client.scheduler.address, "--json", str(tmp_path / "s-dask.json"))
    assert p.returncode == 0, p.stderr
    a, b = (json.loads((tmp_path / f"s-{n}.json").read_text()) for n in ("local", "dask"))
    assert text_of(a) == text_of(b)

    rep = ["reproduce", "--only", "clear-target-last", "copy-target-last", "--scale", "1/256", "--force-scale",
           "-q"]
    p = vmsim_cmd(*rep, "--out", str(tmp_path / "r-local"))
    assert p.returncode == 0, p.stderr
    p = vmsim_cmd(*rep, "--out", str(tmp_path / "r-dask"), "--scheduler", client.scheduler.address)
    assert p.returncode == 0, p.stderr
    for name in ("README.md", "clear-target-last.txt", "copy-target-last.txt"):
        assert (tmp_path / "r-local" / name).read_text() == (tmp_path / "r-dask" / name).read_text()
    for name in ("clear-target-last.json", "copy-target-last.json"):
        a, b = (json.loads((tmp_path / d / name).read_text()) for d in ("r-local", "r-dask"))
        assert text_of(a) == text_of(b)


def test_cli_refuses_contradictory_engines(tiny_toml):
    p = vmsim_cmd("sweep", str(tiny_toml), "--set", "seed=0,1", "--workers", "2", "--scheduler", "tcp://x:1")
    assert p.returncode == 2 and "--workers" in p.stderr and "--scheduler" in p.stderr
    p = vmsim_cmd("compare", "clear-target-last", "--runs", "2", "-j", "2", "--workers", "2")
    assert p.returncode == 2 and "-j/--jobs" in p.stderr


FAILS = '''\
def clear(ctx):
    raise RuntimeError("this policy always fails")
'''


@pytest.mark.sim
def test_a_failing_point_on_the_cluster(client, tmp_path, tiny_config):
    (tmp_path / "bad.py").write_text(FAILS)
    cfg = dict(tiny_config)
    (tmp_path / "base.json").write_text(json.dumps(cfg))
    grid = {"kernel.clear_huge_page": ["target-last", "bad.py:clear"]}
    rows = vmsim.sweep_rows(grid, tmp_path / "base.json", client, keep_going=True)
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert "PolicyError" in rows[1]["error"] and "this policy always fails" in rows[1]["error"]
    with pytest.raises(vmsim.PolicyError):
        vmsim.sweep_rows(grid, tmp_path / "base.json", client)
    # the study's failure stops its own tasks, not the cluster
    assert client.submit(sum, [1, 2]).result() == 3
    assert len(client.scheduler_info()["workers"]) == 2


@pytest.mark.sim
def test_study_timing_tool_runs(tmp_path):
    # tools/study_timing.py, which measured docs/usage.md's figures, on a 2-point study
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, os.path.join(root, "tools", "study_timing.py"), "--points", "2",
                        "--size-mib", "4"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if "wall" in line]
    assert len(lines) == 6 and all(line.endswith("JSON equal to the first: True") for line in lines)


def test_a_service_that_is_not_a_scheduler_is_a_one_line_error(monkeypatch):
    import socket
    import threading

    from vmsim import dask_backend

    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(dask_backend, "CONNECT_TIMEOUT_S", 1)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    held = []
    threading.Thread(target=lambda: held.append(silent.accept()), daemon=True).start()
    address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
    try:
        with pytest.raises(vmsim.ConfigError) as e:
            dask_backend._connect(distributed, address)
        assert e.value.key == "scheduler" and "no Dask scheduler answered within 1 s" in str(e.value)
        assert "\n" not in str(e.value)
    finally:
        silent.close()
