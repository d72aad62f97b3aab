"""The broker alone and behind its wake relay: idle CPU and produce-to-receive latency after quiet (see broker-wake.sh)."""
import argparse
import os
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

IDLE_SECONDS = 20


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consumer(brokers, topic, wait_ms):
    member = Consumer({
        "bootstrap.servers": brokers, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": wait_ms, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 7000,
    })
    member.subscribe([topic])
    return member


def poll_for(members, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for member in members:
            member.poll(0.01)


def measure(name, brokers, wait_ms, pids, quiet, count, consumers):
    topic = f"bench.wake.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": brokers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    idle = [consumer(brokers, topic, wait_ms) for _ in range(consumers)]
    poll_for(idle, 8)  # the groups join
    before = [cpu_seconds(pid) for pid in pids]
    poll_for(idle, IDLE_SECONDS)
    shares = [(cpu_seconds(pid) - start) * 100 / IDLE_SECONDS for pid, start in zip(pids, before)]
    for member in idle:
        member.close()

    producer = Producer({"bootstrap.servers": brokers, "linger.ms": 1, "enable.idempotence": True, "acks": "all"})
    reader = consumer(brokers, topic, wait_ms)
    producer.produce(topic, b"first")
    producer.flush(10)
    while (message := reader.poll(0.1)) is None or message.error():
        pass
    latencies = []
    for number in range(count):
        poll_for([reader], quiet)
        sent = time.monotonic()
        producer.produce(topic, str(number).encode())
        producer.poll(0)
        while (message := reader.poll(0.005)) is None or message.error():
            pass
        latencies.append((time.monotonic() - sent) * 1000)
    reader.close()
    producer.flush(10)
    latencies.sort()
    cpu = " + ".join(f"{share:.1f}%" for share in shares)
    print(f"{name:>17}: {consumers} idle consumers at {wait_ms} ms cost {cpu} of a core; after {quiet:g} s quiet, "
          f"a record reached its consumer in p50 {latencies[len(latencies) // 2]:.1f} ms, "
          f"max {latencies[-1]:.1f} ms (n={count})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quiet", type=float, default=1)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("setups", nargs="+", help="NAME,BROKERS,WAIT_MS,PID[:PID]")
    arguments = parser.parse_args()
    for setup in arguments.setups:
        name, brokers, wait_ms, pids = setup.split(",")
        measure(name, brokers, int(wait_ms), [int(pid) for pid in pids.split(":")], arguments.quiet,
                arguments.count, arguments.consumers)


if __name__ == "__main__":
    main()
