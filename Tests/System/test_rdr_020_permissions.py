"""RDR-020: GPS and camera permissions. The permission screens are the app's; the backend's part is the rule behind
them (through the gateway): a rider is Online only with a precise, fresh fix (no fix, a coarse one - worse than 50 m -
or a stale one - older than 120 s - is 422 PRECISE_LOCATION_REQUIRED and the rider stays Offline; once on the way,
coarse fixes and GPS jumps are dropped), and a prepaid
order needing photo proof cannot be delivered without the photo (422 PROOF_PHOTO_REQUIRED)."""
import pytest

import gateway_kit
from scenario_kit import now

# Just past the rule's limits (50 m, 120 s): an approximate fix (Android's coarse location, iOS with "Precise"
# off), and a last-known fix the OS kept from before the permission was denied.
COARSE_ACCURACY_METERS = 60.0
STALE_AGE_SECONDS = 150.0


def go_online_with(rider, location):
    body = {"status": "online"}
    if location is not None:
        body["location"] = location
    return rider.request("PUT", "/v1/riders/me/availability", json=body)


def refused_online(rider, location):
    """(status, code) of going Online with `location` (None: the app has no fix at all), which must be refused."""
    response = go_online_with(rider, location)
    assert response.status_code >= 400, f"went online with {location}: {response.text[:300]}"
    return response.status_code, response.json()["error"]["code"]


def rider_view(rider):
    return rider.call("GET", "/v1/riders/me")


def assert_offline(rider):
    view = rider_view(rider)
    assert view["status"] == "offline", view


def order_status(cast, order_id):
    return cast.customer.call("GET", f"/v1/orders/{order_id}")["status"]


@pytest.fixture
def picked_up(cast):
    """A prepaid order needing photo proof, assigned to the cast's rider and picked up: the rider is at the
    delivery confirmation screen."""
    order = gateway_kit.AssignedOrder(cast, requires_photo_proof=True)
    try:
        assert order.pick_up()["status"] == "InTransit"
        yield order
    finally:
        order.close()


def test_RDR_020_AC_001_gps_denied_keeps_the_rider_offline(cast):
    """GPS denied: going Online without a location, or with only a coarse (approximate) fix, is refused with
    PRECISE_LOCATION_REQUIRED, and the rider stays Offline with no position recorded."""
    assert_offline(cast.rider)
    assert refused_online(cast.rider, None) == (422, "PRECISE_LOCATION_REQUIRED")
    assert_offline(cast.rider)
    coarse = cast.spot.fix(accuracy=COARSE_ACCURACY_METERS)
    assert refused_online(cast.rider, coarse) == (422, "PRECISE_LOCATION_REQUIRED")
    view = rider_view(cast.rider)
    assert view["status"] == "offline"
    assert view.get("location") is None, view


def test_RDR_020_AC_002_camera_denied_blocks_photo_proof_delivery(cast, picked_up):
    """Camera denied on the delivery confirmation of a prepaid photo-proof order: with no photo taken, delivering
    is refused with PROOF_PHOTO_REQUIRED and the order stays in transit without proof."""
    refusal = cast.rider.refusal("POST", f"/v1/orders/{picked_up.id}/deliver")
    assert refusal == (422, "PROOF_PHOTO_REQUIRED")
    order = cast.customer.call("GET", f"/v1/orders/{picked_up.id}")
    assert order["status"] == "InTransit"
    assert order.get("proofPhoto") is None


def test_RDR_020_AC_003_permanently_denied_permissions_are_refused_every_time(cast, picked_up):
    """"Don't ask again": the app has no new fix (nothing, or only the OS's stale last-known one) and no photo;
    every attempt is refused the same way, so the app shows the same screen each time: going Online gives
    PRECISE_LOCATION_REQUIRED (the second rider stays Offline), delivering gives PROOF_PHOTO_REQUIRED."""
    rider = cast.second_rider
    stale = cast.spot.fix(north_km=1.0, age_seconds=STALE_AGE_SECONDS)
    for location in (None, stale, None):
        assert refused_online(rider, location) == (422, "PRECISE_LOCATION_REQUIRED")
        assert_offline(rider)
    for _ in range(2):
        assert cast.rider.refusal("POST", f"/v1/orders/{picked_up.id}/deliver") == (422, "PROOF_PHOTO_REQUIRED")
    assert order_status(cast, picked_up.id) == "InTransit"


