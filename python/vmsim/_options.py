"""The options the API's commands share: the checks of threads, seeds,
scales, ``min_change`` and metric names (each refusal a ``ConfigError``
naming the option), their limits, the default number of simulations at
once, and the type of a ``progress`` callback."""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Optional, Sequence

from ._errors import config_error, cut

ProgressCallback = Callable[[str, float], Any]


def check_scale(scale: Any) -> Optional[float]:
    """A memory scale factor: ``None`` (the experiment's own) or a positive finite number."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (math.isfinite(scale) and scale > 0):
        raise config_error("scale", f"{cut(repr(scale))} is not accepted; accepted: a positive number, "
                                    "or None for the experiment's own scale")
    return float(scale)


def check_metric_names(metrics: Sequence[str], known: Sequence[str], key: str = "metrics") -> None:
    """Refuses metric names that are not in ``known``, listing the known ones."""
    unknown = [m for m in metrics if m not in set(known)]
    if unknown:
        raise config_error(key, f"unknown metric(s) {', '.join(cut(m) for m in unknown)}; known: {', '.join(known)}")


def check_min_change(min_change: Any) -> float:
    """A ``min_change`` percentage: a finite number of at least 0."""
    if isinstance(min_change, bool) or not isinstance(min_change, (int, float)) or not (
            math.isfinite(min_change) and min_change >= 0):
        raise config_error("min_change", f"{cut(repr(min_change))} is not accepted; accepted: a finite number "
                                         "of at least 0 (percent)")
    return float(min_change)


def default_threads() -> int:
    """Simulations run at once by default (``compare``'s threads, a sweep's or
    ``--runs``' worker processes): one per host CPU this process may use."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Most host threads asked for: far beyond any host's CPUs (the core uses
#: no more threads than it has arms or sockets to run).
MAX_THREADS = 1 << 16


#: Largest seed: a run config's ``seed`` is a TOML integer (at most 2^63-1),
#: and every seed of a ``compare --runs`` or a sweep is one.
MAX_SEED = 2**63 - 1


def check_threads(threads: Any, key: str = "threads") -> int:
    """A host thread count: ``None`` (one per host CPU) or an integer in 1..``MAX_THREADS``."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise config_error(key, f"{cut(repr(threads))} is not accepted; accepted: an integer in 1..{MAX_THREADS}")
    return threads


def check_seed(seed: Any) -> int:
    """A seed as the core takes it: an integer in 0..2^63-1 (``MAX_SEED``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise config_error("seed", f"{cut(repr(seed))} is not accepted; accepted: an integer in 0..{MAX_SEED}")
    return seed
