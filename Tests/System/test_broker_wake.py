"""The local broker's wake relay (deploy/local/broker_wake.py): a waiting fetch is answered as soon as a record
arrives in a partition it reads, and not woken by records elsewhere; requests keep their order, and garbage ends only
the connection that sent it. The frame reading and the relay's bookkeeping have unit tests of their own at the end,
on frames built here for each version of Fetch, Produce and ApiVersions the relay reads."""

import asyncio
import json
import socket
import struct
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "local"))
import broker_wake  # noqa: E402

# Far longer than any hop here. Tansu alone answers a fetch waiting this long 3.3-3.7 s after a record arrives (it
# looks again only late in the wait); through the relay it took 10-20 ms.
LONG_WAIT_MS = 8000
WOKEN_WITHIN_SECONDS = 2


def brokers(running_system):
    return f"127.0.0.1:{running_system.profile.broker_port}"


def new_topic(address, partitions=1):
    name = f"wake-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
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


def test_a_consumer_read_to_its_end_is_not_woken_by_records_elsewhere(running_system):
    address = brokers(running_system)
    topic, other = new_topic(address, partitions=2), new_topic(address)
    fetches = [0]

    def count_fetches(statistics):
        fetches[0] = sum(broker["req"].get("Fetch", 0) for broker in json.loads(statistics)["brokers"].values())

    producer = Producer({"bootstrap.servers": address, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    consumer = Consumer({
        "bootstrap.servers": address, "group.id": f"wake-{uuid.uuid4().hex[:8]}", "fetch.wait.max.ms": LONG_WAIT_MS,
        "statistics.interval.ms": 200, "stats_cb": count_fetches,
    })
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        producer.produce(topic, b"first", partition=0)
        producer.flush(10)
        assert next_value(consumer, 30) == b"first"
        next_value(consumer, 0.5)
        before = fetches[0]
        # 200 records to the topic's other partition and to another topic, over 2 s: none is for this consumer.
        for number in range(100):
            producer.produce(topic, b"elsewhere", partition=1)
            producer.produce(other, b"elsewhere")
            producer.poll(0)
            next_value(consumer, 0.02)
        producer.flush(10)
        next_value(consumer, 0.5)
        # Its fetch stays held (one more at most, should its wait end meanwhile); woken by every produce, as the relay
        # was before, it asked about 200 times.
        assert fetches[0] - before <= 2, fetches[0] - before
        started = time.monotonic()
        producer.produce(topic, b"for it", partition=0)
        producer.poll(0)
        assert next_value(consumer, LONG_WAIT_MS / 1000) == b"for it"
        assert time.monotonic() - started < WOKEN_WITHIN_SECONDS
    finally:
        consumer.close()
        producer.flush(10)


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


# The frame reading, on frames built here.

def request(api_key, version, correlation_id, client_id, body, flexible, header_tags=b"\x00"):
    """A request frame after its size: header v1, or v2 (tagged fields) when `flexible`."""
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return header + (header_tags if flexible else b"") + body


def unsigned_varint(value):
    encoded = b""
    while value >= 0x80:
        encoded += bytes([value & 0x7F | 0x80])
        value >>= 7
    return encoded + bytes([value])


def string(text, flexible):
    if text is None:
        return b"\x00" if flexible else struct.pack(">h", -1)
    return (unsigned_varint(len(text) + 1) if flexible else struct.pack(">h", len(text))) + text


def byte_string(data, flexible):
    if data is None:
        return b"\x00" if flexible else struct.pack(">i", -1)
    return (unsigned_varint(len(data) + 1) if flexible else struct.pack(">i", len(data))) + data


def array(items, flexible):
    if items is None:
        return b"\x00" if flexible else struct.pack(">i", -1)
    return (unsigned_varint(len(items) + 1) if flexible else struct.pack(">i", len(items))) + b"".join(items)


def tags(flexible):
    """An empty set of tagged fields, or one field of three bytes (the readers must skip either)."""
    return b"\x01\x05\x03abc" if flexible else b""


def fetch_request(version, offsets, wait_ms=4321, session_epoch=-1):
    flexible = version >= broker_wake.FETCH_FIRST_FLEXIBLE
    body = b"" if version >= broker_wake.FETCH_FIRST_WITHOUT_REPLICA_ID else struct.pack(">i", -1)
    body += struct.pack(">iiib", wait_ms, 1, 52428800, 0)
    if version >= 7:
        body += struct.pack(">ii", 0, session_epoch)
    topics = []
    for topic in dict.fromkeys(topic for topic, _ in offsets):
        partitions = []
        for (name, partition), offset in offsets.items():
            if name != topic:
                continue
            fields = struct.pack(">i", partition) + (struct.pack(">i", 7) if version >= 9 else b"")
            fields += struct.pack(">q", offset) + (struct.pack(">i", 7) if version >= 12 else b"")
            fields += (struct.pack(">q", 0) if version >= 5 else b"") + struct.pack(">i", 1048576) + tags(flexible)
            partitions.append(fields)
        topics.append(string(topic, flexible) + array(partitions, flexible) + tags(flexible))
    body += array(topics, flexible)
    if version >= 7:
        body += array([], flexible)  # forgotten_topics_data
    if version >= 11:
        body += string(b"", flexible)  # rack_id
    return request(broker_wake.FETCH, version, 9, b"rdkafka", body + tags(flexible), flexible)


def fetch_answer(version, partitions):
    """A Fetch answer (after its size) with each (topic, partition, error_code, high_watermark, records)."""
    flexible = version >= broker_wake.FETCH_FIRST_FLEXIBLE
    frame = struct.pack(">i", 9) + tags(flexible) + struct.pack(">i", 0)
    if version >= 7:
        frame += struct.pack(">hi", 0, 0)
    topics = []
    for topic in dict.fromkeys(entry[0] for entry in partitions):
        answers = []
        for name, partition, error_code, high_watermark, records in partitions:
            if name != topic:
                continue
            fields = struct.pack(">ihqq", partition, error_code, high_watermark, high_watermark)
            fields += struct.pack(">q", 0) if version >= 5 else b""
            aborted = [struct.pack(">qq", 1, 2) + tags(flexible)] if partition % 2 else None
            fields += array(aborted, flexible) + (struct.pack(">i", -1) if version >= 11 else b"")
            answers.append(fields + byte_string(records, flexible) + tags(flexible))
        topics.append(string(topic, flexible) + array(answers, flexible) + tags(flexible))
    return frame + array(topics, flexible) + tags(flexible)


def produce_request(version, partitions, transactional_id=None, acks=-1):
    flexible = version >= broker_wake.PRODUCE_FIRST_FLEXIBLE
    body = string(transactional_id, flexible) + struct.pack(">hi", acks, 30000)
    topics = []
    for topic in dict.fromkeys(topic for topic, _ in partitions):
        data = [struct.pack(">i", partition) + byte_string(b"records", flexible) + tags(flexible)
                for name, partition in partitions if name == topic]
        topics.append(string(topic, flexible) + array(data, flexible) + tags(flexible))
    return request(broker_wake.PRODUCE, version, 3, b"producer", body + array(topics, flexible) + tags(flexible),
                   flexible)


def test_the_fetch_wait_is_found_in_every_version_of_the_request():
    for version in range(4, 18):
        flexible = version >= broker_wake.FETCH_FIRST_FLEXIBLE
        replica = b"" if version >= broker_wake.FETCH_FIRST_WITHOUT_REPLICA_ID else struct.pack(">i", -1)
        body = replica + struct.pack(">ii", 4321, 1) + b"rest"
        for client_id, header_tags in ((b"rdkafka", b"\x00"), (None, b"\x00"), (b"", b"\x02\x01\x03abc\x05\x00")):
            frame = request(broker_wake.FETCH, version, 9, client_id, body, flexible, header_tags)
            offset = broker_wake.fetch_wait_offset(frame, version)
            assert struct.unpack_from(">i", frame, offset) == (4321,), (version, client_id, header_tags)


def test_the_partitions_and_offsets_of_a_fetch_are_read_in_every_version_that_names_its_topics():
    offsets = {(b"orders.events", 0): 12, (b"orders.events", 2): 0, (b"chat.access", 1): 2**40}
    for version in range(4, 13):
        assert broker_wake.fetch_offsets(fetch_request(version, offsets), version) == offsets, version
    # From v13 a fetch names its topics by id, and an incremental session's fetch lists only what changed.
    assert broker_wake.fetch_offsets(fetch_request(13, {}), 13) is None
    assert broker_wake.fetch_offsets(fetch_request(12, offsets, session_epoch=3), 12) is None
    assert broker_wake.readable(broker_wake.fetch_offsets, fetch_request(12, offsets)[:-12], 12) is None


def test_the_high_watermarks_of_a_fetch_answer_are_read_in_every_version_that_names_its_topics():
    answered = [(b"orders.events", 0, 0, 40, b"a record batch"), (b"orders.events", 1, 0, 7, None),
                (b"chat.access", 3, 6, 99, b"")]
    for version in range(4, 13):
        ends = broker_wake.fetched_ends(bytearray(fetch_answer(version, answered)), version)
        # A partition answered with an error (6, NOT_LEADER_OR_FOLLOWER) tells nothing of its end.
        assert ends == {(b"orders.events", 0): 40, (b"orders.events", 1): 7}, version
    assert broker_wake.readable(broker_wake.fetched_ends, fetch_answer(12, answered)[:30], 12) is None


def test_the_partitions_of_a_produce_are_read_and_one_without_acknowledgement_is_told_apart():
    partitions = [(b"chat.messages", 4), (b"chat.messages", 0), (b"orders.events", 1)]
    for version in range(3, 13):
        for transactional_id in (None, b"tx-1"):
            for acks, without in ((0, True), (1, False), (-1, False)):
                frame = produce_request(version, partitions, transactional_id, acks)
                assert broker_wake.without_answer(frame, version) is without, (version, transactional_id, acks)
                assert broker_wake.produced_partitions(frame, version) == partitions, (version, transactional_id)


def test_fetch_is_advertised_up_to_the_last_version_that_names_topics():
    for version in range(0, 5):
        flexible = version >= broker_wake.API_VERSIONS_FIRST_FLEXIBLE
        entries = [struct.pack(">hhh", key, low, high) + tags(flexible)
                   for key, low, high in ((0, 3, 11), (1, 4, 17), (18, 0, 4))]
        frame = struct.pack(">ih", 9, 0) + array(entries, flexible) + struct.pack(">i", 0) + tags(flexible)
        capped = broker_wake.capped_api_versions(bytearray(frame), version)
        assert bytes(capped) == frame.replace(struct.pack(">hhh", 1, 4, 17), struct.pack(">hhh", 1, 4, 12)), version
    # An error answer (an unsupported ApiVersions version, in v0's form) is left as it is.
    refused = struct.pack(">ih", 9, 35) + array([struct.pack(">hhh", 18, 0, 3)], False)
    assert bytes(broker_wake.capped_api_versions(bytearray(refused), 3)) == refused


# The relay's bookkeeping.

ORDERS_0, ORDERS_1, CHAT_0 = (b"orders.events", 0), (b"orders.events", 1), (b"chat.access", 0)


def test_a_fetch_is_held_only_where_every_partition_is_known_to_be_read_to_its_end():
    partitions = broker_wake.Partitions()
    assert not partitions.caught_up({ORDERS_0: 0})  # nothing known yet: the fetch goes on and its answer tells
    partitions.fetch_answered(partitions.produced, {ORDERS_0: 5, ORDERS_1: 0})
    assert partitions.caught_up({ORDERS_0: 5, ORDERS_1: 0})
    assert not partitions.caught_up({ORDERS_0: 3})  # behind: a backlog is read without waiting
    assert not partitions.caught_up({ORDERS_0: 5, CHAT_0: 0})
    assert not partitions.caught_up({})


def test_a_produce_answered_makes_its_partitions_end_unknown_and_overrides_an_answer_older_than_it():
    partitions = broker_wake.Partitions()
    partitions.fetch_answered(partitions.produced, {ORDERS_0: 5, ORDERS_1: 5})
    went_on = partitions.produced
    partitions.produce_answered([ORDERS_0])
    assert not partitions.caught_up({ORDERS_0: 5})
    assert partitions.caught_up({ORDERS_1: 5})
    # A fetch that went on before that produce was answered may not have seen its record: its answer tells nothing.
    partitions.fetch_answered(went_on, {ORDERS_0: 5})
    assert not partitions.caught_up({ORDERS_0: 5})
    partitions.fetch_answered(partitions.produced, {ORDERS_0: 6})
    assert partitions.caught_up({ORDERS_0: 6})
    # A produce that could not be read moves every end, and overrides every older answer.
    went_on = partitions.produced
    partitions.produce_answered(None)
    assert not partitions.caught_up({ORDERS_1: 5})
    partitions.fetch_answered(went_on, {ORDERS_1: 5})
    assert not partitions.caught_up({ORDERS_1: 5})


def test_a_held_fetch_is_woken_by_a_produce_to_one_of_its_partitions_only():
    async def scenario():
        partitions = broker_wake.Partitions()
        held = asyncio.create_task(partitions.hold([ORDERS_0, CHAT_0], 5))
        await asyncio.sleep(0.05)
        partitions.produce_answered([ORDERS_1])
        await asyncio.sleep(0.05)
        assert not held.done()
        partitions.produce_answered([CHAT_0, ORDERS_1])
        await asyncio.wait_for(held, 1)
        assert partitions.held == {}
        started = time.monotonic()
        await partitions.hold([ORDERS_0], 0.1)  # nothing comes: the fetch's own wait ends it
        assert time.monotonic() - started >= 0.09
        assert partitions.held == {}

    asyncio.run(scenario())


def test_a_partition_written_without_acknowledgement_is_never_held_again():
    async def scenario():
        partitions = broker_wake.Partitions()
        partitions.fetch_answered(partitions.produced, {ORDERS_0: 5})
        held = asyncio.create_task(partitions.hold([ORDERS_0], 5))
        await asyncio.sleep(0.05)
        partitions.written_unacknowledged([ORDERS_0])
        await asyncio.wait_for(held, 1)
        partitions.fetch_answered(partitions.produced, {ORDERS_0: 6})
        assert not partitions.caught_up({ORDERS_0: 6})

    asyncio.run(scenario())
