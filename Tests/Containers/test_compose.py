"""The system as users deploy it: docker-compose.yml in containers (podman), two replicas of every service, driven
only through the containerized gateway over TLS. The journeys, the recovery and the console tests are the system
tests' own (Tests/System), run here against the containers; the rest is what only containers have: healthchecks,
non-root services, replicas stopped mid-journey."""
import json
import re
import subprocess

import gateway_kit
from conftest import PROJECT
from system import SERVICES
from test_console import (  # noqa: F401 (the fixtures these tests use)
    browser,
    browsers,
    test_a_technician_visit_from_request_to_arrival,
    test_the_gateway_serves_the_console_and_a_token_signs_in,
)
from test_journeys import test_delivery_journey, test_service_visit_journey  # noqa: F401
from test_recovery import (  # noqa: F401
    test_a_dropped_phone_gets_every_missed_message_once_in_order_before_the_connect_answer,
    test_a_rider_offered_an_order_while_the_connection_was_down_gets_the_offer_once,
)


def test_every_service_runs_twice_as_the_non_root_user_and_passes_its_healthcheck(compose):
    for service in SERVICES:
        containers = compose.containers(service)
        assert len(containers) == 2
        for container in containers:
            assert compose.podman("exec", container, "id", "-u").strip() == "10001"
            assert container in compose.figures["healthy_after_seconds"]
    memory = compose.memory()
    print(json.dumps({"healthy_after_seconds": compose.figures["healthy_after_seconds"], "memory": memory},
                     indent=2))


def test_every_service_loaded_the_image_s_librdkafka_which_the_local_broker_needs(compose):
    """Debian 12's librdkafka (2.0.2) cannot talk to the local broker; the image ships 2.16 (see the Dockerfile)."""
    for service in SERVICES:
        for container in compose.containers(service):
            started = next(json.loads(line) for line in compose.logs(container, tail=100000).splitlines()
                           if line.startswith("{") and json.loads(line).get("message") == "starting")
            library = started["kafka.library"]
            assert re.fullmatch(r"librdkafka 2\.16\.\d+ \(/usr/local/lib/librdkafka\.so\.1\)", library), library


def test_one_replica_of_every_service_stopped_mid_journey_and_the_journey_completes_on_the_others(compose, cast):
    """After the rider accepted, the second replica of every service is stopped (SIGTERM, its graceful shutdown):
    the journey goes on through the first, the gateway passing over the stopped ones."""
    stopped = []

    def stop_second_replicas(step):
        if step == "accepted":
            for service in SERVICES:
                container = compose.containers(service)[1]
                compose.stop(container)
                stopped.append(container)

    try:
        seen = gateway_kit.DeliveryJourney(cast, after=stop_second_replicas).play()
        assert seen["order"]["status"] == "Delivered"
        assert seen["chat"]["rider_heard"][0]["text"] == "Hi! The gate code is 4321."
        assert gateway_kit.map_followed_the_route(seen["map"])
    finally:
        for container in stopped:
            compose.start(container)
        for container in stopped:
            compose.wait_healthy(container, timeout=120)


def test_a_port_leaving_the_network_bridge_leaves_the_others_name_lookups_answering(compose):
    """Linux gives an unpinned bridge the lowest address among its ports; when that port leaves, every container's
    ARP entry for the gateway (where aardvark-dns answers) is stale and lookups hang for 10 s and more. Stack pins
    the bridge's address (see deploy/containers/stack.py); here a port with the lowest possible address joins,
    a service looks a name up, and the port leaves: the next lookup must answer at once."""
    network = json.loads(compose.podman("network", "inspect", f"{PROJECT}_default"))[0]
    bridge = network["network_interface"]
    container = compose.containers("chat-service")[0]
    pid = compose.podman("inspect", "--format", "{{.State.Pid}}", container).strip()

    def lookup():
        return compose.podman("exec", container, "timeout", "3", "getent", "hosts", "postgres", check=False)

    subprocess.run(["ip", "link", "add", "dl-low0", "address", "02:00:00:00:00:01", "type", "veth", "peer", "name",
                    "dl-low1"], check=True)
    try:
        subprocess.run(["ip", "link", "set", "dl-low0", "master", bridge, "up"], check=True)
        subprocess.run(["nsenter", "-t", pid, "-n", "ip", "neigh", "flush", "all"], check=True)
        assert lookup().strip(), "no answer while the low port is attached"
    finally:
        subprocess.run(["ip", "link", "del", "dl-low0"], check=True)
    assert lookup().strip(), "the lookup hung after a port left the bridge"
