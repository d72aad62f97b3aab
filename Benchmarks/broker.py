"""Round trips through one partition of the broker as single-record batches pile up in it (see broker.sh)."""
import statistics
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SAMPLES = 10
PATIENCE = 5.0  # seconds a round trip may take before it counts as lost


def main(brokers, step, steps):
    topic = f"bench.batches.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": brokers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": brokers, "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": "unused", "fetch.wait.max.ms": 10,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])

    def drain():
        while consumer.poll(0.01) is not None:
            pass

    def round_trip():
        """Milliseconds from a produce to its receipt at the end of the partition; None if not within PATIENCE."""
        marker = uuid.uuid4().hex.encode()
        started = time.monotonic()
        producer.produce(topic, value=marker)
        producer.flush()
        while time.monotonic() - started < PATIENCE:
            message = consumer.poll(0.05)
            if message is not None and not message.error() and message.value() == marker:
                return (time.monotonic() - started) * 1000
        return None

    print(f"broker {brokers}, topic {topic}: {SAMPLES} round trips after every {step:,} single-record batches")
    print(f"{'batches':>8} {'p50 ms':>8} {'max ms':>8} {'lost':>5}")
    batches = 0
    for _ in range(steps):
        for _ in range(step):
            producer.produce(topic, value=b"x" * 300)
            producer.flush()  # one batch per record, as a realtime log appending one emit at a time
            batches += 1
            if batches % 500 == 0:
                drain()
        drain()
        times = [round_trip() for _ in range(SAMPLES)]
        batches += SAMPLES
        answered = [value for value in times if value is not None]
        p50 = f"{statistics.median(answered):.1f}" if answered else "-"
        worst = f"{max(answered):.1f}" if answered else "-"
        print(f"{batches:>8,} {p50:>8} {worst:>8} {len(times) - len(answered):>5}", flush=True)
        if not answered:
            print(f"no round trip within {PATIENCE:.0f} s: the partition no longer serves its end")
            break
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
