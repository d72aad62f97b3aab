"""US-072: the customer watches the technician approach on a live map with an ETA (through the gateway)."""
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

import gateway_kit
from scenario_kit import now


@pytest.fixture
def visit(cast):
    visit = gateway_kit.ServiceVisit(cast)
    yield visit
    visit.close()


def live_visit(visit):
    """The technician on the way with travel mode on, and the customer's map live."""
    visit.status("OnTheWay")
    visit.travel_mode(True)
    return visit.view("live")


def approach(visit, steps=6, interval=0.3):
    """The technician drives from the vendor's corner of the spot to the service address."""
    answers = []
    for point in gateway_kit.route(visit.cast.vendor_address, visit.cast.delivery_address, steps):
        answers.append(visit.position(point))
        time.sleep(interval)
    return answers


def test_US_072_AC_001_live_map_once_on_the_way_with_travel_mode(visit):
    """On the way with travel mode on: the customer's map is live with the service address as destination, and the
    technician's positions and an ETA arrive."""
    view = live_visit(visit)
    destination = visit.cast.delivery_address
    assert view["kind"] == "service_request"
    assert view["travelMode"] is True
    assert (view["destination"]["lat"], view["destination"]["lng"]) == pytest.approx((destination["lat"],
                                                                                       destination["lng"]))
    first = visit.cast.vendor_address
    assert visit.position(first) == {"accepted": True}
    location = visit.watcher.wait_for("location")[0]
    assert (location["lat"], location["lng"]) == pytest.approx((first["lat"], first["lng"]))
    eta = visit.watcher.wait_for("eta")[0]
    assert eta["available"] is True and eta["seconds"] > 0 and eta["text"].startswith("Arriving in")


def test_US_072_AC_002_positions_reach_the_map_within_two_seconds_and_the_eta_follows(visit):
    """Each position reaches the customer in under 2 s (measured through the gateway, both ways over WSS), and the
    ETA is recalculated as the technician moves (every 300 m here, and at least every 30 s)."""
    live_visit(visit)
    latencies = []
    for point in gateway_kit.route(visit.cast.vendor_address, visit.cast.delivery_address, 6):
        seen = len(visit.watcher.received("location"))
        sent = time.monotonic()
        visit.position(point)
        visit.watcher.wait_for("location", count=seen + 1, seconds=5)
        latencies.append(time.monotonic() - sent)
    assert len(visit.watcher.received("location")) == 6
    assert max(latencies) < 2.0, latencies
    etas = gateway_kit.until(lambda: (lambda e: e if len(e) >= 3 else None)(visit.watcher.received("eta")),
                             "three ETA updates")
    assert etas[-1]["seconds"] < etas[0]["seconds"]


def test_US_072_AC_003_tracking_ends_on_arrival_or_travel_mode_off(cast, visit):
    """WorkInProgress ends tracking with "The technician has arrived."; travel mode switched off ends it too."""
    live_visit(visit)
    approach(visit, steps=2)
    visit.status("WorkInProgress")
    ended = gateway_kit.until(lambda: visit.statuses("ended"), "tracking to end")[-1]
    assert ended["message"] == "The technician has arrived."
    assert visit.view()["state"] == "ended"
    shown = len(visit.watcher.received("location"))
    visit.position(visit.cast.delivery_address)
    assert len(visit.watcher.wait_for("location", count=shown + 1, seconds=1.5)) == shown

    second = gateway_kit.ServiceVisit(cast)
    try:
        live_visit(second)
        second.travel_mode(False)
        stopped = gateway_kit.until(lambda: second.statuses("ended"), "tracking to stop")[-1]
        assert stopped["message"] != ended["message"] and stopped["message"]
        assert second.view()["state"] == "ended"
    finally:
        second.close()


def test_US_072_AC_004_on_the_way_without_travel_mode_shows_no_map(visit):
    """On the way without travel mode: no map, the waiting message, and the technician's positions are not shown."""
    visit.status("OnTheWay")
    view = visit.view("waiting_for_travel_mode")
    assert view["message"] == ("Technician is on the way. Live location will be available once the technician "
                               "enables it.")
    assert "lastLocation" not in view
    visit.position(visit.cast.vendor_address)
    assert visit.watcher.wait_for("location", seconds=1.5) == []
    assert "lastLocation" not in visit.view()


def test_US_072_AC_005_gps_loss_keeps_the_last_position_and_says_when(visit):
    """No position for longer than the stale threshold (3 s here, 30 s by default): the map keeps the last position,
    the status says when it was recorded, and the ETA reads "ETA recalculating"."""
    live_visit(visit)
    last_recorded = now()
    visit.position(visit.cast.vendor_address, recorded_at=last_recorded)
    visit.watcher.wait_for("location")
    stale = gateway_kit.until(lambda: visit.statuses("stale"), "the map to go stale", seconds=15)[-1]
    assert stale["lastUpdatedAt"][:19] == last_recorded[:19]
    # The `eta` that says so is a second emit, right after the status: wait for it rather than expect it already.
    gateway_kit.until(lambda: [eta for eta in visit.watcher.received("eta") if eta.get("text") == "ETA recalculating"],
                      "the ETA to read 'ETA recalculating'", seconds=5)
    view = visit.view("stale")
    assert (view["lastLocation"]["lat"], view["lastLocation"]["lng"]) == pytest.approx(
        (visit.cast.vendor_address["lat"], visit.cast.vendor_address["lng"]))
    before = len(visit.watcher.received("tracking_status"))
    visit.position(visit.cast.delivery_address)
    assert gateway_kit.until(lambda: [s for s in visit.watcher.received("tracking_status")[before:]
                                      if s["state"] == "live"], "the map to be live again")


