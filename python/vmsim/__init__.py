"""vmsim: a deterministic simulator of the Linux memory-management fast paths.

    >>> import vmsim
    >>> r = vmsim.run({"machine": "xeon-e5-2699v3-2s",
    ...                "workload": {"kind": "usemem", "nr_task": 2, "size_per_task_mib": 4}})
    >>> r["metrics"]["throughput_bytes_per_s"]            # doctest: +SKIP
    >>> c = vmsim.compare("clear-target-last")            # doctest: +SKIP
    >>> vmsim.to_dataframe(c)                             # doctest: +SKIP
"""

from ._startup import install as _install_startup_handlers

_install_startup_handlers()

from ._api import (
    compare,
    compare_results,
    experiments,
    hw,
    machines,
    run,
    runs_statistics,
    sweep,
    sweep_rows,
    to_dataframe,
)
from ._core import (
    ConfigError,
    DataVerificationError,
    HwError,
    HwUnsupportedError,
    PolicyError,
    VmsimError,
    __version__,
)
from . import policy, timeline
from .tables import format_compare, format_run

__all__ = [
    "ConfigError",
    "DataVerificationError",
    "HwError",
    "HwUnsupportedError",
    "PolicyError",
    "VmsimError",
    "__version__",
    "compare",
    "compare_results",
    "experiments",
    "format_compare",
    "format_run",
    "hw",
    "machines",
    "policy",
    "run",
    "runs_statistics",
    "sweep",
    "sweep_rows",
    "timeline",
    "to_dataframe",
]
