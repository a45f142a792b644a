"""An idea to try: flush each page below N pending pages, the whole TLB
above, for reclaim's batch as well: the rule `flush_tlb_mm_range()` applies
to a range (`tlb_single_page_flush_ceiling`), where the kernel's
`arch_tlbbatch_flush()` flushes every batch whole. Entries are deferred into
the batch as the kernel defers them.

    kernel.tlb_flush_on_unmap = "examples/policies/page_count_flush.py:PageCount"
"""

#: Pages up to which a flush takes each page; above it, the whole TLB.
N = 16


class PageCount:
    #: A batch flushed whole: one full-flush IPI per CPU, as the kernel's.
    batch_flush = "ipis"

    def should_defer(self, ctx):
        # should_defer_flush(): only when a CPU other than this one may hold it.
        return ctx.others

    def full_flush(self, ctx):
        # ctx.nr_pages: 1 for an entry flushed at once; for the batch, the
        # entries pending in it (ctx.pending).
        return ctx.nr_pages > N
