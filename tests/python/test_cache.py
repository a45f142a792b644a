"""The result cache (python/vmsim/cache.py): hits are the fresh results byte
for byte, corrupt entries are re-run, keys follow everything a result
depends on, the size limit evicts the least recently used, and the CLI's
`vmsim cache` and `--no-cache`."""

import json
import os
import subprocess
import sys

import pytest

import vmsim
from vmsim import _core, cache, cli

SCALE = 1 / 256  # clear-target-last below its smallest valid scale: a quick run (force_scale)
#: Provenance fields that may differ between a fresh and a cached result (docs/usage.md).
VOLATILE = ("host_seconds", "host_threads", "cached")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("VMSIM_CACHE_DIR", str(d))
    monkeypatch.setenv("VMSIM_CACHE", "1")
    monkeypatch.delenv("VMSIM_CACHE_MAX_BYTES", raising=False)
    return d


def text_of(result):
    """The JSON text the CLI writes, less the fields documented to differ."""
    doc = json.loads(json.dumps(result))
    for r in [doc] + list(doc.get("runs", [])):
        for k in VOLATILE:
            r.get("provenance", {}).pop(k, None)
    return cli._dump_json(doc)


def count_calls(monkeypatch, name):
    calls = []
    real = getattr(_core, name)

    def spy(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(_core, name, spy)
    return calls


def count_simulated(monkeypatch):
    """A spy on ``_core.compare``; ``runs(n)`` gives, for each call so far,
    the places of the runs it simulated of the experiment's ``n`` (those not
    in its ``skip``: an empty list for a result assembled from the cache)."""
    skips = []
    real = _core.compare

    def spy(*a, skip=None, **kw):
        skips.append(list(skip or []))
        return real(*a, skip=skip, **kw)

    monkeypatch.setattr(_core, "compare", spy)

    def runs(n):
        return [[i for i in range(n) if i not in skip] for skip in skips]

    return skips, runs


def entry_files(d):
    return sorted(p for p in d.rglob("*.json") if not p.name.startswith("."))


@pytest.mark.sim
def test_compare_hit_is_the_fresh_result_byte_for_byte(cache_dir, monkeypatch):
    calls, runs = count_simulated(monkeypatch)
    fresh = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True)
    assert runs(2) == [[0, 1]] and "cached" not in fresh["provenance"]
    hit = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True)
    assert runs(2) == [[0, 1], []], "the second compare must come from the cache (the core only assembles it)"
    assert hit["provenance"]["cached"] is True
    assert text_of(hit) == text_of(fresh)
    # and both are what the simulator gives with the cache off
    off = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, cache=False)
    assert runs(2)[-1] == [0, 1]
    assert text_of(off) == text_of(fresh)


@pytest.mark.sim
def test_run_and_sweep_points_share_entries(cache_dir, monkeypatch, tiny_config):
    calls = count_calls(monkeypatch, "run_config")
    fresh = vmsim.run(tiny_config)
    hit = vmsim.run(tiny_config)
    assert len(calls) == 1 and hit["provenance"]["cached"] is True
    assert text_of(hit) == text_of(fresh)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as ex:
        # seed 0 is the run above; seed 1 is new
        rows = vmsim.sweep_rows({"seed": [0, 1]}, tiny_config, ex)
        assert len(calls) == 2
        again = vmsim.sweep_rows({"seed": [0, 1]}, tiny_config, ex)
    assert len(calls) == 2
    assert again == rows
    assert rows[0]["cycles"] == fresh["metrics"]["cycles"]
    with ThreadPoolExecutor(max_workers=1) as ex:
        off = vmsim.sweep_rows({"seed": [0, 1]}, tiny_config, ex, cache=False)
    assert len(calls) == 4 and off == rows


@pytest.mark.sim
def test_sweep_progress_counts_cached_points(cache_dir, tiny_config):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as ex:
        vmsim.sweep_rows({"seed": [0]}, tiny_config, ex)
        seen = []
        vmsim.sweep_rows({"seed": [0, 1]}, tiny_config, ex, progress=lambda label, f: seen.append(f))
    assert seen == [0.5, 1.0]


