"""The gateway itself: TLS only, routing, WebSockets, its own errors in the services' JSON shape."""
import pytest
import requests

import gateway_kit


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
