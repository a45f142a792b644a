"""Results read back (saved compares, plots, DataFrames): their shape is
checked where they come in, so a file that is not what vmsim writes is
refused with one message naming it rather than a traceback from deep inside
a table or a plot. Only what those readers rely on is checked."""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Dict, Mapping, Optional, Union

from ._errors import config_error, cut
from ._provenance import SCHEMA_VERSION


def _a(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"a string ({cut(repr(value))})"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    return "null" if value is None else f"a {type(value).__name__}"


def _metrics_problem(metrics: Any, field: str) -> Optional[str]:
    if not isinstance(metrics, Mapping):
        return f"'{field}' is {_a(metrics)}, not an object of metric names to values"
    per_cpu = metrics.get("per_cpu")
    if per_cpu is not None and not (isinstance(per_cpu, list) and all(isinstance(r, Mapping) for r in per_cpu)):
        return f"'{field}.per_cpu' is {_a(per_cpu)}, not a list of objects (one per CPU)"
    return None


def _order_problem(order: Any, names: Mapping[str, Any], field: str, of: str) -> Optional[str]:
    if order is None:
        return None
    if not isinstance(order, list) or any(not isinstance(n, str) or n not in names for n in order):
        return f"'{field}' is not a list of names found in '{of}' ({cut(json.dumps(order, default=str))})"
    return None


def _arms_problem(result: Mapping[str, Any], prefix: str = "") -> Optional[str]:
    """A run or compare result (with or without cases), in the order
    ``tables.iter_runs`` reads them."""
    if "cases" in result:
        cases = result["cases"]
        if not isinstance(cases, Mapping):
            return f"'{prefix}cases' is {_a(cases)}, not an object of case names to compare results"
        if not cases:
            return f"'{prefix}cases' is empty: no case to show"
        problem = _order_problem(result.get("case_order"), cases, f"{prefix}case_order", f"{prefix}cases")
        for name, case in cases.items():
            if problem:
                break
            if not isinstance(case, Mapping) or not any(k in case for k in ("metrics", "variants", "cases")):
                problem = f"'{prefix}cases.{name}' is {_a(case)}, not a compare result"
            else:
                problem = _arms_problem(case, f"{prefix}cases.{name}.")
        return problem
    if "variants" in result:
        variants = result["variants"]
        if not isinstance(variants, Mapping):
            return f"'{prefix}variants' is {_a(variants)}, not an object of variant names to metrics"
        problem = _order_problem(result.get("variant_order"), variants, f"{prefix}variant_order", f"{prefix}variants")
        problem = problem or _metrics_problem(result.get("baseline", {}), f"{prefix}baseline")
        for name, metrics in variants.items():
            problem = problem or _metrics_problem(metrics, f"{prefix}variants.{name}")
        return problem
    if "metrics" in result:
        return _metrics_problem(result["metrics"], f"{prefix}metrics")
    return f"'{prefix.rstrip('.') or 'result'}' has none of 'metrics', 'variants' or 'cases'"


def result_problem(result: Any) -> Optional[str]:
    """What in ``result`` keeps it from being read as a run, compare,
    ``compare --runs`` or sweep result, or None when nothing does."""
    if not isinstance(result, Mapping):
        return f"not a vmsim run, compare or sweep result: {_a(result)}, not an object"
    prov = result.get("provenance")
    version = prov.get("schema_version") if isinstance(prov, Mapping) else None
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            return f"'provenance.schema_version' is {_a(version)}, not a layout version (a whole number from 1)"
        if version > SCHEMA_VERSION:
            return (f"written by a newer vmsim (result layout {version}; this one reads up to "
                    f"{SCHEMA_VERSION}): read it with that version")
    kind = result.get("kind")
    if kind == "sweep":
        rows = result.get("rows")
        if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
            return f"'rows' is {_a(rows)}, not a list of objects (one per sweep point)"
        keys = result.get("grid_keys")
        if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            return f"'grid_keys' is {_a(keys)}, not a list of config keys"
        if result.get("grid") is not None and not isinstance(result["grid"], Mapping):
            return f"'grid' is {_a(result['grid'])}, not an object of config keys to values"
        return None
    if kind == "compare-runs":
        runs = result.get("runs")
        if not isinstance(runs, list):
            return f"'runs' is {_a(runs)}, not a list of compare results (one per seed)"
        if not runs:
            return "'runs' is empty: no run to show"
        for i, r in enumerate(runs):
            if not isinstance(r, Mapping) or not any(k in r for k in ("metrics", "variants", "cases")):
                return f"'runs[{i}]' is {_a(r)}, not a compare result"
            problem = _arms_problem(r, f"runs[{i}].")
            if problem:
                return problem
        return None
    if not any(k in result for k in ("metrics", "variants", "cases")):
        if "command" in result and "host" in result:
            return ("not a vmsim run, compare or sweep result: a host measurement (vmsim hw); "
                    "its figures are in its table")
        return "not a vmsim run, compare or sweep result: an object without 'metrics', 'variants' or 'cases'"
    return _arms_problem(result)


def check_result(result: Any, origin: str) -> None:
    """Raises ``ConfigError`` (key: ``origin``, the file or argument) when
    ``result`` is not a result the tables and plots can read."""
    problem = result_problem(result)
    if problem:
        raise config_error(origin, problem)


def load_result(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """A result JSON file, its shape checked (``ConfigError`` naming the file
    when it is not one; ``FileNotFoundError`` when it does not exist)."""
    p = os.fspath(path)
    if not p.strip():
        raise config_error("result", "an empty path; give a result JSON file")
    st = os.stat(p)  # FileNotFoundError names the file
    if not stat.S_ISREG(st.st_mode):
        raise config_error(p, "not a regular file; a result must be one")
    try:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
    except ValueError as e:  # bad JSON or bad UTF-8
        raise config_error(p, f"not a JSON result ({cut(str(e), 120)})") from None
    except RecursionError:
        raise config_error(p, "not a JSON result (nested too deep)") from None
    check_result(doc, p)
    return doc
