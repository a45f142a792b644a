"""``to_dataframe``: a result (run, compare, ``compare --runs`` or sweep,
or the path of one) as a ``pandas.DataFrame``."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

from ._errors import config_error, cut
from ._results import check_result, load_result
from .tables import iter_runs, iter_scalar_rows, percent_change


def to_dataframe(result: Union[Mapping[str, Any], Sequence[Mapping[str, Any]], str, "os.PathLike[str]"], *,
                 per_cpu: bool = False):
    """A ``pandas.DataFrame`` of a result.

    - ``run`` result: one row (index ``"run"``), a column per scalar metric;
    - ``compare`` result: a row per configuration (baseline first, then the
      variants in order), a column per scalar metric, and the comparison:
      ``baseline``, the name of the arm the row is compared with (its
      case's baseline, ``case/arm`` in a case), and beside each metric
      ``<metric>_change_pct``, the change from that arm's value in percent
      (NaN where not defined: a zero or missing baseline, a flag);
    - ``compare --runs`` result: the same, one row per configuration and
      seed (index ``run``, ``seed``), each compared with the baseline of its
      seed;
    - a list of rows (``sweep`` without pandas): one row each;
    - the path of a result JSON: that result, as above.

    With ``per_cpu=True``, the per-CPU counters instead: one row per CPU (and
    per configuration for a compare result, in a ``run`` column).
    Needs pandas (``pip install 'vmsim[full]'``).
    """
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("to_dataframe needs pandas: pip install 'vmsim[full]'") from e
    if isinstance(result, (str, os.PathLike)):
        result = load_result(result)
    elif isinstance(result, Mapping):
        check_result(result, "result")
    else:
        try:
            rows = list(result)
        except TypeError:
            rows = None
        if rows is None or not all(isinstance(r, Mapping) for r in rows):
            raise config_error("result", f"{cut(repr(result))} is not accepted; accepted: a result dict, the path "
                                         "of a result JSON, or a list of row dicts")
        return pd.DataFrame(rows)
    if result.get("kind") == "sweep":
        return pd.DataFrame(result.get("rows", []))
    if result.get("kind") == "compare-runs" and not per_cpu:
        rows = [dict(row, run=name, seed=seed)
                for seed, r in zip(result.get("seeds", []), result.get("runs", [])) for name, row in _compared(r)]
        return pd.DataFrame(rows).set_index(["run", "seed"])
    if per_cpu:
        frames = []
        for name, metrics in iter_runs(result):
            df = pd.DataFrame(metrics.get("per_cpu", []))
            df.insert(0, "run", name)
            frames.append(df)
        return pd.concat(frames, ignore_index=True)
    arms = _compared(result) if ("variants" in result or "cases" in result) else list(iter_scalar_rows(result))
    df = pd.DataFrame([m for _, m in arms], index=[n for n, _ in arms])
    df.index.name = "run"
    return df


def _compared(result: Mapping[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """(arm, row) of a compare result: the scalar metrics, ``baseline`` and
    each metric's ``<metric>_change_pct`` beside it."""
    rows = list(iter_scalar_rows(result))
    base_of: Dict[str, str] = {}
    for name, _ in rows:
        case = name.rpartition("/")[0]
        base_of.setdefault(case, name)
    values = dict(rows)
    out = []
    for name, metrics in rows:
        base = base_of[name.rpartition("/")[0]]
        row: Dict[str, Any] = {"baseline": base}
        for k, v in metrics.items():
            row[k] = v
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                change = percent_change(values[base].get(k), v)
                row[f"{k}_change_pct"] = math.nan if change is None else change
        out.append((name, row))
    return out
