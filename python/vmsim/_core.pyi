"""Type stubs of the extension module ``vmsim._core`` (built from crates/vmsim-py)."""

from typing import Callable, List, Optional, Sequence, Tuple

__all__ = [
    "__version__",
    "__git_revision__",
    "preset_json",
    "check_config",
    "metric_names",
    "builtin_toml",
    "run_config",
    "compare",
    "experiment_plan",
    "RESULT_SCHEMA_VERSION",
    "list_machines",
    "list_experiments",
    "policy_names",
    "hw_run",
    "validate_model",
    "VmsimError",
    "ConfigError",
    "DataVerificationError",
    "PolicyError",
    "HwError",
    "HwUnsupportedError",
]

__version__: str

# A name of the stub alone (private: the extension has no such attribute).
_ProgressCallback = Callable[[str, float], object]

def run_config(
    text: str,
    format: str = "toml",
    base_dir: Optional[str] = None,
    progress: Optional[_ProgressCallback] = None,
    threads: Optional[int] = None,
) -> str:
    """Run one simulation of a run config (``format`` is "toml" or "json").

    A windowed run (``sim.window_cycles``) spreads its sockets over up to
    ``threads`` host threads (default: one per host CPU); the result does
    not depend on it.

    Relative paths in the config resolve against ``base_dir``. Returns the
    result as JSON text. The GIL is released while the simulation runs;
    ``progress(label, fraction)`` is called with the GIL held, at most about
    four times a second. An exception raised by ``progress`` (or Ctrl-C)
    stops the run and propagates.
    """

def compare(
    experiment: str,
    scale: Optional[float] = None,
    seed: int = 0,
    progress: Optional[_ProgressCallback] = None,
    set_json: Optional[str] = None,
    threads: Optional[int] = None,
    skip: Optional[Sequence[int]] = None,
) -> str:
    """Run an experiment (built-in name or path to an experiment TOML): its
    baseline and variants, with ``set_json`` (a JSON object of dotted config
    keys to values) applied to every arm, up to ``threads`` simulations at
    once (default: one per host CPU; the result does not depend on it).
    Returns the result as JSON text. The runs whose places in the plan's
    order (``experiment_plan``'s arms, case by case) are in ``skip`` are not
    simulated: their metrics are null, for the caller to fill in with the
    same run's metrics (the result cache's)."""

def experiment_plan(
    experiment: str,
    scale: Optional[float] = None,
    seed: int = 0,
    set_json: Optional[str] = None,
    metrics: bool = True,
) -> str:
    """What ``compare`` would simulate, as JSON text: every case's arms with
    their resolved configs and metric names (null with ``metrics=False``,
    which builds no model), and the experiment's scale, ``min_scale`` and
    ``quick_scale``. With ``metrics``, raises what ``compare`` would raise
    before its first run."""

#: The ``schema_version`` of the result documents this build writes.
RESULT_SCHEMA_VERSION: int

def check_config(text: str, format: str = "toml", base_dir: Optional[str] = None) -> None:
    """Check a run config without running it (raises ConfigError)."""

def metric_names(text: str, format: str = "toml", base_dir: Optional[str] = None) -> List[str]:
    """The scalar metric names a run of this config reports, sorted (nothing is simulated)."""

def preset_json(reference: str, base_dir: Optional[str] = None) -> str:
    """The resolved machine preset, every parameter with its source, as JSON text."""

def builtin_toml(kind: str, name: str) -> Optional[str]:
    """The TOML text of a built-in "machine" or "experiment", or None."""

__git_revision__: str

def list_machines() -> list[tuple[str, str]]:
    """Built-in machine presets as (name, one-line description)."""

def list_experiments() -> list[tuple[str, str]]:
    """Built-in experiments as (name, one-line description)."""

def hw_run(command: str, opts_json: str = "{}", quiet: bool = False) -> str:
    """Run a host measurement ("clear", "copy", "pf-test", "calibrate" or
    "microbench") with
    options given as a JSON object. Returns the result as JSON text.
    ``quiet`` silences the progress notes on stderr. SIGINT and SIGTERM stop
    it once the host's state is restored, raising ``KeyboardInterrupt`` whose
    argument is ``"SIGINT"`` or ``"SIGTERM"``."""

def validate_model(machine: Optional[str] = None) -> str:
    """Run the microbenchmarks of `vmsim validate` on the model of one preset
    (or of every preset with references). Returns JSON text with "rows" and "table"."""

class VmsimError(Exception):
    """Base class of all errors raised by vmsim."""

class ConfigError(VmsimError, ValueError):
    """Bad configuration or option."""

    key: str
    """Dotted path of the offending field, e.g. ``"workload.nr_task"``."""
    message: str
    """What is wrong and which values are accepted."""

class DataVerificationError(VmsimError):
    """A workload's final content check failed: simulated data was lost or corrupted."""

class PolicyError(VmsimError):
    """A policy the run uses failed (an exception, or a decision the kernel cannot carry out)."""

    key: str
    policy: str
    message: str

class HwError(VmsimError):
    """A host measurement failed."""

class HwUnsupportedError(HwError):
    """The host measurement is not supported on this machine."""

def policy_names() -> List[Tuple[str, List[str]]]: ...
