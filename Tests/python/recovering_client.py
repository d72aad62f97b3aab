"""A Socket.IO client that speaks the wire protocol as the official socket.io-client 4.x does over WebSocket,
connection state recovery included (python-socketio does not implement it):

- the CONNECT answer `40/nsp,{"sid":...,"pid":...}` gives the private session id `pid`;
- an EVENT whose last argument is a string, handed to the listeners while a `pid` is held, sets the last offset
  (the client cannot tell an offset from a string argument, exactly like the JS client);
- after its transport closes the client reconnects with `auth = {pid, offset, ...auth}` (no offset if it received
  none); events that arrive before the CONNECT answer are buffered and handed over when it comes; the session
  counts as recovered when the answer carries the same pid;
- a server DISCONNECT ends the session: it does not reconnect by itself (`reconnect()` raises).

Unlike the JS client, listeners here (`events`) get the arguments without the trailing offset, which is kept in
`offsets` instead, so tests compare payloads.

Every packet received is kept raw, in order, so tests can check a connection packet by packet."""
import json
import queue
import socket
import ssl
import threading
import time
import uuid

import websocket


class ConnectRefused(Exception):
    pass


def positions(offset):
    """What an offset of this server says: `{room hash: (epoch, offset)}`, from `hash:epoch:offset` per room, `~`
    between rooms (the client's position in each of its rooms)."""
    found = {}
    for entry in filter(None, offset.split("~")):
        room, epoch, number = entry.split(":")
        found[room] = (epoch, int(number))
    return found


def strictly_increasing(offsets):
    """Whether each offset moves the client on from the one before: in no room back, in some room forward (none
    repeated), as each emit of a room's stream does."""
    seen = [positions(offset) for offset in offsets]
    for earlier, later in zip(seen, seen[1:]):
        if any(room not in later or (later[room][0] == epoch and later[room][1] < number)
               for room, (epoch, number) in earlier.items()):
            return False
        if not any(later[room] != earlier.get(room) for room in later):
            return False
    return True


def parse(text):
    """(type, namespace, ack id, data) of a Socket.IO packet."""
    kind, rest = int(text[0]), text[1:]
    namespace = "/"
    if rest.startswith("/"):
        namespace, _, rest = rest.partition(",")
    digits = ""
    while rest and rest[0].isdigit():
        digits, rest = digits + rest[0], rest[1:]
    return kind, namespace, int(digits) if digits else None, json.loads(rest) if rest else None


