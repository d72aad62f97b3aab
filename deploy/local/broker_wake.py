"""A Kafka-protocol relay in front of the local Tansu broker that answers a waiting fetch as soon as a record arrives
in a partition it reads.

Tansu holds an empty fetch for much of its `max_wait_ms` and is not woken by a produce, so consumers had to ask every
10 ms (`fetch.wait.max.ms=10`): 28-61% of a core for the broker at rest (docs/benchmarks.md, "Idle"). Apache Kafka
holds a fetch until data arrives in one of the partitions it reads, which lets consumers wait 500 ms at no cost in
latency. This relay gives the local broker that behaviour: every client talks to it (Tansu advertises the relay's
address), and it passes each connection's requests on in order, except that it holds a Fetch whose every partition
it knows to be read to its end, until a produce to one of them is answered or the fetch's own wait is over. A Fetch
it passes on has its wait cut to `--upstream-wait-ms` (10), so Tansu answers it at once when it has data and within
10 ms when it has none.

What the relay knows of a partition's end is the high watermark of the last fetch answer that no produce to the
partition has overtaken; a produce answered there forgets it, so the next fetch goes on. A consumer behind on a
partition (a backlog read in several fetches) is never held. It reads the partitions and offsets of Fetch requests,
the high watermarks of their answers and the partitions of Produce requests; to read a fetch's topics by name, it
advertises Fetch up to v12 (v13 names topics by id). A frame it cannot read is passed on as it came, and a fetch it
cannot read is not held.

    python broker_wake.py --listen 127.0.0.1:29092 --upstream 127.0.0.1:PORT [--upstream-wait-ms 10]
"""

import argparse
import asyncio
import logging
import signal
import struct

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
# Fetch is a flexible version (request header v2, with tagged fields) from v12, and has no replica_id from v15.
FETCH_FIRST_FLEXIBLE, FETCH_FIRST_WITHOUT_REPLICA_ID = 12, 15
# The last Fetch version that names its topics; the relay advertises no later one.
FETCH_LAST_NAMING_TOPICS = 12
PRODUCE_FIRST_FLEXIBLE, PRODUCE_LAST_NAMING_TOPICS = 9, 12
API_VERSIONS_FIRST_FLEXIBLE = 3
# A request or response larger than this is refused: Tansu's and librdkafka's own limits are far below.
MAX_FRAME = 128 * 1024 * 1024


class Wire:
    """Reads Kafka's primitive types from a frame, from a position on; compact forms where `flexible`. Reading past
    the frame raises ValueError."""

    def __init__(self, frame, position, flexible):
        self.frame, self.position, self.flexible = frame, position, flexible

    def fixed(self, form, size):
        (value,) = struct.unpack_from(form, self.frame, self.position)
        self.position += size
        return value

    def int8(self):
        return self.fixed(">b", 1)

    def int16(self):
        return self.fixed(">h", 2)

    def int32(self):
        return self.fixed(">i", 4)

    def int64(self):
        return self.fixed(">q", 8)

    def unsigned_varint(self):
        value, self.position = read_unsigned_varint(self.frame, self.position)
        return value

    def skip(self, size):
        if size < 0 or self.position + size > len(self.frame):
            raise ValueError("past the frame")
        self.position += size

    def array_length(self):
        return self.unsigned_varint() - 1 if self.flexible else self.int32()

    def string(self):
        size = self.unsigned_varint() - 1 if self.flexible else self.int16()
        if size < 0:
            return None
        start = self.position
        self.skip(size)
        return bytes(self.frame[start:self.position])

    def skip_bytes(self):
        size = self.unsigned_varint() - 1 if self.flexible else self.int32()
        self.skip(max(size, 0))

    def tagged_fields(self):
        if not self.flexible:
            return
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()
            self.skip(self.unsigned_varint())


def read_unsigned_varint(frame, position):
    value, shift = 0, 0
    while True:
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise ValueError("a varint of more than five bytes")


