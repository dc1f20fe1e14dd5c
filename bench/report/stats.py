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
    sides of ratio_interval carry it: on this host identical runs vary from one hour to the
    next far more than two adjacent ones do. A bootstrap of the ratios' median held the truth
    less often than it said at 3 rounds (ci/tests/test_matrix.py simulates both)."""
    logs = [math.log(a / b) for a, b in zip(of, to) if a is not None and b and a > 0]
    if not logs:
        return None
    n = len(logs)
    se = statistics.stdev(logs) / math.sqrt(n) if n > 1 else 0.0
    return log_interval(statistics.fmean(logs), se, n - 1, level, paired_rounds=n)


def mean_interval(values, level=0.95):
    """VALUES measured apart (rounds of one figure): their mean and its t interval (n-1 degrees
    of freedom), on the values' own scale: a figure held to a bound (a link's utilization at
    least 0.85), not a ratio whose noise is multiplicative."""
    if not values:
        return None
    n, mean = len(values), statistics.fmean(values)
    half = t_quantile(1 - (1 - level) / 2, n - 1) * statistics.stdev(values) / math.sqrt(n) if n > 1 else 0.0
    return {"ratio": mean, "low": mean - half, "high": mean + half, "level": level, "n": n}


def binomial_tail(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + i * math.log(p) + (n - i) * math.log1p(-p)) for i in range(0, k + 1))


def binomial_interval(k, n, level=0.95):
    """Clopper and Pearson's exact interval for a proportion, K of N: each end the p at which
    seeing K or fewer (more) has probability (1 - LEVEL)/2. Exact, so it holds at any N, which
    a normal approximation does not at the few or zero events of a count of failures."""
    a = (1 - level) / 2

    def solve(f, target):  # the p in [0, 1] where f(p), rising with p, crosses TARGET
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        return (lo + hi) / 2
    # low: where K or more stops being unlikely; high: where K or fewer becomes unlikely.
    low = 0.0 if k == 0 else solve(lambda p: 1 - binomial_tail(k - 1, n, p), a)
    high = 1.0 if k == n else solve(lambda p: 1 - binomial_tail(k, n, p), 1 - a)
    return {"ratio": k / n if n else None, "low": low, "high": high, "level": level, "n": n}


def poisson_ratio_interval(k_of, n_of, k_to, n_to, level=0.95):
    """Two counts of rare events (K_OF in N_OF requests, K_TO in N_TO): the ratio of their
    rates and its exact interval, conditional on the total: K_OF of K_OF + K_TO is binomial
    with p = r / (r + 1) at equal exposure (Clopper-Pearson on it, mapped back and scaled by
    the exposures). None when neither side had an event: no rate to divide."""
    total = k_of + k_to
    if not total or not n_of or not n_to:
        return None
    b = binomial_interval(k_of, total, level)
    scale = n_to / n_of
    odds = lambda p: math.inf if p >= 1 else p / (1 - p) * scale  # noqa: E731
    return {"ratio": odds(k_of / total), "low": odds(b["low"]), "high": odds(b["high"]), "level": level,
            "events": [k_of, k_to], "exposures": [n_of, n_to]}