class RecoveringSocket:
    def __init__(self, url, namespace, auth, path="socket.io", ca_file=None):
        """`url` like https://127.0.0.1:18443 (or http://127.0.0.1:PORT for an instance directly); `path` the
        Engine.IO path without slashes (e.g. chat/socket.io behind the gateway)."""
        self.url, self.namespace, self.auth, self.path, self.ca_file = url, namespace, auth, path, ca_file
        self.pid = self.sid = self.offset = None
        self.recovered = False
        self.disconnected_by_server = False
        self.packets = []          # (connection number, raw text) of every packet received
        self.events = []           # [name, args] as listeners get them, offsets stripped
        self.offsets = []          # the offset of each event received with one
        self.connections = 0
        self._acks = {}
        self._next_ack = 0
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._early = []  # kept across connections, as the JS client's receive buffer
        # As an app sends its device id: the gateway keeps a client on one instance by it (and spreads clients).
        self.affinity = uuid.uuid4().hex
        self.connect()

    # Connection

    def connect(self, url=None, timeout=10):
        """Opens a WebSocket (to `url`, default the same) and joins the namespace, recovering if a pid is held."""
        if url:
            self.url = url
        scheme = "wss" if self.url.startswith("https") else "ws"
        address = (f"{scheme}://{self.url.split('://', 1)[1]}/{self.path}/"
                   f"?EIO=4&transport=websocket&affinity={self.affinity}")
        options = {"sslopt": {"ca_certs": self.ca_file, "cert_reqs": ssl.CERT_REQUIRED}} if scheme == "wss" else {}
        if self.disconnected_by_server:
            raise ConnectRefused("the server sent this socket away (DISCONNECT): socket.io-client does not reconnect")
        # A starting instance refuses the handshake until it has read its realtime log: try again, as socket.io-client
        # does (its reconnection), for up to `timeout`.
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ws = websocket.create_connection(address, timeout=timeout, **options)
                break
            except websocket.WebSocketBadStatusException as refusal:
                if refusal.status_code not in (400, 503) or time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
        opening = self.ws.recv()
        assert opening.startswith("0"), opening
        # No read timeout from here: an idle socket waits for the server's pings, as the JS client does.
        self.ws.settimeout(None)
        self.connections += 1
        self._connected.clear()
        self._answered = False
        self.recovered = False
        self._refusal = None
        auth = dict(self.auth)
        if self.pid:
            recovery = {"pid": self.pid}
            if self.offset is not None:
                recovery["offset"] = self.offset
            auth = {**recovery, **auth}
        self._previous_pid = self.pid
        self.ws.send(f"40{self.namespace},{json.dumps(auth)}")
        self._reader = threading.Thread(target=self._read, args=(self.ws, self.connections), daemon=True)
        self._reader.start()
        failure = None
        if not self._connected.wait(timeout):
            failure = TimeoutError("no CONNECT answer")
        elif self._refusal is not None:
            failure = ConnectRefused(self._refusal)
        elif not self._answered:
            failure = ConnectionError("the connection closed before the CONNECT answer")
        if failure:
            # No transport left behind: a late answer on it must not count for the next attempt.
            self.drop()
            raise failure
        return self

    def drop(self):
        """The network goes away: the TCP connection is cut without a WebSocket close or a Socket.IO DISCONNECT
        (the server sees its transport close, a reason it keeps the session for)."""
        connection = self.ws.sock  # the reader's failing recv may clear it
        if connection is not None:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()
        self._reader.join(5)

    def reconnect(self, url=None, after=0):
        """Drops the connection and connects again `after` seconds later (socket.io-client waits 0.5 to 1.5 s)."""
        self.drop()
        time.sleep(after)
        return self.connect(url)

    def close(self):
        """Leaves for good, as socket.disconnect() does: DISCONNECT, then the transport closes."""
        try:
            self.ws.send(f"41{self.namespace},")
            self.ws.close()
        except (OSError, websocket.WebSocketException):
            pass

    # Events

    def call(self, event, data, timeout=10):
        """Emits with an acknowledgement and returns its first argument."""
        answer = queue.Queue()
        with self._lock:
            ack, self._next_ack = self._next_ack, self._next_ack + 1
            self._acks[ack] = answer
        self.ws.send(f"42{self.namespace},{ack}{json.dumps([event, data])}")
        return answer.get(timeout=timeout)[0]

    def received(self, name):
        with self._lock:
            return [args[0] if args else None for event, args in self.events if event == name]

    def wait_for(self, name, count=1, seconds=10):
        deadline = time.time() + seconds
        while time.time() < deadline:
            found = self.received(name)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{count} '{name}' events expected in {seconds} s, got {self.received(name)}")

    def packets_of(self, connection):
        with self._lock:
            return [text for number, text in self.packets if number == connection]

    # Reading

    def _deliver(self, data):
        """Hands an EVENT's arguments to the listeners; a trailing string is the last offset (as the JS client
        reads it), kept in `offsets`."""
        args = data[1:]
        with self._lock:
            if self.pid and args and isinstance(args[-1], str):
                self.offset = args[-1]
                self.offsets.append(args[-1])
                args = args[:-1]
            self.events.append([data[0], args])

    def _signal(self, connection):
        """Wakes a connect waiting for its answer, unless this reader's connection is an earlier one: a socket cut
        under the client (its instance killed) may report its end after the next connect began."""
        if connection == self.connections:
            self._connected.set()

    def _read(self, ws, connection):
        while True:
            try:
                text = ws.recv()
            except (OSError, websocket.WebSocketException):
                self._signal(connection)
                return
            if not text:
                self._signal(connection)
                return
            if text == "2":
                try:
                    ws.send("3")
                except (OSError, websocket.WebSocketException):
                    # The connection was cut under the reader (drop()): it ends as a failed recv would.
                    self._signal(connection)
                    return
                continue
            if not text.startswith("4"):
                continue
            packet = text[1:]
            with self._lock:
                self.packets.append((connection, packet))
            kind, namespace, ack, data = parse(packet)
            if namespace != self.namespace:
                continue
            if kind == 0:
                self.sid, self.pid = data["sid"], data.get("pid")
                self.recovered = self._previous_pid is not None and self.pid == self._previous_pid
                with self._lock:
                    early, self._early = self._early, []
                for event in early:
                    self._deliver(event)
                self._answered = True
                self._signal(connection)
            elif kind == 1:
                self.disconnected_by_server = True
                self._signal(connection)
            elif kind == 4:
                self._refusal = data
                self._signal(connection)
            elif kind == 2:
                if self._answered:
                    self._deliver(data)
                else:
                    with self._lock:
                        self._early.append(data)
            elif kind == 3:
                with self._lock:
                    waiter = self._acks.pop(ack, None)
                if waiter:
                    waiter.put(data)
