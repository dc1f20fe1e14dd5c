"""One place for the numbers of repeated runs: the median, and the spread (min/max, the
coefficient of variation) that says whether a difference is more than noise. The matrix
runner's tables (ci/run/matrix.py) and the index's seed tables (index.py) both use it."""
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
