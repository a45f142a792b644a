"""Statistics over runs with different seeds, as LKP and mmtests report them.

A metric's runs are summarised by their mean, sample standard deviation,
coefficient of variation, minimum and maximum. Whether two arms differ beyond
the noise is decided by Welch's two-sided t-test at a 5% level (mmtests marks
such a change with asterisks; LKP leaves a change inside the noise unmarked).
With one run per arm there is no spread and no test: every change is shown
as measured, and marked as untested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

#: Two-sided 5% critical values of Student's t for 1..30 degrees of freedom.
_T_CRIT_05 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
              2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
              2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stddev: float
    min: float
    max: float

    @property
    def cv_percent(self) -> Optional[float]:
        """Coefficient of variation in percent (None for a zero mean)."""
        return None if self.mean == 0 else self.stddev / abs(self.mean) * 100.0


def summarise(values: Sequence[float]) -> Summary:
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("no values to summarise")
    mean = math.fsum(xs) / n
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    sd = math.sqrt(var)
    if min(xs) == max(xs):
        sd = 0.0  # identical runs: no spread, whatever the rounding of the mean
    return Summary(n, mean, sd, min(xs), max(xs))


#: The two-sided 5% point of the standard normal distribution.
_Z_05 = 1.959963984540054


def t_critical(df: float) -> float:
    """Two-sided 5% critical value of t: the table up to 30 degrees of
    freedom (a fractional df rounds down, the conservative side), beyond it
    the Cornish-Fisher expansion of t in powers of 1/df (Abramowitz and
    Stegun 26.7.5), within 1e-4 of the exact value there."""
    if df < 1:
        return _T_CRIT_05[0]
    if df <= 30:
        return _T_CRIT_05[int(math.floor(df)) - 1]
    z = _Z_05
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


def significant(a: Summary, b: Summary) -> Optional[bool]:
    """Welch's t-test at 5%: True when the means differ beyond the noise,
    False when not, None when either side has a single run (no test)."""
    if a.n < 2 or b.n < 2:
        return None
    if a.mean == b.mean:
        return False
    va, vb = a.stddev ** 2 / a.n, b.stddev ** 2 / b.n
    if va + vb == 0:
        return True  # no spread on either side and different means
    t = abs(a.mean - b.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (a.n - 1) if va else 0.0) + (vb ** 2 / (b.n - 1) if vb else 0.0))
    return t > t_critical(df)
