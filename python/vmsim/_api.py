"""The Python API in one namespace: runs, experiments, sweeps and DataFrames.

Nothing is defined here; every name is re-exported from the module that
owns it, so that ``vmsim``, ``vmsim.cli`` and the other modules (and code
outside the package) keep importing them from ``vmsim._api``:

- ``_run``: the ``run`` command;
- ``_compare``: the ``compare`` command (one seed, arms on this process's threads);
- ``_compare_runs``: compares of many seeds or experiments on an executor
  (``compare_many``, ``compare(runs=N)``);
- ``_compare_arms``: a compare result's arms in the result cache, and its finishing;
- ``_sweep``: the ``sweep`` command (points on an executor);
- ``_sweep_grid``: a sweep's points, columns, grid extension and document;
- ``_plan``: what an experiment would simulate, and the checks made against it;
- ``_options``: the checks, limits and defaults of the options commands share;
- ``_data_check``: the data check of results (``DataVerificationError``);
- ``_pool``: the local process pool, and stopping work on any executor
  (dask clusters are ``dask_backend``'s);
- ``_tasks``: what a worker runs (a sweep point, a seed of an experiment);
- ``_reports``: saved results' tables and statistics;
- ``_dataframe``: ``to_dataframe``;
- ``_listings`` and ``_hw``: the built-in machines and experiments, and host measurements.
"""

from __future__ import annotations

# The modules the API uses, as this namespace held them.
from . import _core, _policies, _provenance  # noqa: F401
from . import cache as _cache  # noqa: F401
from . import dask_backend as _dask  # noqa: F401
from ._compare import compare  # noqa: F401
from ._compare_arms import (  # noqa: F401
    _arm_name,
    _cached_arms,
    _compare_finish,
    _compare_label,
    _fill_arms,
)
from ._compare_runs import MAX_RUNS, _compare_runs, compare_many  # noqa: F401
from ._config import ConfigLike  # noqa: F401
from ._data_check import check_verified, lost_data, policy_notes, timed_data_notes  # noqa: F401
from ._dataframe import to_dataframe  # noqa: F401
from ._hw import hw  # noqa: F401
from ._listings import experiments, machines  # noqa: F401
from ._options import (  # noqa: F401
    MAX_SEED,
    MAX_THREADS,
    ProgressCallback,
    check_metric_names,
    check_min_change,
    check_scale,
    check_seed,
    check_threads,
    default_threads,
)
from ._plan import (  # noqa: F401
    check_min_scale,
    check_set,
    experiment_metric_names,
    experiment_plan,
    quick_scale_note,
)
from ._pool import (  # noqa: F401
    _as_completed,
    _cancel,
    _kill_on_parent_death,
    _pool_worker_init,
    _watch_parent,
    process_pool,
    stop_pool,
)
from ._reports import compare_results, runs_statistics  # noqa: F401
from ._run import _run_key, run  # noqa: F401
from ._sweep import _Done, _have_pandas, sweep, sweep_rows  # noqa: F401
from ._sweep_grid import (  # noqa: F401
    _point_key,
    _sweep_points,
    grid_extension_problem,
    sweep_columns,
    sweep_document,
    sweep_metric_names,
    sweep_points,
)
from ._tasks import _build, _check_build, _compare_text, _run_point, _run_point_text  # noqa: F401
