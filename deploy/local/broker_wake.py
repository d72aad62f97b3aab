"""A Kafka-protocol relay in front of the local Tansu broker that answers a waiting fetch as soon as a record arrives.

Tansu holds an empty fetch for much of its `max_wait_ms` and is not woken by a produce, so consumers had to ask every
10 ms (`fetch.wait.max.ms=10`): 28-61% of a core for the broker at rest (docs/benchmarks.md, "Idle"). Apache Kafka
wakes a waiting fetch when data arrives, which lets consumers wait 500 ms at no cost in latency. This relay gives
the local broker that behaviour: every client talks to it (Tansu advertises the relay's address), it passes each
request on in order, and it holds a Fetch while no produce has been answered since that connection's last fetch
went on, for at most the fetch's own wait. A Fetch it passes on has its wait cut to `--upstream-wait-ms` (10), so
Tansu answers it at once when it has data and within 10 ms when it has none, as before.

Any produce wakes every held fetch: the relay reads no topic or partition, only each frame's header and a Fetch's
wait. Under load that is no worse than before (each fetch waits at most 10 ms at Tansu); at rest a consumer asks
twice a second instead of a hundred times.

    python broker_wake.py --listen 127.0.0.1:29092 --upstream 127.0.0.1:PORT [--upstream-wait-ms 10]
"""

import argparse
import asyncio
import logging
import signal
import struct

PRODUCE, FETCH = 0, 1
# Fetch is a flexible version (request header v2, with tagged fields) from v12, and has no replica_id from v15.
FETCH_FIRST_FLEXIBLE, FETCH_FIRST_WITHOUT_REPLICA_ID = 12, 15
PRODUCE_FIRST_FLEXIBLE = 9
# A request or response larger than this is refused: Tansu's and librdkafka's own limits are far below.
MAX_FRAME = 128 * 1024 * 1024


class Produced:
    """How many produce requests the broker has answered, and a way to wait until that count passes a value."""

    def __init__(self):
        self.count = 0
        self.changed = asyncio.Condition()

    async def answered(self):
        async with self.changed:
            self.count += 1
            self.changed.notify_all()

    async def wait_past(self, seen, timeout):
        """Returns once `count` is above `seen`, or after `timeout` seconds."""
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: self.count > seen), timeout)
            except asyncio.TimeoutError:
                pass


def read_unsigned_varint(frame, position):
    value, shift = 0, 0
    while True:
        byte = frame[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def fetch_wait_offset(frame, version):
    """Where a Fetch request's max_wait_ms is in `frame` (the bytes after the size)."""
    position = request_body(frame, version >= FETCH_FIRST_FLEXIBLE)
    if version < FETCH_FIRST_WITHOUT_REPLICA_ID:
        position += 4
    return position


def request_body(frame, flexible):
    """Where the body of a request starts in `frame` (after its header)."""
    # Request header: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 length).
    (client_id_length,) = struct.unpack_from(">h", frame, 8)
    position = 10 + max(client_id_length, 0)
    if flexible:
        # The header's tagged fields: a count, then each tag and its size-prefixed value.
        count, position = read_unsigned_varint(frame, position)
        for _ in range(count):
            _, position = read_unsigned_varint(frame, position)
            size, position = read_unsigned_varint(frame, position)
            position += size
    return position


def without_answer(frame, version):
    """Whether a Produce request asks for no answer (acks 0)."""
    position = request_body(frame, version >= PRODUCE_FIRST_FLEXIBLE)
    if version >= 3:
        # transactional_id: a nullable string, compact (unsigned varint length + 1) in flexible versions.
        if version >= PRODUCE_FIRST_FLEXIBLE:
            length, position = read_unsigned_varint(frame, position)
            position += max(length - 1, 0)
        else:
            (length,) = struct.unpack_from(">h", frame, position)
            position += 2 + max(length, 0)
    (acks,) = struct.unpack_from(">h", frame, position)
    return acks == 0


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
        self.client_reader, self.client_writer = client_reader, client_writer
        self.pending = {}  # the api_key of each request passed on and not yet answered, by correlation id
        self.produced_seen = relay.produced.count

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
                if api_key == FETCH:
                    frame = await self.held_fetch(bytearray(frame), version)
                unanswered = api_key == PRODUCE and without_answer(frame, version)
                if not unanswered:
                    self.pending[correlation_id] = api_key
                upstream.write(header + frame)
                await upstream.drain()
                if unanswered:
                    await self.relay.produced.answered()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, struct.error, IndexError):
            return

    async def held_fetch(self, frame, version):
        """Waits, up to the fetch's own wait, until a produce was answered since this connection's last fetch; the
        fetch then goes on with the upstream wait."""
        offset = fetch_wait_offset(frame, version)
        (wait_ms,) = struct.unpack_from(">i", frame, offset)
        if self.relay.produced.count <= self.produced_seen and wait_ms > self.relay.upstream_wait_ms:
            await self.relay.produced.wait_past(self.produced_seen, wait_ms / 1000)
        self.produced_seen = self.relay.produced.count
        struct.pack_into(">i", frame, offset, min(wait_ms, self.relay.upstream_wait_ms))
        return bytes(frame)

    async def pass_responses(self, upstream):
        try:
            while True:
                header, frame = await read_frame(upstream)
                (correlation_id,) = struct.unpack_from(">i", frame, 0)
                api_key = self.pending.pop(correlation_id, None)
                self.client_writer.write(header + frame)
                await self.client_writer.drain()
                if api_key == PRODUCE:
                    await self.relay.produced.answered()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, struct.error):
            return


class Relay:
    def __init__(self, upstream, upstream_wait_ms):
        self.upstream = upstream
        self.upstream_wait_ms = upstream_wait_ms
        self.produced = Produced()

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
