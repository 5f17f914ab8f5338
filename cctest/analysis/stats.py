"""Statistics on plain numbers: Jain's fairness index and the mean with its 95 % Student-t interval.

Jain's fairness index (Jain, Chiu, Hawe 1984; Eq. 5 of 001): J = (sum x_i)^2 / (n * sum x_i^2);
1 = perfectly fair, 1/n = one flow takes everything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

# numpy is imported where used: claims (and with them experiments.yaml) are read without it, in a
# guest whose every import costs host time


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index of `values` (NaNs dropped); NaN when empty or all zero."""
    import numpy as np

    x = np.asarray([v for v in values], dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan")
    denom = x.size * float(np.sum(x * x))
    if denom == 0.0:
        return float("nan")
    return float(np.sum(x)) ** 2 / denom


# Two-sided 95 % Student-t quantiles t_{0.975, df} for df = 1..30 (standard tables).
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]


def t_quantile_975(df: int) -> float:
    """t_{0.975} with `df` degrees of freedom: table up to 30, Cornish-Fisher expansion above."""
    if df < 1:
        return float("nan")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959963984540054
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def mean_ci95(samples: Sequence[float]) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % Student-t confidence interval, n); NaNs dropped.

    half-width = t_{0.975, n-1} * s / sqrt(n) with s the sample standard deviation; NaN for n < 2.
    """
    import numpy as np

    x = np.asarray(samples, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    mean = float(x.mean())
    if n < 2:
        return mean, float("nan"), n
    s = float(x.std(ddof=1))
    return mean, t_quantile_975(n - 1) * s / math.sqrt(n), n
