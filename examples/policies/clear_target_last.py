"""Clear the faulting sub-page last: `process_huge_page()` of Linux 4.14
(c79b57e462b5, "mm: hugetlb: clear target sub-page last when clearing huge
page"), as `kernel.clear_huge_page = "target-last"` does.

    kernel.clear_huge_page = "examples/policies/clear_target_last.py:target_last"
"""

from vmsim.policy import Subpage

#: Folios above this many 4 KiB pages (4 MiB) are gigantic on x86-64.
MAX_ORDER_NR_PAGES = 1024


def process_huge_page(n, nr_pages):
    """The sub-page order of mm/memory.c `process_huge_page()` for target `n`:
    everything outside a window centred on the target first, in one sweep
    from the far end; then left and right alternate, converging on it."""
    if 2 * n <= nr_pages:
        base, l = 0, n
        yield from range(nr_pages - 1, 2 * n - 1, -1)
    else:
        base, l = nr_pages - 2 * (nr_pages - n), nr_pages - n
        yield from range(base)
    for i in range(l):
        yield base + i
        yield base + 2 * l - 1 - i


def target_last(ctx):
    if ctx.nr_pages > MAX_ORDER_NR_PAGES:
        # clear_gigantic_page(): ascending.
        return [Subpage(i) for i in range(ctx.nr_pages)]
    return [Subpage(i) for i in process_huge_page(ctx.target, ctx.nr_pages)]
