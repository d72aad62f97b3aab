"""The local broker's wake relay (deploy/local/broker_wake.py): a waiting fetch is answered as soon as a record
arrives, requests keep their order, and garbage ends only the connection that sent it. The header parsing has
unit tests of its own at the end, on frames built here for each Fetch and Produce version the relay reads."""

import socket
import struct
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "local"))
import broker_wake  # noqa: E402

# Far longer than any hop here. Tansu alone answers a fetch waiting this long 3.3-3.7 s after a record arrives (it
# looks again only late in the wait); through the relay it took 10-20 ms.
LONG_WAIT_MS = 8000
WOKEN_WITHIN_SECONDS = 2


def brokers(running_system):
    return f"127.0.0.1:{running_system.profile.broker_port}"


def new_topic(address):
    name = f"wake-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    return name


def quiet_consumer(address, topic):
    """A consumer of `topic` that waits LONG_WAIT_MS per fetch, past its first record."""
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": f"wake-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": LONG_WAIT_MS, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 60000,
    })
    consumer.subscribe([topic])
    return consumer


def next_value(consumer, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.05)
        if message is not None and not message.error():
            return message.value()
    return None


def test_a_record_reaches_a_consumer_waiting_on_a_long_fetch_without_waiting_it_out(running_system):
    address = brokers(running_system)
    topic = new_topic(address)
    producer = Producer({"bootstrap.servers": address, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    consumer = quiet_consumer(address, topic)
    try:
        producer.produce(topic, b"first")
        producer.flush(10)
        assert next_value(consumer, 30) == b"first"
        for number in range(3):
            # The consumer's fetch is now held, with nothing to read: each record must end that wait.
            time.sleep(1)
            started = time.monotonic()
            producer.produce(topic, f"record {number}".encode())
            producer.poll(0)
            assert next_value(consumer, LONG_WAIT_MS / 1000) == f"record {number}".encode()
            assert time.monotonic() - started < WOKEN_WITHIN_SECONDS
    finally:
        consumer.close()
        producer.flush(10)


def test_a_record_sent_without_acknowledgement_wakes_a_waiting_fetch_too(running_system):
    address = brokers(running_system)
    topic = new_topic(address)
    producer = Producer({"bootstrap.servers": address, "acks": 0, "linger.ms": 1})
    consumer = quiet_consumer(address, topic)
    try:
        producer.produce(topic, b"first")
        producer.flush(10)
        assert next_value(consumer, 30) == b"first"
        time.sleep(1)
        started = time.monotonic()
        producer.produce(topic, b"second")
        producer.flush(10)
        # acks 0 has no answer to wait for: the relay wakes the fetches once the request has gone on.
        assert next_value(consumer, LONG_WAIT_MS / 1000) == b"second"
        assert time.monotonic() - started < WOKEN_WITHIN_SECONDS
    finally:
        consumer.close()


def test_garbage_ends_only_the_connection_that_sent_it(running_system):
    address = brokers(running_system)
    port = running_system.profile.broker_port
    for garbage in (struct.pack(">i", -5), struct.pack(">i", 2**30), struct.pack(">i", 3) + b"\x00\x01\x00",
                    struct.pack(">i", 12) + struct.pack(">hhih", 1, 11, 7, 500)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(garbage)
            connection.shutdown(socket.SHUT_WR)
            try:
                assert connection.recv(1) == b""
            except ConnectionResetError:
                pass
    # The relay still serves everyone else.
    topic = new_topic(address)
    producer = Producer({"bootstrap.servers": address, "acks": "all", "linger.ms": 1})
    producer.produce(topic, b"after the garbage")
    assert producer.flush(10) == 0


# The header parsing, on frames built here.

def request(api_key, version, correlation_id, client_id, body, flexible, header_tags=b"\x00"):
    """A request frame after its size: header v1, or v2 (tagged fields) when `flexible`."""
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return header + (header_tags if flexible else b"") + body


def test_the_fetch_wait_is_found_in_every_version_of_the_request():
    for version in range(4, 18):
        flexible = version >= broker_wake.FETCH_FIRST_FLEXIBLE
        replica = b"" if version >= broker_wake.FETCH_FIRST_WITHOUT_REPLICA_ID else struct.pack(">i", -1)
        body = replica + struct.pack(">ii", 4321, 1) + b"rest"
        for client_id, tags in ((b"rdkafka", b"\x00"), (None, b"\x00"), (b"", b"\x02\x01\x03abc\x05\x00")):
            frame = request(broker_wake.FETCH, version, 9, client_id, body, flexible, tags)
            offset = broker_wake.fetch_wait_offset(frame, version)
            assert struct.unpack_from(">i", frame, offset) == (4321,), (version, client_id, tags)


def test_a_produce_without_acknowledgement_is_told_from_one_with_it():
    for version in range(3, 12):
        flexible = version >= broker_wake.PRODUCE_FIRST_FLEXIBLE
        for transactional_id in (None, b"tx-1"):
            if flexible:
                encoded = b"\x00" if transactional_id is None else bytes([len(transactional_id) + 1]) + transactional_id
            else:
                encoded = (struct.pack(">h", -1) if transactional_id is None
                           else struct.pack(">h", len(transactional_id)) + transactional_id)
            for acks, without in ((0, True), (1, False), (-1, False)):
                body = encoded + struct.pack(">hi", acks, 30000)
                frame = request(broker_wake.PRODUCE, version, 3, b"producer", body, flexible)
                assert broker_wake.without_answer(frame, version) is without, (version, transactional_id, acks)
