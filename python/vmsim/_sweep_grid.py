"""A sweep's grid and table, apart from running it: the grid's points,
each config checked by the core before anything runs; the metric names
its rows will hold; the order of its columns; whether a saved sweep's
grid can be resumed as another; and the sweep's JSON document."""

from __future__ import annotations

import itertools
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import _core, _provenance
from ._config import ConfigLike, load_dict, set_dotted
from ._errors import check_json_values, config_error, cut
from .tables import metric_names


def sweep_points(grid: Mapping[str, Sequence[Any]], base: ConfigLike) -> List[Dict[str, Any]]:
    """The points of a sweep, each checked by the core (raises ``ConfigError``
    naming the point and the key for the first bad one)."""
    base_config, base_dir = load_dict(base)
    return _sweep_points(grid, base_config, base_dir)[0]


def sweep_metric_names(grid: Mapping[str, Sequence[Any]], base: ConfigLike) -> List[str]:
    """The scalar metrics the sweep's rows will hold besides the grid keys,
    known before anything runs: the union over the points' machines and
    workloads (the names depend on nothing else)."""
    base_config, base_dir = load_dict(base)
    _, configs = _sweep_points(grid, base_config, base_dir)
    names: set = set()
    seen: set = set()
    for text in configs:
        cfg = json.loads(text)
        workload = cfg.get("workload") if isinstance(cfg.get("workload"), dict) else {}
        kind = json.dumps([cfg.get("machine"), workload.get("kind")], sort_keys=True)
        if kind in seen:
            continue
        seen.add(kind)
        names.update(_core.metric_names(text, "json", base_dir))
    return sorted(names)


def sweep_columns(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> List[str]:
    """The columns of a sweep's table: the swept keys first, in the grid's
    order, then the metrics in table order (``tables.metric_names``), then
    any other field (``status``, then ``error``). The same order whether the
    rows were just run or read back from a saved sweep (whose JSON keys are
    sorted)."""
    keys = list(keys)
    names: List[str] = []
    for r in rows:
        names.extend(k for k in r if k not in keys and k not in names)
    metrics = metric_names(*({k: r[k] for k in r if k in names and k not in ("status", "error")} for r in rows))
    tail = [k for k in ("status", "error") if k in names]
    others = sorted(k for k in names if k not in metrics and k not in tail)
    return keys + metrics + others + tail


def grid_extension_problem(old: Any, new: Mapping[str, Sequence[Any]]) -> Optional[str]:
    """Why a saved sweep's grid ``old`` cannot be resumed as ``new``, or None
    when ``new`` is the same grid or extends it: the same keys (in any
    order), each keeping every value it had (new values may be added)."""
    if not isinstance(old, dict):
        return "it has no grid"
    if set(old) != set(new):
        return f"its keys are {', '.join(sorted(old)) or 'none'}, not {', '.join(sorted(new))}"
    for key, values in new.items():
        had = old[key] if isinstance(old[key], list) else []
        now = {json.dumps(v, sort_keys=True) for v in values}
        lost = [v for v in had if json.dumps(v, sort_keys=True) not in now]
        if lost:
            return f"{key} drops {', '.join(json.dumps(v) for v in lost)}"
    return None


def _point_key(row: Mapping[str, Any], keys: Sequence[str]) -> str:
    return json.dumps([row.get(k) for k in keys], sort_keys=True)


def _sweep_points(grid: Mapping[str, Sequence[Any]], base_config: Dict[str, Any], base_dir: Optional[str]):
    """The grid's points and their config texts, each checked by the core."""
    keys = list(grid)
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise config_error("grid", f"the key {cut(repr(key))} is not a dotted config key (e.g. 'workload.nr_task')")
        for other in keys[:i]:
            if key.startswith(other + ".") or other.startswith(key + "."):
                raise config_error(cut(key), f"overlaps the grid key {cut(other)} (one is inside the other); "
                                             "give each key once")
    value_lists = []
    for key in keys:
        values = grid[key]
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            values = None  # a single value (5, True, None) is no list of values either
        else:
            values = list(values)
        if not values:
            raise config_error(cut(str(key)), f"{cut(repr(grid[key]))} is not accepted; expected a non-empty list "
                                              "of values to sweep")
        value_lists.append(values)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*value_lists)]
    configs = []
    for point in points:
        cfg = json.loads(json.dumps(base_config))
        for key, value in point.items():
            set_dotted(cfg, key, value)
        check_json_values(cfg)
        text = json.dumps(cfg)
        try:
            _core.check_config(text, "json", base_dir)
        except _core.ConfigError as e:
            shown = ", ".join(f"{k}={cut(json.dumps(v), 30)}" for k, v in point.items())
            raise config_error(e.key, f"{e.message} (at sweep point {shown}; no point was run)") from None
        configs.append(text)
    return points, configs


def sweep_document(grid: Mapping[str, Sequence[Any]], base: ConfigLike, rows: List[Dict[str, Any]], *,
                   host_seconds: float = 0.0) -> Dict[str, Any]:
    """The JSON document of a sweep: ``kind`` "sweep", the ``grid``, the
    ``base`` config, one row per point (``rows``) and the provenance block."""
    base_config, base_dir = load_dict(base)
    seeds = sorted({int(r["seed"]) for r in rows if isinstance(r.get("seed"), int)} or {int(base_config.get("seed", 0))})
    doc: Dict[str, Any] = {"kind": "sweep", "grid": {k: list(v) for k, v in grid.items()}, "grid_keys": list(grid),
                           "config": base_config, "rows": rows}
    return _provenance.attach(doc, "sweep", seeds=seeds, scale=None, host_seconds=host_seconds, base_dir=base_dir)
