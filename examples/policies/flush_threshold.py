"""An idea to try: defer an unmapped entry's TLB flush into the batch only
when the mm has run on more than `THRESHOLD` CPUs; with fewer, flush it at
once (`flush_tlb_page()`), as before batching.

    kernel.tlb_flush_on_unmap = "examples/policies/flush_threshold.py:should_defer"
"""

THRESHOLD = 2


def should_defer(ctx):
    return ctx.others and ctx.nr_cpus > THRESHOLD
