import cProfile, pstats, sys, time, timeit
t = time.perf_counter()
from cudamatrix.detect import _pyprobe
t1 = time.perf_counter()
raw = _pyprobe.collect()
t2 = time.perf_counter()
print("import %.1f ms, first collect %.1f ms, dists %d, files %d, path %s" % ((t1 - t) * 1e3, (t2 - t1) * 1e3, len(raw["dists"]), sum(len(d.get("files") or []) for d in raw["dists"]), sys.path))
print("collect min of 7: %.1f ms" % (min(timeit.repeat(_pyprobe.collect, number=1, repeat=7)) * 1e3))
t = time.perf_counter(); _pyprobe._tags(); print("_tags %.2f ms" % ((time.perf_counter() - t) * 1e3))
pr = cProfile.Profile(); pr.enable(); _pyprobe.collect(); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
