"""A service killed mid-journey (SIGKILL: nothing flushed, no shutdown) and started again loses nothing: the journey
completes and every party still sees everything. The kill comes where the service has work in flight; the journey
goes on at once, its calls and sockets retrying while the gateway answers 503 for the dead service. Postgres crashing
and coming back is survived the same way, and a service told to stop while Postgres is down still stops."""
import threading
import time

import pytest

import gateway_kit

# Where each service is killed: just after the step that hands it work through Kafka.
KILL_AFTER = {
    "order-service": "offered",  # the rider's acceptance (OfferAccepted) reaches it only after the restart
    "allocation-service": "ready",  # OrderReadyForPickup waits in Kafka; the offer comes after the restart
    "chat-service": "accepted",  # RiderAssigned opens the chat after the restart
    "location-service": "picked_up",  # OrderPickedUp starts tracking after the restart
    "notification-service": "ready",  # the offer's push is requested while it is down
}


def assert_delivered_once(cast, seen):
    """The order was delivered and its log holds each step once; the chat closed."""
    order = seen["order"]
    assert order["status"] == "Delivered"
    types = [event["type"] for event in cast.customer.call("GET", f"/v1/orders/{order['id']}/events")["events"]]
    for expected in ("OrderCreated", "OrderAccepted", "OrderReadyForPickup", "RiderAssigned", "OrderPickedUp",
                     "OrderDelivered"):
        assert types.count(expected) == 1, types
    assert seen["chat_closed"]


@pytest.mark.parametrize("service", list(KILL_AFTER))
def test_a_service_killed_mid_journey_restarts_and_the_journey_completes(service, cast, running_system):
    restarted = threading.Event()
    failures = []

    def kill_and_restart(step):
        if step != KILL_AFTER[service]:
            return
        running_system.kill_service(service)

        def restart():
            try:
                time.sleep(1.5)
                running_system.start_service(service)
            except BaseException as error:  # noqa: BLE001 - reported by the assertion below
                failures.append(error)
            finally:
                restarted.set()
        threading.Thread(target=restart, daemon=True).start()

    seen = gateway_kit.DeliveryJourney(cast, after=kill_and_restart).play()
    assert restarted.wait(120) and not failures, failures
    assert running_system.running(service)

    assert_delivered_once(cast, seen)
    assert seen["order"]["rider"]["id"] == cast.rider.id
    assert gateway_kit.map_followed_the_route(seen["map"])
    assert seen["chat"]["rider_heard"] and seen["chat"]["customer_heard"]
    pushes = gateway_kit.pushes_of(cast.admin, cast.rider.id, kinds=["offer"])
    assert [push["status"] for push in pushes] == ["sent"]
    pickup_pushes = gateway_kit.pushes_of(cast.admin, cast.customer.id, kinds=["order_picked_up"])
    assert [push["status"] for push in pickup_pushes] == ["sent"]


def test_postgres_crashing_mid_journey_and_coming_back_is_survived_by_the_running_services(cast, running_system):
    """Every service keeps running through the outage; their outbox relays, whose LISTEN connections were cut, publish
    again once Postgres is back (the offer, the assignment and everything after need them)."""
    def crash_and_resume(step):
        if step == "ready":
            running_system.crash_postgres()
            time.sleep(2)
            running_system.resume_postgres()

    seen = gateway_kit.DeliveryJourney(cast, after=crash_and_resume).play()
    assert all(running_system.running(name) for name in running_system.processes)
    assert_delivered_once(cast, seen)


def test_every_service_stops_within_ten_seconds_of_sigterm_while_postgres_is_down(cast, running_system):
    names = list(running_system.processes)
    running_system.crash_postgres()
    try:
        time.sleep(1)
        stopped = running_system.stop_services(names, seconds=10)
    finally:
        running_system.resume_postgres()
        for name in names:
            if not running_system.running(name):
                running_system.start_service(name, wait=False)
        for name in names:
            running_system.wait_until_ready(name)
    assert all(status == 0 for status, _ in stopped.values()), stopped

    assert_delivered_once(cast, gateway_kit.DeliveryJourney(cast).play())


def test_a_graceful_restart_lets_connected_apps_reconnect_by_themselves(cast, running_system):
    """A deploy stops a service with SIGTERM. Its sockets close at the transport, without a Socket.IO DISCONNECT: a
    client that, like socket.io-client, reconnects after a closed transport but never after a server DISCONNECT
    (python-socketio does the same: reason "io server disconnect", no reconnection) comes back by itself once the
    service answers again, and is served."""
    socket = cast.customer.socket("chat", [], reconnection=True)
    reasons, connects = [], []
    socket.client.on("disconnect", lambda reason=None: reasons.append(reason), namespace=socket.namespace)
    socket.client.on("connect", lambda: connects.append(time.time()), namespace=socket.namespace)
    try:
        assert running_system.stop_service("chat-service") == 0
        running_system.start_service("chat-service")
        deadline = time.time() + 60
        while not connects and time.time() < deadline:
            time.sleep(0.1)
        assert reasons and "io server disconnect" not in reasons, reasons
        assert connects, f"the client did not reconnect; it was told {reasons}"
        answer = socket.call("join", {"orderId": "no-such-order"})
        assert answer["error"]["code"] == "CHAT_NOT_AVAILABLE", answer
    finally:
        socket.close()
