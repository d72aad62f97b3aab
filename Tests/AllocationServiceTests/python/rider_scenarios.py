"""RDR-010 scenarios: stock python-socketio rider apps against the allocation service.

Orders arrive on orders.events as the order service publishes them (the scenarios produce those events). Every
scenario happens around its own random spot (config lat, lng) so that riders of parallel tests never meet. The
rider apps confirm each offer they are shown with `received`, as the real app does. Each scenario prints one
JSON object with what the riders saw. Deadlines pass by stepping the service's clock (config clockUrl), never by
waiting for them.
  rider_scenarios.py accept|reassign|one_at_a_time|rescind|unreachable|later_rider CONFIG_JSON
"""
import json
import os
import sys
import time

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from scenario_kit import Orders, SocketClient, TopicReader, advance_clock, now, refused_connection  # noqa: E402

NS = "/rider"
KM = 0.009  # degrees of latitude in a kilometre


class Rider:
    """A rider's app: REST for availability and answers, the /rider socket for offers."""

    def __init__(self, config, name, km, connect=True):
        self.config = config
        self.id = config[f"{name}Id"]
        self.token = config[f"{name}Token"]
        self.lat, self.lng = config["lat"] + km * KM, config["lng"]
        self.socket = None
        if connect:
            self.socket = SocketClient(config["url"], NS, self.token, ("offer", "offer_expired", "offer_rescinded"),
                                       on_event=self._confirm)

    @staticmethod
    def _confirm(socket, event, data):
        if event == "offer":
            socket.emit("received", {"offerId": data["offerId"]})

    def request(self, method, path, body=None, key=None):
        headers = {"Authorization": f"Bearer {self.token}"}
        if key:
            headers["Idempotency-Key"] = key
        answer = requests.request(method, self.config["url"] + path, json=body, headers=headers, timeout=10)
        return {"status": answer.status_code, "body": answer.json() if answer.content else None}

    def online(self):
        location = {"lat": self.lat, "lng": self.lng, "accuracyMeters": 8, "recordedAt": now()}
        return self.request("PUT", "/v1/riders/me/availability", {"status": "online", "location": location})

    def me(self):
        return self.request("GET", "/v1/riders/me")["body"]

    def wait_status(self, status, seconds=15):
        deadline = time.time() + seconds
        while self.me()["status"] != status and time.time() < deadline:
            time.sleep(0.1)
        return self.me()

    def offers(self):
        return self.socket.received("offer") if self.socket else []

    def close(self):
        if self.socket:
            self.socket.close()


def orders_near(config, order_key="orderId"):
    vendor = {"id": "vendor-1", "name": "Spice Route",
              "address": {"line1": "12 MG Road", "area": "Indiranagar", "lat": config["lat"], "lng": config["lng"]}}
    delivery = {"line1": "Flat 4B, 9 Lake View", "area": "Koramangala", "lat": config["lat"] - 3 * KM, "lng": config["lng"]}
    return Orders(dict(config, orderId=config[order_key]), vendor=vendor, delivery=delivery)


def events_of(config, topic, key, until):
    reader = TopicReader(config, topic)
    found = reader.collect(lambda envelope: envelope["aggregateId"] == key or envelope["payload"].get("userId") == key, until)
    reader.close()
    return found


def types(events):
    return [event["type"] for event in events]


def accept(config):
    result = {"customer_refused": refused_connection(config["url"], NS, config["customerToken"])}
    near, far = Rider(config, "near", 1), Rider(config, "far", 2)
    result["near_online"], result["far_online"] = near.online(), far.online()
    orders = orders_near(config)
    started = time.time()
    orders.ready()
    result["offer"] = near.socket.wait_for("offer", 1, 20)
    result["offer_seconds"] = time.time() - started
    offer_id = result["offer"][0]["offerId"] if result["offer"] else "none"
    result["receipt_ack"] = near.socket.call("received", {"offerId": offer_id})
    result["bad_receipt"] = near.socket.call("received", {"offerId": "not-an-offer"})
    result["near_pending"] = near.request("GET", "/v1/riders/me/offer")
    result["far_pending"] = far.request("GET", "/v1/riders/me/offer")
    result["far_accepts_near_offer"] = far.request("POST", f"/v1/offers/{offer_id}/accept")
    result["accepted"] = near.request("POST", f"/v1/offers/{offer_id}/accept", key="accept-1")
    result["accepted_again_same_key"] = near.request("POST", f"/v1/offers/{offer_id}/accept", key="accept-1")
    result["accepted_again"] = near.request("POST", f"/v1/offers/{offer_id}/accept")
    result["near_after_accept"] = near.me()
    result["offline_on_delivery"] = near.request("PUT", "/v1/riders/me/availability", {"status": "offline"})
    result["far_offers"] = far.offers()
    result["events"] = events_of(config, "allocation.events", config["orderId"],
                                 lambda found: "OfferAccepted" in types(found))
    result["push"] = events_of(config, "notifications.requests", near.id,
                               lambda found: any(e["payload"].get("kind") == "offer" for e in found))
    orders.delivered(near.id)
    result["near_after_delivery"] = near.wait_status("online")
    for rider in (near, far):
        rider.close()
    print(json.dumps(result))


