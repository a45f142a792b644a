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
