"""The gateway itself: TLS only, routing, WebSockets, its own errors in the services' JSON shape, and its limits per
client address."""
import json
import math
import socket
import ssl
import time
import uuid

import pytest
import requests

import gateway_kit
import system

LIMITS = system.GATEWAY_LIMITS
RATE_LIMITED = {"error": {"code": "RATE_LIMITED", "message": "Too many requests from this address; retry shortly."}}


def test_plain_http_redirects_to_https(running_system):
    answer = requests.get(f"http://127.0.0.1:{running_system.profile.gateway_http_port}/v1/orders/x",
                          allow_redirects=False, timeout=5)
    assert answer.status_code == 301
    assert answer.headers["Location"] == f"https://127.0.0.1:{running_system.profile.gateway_https_port}/v1/orders/x"


def test_health_over_tls_with_the_generated_certificate(gateway):
    answer = gateway.session().get(f"{gateway.url}/health", timeout=5)
    assert answer.json() == {"status": "ok"}
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
    assert answer.headers["X-Request-ID"]


def test_unknown_route_is_a_json_404(gateway):
    answer = gateway.session().get(f"{gateway.url}/v2/nothing", timeout=5)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "ROUTE_NOT_FOUND"


def test_a_nul_character_in_the_path_or_query_is_a_json_400(cast):
    # A NUL in the path is refused by nginx itself; one in the query reaches the service, which refuses it.
    answer = cast.customer.request("GET", "/v1/vendors/abc%00")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "BAD_REQUEST"
    answer = cast.customer.request("GET", "/v1/chat/quick-replies?x=a%00b")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_CHARACTER"


def test_each_prefix_reaches_its_service_which_checks_the_token(gateway):
    for method, path in (("GET", "/v1/orders/00000000-0000-0000-0000-000000000000"),
                         ("GET", "/v1/orders/x/chat/messages"), ("GET", "/v1/riders/me"), ("GET", "/v1/tracking/x"),
                         ("PUT", "/v1/devices"), ("GET", "/v1/chat/quick-replies"), ("GET", "/v1/service-requests/x")):
        answer = gateway.session().request(method, f"{gateway.url}{path}", timeout=5)
        assert answer.status_code == 401, path
        assert answer.json()["error"]["code"], path


def test_oversized_body_is_refused_by_the_gateway(cast):
    status, code = cast.customer.refusal("POST", "/v1/orders", data=b"x" * (2 << 20),
                                         headers={"Content-Type": "application/json"})
    assert (status, code) == (413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize("kind, role", [("orders", "customer"), ("chat", "customer"), ("rider", "rider"),
                                        ("tracking", "customer")])
def test_each_socket_path_upgrades_to_websocket_over_tls(cast, kind, role):
    """python-socketio starts on long-polling and upgrades; through the gateway the upgrade must succeed (a client
    left on polling works, but pays an HTTP round trip per message)."""
    party = cast.rider if role == "rider" else cast.customer
    client = party.socket(kind, [])
    try:
        assert gateway_kit.until(lambda: client.client.transport() == "websocket", "the WebSocket upgrade", 10)
    finally:
        client.close()


# Limits. Local runs exempt 127.0.0.1 (every other test's address); any other loopback address reaches the gateway as
# a client of its own and gets the deployment's limits (system.GATEWAY_LIMITS), so each test floods from its own.


class FromAddress(requests.adapters.HTTPAdapter):
    """Connections from one local address (any of 127.0.0.0/8), so the gateway sees a client of its own."""

    def __init__(self, address):
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, source_address=(self.address, 0), **kwargs)


def session_from(gateway, address, token=None):
    session = gateway.session(token)
    session.mount("https://", FromAddress(address))
    return session


def assert_rate_limited(status, headers, body):
    assert status == 429
    assert headers["Content-Type"] == "application/json"
    assert headers["Retry-After"] == "1"
    assert headers["X-Request-ID"]
    assert body == RATE_LIMITED


def flood(session, url, count):
    """`count` calls one after another: (the answers that passed, those refused with 429, seconds it took)."""
    started = time.monotonic()
    answers = [session.get(url, timeout=5) for _ in range(count)]
    elapsed = time.monotonic() - started
    refused = [answer for answer in answers if answer.status_code == 429]
    return [answer for answer in answers if answer.status_code != 429], refused, elapsed


