"""What the gateway costs: the same calls made directly to a service and through nginx (TLS, keep-alive, routing),
one client at a time, reported as p50/p95/p99 and calls per second. Starts its own copy of the system.

    Benchmarks/gateway.sh [CALLS]     (default 2000 REST calls and 1000 Socket.IO acknowledgements per path)
    gateway.py BIN_DIR CALLS          what the script runs, with the release build's executables
"""
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
sys.path.insert(0, str(ROOT / "Tests" / "python"))

import gateway_kit  # noqa: E402
import system  # noqa: E402
from scenario_kit import SocketClient  # noqa: E402

PROFILE = system.Profile(
    name="bench-gateway", postgres_port=27432, broker_port=27092, gateway_http_port=27080, gateway_https_port=27443,
    service_ports=dict(zip(system.SERVICES, range(27081, 27086))),
    service_environment={
        "LOG_LEVEL": "warning",
        # The acknowledgements go back to back: lift the per-socket event limit (20 a second by default).
        "SOCKETIO_RATE_LIMIT_PER_SECOND": "100000",
        "SOCKETIO_RATE_LIMIT_BURST": "100000",
    },
)


def percentiles(samples_ms):
    ordered = sorted(samples_ms)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return pick(0.50), pick(0.95), pick(0.99)


def measure(label, calls, call):
    for _ in range(min(100, calls)):  # warm-up: connections, TLS sessions, JIT-free but cache-warm paths
        call()
    samples = []
    started = time.perf_counter()
    for _ in range(calls):
        before = time.perf_counter()
        call()
        samples.append((time.perf_counter() - before) * 1000)
    elapsed = time.perf_counter() - started
    p50, p95, p99 = percentiles(samples)
    print(f"  {label:<44} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  p99 {p99:6.2f} ms  "
          f"{calls / elapsed:7.0f}/s  (mean {statistics.mean(samples):.2f} ms, n={calls})", flush=True)


def main():
    executables, calls = sys.argv[1], int(sys.argv[2])
    running = system.System(PROFILE, executables=executables)
    try:
        running.start()
        gateway = gateway_kit.Gateway(running.gateway_url, running.tls_certificate, running.bin)
        cast = gateway_kit.new_cast(gateway)
        rider = cast.rider
        direct = gateway.session(rider.token)
        allocation = running.service_url("allocation-service")
        print(f"\nREST: GET /v1/riders/me (allocation service, Postgres read), {calls} sequential calls, keep-alive")
        measure("direct  http://127.0.0.1 (service)", calls,
                lambda: direct.get(f"{allocation}/v1/riders/me", timeout=10).raise_for_status())
        measure("gateway https://127.0.0.1 (nginx, TLS)", calls,
                lambda: rider.http.get(f"{gateway.url}/v1/riders/me", timeout=10).raise_for_status())

        acks = max(1, calls // 2)
        print(f"\nSocket.IO over WebSocket: `received` acknowledgement on /rider (allocation service), {acks} calls")
        offer = {"offerId": "00000000-0000-0000-0000-000000000000"}
        direct_socket = SocketClient(allocation, "/rider", rider.token, [], http_session=gateway.session())
        gateway_socket = rider.socket("rider", [])
        try:
            for client in (direct_socket, gateway_socket):  # both upgraded from long-polling before measuring
                gateway_kit.until(lambda: client.client.transport() == "websocket", "the WebSocket upgrade", 10)
            measure("direct  ws://127.0.0.1/socket.io/", acks, lambda: direct_socket.call("received", offer))
            measure("gateway wss://127.0.0.1/allocation/socket.io/", acks, lambda: gateway_socket.call("received", offer))
        finally:
            direct_socket.close()
            gateway_socket.close()
        print()
    finally:
        running.stop()


if __name__ == "__main__":
    main()
