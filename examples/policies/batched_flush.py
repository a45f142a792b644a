"""Batched TLB flushing after unmapping (Linux 4.3, 72b252aed506 "mm: send
one IPI per CPU to TLB flush all entries after unmapping pages"): an entry
another CPU may hold is deferred into the batch, and the batch is flushed
with one IPI per CPU. As `kernel.tlb_flush_on_unmap = "batched"`.

    kernel.tlb_flush_on_unmap = "examples/policies/batched_flush.py:Batched"
"""


class Batched:
    #: arch_tlbbatch_flush(): one full-flush IPI per CPU of the batch.
    batch_flush = "ipis"

    def should_defer(self, ctx):
        # should_defer_flush(): only when a CPU other than this one may hold it.
        return ctx.others