@pytest.mark.sim
def test_compare_runs_reads_cached_seeds(cache_dir, monkeypatch):
    vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, seed=1)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as ex:
        calls, runs = count_simulated(monkeypatch)
        doc = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, runs=2, executor=ex)
    assert sorted(runs(2)) == [[], [0, 1]], "seed 1 was cached: only seed 0 runs"
    assert [r["provenance"].get("cached", False) for r in doc["runs"]] == [False, True]
    with ThreadPoolExecutor(max_workers=1) as ex:
        off = vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, runs=2, executor=ex, cache=False)
    assert text_of(off) == text_of(doc)


def other_experiment(tmp_path, cases=False):
    """clear-target-last under another name and description, its baseline
    the same and its variant clearing another way (with ``cases``: two
    cases of 1 and 2 tasks, each with both arms)."""
    text = _core.builtin_toml("experiment", "clear-target-last")
    edits = [('name = "clear-target-last"', 'name = "clear-other"'),
             ('description = "', 'description = "another experiment: '),
             ('name = "target-last"\nset = { "kernel.clear_huge_page" = "target-last" }',
              'name = "target-last"\nset = { "kernel.clear_huge_page" = "multipage-2023" }')]
    if cases:
        edits.append(("[baseline]", '[[cases]]\nname = "one"\nset = { "workload.nr_task" = 1 }\n\n'
                                    '[[cases]]\nname = "two"\nset = { "workload.nr_task" = 2 }\n\n[baseline]'))
        edits.append(("[[published]]\n", '[[published]]\ncase = "one"\n'))
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / ("other-cases.toml" if cases else "other.toml")
    path.write_text(text)
    return str(path)


@pytest.mark.sim
def test_an_arm_shared_by_two_experiments_runs_once(cache_dir, monkeypatch, tmp_path):
    other = other_experiment(tmp_path)
    skips, runs = count_simulated(monkeypatch)
    vmsim.compare("clear-target-last", scale=SCALE, force_scale=True)
    doc = vmsim.compare(other, scale=SCALE, force_scale=True)
    assert runs(2) == [[0, 1], [1]], "the shared baseline is read from the cache, the new variant runs"
    assert doc["provenance"]["cached"] == ["sequential"]
    assert doc["experiment"] == "clear-other" and doc["description"].startswith("another experiment: ")
    off = vmsim.compare(other, scale=SCALE, force_scale=True, cache=False)
    assert text_of(doc) == text_of(off)
    again = vmsim.compare(other, scale=SCALE, force_scale=True)
    assert runs(2)[-1] == [] and again["provenance"]["cached"] is True
    assert text_of(again) == text_of(off)


