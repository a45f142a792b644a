"""What a worker runs, on any executor (a process pool's worker or a dask
cluster's): one sweep point or one seed of an experiment, each after
checking that the worker runs the caller's vmsim build. Module-level
functions, so that executors can pickle them by name."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional, Sequence

from . import _core


def _build() -> List[str]:
    return [_core.__version__, getattr(_core, "__git_revision__", "unknown")]


def _check_build(expected: Optional[Sequence[str]]) -> None:
    """In a worker: refuses to run for a caller of another vmsim build (a
    cluster's workers must run the caller's version, or results differ)."""
    if expected is not None and list(expected) != _build():
        raise _core.VmsimError(f"this worker runs vmsim {' '.join(_build())}, the study was started with "
                               f"vmsim {' '.join(expected)}; install the same version on every worker")


def _compare_text(experiment: str, scale: Optional[float], seed: int, set_json: Optional[str], threads: int,
                  build: Optional[Sequence[str]] = None, skip: Sequence[int] = ()) -> tuple:
    """One seed of an experiment in a worker (a process pool's or a dask
    cluster's): the core's JSON text (the runs in ``skip`` not simulated,
    their metrics null) and the host seconds it took."""
    _check_build(build)
    t0 = time.monotonic()
    text = _core.compare(experiment, scale, seed, None, set_json, threads, skip=list(skip))
    return text, time.monotonic() - t0


def _run_point(config_json: str, base_dir: Optional[str], threads: int = 1) -> Dict[str, Any]:
    """One sweep point (module level so that process pools can pickle it);
    a windowed point spreads its sockets over ``threads`` host threads."""
    return json.loads(_core.run_config(config_json, "json", base_dir, None, threads))


def _run_point_text(config_json: str, base_dir: Optional[str], threads: int = 1,
                    build: Optional[Sequence[str]] = None) -> str:
    """One sweep point in a worker: the core's JSON text (what the cache stores)."""
    _check_build(build)
    return _core.run_config(config_json, "json", base_dir, None, threads)
