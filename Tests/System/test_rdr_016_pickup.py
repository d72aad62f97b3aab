"""RDR-016: the rider confirms pickup (POST /v1/orders/{id}/pickup through the gateway): ReadyForPickup ->
InTransit with its downstream effects, replayed safely when the app syncs a queued request, refused cleanly while
the order service is down or after a cancellation."""
import uuid

import pytest

from gateway_kit import AssignedOrder, new_cast, place_order, pushes_of, until
from scenario_kit import now


def pickups(party, order_id):
    return [event for event in party.call("GET", f"/v1/orders/{order_id}/events")["events"]
            if event["type"] == "OrderPickedUp"]


def pickup(rider, order_id, key, **options):
    return rider.request("POST", f"/v1/orders/{order_id}/pickup", headers={"Idempotency-Key": key}, **options)


def test_RDR_016_AC_001_pickup_moves_the_order_in_transit_with_every_effect(cast):
    """Pickup after arrival turns ReadyForPickup into InTransit and answers with the delivery address; the event
    log gets one OrderPickedUp by the rider, the customer a push, the customer's map goes live, the vendor's
    dashboard an update, and the pickup saga records all three steps done."""
    cast.customer.register_device("android")
    order = AssignedOrder(cast)
    dashboard = cast.vendor.socket("orders", ["order_update"])
    watcher = cast.customer.socket("tracking", ["location", "eta", "tracking_status"])
    sender = cast.rider.socket("tracking", [])
    try:
        before = until(lambda: (lambda view: view if "error" not in view else None)(
            watcher.call("track", {"jobId": order.id})), "the tracking view")
        assert before["state"] == "not_started"
        arrived = cast.rider.call("POST", f"/v1/orders/{order.id}/arrived")
        assert arrived["status"] == "ReadyForPickup" and arrived["riderArrivedAt"]

        picked = cast.rider.call("POST", f"/v1/orders/{order.id}/pickup", headers={"Idempotency-Key": str(uuid.uuid4())})
        assert picked["status"] == "InTransit"
        assert picked["rider"]["id"] == cast.rider.id
        assert picked["deliveryAddress"] == cast.delivery_address  # where the rider's navigation goes next
        assert picked["version"] == arrived["version"] + 1
        assert cast.customer.call("GET", f"/v1/orders/{order.id}")["status"] == "InTransit"

        logged = pickups(cast.customer, order.id)
        assert len(logged) == 1
        assert (logged[0]["actorId"], logged[0]["actorRole"]) == (cast.rider.id, "rider")
        assert logged[0]["occurredAt"] and logged[0]["payload"]["rider"]["id"] == cast.rider.id

        # Tracking started: the customer's open map goes live and shows the rider's positions.
        until(lambda: [s for s in watcher.received("tracking_status") if s["state"] == "live"], "the map to go live")
        position = cast.spot.fix(north_km=0.1)
        assert sender.call("position", {"lat": position["lat"], "lng": position["lng"], "accuracyMeters": 6,
                                        "recordedAt": now()}) == {"accepted": True}
        located = watcher.wait_for("location")
        assert (located[0]["lat"], located[0]["lng"]) == (position["lat"], position["lng"])

        updates = until(lambda: [u for u in dashboard.received("order_update")
                                 if u["orderId"] == order.id and u["type"] == "OrderPickedUp"], "the dashboard update")
        assert updates[0]["status"] == "InTransit" and updates[0]["rider"]["id"] == cast.rider.id

        pushed = until(lambda: [p for p in pushes_of(cast.admin, cast.customer.id, kinds=["order_picked_up"])
                                if p["status"] == "sent"], "the customer's push to be sent")
        assert len(pushed) == 1
        assert pushed[0]["title"] == "Your order is on the way"
        assert cast.rider.name in pushed[0]["body"] and cast.vendor.name in pushed[0]["body"]

        saga = until(lambda: (lambda s: s if s["completed"] else None)(
            cast.admin.call("GET", f"/v1/orders/{order.id}/saga")), "the pickup saga to complete")
        assert saga["pickupEventId"] == logged[0]["eventId"]
        assert all(step["done"] for step in saga["steps"].values()), saga["steps"]
    finally:
        dashboard.close()
        watcher.close()
        sender.close()
        order.close()