@pytest.mark.sim
def test_shared_arms_across_seeds_cases_and_an_executor(cache_dir, monkeypatch, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    other = other_experiment(tmp_path, cases=True)
    # Seed 0's baselines of both cases are cached by an experiment of the
    # same cases whose variant is another.
    (tmp_path / "first").mkdir()
    first = other_experiment(tmp_path / "first", cases=True)
    with open(first) as f:
        text = f.read().replace('"multipage-2023" }', '"target-last" }')
    with open(first, "w") as f:
        f.write(text)
    vmsim.compare(first, scale=SCALE, force_scale=True)
    skips, runs = count_simulated(monkeypatch)
    with ThreadPoolExecutor(max_workers=1) as ex:
        doc = vmsim.compare(other, scale=SCALE, force_scale=True, runs=2, executor=ex)
    # the plan's order: case one's baseline and variant, then case two's
    assert sorted(runs(4)) == [[0, 1, 2, 3], [1, 3]]
    assert doc["runs"][0]["provenance"]["cached"] == ["one/sequential", "two/sequential"]
    assert "cached" not in doc["runs"][1]["provenance"]
    with ThreadPoolExecutor(max_workers=1) as ex:
        off = vmsim.compare(other, scale=SCALE, force_scale=True, runs=2, executor=ex, cache=False)
    assert text_of(doc) == text_of(off)


@pytest.mark.sim
def test_corrupt_entry_is_detected_and_run_again(cache_dir, monkeypatch, tiny_config):
    fresh = vmsim.run(tiny_config)
    (path,) = entry_files(cache_dir)
    data = bytearray(path.read_bytes())
    i = data.index(b'"cycles"') + len(b'"cycles"')
    while not chr(data[i]).isdigit():
        i += 1
    data[i] = ord("7") if data[i] != ord("7") else ord("8")  # one digit of a metric, still valid JSON
    json.loads(data[data.index(b"\n") + 1:])
    path.write_bytes(bytes(data))
    calls = count_calls(monkeypatch, "run_config")
    again = vmsim.run(tiny_config)
    assert len(calls) == 1, "a corrupt entry must be run again"
    assert "cached" not in again["provenance"]
    assert text_of(again) == text_of(fresh)
    # the entry was written again, whole: the next run reads it
    hit = vmsim.run(tiny_config)
    assert len(calls) == 1 and text_of(hit) == text_of(fresh)
    # a truncated entry and one with garbage for a header are misses too
    for broken in (path.read_bytes()[:100], b"not json\n{}"):
        path.write_bytes(broken)
        assert cache.get(path.stem) is None
        assert not path.exists()


def test_keys_follow_what_the_result_depends_on(cache_dir, tmp_path, monkeypatch, tiny_config):
    def key(cfg, base=None):
        return cache.run_key(json.dumps(cfg), base)

    k = key(tiny_config)
    assert k and k == key(dict(reversed(list(tiny_config.items()))))  # key order does not matter
    assert key(dict(tiny_config, seed=1)) != k
    assert key(dict(tiny_config, workload=dict(tiny_config["workload"], nr_task=1))) != k
    assert key(dict(tiny_config, machine="epyc-7763-2s" if "epyc-7763-2s" in vmsim.machines()
                    else sorted(vmsim.machines())[-1])) != k
    monkeypatch.setattr(_core, "__version__", "0.0.0-other")
    assert key(tiny_config) != k
    monkeypatch.undo()
    monkeypatch.setenv("VMSIM_CACHE_DIR", str(cache_dir))
    assert key(tiny_config) == k
    monkeypatch.setattr(cache, "_core_hash", "another build")
    assert key(tiny_config) != k


def arm_keys(*args):
    return [r["key"] for r in cache.compare_arms(*args)]


def test_compare_arm_keys(cache_dir):
    runs = cache.compare_arms("clear-target-last", SCALE, 0, None)
    assert [(r["case"], r["arm"], r["baseline"]) for r in runs] == [(None, "sequential", True),
                                                                    (None, "target-last", False)]
    k = arm_keys("clear-target-last", SCALE, 0, None)
    assert all(k) and len(set(k)) == 2 and k == arm_keys("clear-target-last", SCALE, 0, None)
    for other in (("clear-target-last", SCALE, 1, None), ("clear-target-last", SCALE * 2, 0, None),
                  ("clear-target-last", None, 0, None),
                  ("clear-target-last", SCALE, 0, {"kernel.page_alloc_shuffle": True})):
        assert not set(arm_keys(*other)) & set(k), other
    assert cache.compare_arms("no-such-experiment", SCALE, 0, None) is None
    # an arm's key is its config's: a run of the same config in another experiment shares it
    (cfg,) = [a["config"] for c in json.loads(_core.experiment_plan("clear-target-last", SCALE, 0, None, False))["cases"]
              for a in c["arms"] if a["name"] == "target-last"]
    assert k[1] == cache._digest({"kind": "arm", "config": cfg, "presets": cache._presets([cfg], None),
                                  "policies": {}})


def test_an_edited_experiment_file_keeps_the_keys_of_the_arms_it_leaves(cache_dir, tmp_path):
    path = tmp_path / "exp.toml"
    text = _core.builtin_toml("experiment", "clear-target-last")
    path.write_text(text)
    k = arm_keys(str(path), SCALE, 0, None)
    assert all(k) and k == arm_keys("clear-target-last", SCALE, 0, None)
    path.write_text(text.replace('description = "', 'description = "edited: ') + "\n# a comment\n")
    assert arm_keys(str(path), SCALE, 0, None) == k
    # one arm edited: that arm's key only
    path.write_text(text.replace('name = "target-last"\nset = { "kernel.clear_huge_page" = "target-last" }',
                                 'name = "target-last"\nset = { "kernel.clear_huge_page" = "multipage-2023" }'))
    edited = arm_keys(str(path), SCALE, 0, None)
    assert edited[0] == k[0] and edited[1] not in (None, k[1])


POLICY = '''\
def clear(ctx):
    return range(ctx.nr_pages)
'''


def test_python_policies_in_the_key(cache_dir, tmp_path, tiny_config):
    pol = tmp_path / "pol.py"
    pol.write_text(POLICY)
    cfg = dict(tiny_config, kernel=dict(tiny_config["kernel"], clear_huge_page="pol.py:clear"))
    k = cache.run_key(json.dumps(cfg), str(tmp_path))
    assert k
    pol.write_text(POLICY + "# changed\n")
    assert cache.run_key(json.dumps(cfg), str(tmp_path)) not in (None, k)
    # a file that is not there cannot be hashed: not cached (the run says what is wrong)
    assert cache.run_key(json.dumps(cfg), str(tmp_path / "elsewhere")) is None
    # a callable of this process is never cached
    cfg = dict(tiny_config, kernel=dict(tiny_config["kernel"], clear_huge_page="python:mod.f"))
    assert cache.run_key(json.dumps(cfg), None) is None


@pytest.mark.sim
def test_a_callable_policy_is_not_cached(cache_dir, tiny_config):
    calls = []

    def clear(ctx):
        calls.append(ctx)
        return range(ctx.nr_pages)

    cfg = dict(tiny_config, kernel=dict(tiny_config["kernel"], clear_huge_page=clear))
    vmsim.run(cfg)
    assert calls and entry_files(cache_dir) == []


def test_lru_eviction_past_the_size_limit(cache_dir, monkeypatch):
    payload = "x" * 1000
    keys = [f"{i:02x}" * 32 for i in range(4)]
    for i, k in enumerate(keys):
        cache.put(k, payload, f"entry {i}")
        os.utime(cache._path(k), (1000 + i, 1000 + i))
    assert len(cache.entries()) == 4
    size = os.path.getsize(cache._path(keys[0]))
    # entry 0 is used now: entry 1 is the least recently used
    assert cache.get(keys[0]) == payload
    monkeypatch.setenv("VMSIM_CACHE_MAX_BYTES", str(3 * size))
    cache.put("ff" * 32, payload, "new")
    left = {e["key"] for e in cache.entries()}
    assert left == {keys[0], keys[3], "ff" * 32}
    assert [e["label"] for e in cache.entries()][0] in ("new", "entry 0")
    assert cache.clear() == 3 and cache.entries() == []


def test_settings_are_checked(cache_dir, monkeypatch, tiny_config):
    monkeypatch.setenv("VMSIM_CACHE_MAX_BYTES", "lots")
    with pytest.raises(vmsim.ConfigError) as info:
        cache.max_bytes()
    assert info.value.key == "VMSIM_CACHE_MAX_BYTES"
    monkeypatch.setenv("VMSIM_CACHE_MAX_BYTES", "500M")
    assert cache.max_bytes() == 500 << 20
    monkeypatch.setenv("VMSIM_CACHE", "maybe")
    with pytest.raises(vmsim.ConfigError) as info:
        vmsim.run(tiny_config)
    assert info.value.key == "VMSIM_CACHE"
    monkeypatch.setenv("VMSIM_CACHE", "off")
    assert not cache.enabled(True)
    monkeypatch.setenv("VMSIM_CACHE", "1")
    for call in (lambda: vmsim.run(tiny_config, cache="no"),
                 lambda: vmsim.compare("clear-target-last", scale=SCALE, force_scale=True, cache=1),
                 lambda: vmsim.sweep_rows({"seed": [0]}, tiny_config, cache=None)):
        with pytest.raises(vmsim.ConfigError) as info:
            call()
        assert info.value.key == "cache"
    monkeypatch.setenv("VMSIM_CACHE_DIR", "")
    with pytest.raises(vmsim.ConfigError) as info:
        cache.cache_dir()
    assert info.value.key == "VMSIM_CACHE_DIR"


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.delenv("VMSIM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path / "vmsim")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "vmsim")


def test_an_unwritable_cache_still_returns_the_result(cache_dir, tiny_config):
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.write_text("a file where the folder would be")
    assert vmsim.run(tiny_config)["metrics"]["cycles"] > 0


def vmsim_cmd(*args):
    return subprocess.run([sys.executable, "-m", "vmsim", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=900)


@pytest.mark.sim
def test_cli_cache_list_clear_path_and_no_cache(cache_dir, tmp_path):
    p = vmsim_cmd("cache", "path")
    assert p.returncode == 0 and p.stdout.strip() == str(cache_dir)
    common = ["compare", "clear-target-last", "--scale", "1/256", "--force-scale", "-q"]
    p = vmsim_cmd(*common, "--no-cache", "--json", str(tmp_path / "a.json"))
    assert p.returncode == 0, p.stderr
    assert entry_files(cache_dir) == []
    p = vmsim_cmd(*common, "--json", str(tmp_path / "b.json"))
    assert p.returncode == 0, p.stderr
    assert len(entry_files(cache_dir)) == 2  # one per arm
    p = vmsim_cmd(*common, "--json", str(tmp_path / "c.json"))
    assert p.returncode == 0, p.stderr
    docs = [json.loads((tmp_path / f"{n}.json").read_text()) for n in "abc"]
    assert docs[2]["provenance"]["cached"] is True
    assert text_of(docs[0]) == text_of(docs[1]) == text_of(docs[2])
    p = vmsim_cmd("cache", "list")
    assert p.returncode == 0
    assert str(cache_dir) in p.stdout and "2 result(s)" in p.stdout
    assert "compare clear-target-last seed 0 scale 1/256 arm sequential" in p.stdout
    assert "compare clear-target-last seed 0 scale 1/256 arm target-last" in p.stdout
    p = vmsim_cmd("cache", "clear")
    assert p.returncode == 0 and "removed 2" in p.stdout
    assert entry_files(cache_dir) == []
    p = vmsim_cmd("compare", str(tmp_path / "a.json"), "--no-cache")
    assert p.returncode == 2 and "--no-cache" in p.stderr and "saved results" in p.stderr


@pytest.mark.sim
def test_reproduce_reads_the_cache(cache_dir, tmp_path, monkeypatch):
    from vmsim.reproduce import reproduce

    calls, runs = count_simulated(monkeypatch)
    reproduce(str(tmp_path / "a"), only=["clear-target-last"], scale=SCALE, force_scale=True)
    assert runs(2) == [[0, 1]]
    reproduce(str(tmp_path / "b"), only=["clear-target-last"], scale=SCALE, force_scale=True)
    assert runs(2) == [[0, 1], []], "the second reproduce reads the cache"
    for name in ("README.md", "clear-target-last.txt"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    a, b = (json.loads((tmp_path / d / "clear-target-last.json").read_text()) for d in "ab")
    assert b["provenance"]["cached"] is True and text_of(a) == text_of(b)
    reproduce(str(tmp_path / "c"), only=["clear-target-last"], scale=SCALE, force_scale=True, cache=False)
    assert runs(2)[-1] == [0, 1]


_ORDER = """\
from vmsim.policy import Region, Subpage
def order(ctx):
    return {body}
"""


def test_a_policy_file_edited_in_the_process_runs_as_edited_and_is_keyed_by_what_ran(cache_dir, tmp_path,
                                                                                    tiny_config):
    f = tmp_path / "order.py"
    f.write_text(_ORDER.format(body="[Region(0, ctx.nr_pages)]"))
    cfg = dict(tiny_config)
    cfg["kernel"] = dict(cfg["kernel"], clear_huge_page=f"{f}:order")
    asc = vmsim.run(cfg)
    f.write_text(_ORDER.format(body="[Subpage(i) for i in reversed(range(ctx.nr_pages))]"))
    desc = vmsim.run(cfg)
    assert not desc["provenance"].get("cached"), "an edited policy is a new key"
    assert desc["metrics"] != asc["metrics"], "the edited code ran, not the module loaded first"
    # The same two runs again come from the cache, each under its content.
    f.write_text(_ORDER.format(body="[Region(0, ctx.nr_pages)]"))
    again = vmsim.run(cfg)
    assert again["provenance"].get("cached") and again["metrics"] == asc["metrics"]


def test_a_result_is_not_stored_when_its_policy_changed_during_the_run(cache_dir, tmp_path, tiny_config):
    f = tmp_path / "order.py"
    f.write_text(_ORDER.format(body="[Region(0, ctx.nr_pages)]"))
    cfg = dict(tiny_config)
    cfg["kernel"] = dict(cfg["kernel"], clear_huge_page=f"{f}:order")
    key = cache.run_key(json.dumps(cfg), None)
    assert key is not None
    f.write_text(_ORDER.format(body="[Subpage(i) for i in range(ctx.nr_pages)]"))  # edited mid-run
    cache.put(key, "{}", "run")
    assert cache.get(key) is None
    key = cache.run_key(json.dumps(cfg), None)
    cache.put(key, "{}", "run")
    assert cache.get(key) == "{}"


def test_a_fifo_as_the_trace_fails_at_once_with_the_cache_on(cache_dir, tmp_path):
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'machine = "xeon-e5-2699v3-2s"\n[workload]\nkind = "trace"\ntrace = "{fifo}"\n')
    p = subprocess.run([sys.executable, "-m", "vmsim", "run", "-q", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "not a regular file" in p.stderr, p.stderr


def test_a_bad_size_limit_is_refused_before_the_simulation(cache_dir, monkeypatch, tiny_config):
    calls = count_calls(monkeypatch, "run_config")
    monkeypatch.setenv("VMSIM_CACHE_MAX_BYTES", "banana")
    with pytest.raises(vmsim.ConfigError, match="VMSIM_CACHE_MAX_BYTES"):
        vmsim.run(tiny_config)
    assert calls == []


def test_an_entry_the_cache_did_not_write_is_dropped_unread(cache_dir, monkeypatch, tiny_config):
    key = cache.run_key(json.dumps(tiny_config), None)
    cache.put(key, "{}", "run")
    path = cache._path(key)
    monkeypatch.setenv("VMSIM_CACHE_MAX_BYTES", "1K")
    with open(path, "wb") as f:  # a forged entry past the whole cache's limit, no line break
        f.write(b"x" * 4096)
    assert cache.get(key) is None and not os.path.exists(path)
    os.mkfifo(path)  # would block a read
    assert cache.get(key) is None and not os.path.exists(path)


def test_a_program_that_maps_no_memory_has_lost_nothing(cache_dir, tmp_path):
    cfg = tmp_path / "sleep.toml"
    cfg.write_text('machine = "xeon-e5-2699v3-2s"\n[workload]\nkind = "program"\n[[workload.task]]\n'
                   'name = "t"\nsteps = [ { op = "sleep", us = 10 } ]\n')
    assert vmsim.run(str(cfg))["metrics"]["data_verified"] is True