def test_a_flood_of_rest_calls_from_one_address_gets_429_json_while_other_addresses_pass(gateway):
    token = gateway.token("rest-flooder", "customer", "Flooder")
    url = f"{gateway.url}/v1/chat/quick-replies"
    rate, burst = LIMITS["GATEWAY_REST_RATE"], LIMITS["GATEWAY_REST_BURST"]

    passed, refused, elapsed = flood(session_from(gateway, "127.0.0.2", token), url, 3 * burst)

    assert {answer.status_code for answer in passed} == {200}
    assert burst <= len(passed) <= burst + 2 + math.ceil(elapsed * rate), elapsed
    assert refused
    assert_rate_limited(refused[0].status_code, refused[0].headers, refused[0].json())
    assert session_from(gateway, "127.0.0.3", token).get(url, timeout=5).status_code == 200
    # At the permitted pace the flooding address is served again.
    time.sleep(2 / rate)
    assert session_from(gateway, "127.0.0.2", token).get(url, timeout=5).status_code == 200


def test_a_flood_of_socket_handshakes_from_one_address_gets_429_json(gateway):
    url = f"{gateway.url}/orders/socket.io/?EIO=4&transport=polling"
    rate, burst = LIMITS["GATEWAY_SOCKET_RATE"], LIMITS["GATEWAY_SOCKET_BURST"]

    passed, refused, elapsed = flood(session_from(gateway, "127.0.0.4"), url, 3 * burst)

    assert {answer.status_code for answer in passed} == {200}
    assert all(answer.text.startswith('0{"sid":') for answer in passed)
    assert burst <= len(passed) <= burst + 2 + math.ceil(elapsed * rate), elapsed
    assert refused
    assert_rate_limited(refused[0].status_code, refused[0].headers, refused[0].json())
    assert session_from(gateway, "127.0.0.3").get(url, timeout=5).status_code == 200


def tls_connection(gateway, port, address="127.0.0.1"):
    """A TLS connection to the gateway from `address`, trusting its certificate."""
    context = ssl.create_default_context(cafile=gateway.certificate)
    connection = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(address, 0))
    return context.wrap_socket(connection, server_hostname="127.0.0.1")


