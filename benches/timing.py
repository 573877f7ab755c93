"""Timing helper shared by the benches' Python comparison scripts."""
import time


def median_ms(reps, f):
    """Median wall time in milliseconds of `reps` calls of f, after one warm-up call."""
    f()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append((time.perf_counter() - s) * 1e3)
    t.sort()
    return t[reps // 2]
