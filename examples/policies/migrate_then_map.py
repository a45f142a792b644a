"""Migrate before mapping on NUMA hinting faults (Linux 5.13, b99a342d4f11
"NUMA balancing: reduce TLB flush via delaying mapping on hint page fault"):
the misplaced page migrates while its PTE is still PROT_NONE, so no TLB can
hold it and no shootdown is needed. As
`kernel.numa_hint_fault = "migrate-then-map"`.

    kernel.numa_hint_fault = "examples/policies/migrate_then_map.py:migrate_then_map"
"""


def migrate_then_map(ctx):
    return "migrate-then-map"
