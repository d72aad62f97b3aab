"""The system tests' set-up: the whole system (Postgres, the broker, the five services, the gateway) started once
on ports of its own, a fake Azure Maps on 127.0.0.1 the location service asks for ETAs, and a fresh cast of parties
at a place of its own for each test. Every client call goes through the gateway."""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
sys.path.insert(0, str(ROOT / "Tests" / "python"))

import gateway_kit  # noqa: E402
import system  # noqa: E402

# SYSTEM_TEST_PORT_OFFSET moves every port below (and the runtime folder), so two copies can run side by side.
OFFSET = int(os.environ.get("SYSTEM_TEST_PORT_OFFSET", "0"))
MAPS_PORT = 18090 + OFFSET

# Short windows so the timing criteria run in seconds; each is the documented setting a deployment would change.
PROFILE = system.Profile(
    name=f"system-test-{OFFSET}", postgres_port=15433 + OFFSET, broker_port=19120 + OFFSET,
    gateway_http_port=18080 + OFFSET, gateway_https_port=18443 + OFFSET,
    service_ports=dict(zip(system.SERVICES, range(18081 + OFFSET, 18086 + OFFSET))),
    # The browser tests run offline: the console's map draws a plain grid.
    console_tile_url="grid",
    service_environment={
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "info"),
        "OFFER_TIMEOUT_SECONDS": "6",
        "OFFER_RECEIPT_TIMEOUT_SECONDS": "3",
        "TRACKING_STALE_AFTER_SECONDS": "3",
        # The tests' couriers are fast-forwarded (a 2 km approach in well under a second); 70 m/s would drop them.
        "POSITION_MAX_SPEED_MPS": "100000",
        "ETA_PROVIDER": "azure",
        "ETA_PROVIDER_URL": f"http://127.0.0.1:{MAPS_PORT}",
        "AZURE_MAPS_KEY": "system-test-key",
        "ETA_PROVIDER_TIMEOUT_MS": "1000",
        "ETA_BREAKER_FAILURES": "1000000",
        "PUSH_RETRY_INITIAL_MS": "200",
    },
)


class FakeAzureMaps(BaseHTTPRequestHandler):
    """Azure Maps Route Directions: 40 km/h along a road 1.3 times the straight line, or 503 for a destination the
    test marked as failing."""
    failing_destinations = set()

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        try:
            start, end = [tuple(float(x) for x in point.split(",")) for point in query["query"][0].split(":")]
        except (KeyError, ValueError):
            return self._answer(400, {"error": {"code": "BadRequest"}})
        if url.path != "/route/directions/json" or query.get("subscription-key") != ["system-test-key"]:
            return self._answer(401, {"error": {"code": "Unauthorized"}})
        if (round(end[0], 4), round(end[1], 4)) in self.failing_destinations:
            return self._answer(503, {"error": {"code": "ServiceUnavailable"}})
        meters = gateway_kit.distance_meters(start, end) * 1.3
        self._answer(200, {"routes": [{"summary": {"lengthInMeters": meters, "travelTimeInSeconds": meters / 11.1}}]})

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_):
        pass


@pytest.fixture(scope="session")
def maps():
    server = ThreadingHTTPServer(("127.0.0.1", MAPS_PORT), FakeAzureMaps)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield FakeAzureMaps
    server.shutdown()


@pytest.fixture(scope="session")
def running_system(maps):
    with system.started(PROFILE) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(running_system):
    return gateway_kit.Gateway(running_system.gateway_url, running_system.tls_certificate, running_system.bin)


@pytest.fixture
def cast(gateway):
    """New parties (customer, vendor, two riders, technician, admin) and a vendor at a place no other test uses."""
    return gateway_kit.new_cast(gateway)


def pytest_terminal_summary(terminalreporter, exitstatus):
    """After a failure, the end of each service's and the gateway's log (CI shows nothing else of them)."""
    if exitstatus == 0:
        return
    # The main system's, and those of the modules that start a system of their own.
    for name in (PROFILE.name, f"multi-instance-{OFFSET}", f"soak-test-{OFFSET}"):
        logs = system.runtime_dir(name) / "logs"
        for log in sorted(logs.glob("*.log")) if logs.exists() else []:
            lines = log.read_text(errors="replace").splitlines()[-25:]
            terminalreporter.write_sep("-", f"{name}: {log.name} (last {len(lines)} lines)")
            terminalreporter.write_line("\n".join(lines))