def test_RDR_020_AC_004_granting_the_permission_lets_the_rider_proceed(cast):
    """Back from the settings with the permission granted: the same rider, refused a moment ago, goes Online with
    a precise fresh fix (and then gets offers); with the camera allowed, the photo is uploaded and the order that
    was refused is delivered."""
    assert refused_online(cast.rider, None) == (422, "PRECISE_LOCATION_REQUIRED")
    fix = cast.spot.fix(0.4, 0.3, accuracy=30.0, age_seconds=5.0)  # a city GPS fix, within 50 m and 120 s
    response = go_online_with(cast.rider, fix)
    assert response.status_code == 200, response.text[:300]
    view = rider_view(cast.rider)
    assert view["status"] == "online"
    assert (view["location"]["lat"], view["location"]["lng"]) == pytest.approx((fix["lat"], fix["lng"]))

    order = gateway_kit.AssignedOrder(cast, requires_photo_proof=True)  # the rider online is offered and accepts
    try:
        order.pick_up()
        assert cast.rider.refusal("POST", f"/v1/orders/{order.id}/deliver") == (422, "PROOF_PHOTO_REQUIRED")
        upload = cast.rider.call("POST", f"/v1/orders/{order.id}/proof-photo", expect=201,
                                 data=gateway_kit.PROOF_PHOTO, headers={"Content-Type": "image/png"})
        assert upload["proofPhoto"]["contentType"] == "image/png"
        delivered = cast.rider.call("POST", f"/v1/orders/{order.id}/deliver")
        assert delivered["status"] == "Delivered"
    finally:
        order.close()


def test_RDR_020_AC_005_still_denied_the_rider_stays_blocked(cast):
    """Back from the settings without granting: going Online is still refused, the rider stays Offline and gets
    no task - an order ready next to them goes to a rider farther away who is Online."""
    assert refused_online(cast.rider, None) == (422, "PRECISE_LOCATION_REQUIRED")
    # Returned from the settings, permission still denied: the app still has no precise fix.
    assert refused_online(cast.rider, cast.spot.fix(0.4, 0.3, accuracy=COARSE_ACCURACY_METERS)) == (
        422, "PRECISE_LOCATION_REQUIRED")
    assert refused_online(cast.rider, None) == (422, "PRECISE_LOCATION_REQUIRED")
    assert_offline(cast.rider)

    offers = cast.second_rider.socket("rider", ["offer"])
    try:
        gateway_kit.go_online(cast.second_rider, cast.spot, north_km=0.8, east_km=0.6)
        order = gateway_kit.place_order(cast)
        cast.vendor.call("POST", f"/v1/orders/{order['id']}/accept")
        cast.vendor.call("POST", f"/v1/orders/{order['id']}/ready")
        offer = gateway_kit.offer_for(cast.second_rider, offers, order["id"], seconds=10)
        offers.call("received", {"offerId": offer["offerId"]})
    finally:
        offers.close()
    assert cast.rider.refusal("GET", "/v1/riders/me/offer") == (404, "NO_ACTIVE_OFFER")
    assert_offline(cast.rider)


def test_BR_RDR_PERM_01_coarse_fixes_and_gps_jumps_never_reach_the_customers_map(cast, picked_up):
    """Once the rider is on the way, a fix coarser than the limit (100 m) or one that would mean a jump faster than
    any vehicle is answered with why it was dropped, and the customer's map never shows it; precise positions
    before and after it are shown."""
    watcher = cast.customer.socket("tracking", ["location"])
    sender = cast.rider.socket("tracking", [])
    try:
        gateway_kit.until(lambda: (lambda view: view if view.get("state") == "live" else None)(
            watcher.call("track", {"jobId": picked_up.id})), "the map to go live")

        def send(fix, offset=0.0):
            return sender.call("position", {"lat": fix["lat"], "lng": fix["lng"],
                                            "accuracyMeters": fix["accuracyMeters"], "recordedAt": now(offset)})

        precise = cast.spot.fix(north_km=0.1)
        assert send(precise, -2) == {"accepted": True}
        assert send(cast.spot.fix(north_km=0.12, accuracy=10_000), -1) == {"accepted": False, "reason": "inaccurate"}
        assert send(cast.spot.fix(north_km=2000)) == {"accepted": False, "reason": "implausible_jump"}
        later = cast.spot.fix(north_km=0.15)
        assert send(later, 1) == {"accepted": True}
        shown = watcher.wait_for("location", count=2)
        assert [(l["lat"], l["lng"]) for l in shown] == [(precise["lat"], precise["lng"]), (later["lat"], later["lng"])]
    finally:
        watcher.close()
        sender.close()
