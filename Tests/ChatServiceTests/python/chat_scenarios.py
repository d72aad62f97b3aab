"""CUS-032 scenarios driven by stock python-socketio clients against the chat service.

The order lifecycle arrives on orders.events exactly as the order service publishes it: the scenarios produce
those events themselves (as the order service would). Each prints one JSON object with what the clients saw.
  chat_scenarios.py conversation CONFIG_JSON
  chat_scenarios.py reassign CONFIG_JSON
  chat_scenarios.py offline CONFIG_JSON
"""
import datetime
import json
import sys
import time
import uuid

import requests
import socketio
from confluent_kafka import Producer

NS = "/chat"


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Orders:
    """Publishes order events the way the order service does."""

    def __init__(self, config):
        self.producer = Producer({"bootstrap.servers": config["brokers"], "enable.idempotence": True, "linger.ms": 1})
        self.order = config["orderId"]
        self.customer = config["customerId"]
        self.vendor = "vendor-1"

    def publish(self, event_type, payload):
        envelope = {
            "eventId": str(uuid.uuid4()), "type": event_type, "aggregateId": self.order, "occurredAt": now(),
            "schemaVersion": 1, "payload": payload,
        }
        self.producer.produce("orders.events", key=self.order, value=json.dumps(envelope))
        self.producer.flush(10)

    def created(self):
        address = {"line1": "4 Lake View", "area": "Koramangala", "lat": 12.93, "lng": 77.62}
        self.publish("OrderCreated", {
            "orderId": self.order, "customerId": self.customer, "paymentMode": "prepaid", "totalAmount": 249.5,
            "requiresPhotoProof": False, "deliveryAddress": address,
            "vendor": {"id": self.vendor, "name": "Spice Route", "address": address},
        })

    def assigned(self, rider_id, rider_name):
        self.publish("RiderAssigned", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor, "offerId": "offer-1",
            "rider": {"id": rider_id, "name": rider_name},
        })

    def reassigned(self, rider_id, rider_name, previous):
        self.publish("RiderReassigned", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor, "offerId": "offer-2",
            "rider": {"id": rider_id, "name": rider_name}, "previousRiderId": previous,
        })

    def delivered(self, rider_id):
        self.publish("OrderDelivered", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor, "riderId": rider_id,
            "deliveredAt": now(),
        })

    def cancelled(self):
        self.publish("OrderCancelled", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor, "cancelledBy": "customer",
        })


class ChatClient:
    def __init__(self, url, token):
        self.events = []
        self.client = socketio.Client(reconnection=False)
        for name in ("message", "chat_closed", "access_revoked"):
            self.client.on(name, (lambda event: lambda data: self.events.append([event, data]))(name), namespace=NS)
        self.client.connect(url, namespaces=[NS], auth={"token": token}, wait_timeout=10)

    def call(self, event, data):
        return self.client.call(event, data, namespace=NS, timeout=10)

    def join_when_open(self, order, seconds=20):
        """Joins, retrying while the room is not open yet (the projection follows orders.events)."""
        deadline = time.time() + seconds
        while True:
            answer = self.call("join", {"orderId": order})
            if "error" not in answer or answer["error"]["code"] != "CHAT_NOT_AVAILABLE" or time.time() > deadline:
                return answer
            time.sleep(0.2)

    def received(self, name):
        return [data for event, data in self.events if event == name]

    def wait_for(self, name, count=1, seconds=10):
        deadline = time.time() + seconds
        while len(self.received(name)) < count and time.time() < deadline:
            time.sleep(0.05)
        return self.received(name)

    def close(self):
        self.client.disconnect()


