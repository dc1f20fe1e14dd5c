"""One place for the numbers of repeated runs: the median, and the spread (min/max, the
coefficient of variation) that says whether a difference is more than noise. The matrix
runner's tables (bench/run/tables.py) and the index's seed tables (index.py) both use it."""
import functools
import math
import statistics

from .fmt import num


def stats(values):
    """Values of one column over rounds -> n, median, min, max, mean, cv_percent; values that
    are not numbers (a CPU list) -> the distinct ones seen, as text."""
    nums = [v for v in values if num(v)]
    if not values:
        return {"n": 0, "values": []}
    if len(nums) != len(values):
        return {"n": len(values), "values": values, "text": list(dict.fromkeys(map(str, values)))}
    mean = statistics.fmean(nums)
    cv = statistics.stdev(nums) / mean * 100 if len(nums) > 1 and mean else None
    return {"n": len(nums), "values": nums, "median": statistics.median(nums), "min": min(nums), "max": max(nums),
            "mean": mean, "cv_percent": cv}


@functools.lru_cache(maxsize=256)
def t_quantile(p, df):
    """Student's t quantile (0.5 < P < 1) at DF degrees of freedom (Welch's need not be whole):
    its density integrated by Simpson's rule and bisected; no statistics package needed."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    pdf = lambda t: c * (1 + t * t / df) ** (-(df + 1) / 2)  # noqa: E731

    def cdf(x, n=400):
        h = x / n
        return 0.5 + h / 3 * sum((1 if i in (0, n) else 4 if i % 2 else 2) * pdf(i * h) for i in range(n + 1))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def log_interval(mean, se, df, level, **more):
    """exp(MEAN) with its LEVEL t interval, MEAN and SE on the log scale (a ratio's noise is
    multiplicative: 0.8x and 1.25x are the same distance from 1). SE 0 (a point): no spread."""
    half = t_quantile(1 - (1 - level) / 2, df) * se if se and df > 0 else 0.0
    return {"ratio": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half), "level": level, **more}


def ratio_interval(of, to, level=0.95):
    """OF's and TO's rounds measured apart (a saved baseline; a matrix's cases): the ratio of
    their geometric means and Welch's t interval on the logs (each side its own variance; a
    side of one value counts as exact). Why not a bootstrap of the medians: with 3 rounds a
    side its "95 %" interval held the truth 87 % of the time on simulated identical sides, the
    t interval 95 % (ci/tests/test_matrix.py, test_the_intervals_hold_what_they_say)."""
    if not of or not to or min(min(of), min(to)) <= 0:
        return None
    lo, lt = [math.log(v) for v in of], [math.log(v) for v in to]
    v = [statistics.variance(x) / len(x) if len(x) > 1 else 0.0 for x in (lo, lt)]
    se2 = sum(v)
    df = se2 ** 2 / sum(x ** 2 / (len(s) - 1) for x, s in zip(v, (lo, lt)) if x) if se2 else 0
    return log_interval(statistics.fmean(lo) - statistics.fmean(lt), math.sqrt(se2), df, level)


def paired_ratio_interval(of, to, level=0.95):
    """OF[i] and TO[i] measured in one round, back to back (alternated): the geometric mean of
    the rounds' ratios OF[i]/TO[i] and its t interval (n-1 degrees of freedom). A drift of the
    machine between rounds falls on both sides of a pair and cancels, where the independent
    sides of ratio_interval carry it: on this host identical runs vary 1-11 % (CV) by the
    hour, two adjacent ones 2.7 % (README, "Measured on this machine"). A bootstrap of the
    ratios' median held the truth 71 % of the time at 3 rounds, not 95 % (the test above)."""
    logs = [math.log(a / b) for a, b in zip(of, to) if a is not None and b and a > 0]
    if not logs:
        return None
    n = len(logs)
    se = statistics.stdev(logs) / math.sqrt(n) if n > 1 else 0.0
    return log_interval(statistics.fmean(logs), se, n - 1, level, paired_rounds=n)
