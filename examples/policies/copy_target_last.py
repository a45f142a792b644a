"""Copy the faulting sub-page last: `copy_user_huge_page()` through
`process_huge_page()` from Linux 4.18 (c9f4cd713835, "mm, huge page: copy
target sub-page last when copy huge page"), as
`kernel.copy_huge_page = "target-last"` does.

    kernel.copy_huge_page = "examples/policies/copy_target_last.py:target_last"
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clear_target_last import process_huge_page  # noqa: E402


def target_last(ctx):
    return list(process_huge_page(ctx.target, ctx.nr_pages))
