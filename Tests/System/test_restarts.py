"""A service killed mid-journey (SIGKILL: nothing flushed, no shutdown) and started again loses nothing: the journey
completes and every party still sees everything. The kill comes where the service has work in flight; the journey
goes on at once, its calls and sockets retrying while the gateway answers 503 for the dead service."""
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

    order = seen["order"]
    assert order["status"] == "Delivered"
    assert order["rider"]["id"] == cast.rider.id
    log = cast.customer.call("GET", f"/v1/orders/{order['id']}/events")["events"]
    types = [event["type"] for event in log]
    for expected in ("OrderCreated", "OrderAccepted", "OrderReadyForPickup", "RiderAssigned", "OrderPickedUp",
                     "OrderDelivered"):
        assert types.count(expected) == 1, types
    assert len(seen["map"]["locations"]) == 6
    assert seen["chat"]["rider_heard"] and seen["chat"]["customer_heard"]
    assert seen["chat_closed"]
    pushes = gateway_kit.pushes_of(cast.admin, cast.rider.id, kinds=["offer"])
    assert [push["status"] for push in pushes] == ["sent"]
    pickup_pushes = gateway_kit.pushes_of(cast.admin, cast.customer.id, kinds=["order_picked_up"])
    assert [push["status"] for push in pickup_pushes] == ["sent"]
