"""US-072 and RDR-016 tracking scenarios: stock python-socketio couriers and customers against the location service.

Jobs' lifecycles arrive on orders.events as the order service publishes them (the scenarios produce those events).
Every scenario happens around its own random spot (config lat, lng). Each prints one JSON object with what the
clients saw. Staleness and the time limit pass by stepping the service's clock (config clockUrl), never by waiting.
  location_scenarios.py delivery|service|eta_failure|validation|time_limit|eta_refresh|another_instance CONFIG_JSON
"""
import json
import os
import sys
import time

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from scenario_kit import Orders, ServiceRequests, SocketClient, TopicReader, advance_clock, now  # noqa: E402

NS = "/tracking"
KM = 0.009  # degrees of latitude in a kilometre
EVENTS = ("location", "eta", "tracking_status")


class Watcher(SocketClient):
    def __init__(self, config, token):
        super().__init__(config["url"], NS, token, EVENTS)

    def track_when_known(self, job_id, seconds=20):
        """Tracks, retrying while the job is unknown (the service learns it from orders.events)."""
        deadline = time.time() + seconds
        while True:
            answer = self.call("track", {"jobId": job_id})
            if "error" not in answer or answer["error"]["code"] != "NOT_FOUND" or time.time() > deadline:
                return answer
            time.sleep(0.2)

    def states(self):
        return [status["state"] for status in self.received("tracking_status")]

    def wait_state(self, state, seconds=20):
        deadline = time.time() + seconds
        while state not in self.states() and time.time() < deadline:
            time.sleep(0.02)
        return [status for status in self.received("tracking_status") if status["state"] == state]