def request_body(frame, flexible):
    """Where the body of a request starts in `frame` (the bytes after the size, after the request's header)."""
    # Request header: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 length).
    (client_id_length,) = struct.unpack_from(">h", frame, 8)
    wire = Wire(frame, 10 + max(client_id_length, 0), flexible)
    wire.tagged_fields()
    return wire.position


def fetch_wait_offset(frame, version):
    """Where a Fetch request's max_wait_ms is in `frame`."""
    position = request_body(frame, version >= FETCH_FIRST_FLEXIBLE)
    if version < FETCH_FIRST_WITHOUT_REPLICA_ID:
        position += 4
    return position


def fetch_offsets(frame, version):
    """The offset a Fetch request reads each of its partitions from, by (topic, partition); None for a version that
    names topics by id, or an incremental fetch session's request (which lists only what changed)."""
    if not 4 <= version <= FETCH_LAST_NAMING_TOPICS:
        return None
    wire = Wire(frame, fetch_wait_offset(frame, version) + 4, version >= FETCH_FIRST_FLEXIBLE)
    wire.skip(4 + 4 + 1)  # min_bytes, max_bytes, isolation_level
    if version >= 7:
        wire.int32()  # session_id
        if wire.int32() > 0:  # session_epoch
            return None
    offsets = {}
    for _ in range(wire.array_length()):
        topic = wire.string()
        for _ in range(wire.array_length()):
            partition = wire.int32()
            if version >= 9:
                wire.int32()  # current_leader_epoch
            offsets[(topic, partition)] = wire.int64()
            if version >= 12:
                wire.int32()  # last_fetched_epoch
            if version >= 5:
                wire.int64()  # log_start_offset
            wire.int32()  # partition_max_bytes
            wire.tagged_fields()
        wire.tagged_fields()
    return offsets


def fetched_ends(frame, version):
    """Each partition's high watermark in a Fetch answer (`frame` after its size), by (topic, partition), for the
    partitions answered without an error."""
    if not 4 <= version <= FETCH_LAST_NAMING_TOPICS:
        return None
    flexible = version >= FETCH_FIRST_FLEXIBLE
    wire = Wire(frame, 4, flexible)  # correlation_id
    wire.tagged_fields()  # response header v1 in flexible versions
    wire.int32()  # throttle_time_ms
    if version >= 7:
        wire.int16()  # error_code
        wire.int32()  # session_id
    ends = {}
    for _ in range(wire.array_length()):
        topic = wire.string()
        for _ in range(wire.array_length()):
            partition, error_code, high_watermark = wire.int32(), wire.int16(), wire.int64()
            wire.int64()  # last_stable_offset
            if version >= 5:
                wire.int64()  # log_start_offset
            for _ in range(max(wire.array_length(), 0)):  # aborted_transactions
                wire.skip(16)
                wire.tagged_fields()
            if version >= 11:
                wire.int32()  # preferred_read_replica
            wire.skip_bytes()  # records
            wire.tagged_fields()
            if error_code == 0:
                ends[(topic, partition)] = high_watermark
        wire.tagged_fields()
    return ends


def produce_acks_position(frame, version):
    """Where a Produce request's acks is in `frame`."""
    wire = Wire(frame, request_body(frame, version >= PRODUCE_FIRST_FLEXIBLE), version >= PRODUCE_FIRST_FLEXIBLE)
    if version >= 3:
        wire.string()  # transactional_id
    return wire.position


def without_answer(frame, version):
    """Whether a Produce request asks for no answer (acks 0)."""
    (acks,) = struct.unpack_from(">h", frame, produce_acks_position(frame, version))
    return acks == 0


def produced_partitions(frame, version):
    """The (topic, partition) pairs a Produce request writes to; None for a version this does not read."""
    if not 3 <= version <= PRODUCE_LAST_NAMING_TOPICS:
        return None
    wire = Wire(frame, produce_acks_position(frame, version) + 2 + 4, version >= PRODUCE_FIRST_FLEXIBLE)  # acks, timeout
    partitions = []
    for _ in range(wire.array_length()):
        topic = wire.string()
        for _ in range(wire.array_length()):
            partitions.append((topic, wire.int32()))
            wire.skip_bytes()  # records
            wire.tagged_fields()
        wire.tagged_fields()
    return partitions