def test_US_072_AC_006_a_reconnecting_app_gets_the_latest_state(cast, visit):
    """The customer's app goes offline while the technician moves; on reconnecting, `track` (or GET
    /v1/tracking/{id}) returns the latest position and ETA."""
    live_visit(visit)
    visit.watcher.close()
    approach(visit, steps=3)
    destination = cast.delivery_address
    rejoined = cast.customer.socket("tracking", ["location", "eta", "tracking_status"])
    try:
        view = rejoined.call("track", {"jobId": visit.id})
        assert view["state"] == "live"
        assert (view["lastLocation"]["lat"], view["lastLocation"]["lng"]) == pytest.approx(
            (destination["lat"], destination["lng"]))
        assert view["eta"]["available"] is True
        assert cast.customer.call("GET", f"/v1/tracking/{visit.id}")["lastLocation"] == view["lastLocation"]
    finally:
        rejoined.close()


def test_US_072_AC_007_eta_unavailable_while_the_map_keeps_moving(visit, maps):
    """Azure Maps failing (the fake answers 503 for this address): positions keep reaching the map, and the ETA
    reads "ETA unavailable"."""
    destination = visit.cast.delivery_address
    maps.failing_destinations.add((round(destination["lat"], 4), round(destination["lng"], 4)))
    live_visit(visit)
    approach(visit, steps=3)
    assert len(visit.watcher.wait_for("location", count=3)) == 3
    eta = gateway_kit.until(lambda: [e for e in visit.watcher.received("eta") if e["available"] is False],
                            "the ETA to be unavailable")[-1]
    assert eta["text"] == "ETA unavailable"
    assert not [e for e in visit.watcher.received("eta") if e["available"]]


def test_US_072_AC_006_a_technician_back_online_syncs_five_minutes_of_queued_positions(visit):
    """The technician's app queued a position every 3 s through 5 minutes without a network: the batch of 100 is
    applied in one request (one rate-limit token, not 100), the map shows the newest; the same batch retried (its
    answer was lost) changes nothing and is not refused; a position older than the service keeps is answered
    too_old without failing the positions sent with it."""
    live_visit(visit)
    technician = visit.cast.technician
    points = gateway_kit.route(visit.cast.vendor_address, visit.cast.delivery_address, 100)
    queued = [{"lat": p["lat"], "lng": p["lng"], "accuracyMeters": 8, "recordedAt": now(-300 + 3 * i)}
              for i, p in enumerate(points)]

    synced = technician.call("POST", "/v1/couriers/me/positions", json={"positions": queued})
    assert synced == {"accepted": 100, "dropped": 0, "results": ["applied"] * 100}
    newest = gateway_kit.until(lambda: [l for l in visit.watcher.received("location")
                            if (l["lat"], l["lng"]) == (points[-1]["lat"], points[-1]["lng"])], "the newest position")
    assert newest

    retried = technician.call("POST", "/v1/couriers/me/positions", json={"positions": queued})
    assert retried == {"accepted": 0, "dropped": 100, "results": ["older_than_last"] * 100}

    mixed = [{"lat": points[0]["lat"], "lng": points[0]["lng"], "accuracyMeters": 8, "recordedAt": now(-700)},
             {"lat": points[-1]["lat"], "lng": points[-1]["lng"], "accuracyMeters": 8, "recordedAt": now()}]
    answered = technician.call("POST", "/v1/couriers/me/positions", json={"positions": mixed})
    assert answered["results"] == ["too_old", "applied"]

    invalid = [mixed[1] | {"recordedAt": now(1)}, mixed[1] | {"lat": 91}]
    assert technician.refusal("POST", "/v1/couriers/me/positions", json={"positions": invalid}) == \
        (400, "VALIDATION_FAILED")
    assert technician.call("POST", "/v1/couriers/me/positions", json={"positions": invalid[:1]})["results"] == \
        ["applied"], "the refused batch applied nothing"


def test_US_072_positions_are_ephemeral_the_broker_keeps_them_an_hour_at_most(running_system, cast):
    """Positions are never stored long-term: couriers.positions keeps them an hour at most, as the broker reports;
    the map's `location` emits are a job's latest value in an unlogged table the realtime store trims after minutes
    (no realtime topic on the broker at all); a rider who goes Offline has no position left in allocation."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{running_system.profile.broker_port}"})
    described = admin.describe_configs([ConfigResource("topic", "couriers.positions")])
    retention = {resource.name: int(future.result(10)["retention.ms"].value) for resource, future in described.items()}
    assert retention["couriers.positions"] <= 3_600_000, retention
    assert not [topic for topic in admin.list_topics(timeout=10).topics if topic.startswith("realtime.")]
    psql = shutil.which("psql") or sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))[-1]
    persistence = subprocess.run(
        [str(psql), "-h", "127.0.0.1", "-p", str(running_system.profile.postgres_port), "-U", "postgres",
         "-d", "delivery", "-AtX", "-c",
         "SELECT relpersistence FROM pg_class WHERE relname = 'realtime_latest' "
         "AND relnamespace = 'location'::regnamespace"],
        check=True, capture_output=True, text=True).stdout.strip()
    assert persistence == "u", "the latest positions are kept in an unlogged table"

    gateway_kit.go_online(cast.rider, cast.spot)
    assert cast.rider.call("GET", "/v1/riders/me")["location"]
    cast.rider.call("PUT", "/v1/riders/me/availability", json={"status": "offline"})
    assert "location" not in cast.rider.call("GET", "/v1/riders/me")