def test_RDR_016_AC_002_queued_pickup_synced_later_is_applied_once(cast):
    """The app queues the pickup with an Idempotency-Key and sends it again when back online: the retry replays
    the first answer (Idempotent-Replayed: true) and changes nothing, where a pickup without that key conflicts."""
    cast.customer.register_device("android")
    order = AssignedOrder(cast)
    try:
        cast.rider.call("POST", f"/v1/orders/{order.id}/arrived")
        key = str(uuid.uuid4())
        first = pickup(cast.rider, order.id, key)
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "InTransit"
        assert first.headers.get("Idempotent-Replayed") != "true"

        synced = pickup(cast.rider, order.id, key)
        assert synced.status_code == 200, synced.text
        assert synced.headers["Idempotent-Replayed"] == "true"
        assert synced.json() == first.json()

        current = cast.customer.call("GET", f"/v1/orders/{order.id}")
        assert (current["status"], current["version"]) == ("InTransit", first.json()["version"])
        assert len(pickups(cast.customer, order.id)) == 1
        assert len(pushes_of(cast.admin, cast.customer.id, kinds=["order_picked_up"])) == 1

        # The same pickup without the queued request's key is a second, conflicting transition.
        assert cast.rider.refusal("POST", f"/v1/orders/{order.id}/pickup",
                                  headers={"Idempotency-Key": str(uuid.uuid4())}) == (409, "ORDER_STATE_CONFLICT")
    finally:
        order.close()


def test_RDR_016_AC_003_order_service_down_is_a_503_and_the_retry_succeeds(cast, running_system):
    """With the order service down the gateway answers a JSON 503 SERVICE_UNAVAILABLE the app can show, the
    order stays ReadyForPickup (nothing recorded), and the rider's retry after it is back succeeds."""
    order = AssignedOrder(cast)
    try:
        arrived = cast.rider.call("POST", f"/v1/orders/{order.id}/arrived")
        key = str(uuid.uuid4())
        running_system.kill_service("order-service")
        try:
            failed = pickup(cast.rider, order.id, key, retry_unavailable_for=0)
            assert failed.status_code == 503
            assert failed.headers["Content-Type"].startswith("application/json")
            assert failed.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
        finally:
            running_system.start_service("order-service")

        unchanged = cast.rider.call("GET", f"/v1/orders/{order.id}")
        assert (unchanged["status"], unchanged["version"]) == ("ReadyForPickup", arrived["version"])
        assert pickups(cast.rider, order.id) == []

        retried = pickup(cast.rider, order.id, key)
        assert retried.status_code == 200, retried.text
        assert retried.headers.get("Idempotent-Replayed") != "true"
        assert retried.json()["status"] == "InTransit"
        assert len(pickups(cast.rider, order.id)) == 1
    finally:
        if not running_system.running("order-service"):
            running_system.start_service("order-service")
        order.close()


@pytest.mark.parametrize("canceller", ["customer", "admin"])
def test_RDR_016_AC_004_pickup_of_a_cancelled_order_is_refused(cast, canceller):
    """An order cancelled (by the customer or an admin) just before pickup: the pickup is refused with 409
    ORDER_CANCELLED naming the final state, the rider's view of the order is Cancelled and the task leaves the
    rider's current order."""
    order = AssignedOrder(cast)
    try:
        cast.rider.call("POST", f"/v1/orders/{order.id}/arrived")
        until(lambda: cast.rider.call("GET", "/v1/riders/me").get("currentOrderId") == order.id,
              "the task to be the rider's current order")
        party = getattr(cast, canceller)
        assert party.call("POST", f"/v1/orders/{order.id}/cancel", json={"reason": "changed my mind"})["status"] \
            == "Cancelled"

        refused = pickup(cast.rider, order.id, str(uuid.uuid4()))
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert error["code"] == "ORDER_CANCELLED"
        assert error["details"]["currentState"] == "Cancelled"

        assert cast.rider.call("GET", f"/v1/orders/{order.id}")["status"] == "Cancelled"
        assert pickups(cast.rider, order.id) == []
        until(lambda: cast.rider.call("GET", "/v1/riders/me").get("currentOrderId") != order.id,
              "the cancelled task to leave the rider's current order")
    finally:
        order.close()