def capped_api_versions(frame, version):
    """An ApiVersions answer (`frame` after its size, a bytearray, changed in place) advertising Fetch up to
    FETCH_LAST_NAMING_TOPICS at most."""
    wire = Wire(frame, 4, version >= API_VERSIONS_FIRST_FLEXIBLE)  # correlation_id; the header has no tagged fields
    if wire.int16() != 0:
        return frame
    for _ in range(wire.array_length()):
        entry = wire.position
        api_key, minimum, maximum = wire.int16(), wire.int16(), wire.int16()
        if api_key == FETCH and minimum <= FETCH_LAST_NAMING_TOPICS < maximum:
            struct.pack_into(">h", frame, entry + 4, FETCH_LAST_NAMING_TOPICS)
        wire.tagged_fields()
    return frame


def readable(read, *arguments):
    """What `read` finds in a frame, or None if the frame is not as it expects."""
    try:
        return read(*arguments)
    except (ValueError, struct.error, IndexError):
        return None


class Partitions:
    """What the relay knows of each partition's end, and the fetches held until a record arrives in one they read."""

    def __init__(self):
        self.produced = 0  # produces answered so far: when each fetch went on, in these
        self.last_produced = {}  # partition -> `produced` when a produce to it was last answered
        self.produced_anywhere = 0  # `produced` when a produce this could not read was last answered
        self.ends = {}  # partition -> its high watermark in a fetch answer no produce to it has overtaken
        self.unacknowledged = set()  # partitions written with acks 0: when their records land is not known
        self.held = {}  # partition -> the futures of the fetches held on it

    def caught_up(self, offsets):
        """Whether a fetch from `offsets` would find nothing new in any of its partitions."""
        return bool(offsets) and all(self.ends.get(partition, offset + 1) <= offset
                                     for partition, offset in offsets.items())

    async def hold(self, partitions, seconds):
        """Waits until a produce to one of `partitions` is answered, or `seconds` passed."""
        woken = asyncio.get_running_loop().create_future()
        for partition in partitions:
            self.held.setdefault(partition, set()).add(woken)
        try:
            await asyncio.wait_for(woken, seconds)
        except asyncio.TimeoutError:
            pass
        finally:
            for partition in partitions:
                waiting = self.held.get(partition)
                if waiting is not None:
                    waiting.discard(woken)
                    if not waiting:
                        del self.held[partition]

    def fetch_answered(self, went_on, ends):
        """A fetch that went on when `produced` was `went_on` was answered with these `ends`: each is the partition's
        end unless a produce to it was answered since (the answer may not have seen that record)."""
        if self.produced_anywhere > went_on:
            return
        for partition, end in ends.items():
            if self.last_produced.get(partition, 0) <= went_on and partition not in self.unacknowledged:
                self.ends[partition] = end

    def produce_answered(self, partitions):
        """A produce to `partitions` (None: not read) was answered: their ends move, and fetches held on them go on."""
        self.produced += 1
        if partitions is None:
            self.produced_anywhere = self.produced
            partitions = list(self.held) + list(self.ends)
        for partition in partitions:
            self.last_produced[partition] = self.produced
            self.ends.pop(partition, None)
            for woken in self.held.pop(partition, ()):
                if not woken.done():
                    woken.set_result(None)

    def written_unacknowledged(self, partitions):
        """A produce without an answer went on: its partitions' fetches are never held again."""
        if partitions is None:
            partitions = list(self.held) + list(self.ends)
        self.unacknowledged.update(partitions)
        self.produce_answered(partitions)


async def read_frame(reader):
    header = await reader.readexactly(4)
    (size,) = struct.unpack(">i", header)
    if size < 0 or size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    return header, await reader.readexactly(size)