def read_answer(connection):
    """(status, headers, body read so far, at least Content-Length bytes) of the HTTP answer on `connection`."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(4096)
        assert chunk, f"the gateway closed the connection after {received!r}"
        received += chunk
    head, body = received.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = requests.structures.CaseInsensitiveDict(line.split(": ", 1) for line in lines[1:])
    while len(body) < int(headers.get("Content-Length", 0)):
        body += connection.recv(4096)
    return int(lines[0].split()[1]), headers, body


def test_a_photo_upload_refused_before_its_body_is_sent_says_the_connection_closes(gateway, cast, running_system):
    """The photo streams to the service, which refuses an upload it does not expect before reading the body. nginx
    then closes the client's connection; the answer must say so, or a client sends its next request on a
    connection about to close and loses it (seen once in CI: RemoteDisconnected on the request after)."""
    connection = tls_connection(gateway, running_system.profile.gateway_https_port)
    try:
        connection.sendall(f"POST /v1/orders/{uuid.uuid4()}/proof-photo HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
                           + f"Authorization: Bearer {cast.rider.token}\r\n".encode()
                           + b"Content-Type: image/jpeg\r\nContent-Length: 100000\r\n\r\n\xff\xd8\xff")
        status, headers, body = read_answer(connection)
        assert (status, json.loads(body)["error"]["code"]) == (404, "NOT_FOUND")
        assert headers.get("Connection") == "close"
        assert connection.recv(4096) == b"", "and the gateway closes it"
    finally:
        connection.close()


class WebSocketUpgrade:
    """A raw WebSocket upgrade of an Engine.IO connection through the gateway, sent from `address`; the connection
    stays open (holding its place in the gateway's count) until closed."""

    def __init__(self, gateway, address, port, query=""):
        self.connection = tls_connection(gateway, port, address)
        self.connection.sendall(
            f"GET /orders/socket.io/?EIO=4&transport=websocket{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
            + b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        self.status, self.headers, self.body = read_answer(self.connection)

    def send_text(self, text):
        """One masked text frame (payloads under 126 bytes)."""
        payload, mask = text.encode(), b"\x01\x02\x03\x04"
        assert len(payload) < 126
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self.connection.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)

    def next_frame(self):
        """(opcode, payload) of the next frame from the server (payloads under 126 bytes)."""
        while len(self.body) < 2 or len(self.body) < 2 + (self.body[1] & 0x7F):
            chunk = self.connection.recv(4096)
            assert chunk, f"the connection ended after {self.body!r}"
            self.body += chunk
        length = self.body[1] & 0x7F
        assert length < 126
        frame, self.body = self.body[:2 + length], self.body[2 + length:]
        return frame[0] & 0x0F, frame[2:]

    def close(self):
        self.connection.close()


def test_socket_connections_from_one_address_are_limited(gateway, running_system):
    limit, rate = LIMITS["GATEWAY_SOCKET_CONNECTIONS"], LIMITS["GATEWAY_SOCKET_RATE"]
    assert limit <= LIMITS["GATEWAY_SOCKET_BURST"], "the sockets below open within one burst"
    port = running_system.profile.gateway_https_port
    held = []
    try:
        for _ in range(limit):
            held.append(WebSocketUpgrade(gateway, "127.0.0.5", port))
            assert held[-1].status == 101
        # The request rate has room again: what refuses the next socket is the number open.
        time.sleep(2 / rate)
        refused = WebSocketUpgrade(gateway, "127.0.0.5", port)
        refused.close()
        assert_rate_limited(refused.status, refused.headers, json.loads(refused.body))
        held.append(WebSocketUpgrade(gateway, "127.0.0.6", port))
        assert held[-1].status == 101

        held.pop(0).close()

        def another_opens():
            upgrade = WebSocketUpgrade(gateway, "127.0.0.5", port)
            if upgrade.status == 101:
                held.append(upgrade)
                return True
            upgrade.close()
            return False
        assert gateway_kit.until(another_opens, "a socket in place of the closed one", 5)
    finally:
        for upgrade in held:
            upgrade.close()


def test_a_second_websocket_on_an_upgraded_session_is_accepted_and_closed(gateway, running_system):
    """Engine.IO's "ignores WebSocket connection with same sid after upgrade": through the gateway, a session
    upgraded from polling keeps its WebSocket when another WebSocket names its sid; that one is accepted and closed
    at once (stock clients treat a refused handshake as an error); a WebSocket for an unknown sid is refused (400)."""
    port = running_system.profile.gateway_https_port
    http = session_from(gateway, "127.0.0.7")
    opened = http.get(f"{gateway.url}/orders/socket.io/?EIO=4&transport=polling", timeout=5)
    sid = json.loads(opened.text[1:])["sid"]
    first = WebSocketUpgrade(gateway, "127.0.0.7", port, f"&sid={sid}")
    second = None
    try:
        assert first.status == 101
        first.send_text("2probe")
        assert first.next_frame() == (0x1, b"3probe")
        first.send_text("5")

        second = WebSocketUpgrade(gateway, "127.0.0.7", port, f"&sid={sid}")
        assert second.status == 101, "accepted, not refused"
        assert second.next_frame()[0] == 0x8, "then closed at once"

        # The upgraded session is undisturbed: a CONNECT without a token is answered on it.
        first.send_text("40/orders,")
        opcode, payload = first.next_frame()
        while payload == b"2":  # a heartbeat ping may come first
            first.send_text("3")
            opcode, payload = first.next_frame()
        assert opcode == 0x1 and payload.startswith(b"44/orders,"), payload

        unknown = WebSocketUpgrade(gateway, "127.0.0.7", port, "&sid=no-such-session")
        unknown.close()
        assert unknown.status == 400
    finally:
        first.close()
        if second:
            second.close()


# What a machine on the network sees (issue 34: the gateway listened on every address, and handed the demo tokens to
# anyone). Connections from one of this machine's own non-loopback addresses reach nginx as a client from the
# network would.


def network_address():
    """This machine's address on its network (the source of its default route), or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # nothing is sent: this only picks the route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def require_network_address():
    address = network_address()
    if address is None:
        pytest.skip("this machine has no address outside 127.0.0.0/8 to connect from")
    return address


def test_the_gateway_listens_on_loopback_only(running_system):
    address = require_network_address()
    for port in (running_system.profile.gateway_https_port, running_system.profile.gateway_http_port):
        with socket.socket() as client:
            client.settimeout(5)
            assert client.connect_ex((address, port)) != 0, f"the gateway answers on {address}:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_the_demo_parties_tokens_are_served_to_this_machine_only(gateway, running_system):
    address = require_network_address()
    parties = running_system.runtime / "gateway" / "dev-parties.json"
    parties.write_text(json.dumps([{"role": "admin", "id": "admin-demo", "name": "Admin", "token": "secret"}]))
    try:
        url = f"{gateway.url}/console/dev-parties.json"
        assert gateway.session().get(url, timeout=5).json()[0]["token"] == "secret"
        assert session_from(gateway, "127.0.0.5").get(url, timeout=5).status_code == 200
        from_network = session_from(gateway, address).get(url, timeout=5)
        assert from_network.status_code == 403
        assert from_network.json()["error"]["code"] == "FORBIDDEN"
        assert "secret" not in from_network.text
        # The rest of the console is served to the network like any page.
        assert session_from(gateway, address).get(f"{gateway.url}/console/", timeout=5).status_code == 200
    finally:
        parties.unlink()


SECURITY_HEADERS = ("Strict-Transport-Security", "X-Request-ID", "X-Content-Type-Options", "X-Frame-Options",
                    "Referrer-Policy", "Content-Security-Policy")


def test_every_response_carries_the_same_security_headers(gateway, running_system, cast):
    session = gateway.session()
    base, plain = gateway.url, f"http://127.0.0.1:{running_system.profile.gateway_http_port}"
    flooder = session_from(gateway, "127.0.0.9", gateway.token("header-flooder", "customer", "Flooder"))
    _, refused, _ = flood(flooder, f"{base}/v1/chat/quick-replies", 3 * LIMITS["GATEWAY_REST_BURST"])
    answers = {
        "the gateway's health": session.get(f"{base}/health", timeout=5),
        "/ to the console": session.get(f"{base}/", allow_redirects=False, timeout=5),
        "the console's page": session.get(f"{base}/console/", timeout=5),
        "a console script": session.get(f"{base}/console/js/console.js", timeout=5),
        "the console's settings": session.get(f"{base}/console/config.json", timeout=5),
        "the demo parties (absent)": session.get(f"{base}/console/dev-parties.json", timeout=5),
        "Leaflet": session.get(f"{base}/console/vendor/leaflet/leaflet.js", timeout=5),
        "a service's 200": cast.customer.request("GET", "/v1/chat/quick-replies"),
        "a service's 401": session.get(f"{base}/v1/orders/x", timeout=5),
        "the gateway's 404": session.get(f"{base}/v2/nothing", timeout=5),
        "the gateway's 400": session.get(f"{base}/v1/vendors/abc%00", timeout=5),
        "the gateway's 413": session.post(f"{base}/v1/orders", data=b"x" * (2 << 20),
                                          headers={"Content-Type": "application/json"}, timeout=10),
        "the gateway's 429": refused[0],
        "a Socket.IO handshake": session.get(f"{base}/orders/socket.io/?EIO=4&transport=polling", timeout=5),
        "plain HTTP's redirect": requests.get(f"{plain}/v1/orders/x", allow_redirects=False, timeout=5),
        "plain HTTP's health": requests.get(f"{plain}/health", timeout=5),
    }
    address = network_address()
    if address:
        answers["the gateway's 403"] = session_from(gateway, address).get(
            f"{base}/console/dev-parties.json", timeout=5)
    assert answers["the gateway's 429"].status_code == 429
    for name, answer in answers.items():
        missing = [header for header in SECURITY_HEADERS if header not in answer.headers]
        assert not missing, f"{name} ({answer.status_code}) lacks {missing}"
        for header in SECURITY_HEADERS:
            # A header sent twice reaches requests joined with ", ".
            assert ", " not in answer.headers[header].replace("; ", ";"), f"{name}: {header} twice"
        assert answer.headers["Strict-Transport-Security"].startswith("max-age="), name
        assert answer.headers["X-Content-Type-Options"] == "nosniff", name
        assert answer.headers["X-Frame-Options"] == "DENY", name
        assert answer.headers["Referrer-Policy"] == "no-referrer", name
        assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"], name
    console = answers["the console's page"].headers["Content-Security-Policy"]
    assert "connect-src 'self';" in console and "wss:" not in console
    assert answers["a service's 401"].headers["Content-Security-Policy"] == "default-src 'none'; frame-ancestors 'none'"
