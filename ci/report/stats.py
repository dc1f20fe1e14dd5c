"""One place for the numbers of repeated runs: the median, and the spread (min/max, the
coefficient of variation) that says whether a difference is more than noise. The matrix
runner's tables (ci/run/matrix.py) and the index's seed tables (index.py) both use it."""
import math
import random
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


def median_ratio_interval(of, to, level=0.95, resamples=10000):
    """The ratio of two sides' medians, median(of)/median(to), and its bootstrap confidence
    interval at LEVEL: each side resampled with replacement on its own (the rounds are
    independent runs), the ratio of the resamples' medians, its percentiles. Few rounds give a
    wide interval, which is the point: a decision is made only when the interval allows it.
    The generator is seeded from the values, so one set of runs always gives one answer."""
    if not of or not to or statistics.median(to) == 0:
        return None
    rng = random.Random(repr((sorted(of), sorted(to))))
    ratios = sorted(statistics.median(rng.choices(of, k=len(of))) / (statistics.median(rng.choices(to, k=len(to))) or math.nan)
                    for _ in range(resamples))
    return interval(statistics.median(of) / statistics.median(to), [r for r in ratios if math.isfinite(r)], level, resamples)


def interval(ratio, resampled, level, resamples, **more):
    """The ratio with the LEVEL percentile interval of its sorted bootstrap RESAMPLED values."""
    tail = (1 - level) / 2
    pick = lambda q: resampled[min(len(resampled) - 1, max(0, round(q * (len(resampled) - 1))))]  # noqa: E731
    return {"ratio": ratio, "low": pick(tail), "high": pick(1 - tail), "level": level, "resamples": resamples, **more}


def paired_ratio_interval(of, to, level=0.95, resamples=10000):
    """OF[i] and TO[i] measured in one round, back to back (alternated): the median of the
    rounds' ratios OF[i]/TO[i] and its bootstrap interval (the rounds resampled). A drift of the
    machine between rounds falls on both sides of a pair and cancels, where the independent
    sides of median_ratio_interval carry it: on this host identical runs vary 1-11 % (CV) by the
    hour, two adjacent ones 2.7 % (README, "Measured on this machine"). Seeded as above."""
    ratios = [a / b for a, b in zip(of, to) if a is not None and b]
    if not ratios:
        return None
    rng = random.Random(repr(ratios))
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return interval(statistics.median(ratios), meds, level, resamples, paired_rounds=len(ratios))