class Connection:
    """One client connection and its own connection to the broker, requests passed on in the order they came."""

    def __init__(self, relay, client_reader, client_writer):
        self.relay = relay
        self.partitions = relay.partitions
        self.client_reader, self.client_writer = client_reader, client_writer
        # By correlation id, each request passed on and not yet answered: api_key, version, and for a Fetch the
        # `produced` count when it went on, for a Produce its partitions.
        self.pending = {}

    async def run(self):
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.relay.upstream)
        except OSError as error:
            logging.warning("cannot reach the broker at %s:%s: %s", *self.relay.upstream, error)
            self.client_writer.close()
            return
        requests = asyncio.create_task(self.pass_requests(upstream_writer))
        responses = asyncio.create_task(self.pass_responses(upstream_reader))
        await asyncio.wait([requests, responses], return_when=asyncio.FIRST_COMPLETED)
        for task in (requests, responses):
            task.cancel()
        for writer in (upstream_writer, self.client_writer):
            writer.close()

    async def pass_requests(self, upstream):
        try:
            while True:
                header, frame = await read_frame(self.client_reader)
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                unanswered = False
                if api_key == FETCH:
                    frame = await self.held_fetch(bytearray(frame), version)
                    self.pending[correlation_id] = (api_key, version, self.partitions.produced)
                elif api_key == PRODUCE:
                    partitions = readable(produced_partitions, frame, version)
                    unanswered = without_answer(frame, version)
                    if not unanswered:
                        self.pending[correlation_id] = (api_key, version, partitions)
                else:
                    self.pending[correlation_id] = (api_key, version, None)
                upstream.write(header + frame)
                await upstream.drain()
                if unanswered:
                    self.partitions.written_unacknowledged(partitions)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, struct.error, IndexError):
            return

    async def held_fetch(self, frame, version):
        """Holds a fetch that would find nothing new, up to its own wait, until a produce to one of its partitions is
        answered; the fetch then goes on with the upstream wait."""
        offset = fetch_wait_offset(frame, version)
        (wait_ms,) = struct.unpack_from(">i", frame, offset)
        if wait_ms > self.relay.upstream_wait_ms:
            offsets = readable(fetch_offsets, frame, version)
            if offsets is not None and self.partitions.caught_up(offsets):
                await self.partitions.hold(list(offsets), wait_ms / 1000)
            struct.pack_into(">i", frame, offset, self.relay.upstream_wait_ms)
        return bytes(frame)

    async def pass_responses(self, upstream):
        try:
            while True:
                header, frame = await read_frame(upstream)
                (correlation_id,) = struct.unpack_from(">i", frame, 0)
                api_key, version, detail = self.pending.pop(correlation_id, (None, None, None))
                if api_key == API_VERSIONS:
                    frame = readable(capped_api_versions, bytearray(frame), version) or frame
                self.client_writer.write(header + frame)
                await self.client_writer.drain()
                if api_key == PRODUCE:
                    self.partitions.produce_answered(detail)
                elif api_key == FETCH:
                    ends = readable(fetched_ends, frame, version)
                    if ends is not None:
                        self.partitions.fetch_answered(detail, ends)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, struct.error):
            return


class Relay:
    def __init__(self, upstream, upstream_wait_ms):
        self.upstream = upstream
        self.upstream_wait_ms = upstream_wait_ms
        self.partitions = Partitions()

    async def serve(self, client_reader, client_writer):
        await Connection(self, client_reader, client_writer).run()


def address(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=address, required=True)
    parser.add_argument("--upstream", type=address, required=True)
    parser.add_argument("--upstream-wait-ms", type=int, default=10)
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s broker-wake %(levelname)s %(message)s")
    relay = Relay(arguments.upstream, arguments.upstream_wait_ms)
    server = await asyncio.start_server(relay.serve, *arguments.listen, backlog=1024)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    logging.info("relaying %s:%s to the broker at %s:%s", *arguments.listen, *arguments.upstream)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
