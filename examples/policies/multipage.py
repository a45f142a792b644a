"""Multi-page clearing with string instructions: the huge page cleared as a
few contiguous regions, each one `clear_pages()` call (`rep stosb` over the
whole region), the neighbourhood of the faulting sub-page last.

- `multipage_2023`: Ankur Arora's 2023 x86 proposal: left, right, then the
  neighbourhood (radius 2); a gigantic folio one straight clear.
- `contiguous_7_0`: Linux 7.0 `folio_zero_user()`: right, left, neighbourhood,
  each through `clear_contig_highpages()` (chunks of 8192 pages with a
  `cond_resched()` between them unless the kernel is preemptible).

    kernel.clear_huge_page = "examples/policies/multipage.py:contiguous_7_0"
"""

from vmsim.policy import Region

MAX_ORDER_NR_PAGES = 1024
FOLIO_ZERO_LOCALITY_RADIUS = 2
PROCESS_PAGES_NON_PREEMPT_BATCH = 8192


def multipage_2023(ctx):
    n, nr = ctx.target, ctx.nr_pages
    if nr > MAX_ORDER_NR_PAGES:
        return [Region(0, nr)]
    s2 = max(n - FOLIO_ZERO_LOCALITY_RADIUS, 0)
    e2 = min(n + FOLIO_ZERO_LOCALITY_RADIUS, nr - 1)
    steps = []
    if s2 > 0:
        steps.append(Region(0, s2))
    if e2 + 1 < nr:
        steps.append(Region(e2 + 1, nr - 1 - e2))
    steps.append(Region(s2, e2 - s2 + 1))
    return steps


def clear_contig_highpages(start, npages, preemptible):
    unit = npages if preemptible else PROCESS_PAGES_NON_PREEMPT_BATCH
    i = 0
    while i < npages:
        count = min(unit, npages - i)
        yield Region(start + i, count)
        i += count


def contiguous_7_0(ctx):
    n, end = ctx.target, ctx.nr_pages - 1
    hot_start = max(n - FOLIO_ZERO_LOCALITY_RADIUS, 0)
    hot_end = min(n + FOLIO_ZERO_LOCALITY_RADIUS, end)
    regions = []
    if hot_end < end:
        regions.append((hot_end + 1, end - hot_end))
    if hot_start > 0:
        regions.append((0, hot_start))
    regions.append((hot_start, hot_end - hot_start + 1))
    return [r for s, l in regions for r in clear_contig_highpages(s, l, ctx.preemptible)]
