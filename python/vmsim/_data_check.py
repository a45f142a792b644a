"""The data check of results: which runs of a result lost or corrupted
data (``lost_data``), and the ``DataVerificationError`` that ``run``,
``compare`` and the commands raise for them (``check_verified``); and the
notes a run's report makes on a user's policy (``policy_notes``)."""

from __future__ import annotations

from typing import Any, List, Mapping

from . import _core
from .tables import iter_runs


def lost_data(result: Mapping[str, Any]) -> List[str]:
    """The runs of a run or compare result whose data check failed, each as
    ``"name: first errors"``."""
    lost: List[str] = []
    if not any(k in result for k in ("metrics", "variants", "cases")):
        return lost  # host measurements and other documents hold no data check
    for name, metrics in iter_runs(result):
        if metrics.get("data_verified") is False:
            errors = metrics.get("data_errors") or []
            shown = "; ".join(str(e) for e in errors[:3]) + (f"; … {len(errors) - 3} more" if len(errors) > 3 else "")
            lost.append(f"{name}: {shown or 'content check failed'}")
    return lost


def check_verified(result: Mapping[str, Any]) -> None:
    """Raises ``DataVerificationError`` (with the result as ``.result``) when
    any run of ``result`` lost or corrupted data."""
    lost = lost_data(result)
    if lost:
        err = _core.DataVerificationError("; ".join(lost))
        err.result = result
        raise err


def policy_notes(result: Mapping[str, Any]) -> List[str]:
    """The ``policy_notes`` of every run of a run or compare result, each as
    ``"name: note"`` (``"note"`` alone for a single run): a user's flush
    policy that was never asked, or answered as a built-in everywhere."""
    out: List[str] = []
    if not any(k in result for k in ("metrics", "variants", "cases")):
        return out
    for name, metrics in iter_runs(result):
        for note in metrics.get("policy_notes") or []:
            out.append(str(note) if "metrics" in result else f"{name}: {note}")
    return out


# A program's timed data at most this many times the machine's LLCs: the
# caches' state when its clock starts decides a good part of its rates.
TIMED_PER_LLC = 4.0


def timed_data_notes(result: Mapping[str, Any]) -> List[str]:
    """A note for each run of a program (``kind = "program"``) whose timed
    intervals accessed at most ``TIMED_PER_LLC`` times the bytes of the
    machine's LLCs: there the caches' state at the clock's start (cold, or
    what a warm-up left) weighs on the rates, and a small change in the
    sizes can turn a result round (docs/workloads.md)."""
    out: List[str] = []
    if not any(k in result for k in ("metrics", "variants", "cases")):
        return out
    for name, metrics in iter_runs(result):
        per_llc = metrics.get("timed_bytes_per_llc")
        if per_llc is None or per_llc > TIMED_PER_LLC:
            continue
        mib = metrics.get("timed_bytes", 0) / (1 << 20)
        note = (f"the timed interval accessed {mib:,.0f} MiB, {per_llc:.2g} times the machine's LLCs: the caches' "
                f"state when the clock starts weighs on the rates; time more data (docs/workloads.md, "
                f"\"Processes, threads and time\")")
        out.append(note if "metrics" in result else f"{name}: {note}")
    return out
