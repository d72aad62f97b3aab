"""How steadily the machine itself runs: times a fixed piece of CPU work (0.1 ms) every 10 ms and reports the episodes in
which it ran several times slower than usual. Run alone (Benchmarks/host.sh) it shows what the host does to this
machine at rest; run beside a benchmark (BENCH_HOST_PROBE=1) it records those episodes for the load generator.

    host.py SECONDS [--episodes FILE]

SECONDS 0 runs until SIGTERM. Episodes are written to FILE as they end, one "start end" line each, in seconds
of CLOCK_BOOTTIME (what Swift's ContinuousClock counts on Linux), so a generator can set aside the operations
that met one. The probe asks for SCHED_FIFO so that the machine's own processes do not delay it; where that is
refused it runs at normal priority and says so, and then a busy machine also shows up as slow episodes.
"""

import os
import signal
import statistics
import sys
import time

CHUNK_SECONDS = 0.0001
PERIOD_SECONDS = 0.01
SLOW_FACTOR = 3.0
EPISODE_GAP = 0.05
EPISODE_MINIMUM = 0.02


def work(iterations):
    value = 1.0
    for _ in range(iterations):
        value = value * 1.0000001 + 1e-9
    return value


def calibrate():
    """Iterations that take about CHUNK_SECONDS: the fastest of several tries, so a slow moment does not count."""
    iterations = 1000
    best = min(timed(iterations)[1] for _ in range(50))
    return max(100, int(iterations * CHUNK_SECONDS / best))


def timed(iterations):
    """When the work began (CLOCK_BOOTTIME seconds) and how long it took."""
    began = time.clock_gettime(time.CLOCK_BOOTTIME)
    work(iterations)
    return began, time.clock_gettime(time.CLOCK_BOOTTIME) - began


def episodes_of(chunks, usual):
    """Runs of slow chunks (SLOW_FACTOR times the usual) closer than EPISODE_GAP, as [start, end] pairs."""
    found = []
    for began, took in chunks:
        if took < usual * SLOW_FACTOR:
            continue
        if found and began - found[-1][1] < EPISODE_GAP:
            found[-1][1] = began + took
        else:
            found.append([began, began + took])
    return [episode for episode in found if episode[1] - episode[0] >= EPISODE_MINIMUM]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    episodes_path = sys.argv[sys.argv.index("--episodes") + 1] if "--episodes" in sys.argv else None
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        priority = "SCHED_FIFO"
    except (PermissionError, AttributeError):
        priority = "normal priority (SCHED_FIFO refused): a busy machine shows up as slow episodes too"
    iterations = calibrate()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    chunks = []
    written_until = 0.0
    episodes_file = open(episodes_path, "w") if episodes_path else None
    started = time.clock_gettime(time.CLOCK_BOOTTIME)
    while not stopping and (seconds == 0 or time.clock_gettime(time.CLOCK_BOOTTIME) - started < seconds):
        chunks.append(timed(iterations))
        if episodes_file and len(chunks) % 20 == 0:
            usual = statistics.median(took for _, took in chunks[-2000:])
            for start, end in episodes_of(chunks[-2000:], usual):
                if start > written_until and chunks[-1][0] - end > EPISODE_GAP:
                    episodes_file.write(f"{start:.6f} {end:.6f}\n")
                    written_until = end
            episodes_file.flush()
        time.sleep(PERIOD_SECONDS)
    if len(chunks) < 2:
        print("host probe: stopped before it timed anything")
        return
    usual = statistics.median(took for _, took in chunks)
    found = episodes_of(chunks, usual)
    if episodes_file:
        for start, end in found:
            if start > written_until:
                episodes_file.write(f"{start:.6f} {end:.6f}\n")
        episodes_file.close()
    elapsed = chunks[-1][0] - chunks[0][0]
    took = sorted(t for _, t in chunks)
    slow_time = sum(end - start for start, end in found)
    print(f"host probe ({priority}): {len(chunks)} chunks of fixed work over {elapsed:.1f} s; each took "
          f"p50 {usual * 1000:.3f} ms, p99 {took[int(len(took) * 0.99)] * 1000:.3f} ms, max {took[-1] * 1000:.3f} ms")
    if not found:
        print(f"  no episode of {EPISODE_MINIMUM * 1000:.0f} ms or more with the work {SLOW_FACTOR:.0f}x slower")
        return
    lengths = sorted((end - start) * 1000 for start, end in found)
    gaps = [b[0] - a[0] for a, b in zip(found, found[1:])]
    print(f"  {len(found)} episodes with the work {SLOW_FACTOR:.0f}x slower or more: {slow_time * 1000:.0f} ms in all, "
          f"{100 * slow_time / elapsed:.1f}% of the time; each {lengths[0]:.0f}-{lengths[-1]:.0f} ms (median "
          f"{statistics.median(lengths):.0f})" + (f", one every {statistics.median(gaps):.2f} s (median)" if gaps else ""))


if __name__ == "__main__":
    main()
