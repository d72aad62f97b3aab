"""Two instances of every service behind the gateway (a system of its own, on ports of its own): journeys with
sockets spread across instances, no event missed or doubled when a phone reconnects to the other instance, and an
instance killed mid-journey."""
import dataclasses
import time
import uuid

import pytest
import requests
import socketio

import gateway_kit
import system
from chat_kit import RecoveringChat, send
from conftest import OFFSET, PROFILE
from gateway_kit import assert_offer_recovered_once, offer_made_while_away, place_order
from recovering_client import strictly_increasing

MULTI = dataclasses.replace(
    PROFILE, name=f"multi-instance-{OFFSET}", postgres_port=15434 + OFFSET, broker_port=19130 + OFFSET,
    gateway_http_port=18180 + OFFSET, gateway_https_port=18543 + OFFSET,
    service_ports=dict(zip(system.SERVICES, range(18181 + OFFSET, 18186 + OFFSET))), instances=2)


@pytest.fixture(scope="module")
def instances(maps):
    with system.started(MULTI) as running:
        yield running


@pytest.fixture
def cast(instances):
    return gateway_kit.new_cast(gateway_kit.Gateway(instances.gateway_url, instances.tls_certificate, instances.bin))


def message_ids(client):
    return [message["id"] for message in client.received("message")]


def chat_across(cast, instances, customer_on, rider_on):
    """A chat whose customer and rider are connected straight to the given chat instances."""
    return RecoveringChat(cast, instances.service_url(customer_on), instances.service_url(rider_on))


@pytest.mark.parametrize("affinity", [True, False], ids=["by-affinity", "by-address"])
def test_long_polling_clients_through_the_gateway_stay_on_the_instance_holding_their_session(cast, affinity):
    """A long-polling client's handshake, posts and polls each come on a connection of their own; the gateway must
    send them all to one instance. (It once routed the handshake at random and the rest by session id: with two
    instances, half the clients got "Session ID unknown" and never connected.) Sixteen clients all connecting by
    chance would be one in 65,536."""
    clients = []
    try:
        for _ in range(16):
            client = socketio.Client(reconnection=False, http_session=cast.customer.gateway.session())
            query = f"?affinity={uuid.uuid4().hex}" if affinity else ""
            client.connect(f"{cast.customer.gateway.url}{query}", namespaces=["/orders"],
                           auth={"token": cast.customer.token}, transports=["polling"],
                           socketio_path="orders/socket.io", wait_timeout=10)
            clients.append(client)
        time.sleep(0.5)  # a few polls more, each of which must find the session
        assert all(client.connected for client in clients)
    finally:
        for client in clients:
            client.disconnect()


def test_a_customer_and_a_rider_on_different_chat_instances_hear_each_other_once(cast, instances):
    with chat_across(cast, instances, "chat-service", "chat-service-2") as chat:
        from_customer = [send(chat.customer, chat.order.id, f"gate code {n}")["id"] for n in range(3)]
        from_rider = [send(chat.rider, chat.order.id, f"two minutes {n}")["id"] for n in range(3)]
        chat.rider.wait_for("message", 3)
        chat.customer.wait_for("message", 3)
        assert message_ids(chat.rider) == from_customer
        assert message_ids(chat.customer) == from_rider
        # Both instances number a room's emits alike: the room's stream, whichever instance holds the socket.
        for client in (chat.customer, chat.rider):
            assert strictly_increasing(client.offsets)


def test_a_phone_dropped_on_one_instance_recovers_on_the_other_without_a_missed_or_doubled_message(cast, instances):
    with chat_across(cast, instances, "chat-service", "chat-service-2") as chat:
        customer, sent = chat.customer, []
        for round_number in range(3):  # 10 events: within the chat's per-socket burst
            sent.append(chat.heard(f"before drop {round_number}"))
            customer.drop()
            sent += [send(chat.rider, chat.order.id, f"while away {round_number}.{n}")["id"] for n in range(2)]
            # Each reconnect lands on the other instance.
            customer.connect(instances.service_url("chat-service" if round_number % 2 else "chat-service-2"))
            assert customer.recovered
            customer.wait_for("message", len(sent))
        assert message_ids(customer) == sent
        assert strictly_increasing(customer.offsets)