def history(config, token, limit):
    """Every message of the order, paging newest first with `before`."""
    url = f"{config['http']}/v1/orders/{config['orderId']}/chat/messages"
    pages, before = [], None
    while True:
        params = {"limit": limit}
        if before:
            params["before"] = before
        answer = requests.get(url, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        if answer.status_code != 200:
            return {"status": answer.status_code, "body": answer.json()}
        body = answer.json()
        pages.append([message["id"] for message in body["messages"]])
        before = body.get("nextBefore")
        if not before:
            return {"status": 200, "pages": pages, "texts": [m["text"] for m in body["messages"]]}


def conversation(config):
    orders = Orders(config)
    result = {}
    customer = ChatClient(config["url"], config["customerToken"])
    orders.created()
    time.sleep(1.0)
    result["join_before_rider"] = customer.call("join", {"orderId": config["orderId"]})
    orders.assigned(config["riderId"], "Ravi")
    result["customer_join"] = customer.join_when_open(config["orderId"])
    stranger = ChatClient(config["url"], config["strangerToken"])
    result["stranger_join"] = stranger.call("join", {"orderId": config["orderId"]})
    rider = ChatClient(config["url"], config["riderToken"])
    result["rider_join"] = rider.call("join", {"orderId": config["orderId"]})

    order = config["orderId"]
    result["hello_ack"] = customer.call("message", {"orderId": order, "clientMessageId": "c-1", "text": "Hello Ravi"})
    result["rider_got"] = rider.wait_for("message", 1)
    result["reply_ack"] = rider.call("message", {"orderId": order, "clientMessageId": "r-1", "text": "On my way!"})
    result["customer_got"] = customer.wait_for("message", 1)
    result["quick_ack"] = customer.call("message", {"orderId": order, "clientMessageId": "c-2", "quickReplyId": "leave-at-door"})
    result["rider_got_quick"] = rider.wait_for("message", 2)
    result["exactly_500"] = customer.call("message", {"orderId": order, "clientMessageId": "c-3", "text": "x" * 500})
    result["too_long"] = customer.call("message", {"orderId": order, "clientMessageId": "c-4", "text": "y" * 501})
    result["empty"] = customer.call("message", {"orderId": order, "clientMessageId": "c-5", "text": "   "})
    result["resend_ack"] = customer.call("message", {"orderId": order, "clientMessageId": "c-1", "text": "Hello Ravi"})
    result["stranger_send"] = stranger.call("message", {"orderId": order, "clientMessageId": "s-1", "text": "hi"})
    time.sleep(0.5)
    result["rider_messages"] = rider.received("message")
    for index in range(7):
        rider.call("message", {"orderId": order, "clientMessageId": f"r-{index + 2}", "text": f"update {index}"})
    result["history"] = history(config, config["customerToken"], 3)

    orders.delivered(config["riderId"])
    result["customer_closed"] = customer.wait_for("chat_closed", 1, 20)
    result["rider_closed"] = rider.wait_for("chat_closed", 1, 20)
    result["send_after_close"] = customer.call("message", {"orderId": order, "clientMessageId": "c-9", "text": "thanks"})
    result["history_after_close"] = history(config, config["customerToken"], 100)
    result["rejoin_after_close"] = customer.call("join", {"orderId": order})

    admin = ChatClient(config["url"], config["adminToken"])
    result["admin_join"] = admin.call("join", {"orderId": order})
    result["admin_send"] = admin.call("message", {"orderId": order, "clientMessageId": "a-1", "text": "hello"})
    result["admin_history"] = history(config, config["adminToken"], 100)
    result["stranger_history"] = history(config, config["strangerToken"], 100)
    for client in (customer, rider, stranger, admin):
        client.close()
    print(json.dumps(result))


def reassign(config):
    orders = Orders(config)
    result = {}
    orders.created()
    orders.assigned(config["riderId"], "Ravi")
    customer = ChatClient(config["url"], config["customerToken"])
    result["customer_join"] = customer.join_when_open(config["orderId"])
    old = ChatClient(config["url"], config["riderToken"])
    result["old_join"] = old.call("join", {"orderId": config["orderId"]})
    orders.reassigned(config["newRiderId"], "Ria", config["riderId"])
    result["revoked"] = old.wait_for("access_revoked", 1, 20)
    result["old_send"] = old.call("message", {"orderId": config["orderId"], "clientMessageId": "o-1", "text": "still here?"})
    new = ChatClient(config["url"], config["newRiderToken"])
    deadline = time.time() + 20
    while True:
        result["new_join"] = new.call("join", {"orderId": config["orderId"]})
        if "error" not in result["new_join"] or time.time() > deadline:
            break
        time.sleep(0.2)
    customer.call("message", {"orderId": config["orderId"], "clientMessageId": "c-1", "text": "Hi Ria"})
    result["new_got"] = new.wait_for("message", 1)
    time.sleep(0.5)
    result["old_got"] = old.received("message")
    for client in (customer, old, new):
        client.close()
    print(json.dumps(result))


def offline(config):
    orders = Orders(config)
    result = {}
    orders.created()
    orders.assigned(config["riderId"], "Ravi")
    customer = ChatClient(config["url"], config["customerToken"])
    result["customer_join"] = customer.join_when_open(config["orderId"])
    result["ack"] = customer.call("message", {"orderId": config["orderId"], "clientMessageId": "c-1", "text": "Please leave it with the guard at the gate"})
    orders.cancelled()
    result["closed"] = customer.wait_for("chat_closed", 1, 20)
    customer.close()
    print(json.dumps(result))


if __name__ == "__main__":
    {"conversation": conversation, "reassign": reassign, "offline": offline}[sys.argv[1]](json.loads(sys.argv[2]))