def test_RDR_016_AC_004_the_rider_is_told_of_the_cancellation_on_the_socket_or_by_push(cast):
    """The rider learns of a cancellation without acting: on the /rider socket while connected (and no push), by a
    push when no socket is connected; either way the task leaves the rider."""
    connected = AssignedOrder(cast)
    try:
        assert cast.rider.call("GET", "/v1/riders/me")["connected"] is True
        cast.customer.call("POST", f"/v1/orders/{connected.id}/cancel", json={"reason": "changed my mind"})
        told = connected.offers.wait_for("order_cancelled")
        assert told and told[0]["orderId"] == connected.id and "cancelled" in told[0]["message"]
        until(lambda: cast.rider.call("GET", "/v1/riders/me").get("currentOrderId") is None,
              "the cancelled task to leave the rider")
    finally:
        connected.close()

    cast.rider.register_device()
    away = AssignedOrder(cast)
    away.close()
    until(lambda: cast.rider.call("GET", "/v1/riders/me")["connected"] is False, "the rider's socket to be gone")
    cast.customer.call("POST", f"/v1/orders/{away.id}/cancel", json={"reason": "changed my mind"})
    pushes = pushes_of(cast.admin, cast.rider.id, kinds=["order_cancelled"])
    assert [(push["status"], push["data"]["orderId"]) for push in pushes] == [("sent", away.id)]
    assert "cancelled" in pushes[0]["body"]


def test_RDR_016_AC_001_6_a_dashboard_that_was_offline_catches_up_with_its_orders(cast, gateway):
    """The vendor's dashboard, offline while its orders moved, lists them on reconnecting: the active ones with
    status, rider and times (the picked-up one InTransit with its rider), paged oldest first; a delivered or
    cancelled order only with state=all; no other vendor's orders, and another vendor may not look."""
    order = AssignedOrder(cast)
    try:
        order.pick_up()
    finally:
        order.close()
    waiting = [place_order(cast) for _ in range(3)]
    cancelled = place_order(cast)
    cast.customer.call("POST", f"/v1/orders/{cancelled['id']}/cancel", json={"reason": "changed my mind"})
    place_order(new_cast(gateway))  # another vendor's order, which must not show here

    pages, after = [], None
    while True:
        query = "limit=2" + (f"&after={after}" if after else "")
        page = cast.vendor.call("GET", f"/v1/vendors/me/orders?{query}")
        assert page["vendorId"] == cast.vendor.id
        pages.append(page["orders"])
        after = page.get("nextAfter")
        if not after:
            break
    listed = [order for page in pages for order in page]
    assert [len(page) for page in pages] == [2, 2]  # the last page says so (no nextAfter)
    assert [o["id"] for o in listed] == [order.id] + [w["id"] for w in waiting]
    picked = listed[0]
    assert picked["status"] == "InTransit" and picked["rider"]["id"] == cast.rider.id
    assert picked["createdAt"] and picked["updatedAt"] and picked["riderArrivedAt"]
    assert {o["status"] for o in listed[1:]} == {"PendingVendorAcceptance"}

    everything = cast.vendor.call("GET", "/v1/vendors/me/orders?state=all&limit=100")["orders"]
    assert [o["id"] for o in everything] == [order.id] + [w["id"] for w in waiting] + [cancelled["id"]]
    assert cast.admin.call("GET", f"/v1/vendors/{cast.vendor.id}/orders?limit=100")["orders"] == listed

    assert cast.vendor.refusal("GET", "/v1/vendors/me/orders?after=garbage") == (400, "VALIDATION_FAILED")
    # A cursor's time out of range is no cursor (a probe's: Postgres answered "interval out of range", a 500); the
    # extremes of the range page as any cursor does.
    nil = "00000000-0000-0000-0000-000000000000"
    for micros in ("9223372036854775807", "-9223372036854775808", "-9000000000000000000", "253402300800000000", "-1"):
        assert cast.vendor.refusal("GET", f"/v1/vendors/me/orders?state=all&after={micros}.{nil}") == (
            400, "VALIDATION_FAILED"), micros
    assert cast.vendor.call("GET", f"/v1/vendors/me/orders?state=all&after=253402300799999999.{nil}")["orders"] == []
    assert [o["id"] for o in cast.vendor.call("GET", f"/v1/vendors/me/orders?state=all&limit=100&after=0.{nil}")[
        "orders"]] == [o["id"] for o in everything]
    assert cast.vendor.refusal("GET", "/v1/vendors/me/orders?limit=0") == (400, "VALIDATION_FAILED")
    assert cast.vendor.refusal("GET", "/v1/vendors/me/orders?state=old") == (400, "VALIDATION_FAILED")
    assert cast.vendor.refusal("GET", "/v1/vendors/someone-else/orders") == (403, "FORBIDDEN")
    assert cast.customer.refusal("GET", "/v1/vendors/me/orders") == (403, "FORBIDDEN")
    assert cast.admin.refusal("GET", "/v1/vendors/me/orders") == (400, "VALIDATION_FAILED")
