"""Publishes whole order lifecycles on orders.events at once and times each named consumer until its
events_consumed_total (on its service's /metrics) has counted them all; prints each process's CPU over that time
(with its children: Postgres's backends)."""
import argparse
import os
import sys
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "python"))
from confluent_kafka import Producer  # noqa: E402
from scenario_kit import Orders  # noqa: E402

EVENTS_PER_ORDER = 7
TICKS = os.sysconf("SC_CLK_TCK")


def consumed(url, consumer):
    prefix = f'events_consumed_total{{consumer="{consumer}"}} '
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(prefix):
                return int(float(line[len(prefix):]))
    return 0


def cpu_ticks(root):
    """utime + stime of `root` and every process descended from it, with the children each has reaped (cutime +
    cstime), so a backend that exits during the run still counts."""
    parents, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = sum(int(field) for field in fields[11:15])
    total = 0
    for pid, tick in ticks.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += tick
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--consumer", action="append", default=[], help="NAME=SERVICE_URL")
    parser.add_argument("--process", action="append", default=[], help="LABEL=PID")
    args = parser.parse_args()
    consumers = dict(item.split("=", 1) for item in args.consumer)
    processes = {label: int(pid) for label, pid in (item.split("=", 1) for item in args.process)}
    before = {name: consumed(url, name) for name, url in consumers.items()}
    target = args.orders * EVENTS_PER_ORDER

    producer = Producer({"bootstrap.servers": args.brokers, "enable.idempotence": True, "linger.ms": 5,
                         "queue.buffering.max.messages": 1000000})
    vendor = {"id": "bench-vendor", "name": "Bench Kitchen",
              "address": {"line1": "1 Bench St", "area": "Indiranagar", "lat": 12.97, "lng": 77.64}}
    cpu_before = {label: cpu_ticks(pid) for label, pid in processes.items()}
    start = time.monotonic()
    for index in range(args.orders):
        order = Orders({"orderId": str(uuid.uuid4()), "customerId": f"bench-customer-{index % 500}"},
                       vendor=vendor, producer=producer)
        rider = f"bench-rider-{index % 500}"
        order.created()
        order.accepted()
        order.ready()
        order.assigned(rider, "Bench Rider")
        order.arrived(rider)
        order.picked_up(rider, "Bench Rider")
        order.delivered(rider)
        producer.poll(0)
    if producer.flush(60) > 0:
        sys.exit("the events were not all delivered to orders.events within 60 s")
    published = time.monotonic() - start
    print(f"{args.orders} orders, {target} events on orders.events, published in {published:.2f} s")

    done, progress = {}, {name: (time.monotonic(), 0) for name in consumers}
    while len(done) < len(consumers):
        for name, url in consumers.items():
            if name in done:
                continue
            count = consumed(url, name) - before[name]
            if count >= target:
                done[name] = time.monotonic() - start
            elif count > progress[name][1]:
                progress[name] = (time.monotonic(), count)
            elif time.monotonic() - progress[name][0] > 30:
                sys.exit(f"{name} made no progress in 30 s: {count} of {target} events")
        time.sleep(0.05)  # each look renders three services' metrics
    elapsed = time.monotonic() - start
    for name, seconds in done.items():
        print(f"{name}: {target} events in {seconds:.2f} s = {target / seconds:.0f} events, "
              f"{args.orders / seconds:.0f} orders a second")
    cpu_seconds = {label: (cpu_ticks(pid) - cpu_before[label]) / TICKS for label, pid in processes.items()}
    print(f"CPU over {elapsed:.2f} s, one core = 100%: "
          + ", ".join(f"{label} {seconds / elapsed * 100:.0f}%" for label, seconds in cpu_seconds.items()))
    print("CPU per order: "
          + ", ".join(f"{label} {seconds / args.orders * 1000:.2f} ms" for label, seconds in cpu_seconds.items()))


if __name__ == "__main__":
    main()
