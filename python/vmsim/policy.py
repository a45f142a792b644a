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
    object with ``should_defer(ctx)``, optionally ``full_flush(ctx) -> bool``
    (the whole TLB rather than each page of the flush: the kernel's
    ``tlb_single_page_flush_ceiling`` rule when left out) and ``batch_flush``
    (``"ipis"`` or ``"broadcast"``).
``kernel.numa_hint_fault``: ``f(ctx: HintContext) ->
    "map-then-migrate" | "migrate-then-map"``.

A policy must decide from its context alone: no hidden state, no randomness
(vmsim asks once per distinct context and reuses the answer, so a policy that
changes its mind is not seen to, and runs stay deterministic).
"""

from typing import NamedTuple, Optional

__all__ = [
    "ClearContext", "CopyContext", "CowContext", "FlushContext", "HintContext",
    "Subpage", "Region", "Fence", "STORES", "FLUSH_KINDS", "MASK_SAMPLES", "kernel_full_flush",
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


#: What a flush decision is about (:attr:`FlushContext.kind`): ``"page"``,
#: the flush of the entry just cleared (``flush_tlb_page()``) unless it is
#: deferred; ``"batch"``, the flush of the task's batch of deferred entries
#: (``try_to_unmap_flush()`` -> ``arch_tlbbatch_flush()``).
FLUSH_KINDS = ("page", "batch")

#: When :attr:`FlushContext.nr_cpus` was counted (:attr:`FlushContext.sampled`):
#: ``"unmap"``, the mm's ``mm_cpumask`` as the entry is cleared (the CPUs that
#: have the mm loaded, running it or lazily: a CPU leaves the mask only when
#: a flush finds it lazy or it switches away, so this is not how many CPUs the
#: process ever ran on); ``"batch"``, the batch's mask at its flush (the union
#: of the mm masks sampled at each deferred unmap).
MASK_SAMPLES = ("unmap", "batch")


class FlushContext(NamedTuple):
    """A TLB-flush decision of reclaim's or migration's unmap: what the
    kernel has when it decides. Addresses are left out, so answers are
    reused per context shape."""
    #: A CPU other than this one may hold the entry in its TLB (the mask has
    #: a CPU besides this one).
    others: bool
    #: CPUs in the mask, as sampled (see ``sampled``).
    nr_cpus: int
    #: Entries deferred into the task's batch and not flushed yet: before
    #: this entry for ``kind == "page"``, all of the batch for ``"batch"``.
    pending: int = 0
    #: Pages the flush covers: 1 for ``"page"``, ``pending`` for ``"batch"``.
    nr_pages: int = 1
    #: ``"page"`` or ``"batch"`` (:data:`FLUSH_KINDS`).
    kind: str = "page"
    #: ``"unmap"`` or ``"batch"`` (:data:`MASK_SAMPLES`).
    sampled: str = "unmap"
    #: ``kernel.tlb_single_page_flush_ceiling``: above this many pages the
    #: kernel's own rule flushes the whole TLB.
    ceiling: int = 33


def kernel_full_flush(ctx: FlushContext) -> bool:
    """The kernel's own answer to ``full_flush``: a batch is flushed whole
    (``arch_tlbbatch_flush()`` keeps no addresses); a flush of more than
    ``ctx.ceiling`` pages is a full flush (``flush_tlb_mm_range()``)."""
    return ctx.kind == "batch" or ctx.nr_pages > ctx.ceiling


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