class Courier(SocketClient):
    def __init__(self, config, token):
        super().__init__(config["url"], NS, token, ())
        self.config = config
        self.token = token

    def send(self, lat, lng, recorded_at=None, **extra):
        position = {"lat": lat, "lng": lng, "accuracyMeters": 6, "headingDegrees": 180, "speedMps": 8,
                    "recordedAt": recorded_at or now()}
        position.update(extra)
        return self.call("position", position)

    def rest(self, method, path, body=None):
        answer = requests.request(method, self.config["url"] + path, json=body,
                                  headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
        return {"status": answer.status_code, "body": answer.json() if answer.content else None}


def address(config, km_south, line="9 Lake View"):
    return {"line1": line, "area": "Koramangala", "lat": config["lat"] - km_south * KM, "lng": config["lng"]}


def tracking_events(config, job_id, until):
    reader = TopicReader(config, "tracking.events")
    found = reader.collect(lambda envelope: envelope["aggregateId"] == job_id, until)
    reader.close()
    return [[event["type"], event["payload"].get("reason"), event["payload"].get("kind")] for event in found]


def delivery(config):
    result = {}
    destination = address(config, 3)
    orders = Orders(config, delivery=destination)
    orders.created()
    customer = Watcher(config, config["customerToken"])
    result["before_pickup"] = customer.track_when_known(config["orderId"])
    result["stranger"] = Watcher(config, config["strangerToken"]).call("track", {"jobId": config["orderId"]})
    rider = Courier(config, config["riderToken"])
    result["rider_track"] = rider.call("track", {"jobId": config["orderId"]})
    result["unknown_job"] = customer.call("track", {"jobId": "no-such-job"})
    orders.picked_up(config["riderId"], "Ravi")
    result["live"] = customer.wait_state("live")
    sent = []
    for step in range(5):
        lat = round(config["lat"] - step * 0.3 * KM, 6)
        sent.append(lat)
        result.setdefault("acks", []).append(rider.send(lat, config["lng"]))
        time.sleep(0.2)
    customer.wait_for("location", 5)
    customer.wait_for("eta", 1)
    result["locations"] = customer.received("location")
    result["etas"] = customer.received("eta")
    result["sent_lats"] = sent
    result["rejoin"] = customer.call("track", {"jobId": config["orderId"]})
    rest = requests.get(f"{config['url']}/v1/tracking/{config['orderId']}",
                        headers={"Authorization": f"Bearer {config['customerToken']}"}, timeout=10)
    result["rest_view"] = {"status": rest.status_code, "body": rest.json()}
    orders.delivered(config["riderId"])
    result["ended"] = customer.wait_state("ended")
    count = len(customer.received("location"))
    rider.send(config["lat"] - 2 * KM, config["lng"])
    time.sleep(0.5)
    result["locations_after_end"] = len(customer.received("location")) - count
    result["events"] = tracking_events(config, config["orderId"], lambda found: len(found) >= 2)
    for client in (customer, rider):
        client.close()
    print(json.dumps(result))


def on_the_way(config, result):
    """A visit assigned to the technician and on its way, its customer watching (config url): the requests, the
    job's id and the watcher; what the customer saw goes into result."""
    requests_ = ServiceRequests(config, address(config, 2, "12 Temple Road"))
    job = config["requestId"]
    requests_.created()
    requests_.assigned(config["technicianId"], "Tara")
    customer = Watcher(config, config["customerToken"])
    result["assigned"] = customer.track_when_known(job)
    requests_.status("OnTheWay", config["technicianId"], "Tara")
    result["waiting"] = customer.wait_state("waiting_for_travel_mode")
    return requests_, job, customer


def service(config):
    result = {}
    requests_, job, customer = on_the_way(config, result)
    technician = Courier(config, config["technicianToken"])
    other = Courier(config, config["otherTechnicianToken"])
    result["other_travel_mode"] = other.rest("POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
    result["customer_travel_mode"] = Courier(config, config["customerToken"]).rest(
        "POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
    result["travel_mode_on"] = technician.rest("POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
    result["live"] = customer.wait_state("live")
    technician.send(config["lat"], config["lng"])
    result["first_location"] = customer.wait_for("location", 1)
    result["first_eta"] = customer.wait_for("eta", 1)
    # The technician's phone goes quiet: stale once the limit passed (not before), live again with the next position.
    time.sleep(0.5)
    result["stale_early"] = [status for status in customer.received("tracking_status") if status["state"] == "stale"]
    advance_clock(config, float(config["staleAfterSeconds"]) + 1)
    result["stale"] = customer.wait_state("stale", 15)
    # The `eta` that says so follows the status.
    deadline = time.time() + 10
    while not [eta for eta in customer.received("eta") if not eta["available"]] and time.time() < deadline:
        time.sleep(0.02)
    result["stale_eta"] = [eta for eta in customer.received("eta") if not eta["available"]]
    technician.send(config["lat"] - 0.5 * KM, config["lng"])
    deadline = time.time() + 10
    while customer.states()[-1:] != ["live"] and time.time() < deadline:
        time.sleep(0.05)
    result["states_after_resume"] = customer.states()
    result["travel_mode_off"] = technician.rest("POST", f"/v1/tracking/{job}/travel-mode", {"active": False})
    result["ended_travel_mode"] = customer.wait_state("ended")
    result["travel_mode_on_again"] = technician.rest("POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
    deadline = time.time() + 10
    while customer.states()[-1:] != ["live"] and time.time() < deadline:
        time.sleep(0.05)
    technician.send(config["lat"] - 1 * KM, config["lng"])
    requests_.status("WorkInProgress", config["technicianId"], "Tara")
    deadline = time.time() + 20
    while customer.states()[-1:] != ["ended"] and time.time() < deadline:
        time.sleep(0.05)
    result["arrived"] = customer.received("tracking_status")[-1]
    result["states"] = customer.states()
    result["events"] = tracking_events(config, job, lambda found: len(found) >= 4)
    for client in (customer, technician, other):
        client.close()
    print(json.dumps(result))


def another_instance(config):
    """Travel mode goes on through one instance (config url, where the customer watches) and the technician's
    position goes to another (config otherUrl) as soon as the visit is live; neither instance reloads its jobs by
    itself meanwhile, so the second knows the visit is live only from the change's notice."""
    result = {}
    _, job, customer = on_the_way(config, result)
    technician = Courier(dict(config, url=config["otherUrl"]), config["technicianToken"])
    result["travel_mode_on"] = Courier(config, config["technicianToken"]).rest(
        "POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
    result["live"] = customer.wait_state("live")
    result["position"] = technician.send(config["lat"], config["lng"])
    result["location"] = [abs(location["lat"] - config["lat"]) < 1e-7 and abs(location["lng"] - config["lng"]) < 1e-7
                          for location in customer.wait_for("location", 1, 5)]
    for client in (customer, technician):
        client.close()
    print(json.dumps(result))


def eta_failure(config):
    """The fake routing service fails for destinations south of the equator."""
    result = {}
    orders = Orders(config, delivery={"line1": "1 Harbour Road", "area": "Port", "lat": -config["lat"], "lng": config["lng"]})
    orders.created()
    customer = Watcher(config, config["customerToken"])
    customer.track_when_known(config["orderId"])
    orders.picked_up(config["riderId"], "Ravi")
    customer.wait_state("live")
    rider = Courier(config, config["riderToken"])
    for step in range(3):
        rider.send(config["lat"] - step * KM, config["lng"])
        time.sleep(0.2)
    result["locations"] = customer.wait_for("location", 3)
    result["etas"] = customer.wait_for("eta", 1)
    orders.delivered(config["riderId"])
    customer.wait_state("ended")
    for client in (customer, rider):
        client.close()
    print(json.dumps(result))


def validation(config):
    result = {}
    rider = Courier(config, config["riderToken"])
    lat, lng = config["lat"], config["lng"]
    result["out_of_range"] = rider.send(95, lng)
    result["bad_heading"] = rider.send(lat, lng, headingDegrees=400)
    result["future"] = rider.send(lat, lng, recorded_at=now(3600))
    result["too_old"] = rider.send(lat, lng, recorded_at=now(-3 * 3600))
    result["missing_field"] = rider.call("position", {"lat": lat})
    result["newest"] = rider.send(lat, lng, recorded_at=now())
    result["older"] = rider.send(lat, lng, recorded_at=now(-60))
    customer = Courier(config, config["customerToken"])
    result["customer_sends"] = customer.send(lat, lng)
    batch = [{"lat": lat, "lng": lng, "accuracyMeters": 5, "recordedAt": now(offset)} for offset in (-30, -20, -10)]
    result["batch_all_older"] = rider.rest("POST", "/v1/couriers/me/positions", {"positions": batch})
    fresh = [{"lat": lat, "lng": lng, "accuracyMeters": 5, "recordedAt": now(offset)} for offset in (1, 2)]
    result["batch_fresh"] = rider.rest("POST", "/v1/couriers/me/positions", {"positions": fresh})
    result["batch_empty"] = rider.rest("POST", "/v1/couriers/me/positions", {"positions": []})
    result["batch_too_big"] = rider.rest("POST", "/v1/couriers/me/positions", {"positions": fresh * 51})
    result["batch_customer"] = customer.rest("POST", "/v1/couriers/me/positions", {"positions": fresh})
    flood = Courier(config, config["floodToken"])
    answers = [flood.send(lat, lng, recorded_at=now(index * 0.01)) for index in range(40)]
    result["flood_codes"] = sorted({answer.get("error", {}).get("code", "ok") for answer in answers})
    for client in (rider, customer, flood):
        client.close()
    print(json.dumps(result))


def on_the_way_with_travel_mode(config):
    """A service request on the way, its customer tracking it, and the technician switching travel mode on (retried
    while the service does not know the request yet). Returns the watcher, the technician and the last answer."""
    requests_ = ServiceRequests(config, address(config, 2, "12 Temple Road"))
    job = config["requestId"]
    requests_.created()
    requests_.assigned(config["technicianId"], "Tara")
    requests_.status("OnTheWay", config["technicianId"], "Tara")
    customer = Watcher(config, config["customerToken"])
    customer.track_when_known(job)
    technician = Courier(config, config["technicianToken"])
    deadline = time.time() + 20
    while True:
        answer = technician.rest("POST", f"/v1/tracking/{job}/travel-mode", {"active": True})
        if answer["status"] == 200 and answer["body"]["state"] == "live" or time.time() > deadline:
            return customer, technician, answer
        time.sleep(0.2)


def time_limit(config):
    result = {}
    job = config["requestId"]
    customer, technician, answer = on_the_way_with_travel_mode(config)
    result["travel_mode_on"] = answer
    time.sleep(0.5)
    result["ended_early"] = [status for status in customer.received("tracking_status") if status["state"] == "ended"]
    advance_clock(config, float(config["maximumTrackingSeconds"]) + 1)
    result["ended"] = customer.wait_state("ended", 30)
    result["events"] = tracking_events(config, job, lambda found: len(found) >= 2)
    reader = TopicReader(config, "notifications.requests")
    pushes = reader.collect(lambda envelope: envelope["payload"].get("userId") == config["technicianId"], lambda found: found)
    reader.close()
    result["push"] = pushes[0]["payload"] if pushes else None
    for client in (customer, technician):
        client.close()
    print(json.dumps(result))


def eta_refresh(config):
    """A technician who stands still: the ETA is recomputed once ETA_REFRESH_SECONDS of the service's clock passed,
    from the last position and without a new one; not before, and a position at the same spot does not force it."""
    result = {}
    customer, technician, _ = on_the_way_with_travel_mode(config)
    technician.send(config["lat"], config["lng"])
    result["first"] = len(customer.wait_for("eta", 1))
    refresh = float(config["etaRefreshSeconds"])
    advance_clock(config, refresh * 2 / 3)
    technician.send(config["lat"], config["lng"])  # standing still, still sending: the map stays live
    time.sleep(0.5)
    result["before_due"] = len(customer.received("eta"))
    advance_clock(config, refresh / 3 + 1)
    result["when_due"] = len(customer.wait_for("eta", 2))
    result["states"] = customer.states()
    for client in (customer, technician):
        client.close()
    print(json.dumps(result))


if __name__ == "__main__":
    settings = json.loads(sys.argv[2])
    settings["lat"], settings["lng"] = float(settings["lat"]), float(settings["lng"])
    {"delivery": delivery, "service": service, "eta_failure": eta_failure, "validation": validation,
     "time_limit": time_limit, "eta_refresh": eta_refresh, "another_instance": another_instance}[sys.argv[1]](settings)
