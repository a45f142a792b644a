"""What an experiment would simulate, asked of the core's plan without
simulating: ``experiment_plan``, its metric names, the checks a compare
makes against it before running (``set`` keys the experiment sets itself,
a scale below its smallest valid one) and the note for a scale below its
quick scale."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _core
from ._errors import check_json_values, config_error, cut
from .tables import show_scale


def check_min_scale(experiment: str, scale: Optional[float], settings: Optional[Mapping[str, Any]] = None,
                    force_scale: Any = False) -> Optional[Dict[str, Any]]:
    """Holds a compare's scale to the experiment's smallest valid scale (its
    ``min_scale``, read from the core's plan). Below it: ``ConfigError``
    keyed ``scale`` naming the smallest valid scale and why, or, with
    ``force_scale``, the marks for the result (``scale_forced``,
    ``scale_factor``, the scale run, ``min_scale`` and ``min_scale_why``).
    None when the scale is valid (or the experiment cannot be planned: the
    run then says why)."""
    if not isinstance(force_scale, bool):
        raise config_error("force_scale", f"{cut(repr(force_scale))} is not accepted; accepted: True or False")
    try:
        plan = json.loads(_core.experiment_plan(experiment, None, 0, json.dumps(dict(settings)) if settings else None,
                                                False))
    except (_core.VmsimError, OSError, ValueError):
        return None
    least, why = plan.get("min_scale"), plan.get("min_scale_why")
    used = plan["scale"] if scale is None else scale
    if least is None or used >= least * (1 - 1e-12):
        return None
    if not force_scale:
        quick = plan.get("quick_scale")
        hint = (f"; its quick scale is {show_scale(quick['scale'])}, measured within {quick['tolerance']:g} "
                f"percentage {'point' if quick['tolerance'] == 1 else 'points'} of scale {show_scale(plan['scale'])}'s headline change"
                ) if isinstance(quick, dict) else ""
        raise config_error("scale", f"{show_scale(used)} is below {plan['experiment']}'s smallest valid scale "
                                    f"{show_scale(least)}: {why}; accepted: at least {show_scale(least)} "
                                    "(force_scale=True, --force-scale on the command line, runs anyway and "
                                    f"marks the result){hint}")
    return {"scale_forced": True, "scale_factor": used, "min_scale": least, "min_scale_why": why}


def quick_scale_note(experiment: str, scale: Optional[float]) -> Optional[str]:
    """A note for a compare run at ``scale`` below the experiment's quick
    scale (the smallest measured to give the headline change of the
    experiment's default scale, scale 1 unless its file says otherwise,
    within its tolerance), or None: such a scale is valid, but its answer
    may differ from that scale's by more than that."""
    if scale is None:
        return None
    try:
        plan = json.loads(_core.experiment_plan(experiment, None, 0, None, False))
    except (_core.VmsimError, OSError, ValueError):
        return None
    quick = plan.get("quick_scale")
    if not isinstance(quick, dict) or scale >= quick["scale"] * (1 - 1e-12):
        return None
    reference = show_scale(plan["scale"])
    return (f"{show_scale(scale)} is below {plan['experiment']}'s quick scale {show_scale(quick['scale'])}, "
            f"the smallest measured to give scale {reference}'s headline change within {quick['tolerance']:g} "
            f"percentage {'point' if quick['tolerance'] == 1 else 'points'}: this answer may differ from scale "
            f"{reference}'s by more")


def check_set(experiment: str, settings: Any) -> Optional[Dict[str, Any]]:
    """``compare``'s ``set`` as a dict of dotted keys to JSON values, or None.

    A key that a case or an arm of the experiment also sets is refused: the
    core applies those after ``set``, so the value given would be lost."""
    if settings is None:
        return None
    if not isinstance(settings, Mapping):
        raise config_error("set", f"{cut(repr(settings))} is not accepted; accepted: a mapping of dotted config keys "
                                  "to values, e.g. {'workload.nr_task': 4}")
    settings = dict(settings)
    for key in settings:
        if not isinstance(key, str) or not key.strip():
            raise config_error("set", f"the key {cut(repr(key))} is not a dotted config key (e.g. 'workload.nr_task')")
    check_json_values(settings, "set")
    if settings:
        # The core refuses a key that a case or an arm sets itself (its own
        # value would win); an experiment it cannot load is left for the run
        # to report.
        try:
            _core.experiment_plan(experiment, None, 0, json.dumps(settings), False)
        except _core.ConfigError as e:
            if e.key == "set" or e.key.startswith("set."):
                raise
    return settings or None


def experiment_plan(experiment: Union[str, "os.PathLike[str]"], scale: Optional[float] = None, seed: int = 0,
                    settings: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """What ``compare`` would simulate, from the core, without simulating:
    ``{"experiment", "scale", "seed", "min_scale", "min_scale_why",
    "quick_scale", "cases": [{"name", "arms": [{"name", "baseline", "config",
    "metrics"}]}]}`` (a case ``name`` of None for an experiment without
    cases; ``min_scale``, the smallest valid scale, its reason, and
    ``quick_scale`` (``{"scale", "tolerance", "measured"}``) None where the
    experiment states none). Raises what ``compare`` would raise before
    its first run."""
    return json.loads(_core.experiment_plan(os.fspath(experiment), scale, seed,
                                            json.dumps(dict(settings)) if settings else None))


def experiment_metric_names(experiment: Union[str, "os.PathLike[str]"],
                            settings: Optional[Mapping[str, Any]] = None,
                            scale: Optional[float] = None) -> Optional[List[str]]:
    """The scalar metrics an experiment's arms report, known before anything
    runs (from the core's plan), or None when the plan cannot be made: the
    run then says what is wrong."""
    try:
        plan = experiment_plan(experiment, scale, 0, settings)
    except (_core.VmsimError, OSError, ValueError):
        return None
    return sorted({m for case in plan["cases"] for arm in case["arms"] for m in arm["metrics"]})