def reassign(config):
    result = {}
    riders = [Rider(config, name, km) for name, km in (("near", 1), ("middle", 2), ("far", 3))]
    near, middle, far = riders
    for rider in riders:
        rider.online()
    orders_near(config).ready()
    first = near.socket.wait_for("offer", 1, 20)
    result["rejected"] = near.request("POST", f"/v1/offers/{first[0]['offerId']}/reject")
    result["rejected_then_accepted"] = near.request("POST", f"/v1/offers/{first[0]['offerId']}/accept")
    second = middle.socket.wait_for("offer", 1, 20)
    result["middle_offer"] = second
    # The middle rider lets the offer run out: nothing happens until its deadline, which the clock then passes.
    time.sleep(0.5)
    result["middle_expired_early"] = middle.socket.received("offer_expired")
    advance_clock(config, float(config["offerTimeoutSeconds"]) + 0.5)
    result["middle_expired"] = middle.socket.wait_for("offer_expired", 1, 20)
    result["middle_after_expiry"] = middle.me()
    result["expired_then_accepted"] = middle.request("POST", f"/v1/offers/{second[0]['offerId']}/accept")
    third = far.socket.wait_for("offer", 1, 20)
    result["far_offer"] = third
    result["far_accepted"] = far.request("POST", f"/v1/offers/{third[0]['offerId']}/accept")
    time.sleep(0.5)
    result["near_offers"], result["middle_offers"] = near.offers(), middle.offers()
    result["events"] = events_of(config, "allocation.events", config["orderId"],
                                 lambda found: "OfferAccepted" in types(found))
    for rider in riders:
        rider.close()
    print(json.dumps(result))


def one_at_a_time(config):
    result = {}
    near, far = Rider(config, "near", 1), Rider(config, "far", 3)
    near.online()
    far.online()
    first, second = orders_near(config, "orderId"), orders_near(config, "secondOrderId")
    first.ready()
    second.ready()
    far.socket.wait_for("offer", 1, 20)
    near.socket.wait_for("offer", 1, 20)
    time.sleep(1.0)
    result["near_offers"], result["far_offers"] = near.offers(), far.offers()
    result["near_pending"] = near.request("GET", "/v1/riders/me/offer")
    first.cancelled()
    second.cancelled()
    near.socket.wait_for("offer_rescinded", 1, 20)
    far.socket.wait_for("offer_rescinded", 1, 20)
    for rider in (near, far):
        rider.close()
    print(json.dumps(result))


def rescind(config):
    result = {}
    rider = Rider(config, "near", 1)
    rider.online()
    orders = orders_near(config)
    orders.ready()
    offer = rider.socket.wait_for("offer", 1, 20)
    orders.cancelled()
    result["rescinded"] = rider.socket.wait_for("offer_rescinded", 1, 20)
    result["accept_after_rescind"] = rider.request("POST", f"/v1/offers/{offer[0]['offerId']}/accept")
    result["rider_after"] = rider.me()
    result["pending_after"] = rider.request("GET", "/v1/riders/me/offer")
    rider.close()
    print(json.dumps(result))


def unreachable(config):
    result = {}
    silent = Rider(config, "near", 1, connect=False)
    listening = Rider(config, "far", 2)
    silent.online()
    listening.online()
    orders_near(config).ready()
    deadline = time.time() + 20
    while silent.request("GET", "/v1/riders/me/offer")["status"] != 200 and time.time() < deadline:
        time.sleep(0.1)
    # The silent rider's app never confirms: the next rider is asked once the receipt time passed, not before.
    time.sleep(0.5)
    result["offer_before_receipt_deadline"] = listening.offers()
    advance_clock(config, float(config["receiptTimeoutSeconds"]) + 0.5)
    result["offer"] = listening.socket.wait_for("offer", 1, 30)
    result["silent_after"] = silent.me()
    result["events"] = events_of(config, "allocation.events", config["orderId"],
                                 lambda found: types(found).count("OfferSent") >= 2)
    listening.close()
    print(json.dumps(result))


def later_rider(config):
    result = {}
    orders_near(config).ready()
    result["events"] = events_of(config, "allocation.events", config["orderId"],
                                 lambda found: "AllocationFailed" in types(found))
    rider = Rider(config, "near", 1)
    result["online"] = rider.online()
    result["offer"] = rider.socket.wait_for("offer", 1, 20)
    rider.close()
    print(json.dumps(result))


if __name__ == "__main__":
    scenarios = {"accept": accept, "reassign": reassign, "one_at_a_time": one_at_a_time, "rescind": rescind,
                 "unreachable": unreachable, "later_rider": later_rider}
    settings = json.loads(sys.argv[2])
    settings["lat"], settings["lng"] = float(settings["lat"]), float(settings["lng"])
    scenarios[sys.argv[1]](settings)