def test_a_phone_on_an_instance_that_was_killed_recovers_on_the_other(cast, instances):
    """A killed instance records nothing about its sockets' end; the other instance still restores them (Socket.IO
    keeps sessions in the memory of the process that died)."""
    try:
        with chat_across(cast, instances, "chat-service-2", "chat-service") as chat:
            sent = [chat.heard("before the crash")]
            instances.kill_service("chat-service-2")
            sent += [send(chat.rider, chat.order.id, f"after the crash {n}")["id"] for n in range(2)]
            chat.customer.connect(instances.service_url("chat-service"))
            assert chat.customer.recovered
            chat.customer.wait_for("message", 3)
            assert message_ids(chat.customer) == sent
    finally:
        if not instances.running("chat-service-2"):
            instances.start_service("chat-service-2")


def test_order_updates_reach_each_device_once_though_both_instances_read_every_event(cast, instances):
    phone = cast.customer.recovering_socket("orders", url=instances.service_url("order-service"))
    tablet = cast.customer.recovering_socket("orders", url=instances.service_url("order-service-2"))
    try:
        order_id = place_order(cast)["id"]
        cast.vendor.call("POST", f"/v1/orders/{order_id}/accept")
        cast.customer.call("POST", f"/v1/orders/{order_id}/cancel", json={"reason": "changed my mind"})
        for device in (phone, tablet):
            device.wait_for("order_update", 3)
            types = [update["type"] for update in device.received("order_update")]
            assert types == ["OrderCreated", "OrderAccepted", "OrderCancelled"], types
    finally:
        phone.close()
        tablet.close()


def test_an_offer_made_while_the_rider_was_away_is_recovered_once_on_the_other_allocation_instance(cast, instances):
    rider = cast.rider.recovering_socket("rider", url=instances.service_url("allocation-service"))
    try:
        order_id = offer_made_while_away(cast, rider)
        rider.connect(instances.service_url("allocation-service-2"))
        assert_offer_recovered_once(rider, order_id)
    finally:
        rider.close()


def test_one_instance_of_every_service_killed_mid_journey_and_the_journey_completes_on_the_others(cast, instances):
    """The gateway spreads the journey's sockets and calls over both instances; after the rider accepted, the
    second instance of every service is killed (SIGKILL): the journey goes on through the first."""
    killed = []

    def kill_second_instances(step):
        if step == "accepted":
            for service in system.SERVICES:
                instances.kill_service(f"{service}-2")
                killed.append(f"{service}-2")

    try:
        seen = gateway_kit.DeliveryJourney(cast, after=kill_second_instances).play()
        assert seen["order"]["status"] == "Delivered"
        assert seen["chat"]["rider_heard"][0]["text"] == "Hi! The gate code is 4321."
        assert gateway_kit.map_followed_the_route(seen["map"])
    finally:
        for name in killed:
            instances.start_service(name)


def test_a_technician_standing_still_appears_on_the_map_when_travel_mode_and_position_reach_different_instances(
        cast, instances):
    """Travel mode goes on through location instance 2, and the technician's one position (they do not move) reaches
    instance 1 before its tick has learned the visit is live: neither instance delivers it then, so the instance
    holding the position sends it with the ETA it computes on its next tick."""
    visit = gateway_kit.ServiceVisit(cast, sender_url=instances.service_url("location-service"))
    try:
        visit.status("OnTheWay")
        visit.view("waiting_for_travel_mode")
        switched = requests.post(
            f"{instances.service_url('location-service-2')}/v1/tracking/{visit.id}/travel-mode",
            json={"active": True}, headers={"Authorization": f"Bearer {cast.technician.token}"}, timeout=10)
        assert switched.status_code == 200, switched.text
        here = cast.spot.fix(0.2, 0.1)
        answer = visit.position(here)
        assert "error" not in answer, answer
        shown = visit.watcher.wait_for("location", seconds=10)
        assert [(location["lat"], location["lng"]) for location in shown][-1:] == [(here["lat"], here["lng"])]
    finally:
        visit.close()
