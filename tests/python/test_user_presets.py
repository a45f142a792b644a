"""A user's copy of a built-in preset: its changes are recorded as the
user's (provenance.machines[FILE].user_changes, ``user:`` sources, a
warning), and ``vmsim validate --machine FILE`` measures it against the
built-in's published figures."""
import json
import re

import pytest

from conftest import TINY_TOML
from vmsim import _provenance, cli, model_validate


def _copy(tmp_path, capsys, name="xeon-6238m-clx", edits=()):
    assert cli.main(["machines", "--show", name]) == 0
    text = capsys.readouterr().out
    for pattern, repl in edits:
        text, n = re.subn(pattern, repl, text, count=1, flags=re.M)
        assert n == 1, pattern
    path = tmp_path / "my.toml"
    path.write_text(text)
    return path




def _edits(builtin_text):
    llc = builtin_text.index("[llc]")
    size = re.search(r'size_kib = \{ value = (\d+)', builtin_text[llc:])
    ways = re.search(r'ways = \{ value = (\d+), source = "[^"]*"', builtin_text[llc:])
    return int(size.group(1)), int(ways.group(1)), llc


def test_changes_are_recorded_as_the_users(tmp_path, capsys, monkeypatch):
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    size, ways, llc = _edits(text)
    head, tail = text[:llc], text[llc:]
    tail = tail.replace(f"size_kib = {{ value = {size},", f"size_kib = {{ value = {size // 2},", 1)
    tail = re.sub(r'ways = \{ value = \d+, source = "[^"]*"', f'ways = {{ value = {ways * 2}, source = "user: twice the ways"', tail, count=1)
    path.write_text(head + tail)
    changes = _provenance.preset_changes(str(path))
    assert changes["builtin"] == "xeon-6238m-clx"
    by_key = {c["key"]: c for c in changes["changed"]}
    assert set(by_key) == {"llc.size_kib", "llc.ways"}
    assert by_key["llc.size_kib"]["value"] == size // 2 and by_key["llc.size_kib"]["builtin_value"] == size
    assert not by_key["llc.size_kib"]["source_recorded"]
    assert by_key["llc.size_kib"]["source"].startswith(f"user: changed from {size} in the built-in preset xeon-6238m-clx")
    assert by_key["llc.ways"] == {"key": "llc.ways", "value": ways * 2, "builtin_value": ways,
                                  "source": "user: twice the ways", "source_recorded": True}
    # A built-in name, or a file named after no built-in, has nothing to compare with.
    assert _provenance.preset_changes("xeon-6238m-clx") is None
    other = tmp_path / "other.toml"
    other.write_text(path.read_text().replace('name = "xeon-6238m-clx"', 'name = "mine"', 1))
    assert _provenance.preset_changes(str(other)) is None

    # A run on it records them, and the CLI warns of the one without a source.
    run = tmp_path / "run.toml"
    run.write_text(TINY_TOML.replace('machine = "xeon-e5-2699v3-2s"', 'machine = "my.toml"'))
    out = tmp_path / "r.json"
    assert cli.main(["run", "-q", str(run), "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning: changed from the built-in preset without a source of their own" in err
    assert f"my.toml: llc.size_kib ({size} -> {size // 2})" in err and "llc.ways" not in err
    machine = json.loads(out.read_text())["provenance"]["machines"]["my.toml"]
    assert machine["user_changes"] == changes
    assert machine["sources"]["llc.size_kib"] == by_key["llc.size_kib"]["source"]
    assert machine["sources"]["llc.ways"] == "user: twice the ways"


def test_added_and_removed_values_are_recorded(tmp_path, capsys):
    # A NUMA hop table added to a preset that has none, and a value left out.
    path = _copy(tmp_path, capsys, name="xeon-e5-2699v3-2s")
    text = path.read_text()
    text += ('\n[numa]\nhops = { value = [[0, 1], [1, 0]], source = "user: two sockets, one link" }\n'
             'extra_hop_latency_ns = { value = 0.0, source = "user: no second hop" }\n')
    line = next(l for l in text.splitlines() if l.startswith("issue_width ="))
    path.write_text(text.replace(line + "\n", "", 1))
    changes = _provenance.preset_changes(str(path))
    by_key = {c["key"]: c for c in changes["changed"]}
    assert by_key["numa.hops"] == {"key": "numa.hops", "value": [[0, 1], [1, 0]], "builtin_value": None,
                                   "source": "user: two sockets, one link", "source_recorded": True}
    assert by_key["numa.extra_hop_latency_ns"]["builtin_value"] is None
    removed = [c for c in changes["changed"] if c["value"] is None]
    assert len(removed) == 1 and removed[0]["source"].startswith("user: left out of the file")


def test_show_tells_how_to_record_a_change(capsys):
    import tomllib

    assert cli.main(["machines", "--show", "xeon-8358-icx"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# The built-in preset xeon-8358-icx, to copy and change.")
    assert 'source = "user: ..."' in out and tomllib.loads(out)["name"] == "xeon-8358-icx"


@pytest.mark.sim
def test_validate_a_preset_file_against_its_builtins_published_figures(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    size, _, llc = _edits(text)
    path.write_text(text[:llc] + text[llc:].replace(f"size_kib = {{ value = {size},", f"size_kib = {{ value = {size // 4},", 1))
    builtin = model_validate.validate_model("xeon-6238m-clx")
    mine = model_validate.validate_model("my.toml")
    assert mine["user_changes"]["changed"][0]["key"] == "llc.size_kib"
    assert mine["table"].startswith("my.toml changes 1 value(s) of the built-in preset xeon-6238m-clx:")
    assert [r["description"] for r in mine["rows"]] == [r["description"] for r in builtin["rows"]]
    assert {r["preset"] for r in mine["rows"]} == {"my.toml (against the published figures of xeon-6238m-clx)"}
    assert [r["published"] for r in mine["rows"]] == [r["published"] for r in builtin["rows"]]
    # A quarter of the LLC: the row over 9 MiB (inside the built-in's LLC) now runs from DRAM.
    def row(rows, what):
        return next(r for r in rows if r["description"] == what)
    assert row(mine["rows"], "1 core load, 9 MiB (GB/s)")["model"] < 0.7 * row(builtin["rows"], "1 core load, 9 MiB (GB/s)")["model"]
    assert row(mine["rows"], "idle latency, local DRAM (ns)")["model"] == row(builtin["rows"], "idle latency, local DRAM (ns)")["model"]
    # Files that cannot be validated: refused with the reason, naming the field.
    (tmp_path / "mine.toml").write_text(path.read_text().replace('name = "xeon-6238m-clx"', 'name = "mine"', 1))
    for arg, says in (("mine.toml", 'its preset is named "mine", which has no microbenchmarks'),
                      ("nope.toml", "neither a built-in machine nor an existing .toml file"),
                      ("nope", 'no microbenchmarks for "nope"')):
        assert cli.main(["validate", "--machine", arg]) == 2
        err = capsys.readouterr().err
        assert err.startswith("vmsim: error: machine: ") and says in err, err
