"""An idea to try: clear the faulting sub-page *first*, then the others
ascending — the opposite of target-last, whose point is that the sub-page
the faulting thread touches next is the one written last, so still in its
cache. docs/your-own-policy.md measures what the opposite costs.

    kernel.clear_huge_page = "examples/policies/target_first.py:target_first"
"""

from vmsim.policy import Subpage


def target_first(ctx):
    rest = [i for i in range(ctx.nr_pages) if i != ctx.target]
    return [Subpage(ctx.target)] + [Subpage(i) for i in rest]
