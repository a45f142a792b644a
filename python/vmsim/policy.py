"""Kernel policies written in Python: what a policy receives and returns.

A run config names a Python policy as ``"FILE.py:NAME"`` in a ``kernel.*``
policy key (relative paths resolve against the config file's directory, or
the working directory for built-in experiments); the Python API also takes
the callable itself. vmsim calls it at the hook, checks what it returns and
stops the run with :class:`vmsim.PolicyError` (naming the policy, with the
traceback of an exception) when it is wrong. The hooks and what each gets:

``kernel.clear_huge_page``: ``f(ctx: ClearContext) -> iterable of steps``,
    each ``Subpage(i)``, ``Region(start, len, how=None)`` or ``Fence()``;
    together they must clear every sub-page exactly once.
``kernel.copy_huge_page``: ``f(ctx: CopyContext) -> iterable of int``,
    the sub-page indices in copy order, each exactly once.
``kernel.thp_cow``: ``f(ctx: CowContext) -> "reuse" | "copy" | "split"``
    ("reuse" only when ``ctx.exclusive``).
``kernel.tlb_flush_on_unmap`` and ``kernel.migrate_tlb_flush``:
    ``f(ctx: FlushContext) -> bool`` (defer the flush into the batch), or an
    object with ``should_defer(ctx)`` and ``batch_flush`` (``"ipis"`` or
    ``"broadcast"``).
``kernel.numa_hint_fault``: ``f(ctx: HintContext) ->
    "map-then-migrate" | "migrate-then-map"``.

A policy must decide from its context alone: no hidden state, no randomness
(vmsim asks once per distinct context and reuses the answer, so a policy that
changes its mind is not seen to, and runs stay deterministic).
"""

from typing import NamedTuple, Optional

__all__ = [
    "ClearContext", "CopyContext", "CowContext", "FlushContext", "HintContext",
    "Subpage", "Region", "Fence", "STORES",
]

#: How a region's lines are stored: ``"string"`` (``rep stosb``), ``"mov"``
#: (a ``movq`` loop), ``"nontemporal"`` (``movnti``), ``"clzero"`` (one
#: ``clzero`` per line; only on a machine whose CPUs have it, the AMD presets:
#: ``string.clzero``).
STORES = ("string", "mov", "nontemporal", "clzero")


class ClearContext(NamedTuple):
    """A huge-page clear: the folio's sub-pages, the faulting one, the kernel."""
    nr_pages: int
    target: int
    #: The kernel is preemptible (``preempt = full`` or ``lazy``).
    preemptible: bool
    #: How the arch's ``clear_pages()`` stores: ``"string"`` or ``"mov"``.
    string: str


class CopyContext(NamedTuple):
    """A huge-page copy on a write fault: its sub-pages and the faulting one."""
    nr_pages: int
    target: int


class CowContext(NamedTuple):
    """A write fault on a read-only PMD-mapped huge page."""
    nr_pages: int
    #: No other process maps the page.
    exclusive: bool


class FlushContext(NamedTuple):
    """An entry just cleared by reclaim's or migration's unmap."""
    #: A CPU other than this one may hold the entry in its TLB.
    others: bool
    #: CPUs in the mm's cpumask.
    nr_cpus: int


class HintContext(NamedTuple):
    """A NUMA hinting fault on a misplaced-or-not page."""
    page_node: int
    cpu_node: int


class Subpage(NamedTuple):
    """``clear_page()`` of one sub-page."""
    index: int


class Region(NamedTuple):
    """One ``clear_pages()`` call over ``[start, start + len)``; ``how`` is one
    of :data:`STORES`, or None for the arch's own (``ctx.string``)."""
    start: int
    len: int
    how: Optional[str] = None


class Fence(NamedTuple):
    """``sfence``: non-temporal stores before it are ordered before what follows."""
