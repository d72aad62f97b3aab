"""What the python scenario scripts of the service tests share: stock python-socketio clients, an order-event
publisher that writes orders.events the way the order service does, and a reader of the services' topics."""
import datetime
import json
import select
import threading
import time
import urllib.request
import uuid

import socketio
import websocket
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def now(offset_seconds=0.0):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def advance_clock(config, seconds):
    """Steps the clock of the service under test (a SteppedClock the Swift test serves at config["clockUrl"])."""
    request = urllib.request.Request(f"{config['clockUrl']}/advance?ms={int(seconds * 1000)}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        if answer.status != 204:
            raise RuntimeError(f"the clock control answered {answer.status}")


class OrderEventPublisher:
    """Publishes one aggregate's events on orders.events, keyed and enveloped as the order service does."""

    def __init__(self, config, key, producer=None):
        """Publishes each event and waits for it; with `producer`, only hands it over (its owner flushes)."""
        self.waits = producer is None
        self.producer = producer if producer is not None else Producer(
            {"bootstrap.servers": config["brokers"], "enable.idempotence": True, "linger.ms": 1})
        self.key = key

    def publish(self, event_type, payload):
        envelope = {
            "eventId": str(uuid.uuid4()), "type": event_type, "aggregateId": self.key, "occurredAt": now(),
            "schemaVersion": 1, "payload": payload,
        }
        self.producer.produce("orders.events", key=self.key, value=json.dumps(envelope))
        if self.waits and self.producer.flush(10) > 0:
            raise RuntimeError(f"{event_type} for {self.key} was not delivered to orders.events within 10 s")


class Orders(OrderEventPublisher):
    """One order's events."""

    def __init__(self, config, vendor=None, delivery=None, producer=None):
        super().__init__(config, config["orderId"], producer)
        self.order = config["orderId"]
        self.customer = config["customerId"]
        self.vendor = vendor or {"id": "vendor-1", "name": "Spice Route",
                                 "address": {"line1": "4 Lake View", "area": "Koramangala", "lat": 12.93, "lng": 77.62}}
        self.delivery = delivery or {"line1": "4 Lake View", "area": "Koramangala", "lat": 12.93, "lng": 77.62}

    def created(self):
        self.publish("OrderCreated", {
            "orderId": self.order, "customerId": self.customer, "paymentMode": "prepaid", "totalAmount": 249.5,
            "requiresPhotoProof": False, "deliveryAddress": self.delivery, "vendor": self.vendor,
        })

    def accepted(self):
        self.publish("OrderAccepted", {"orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"]})

    def ready(self):
        self.publish("OrderReadyForPickup", {
            "orderId": self.order, "customerId": self.customer, "vendor": self.vendor, "deliveryArea": self.delivery["area"],
            "deliveryLocation": {"lat": self.delivery["lat"], "lng": self.delivery["lng"]}, "totalAmount": 249.5,
        })

    def assigned(self, rider_id, rider_name):
        self.publish("RiderAssigned", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"], "offerId": "offer-1",
            "rider": {"id": rider_id, "name": rider_name},
        })

    def reassigned(self, rider_id, rider_name, previous):
        self.publish("RiderReassigned", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"], "offerId": "offer-2",
            "rider": {"id": rider_id, "name": rider_name}, "previousRiderId": previous,
        })

    def arrived(self, rider_id):
        self.publish("RiderArrivedAtStore", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"], "riderId": rider_id,
        })

    def delivered(self, rider_id):
        self.publish("OrderDelivered", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"], "riderId": rider_id,
            "deliveredAt": now(),
        })

    def cancelled(self):
        self.publish("OrderCancelled", {
            "orderId": self.order, "customerId": self.customer, "vendorId": self.vendor["id"], "cancelledBy": "customer",
        })

    def picked_up(self, rider_id, rider_name):
        self.publish("OrderPickedUp", {
            "orderId": self.order, "customerId": self.customer, "vendor": self.vendor,
            "rider": {"id": rider_id, "name": rider_name}, "destination": self.delivery, "pickedUpAt": now(),
        })


class ServiceRequests(OrderEventPublisher):
    """One service request's events."""

    def __init__(self, config, address):
        super().__init__(config, config["requestId"])
        self.request = config["requestId"]
        self.customer = config["customerId"]
        self.address = address

    def created(self):
        self.publish("ServiceRequestCreated", {
            "requestId": self.request, "customerId": self.customer, "serviceAddress": self.address,
            "description": "The kitchen tap leaks",
        })

    def assigned(self, technician_id, technician_name):
        self.publish("ServiceRequestAssigned", {
            "requestId": self.request, "customerId": self.customer,
            "technician": {"id": technician_id, "name": technician_name}, "serviceAddress": self.address,
        })

    def status(self, status, technician_id, technician_name):
        self.publish("ServiceRequestStatusChanged", {
            "requestId": self.request, "customerId": self.customer,
            "technician": {"id": technician_id, "name": technician_name}, "status": status, "serviceAddress": self.address,
        })


class SerializedWebSocket(websocket.WebSocket):
    """websocket-client's socket for python-engineio, which reads in one thread and writes in another: over TLS the
    two race on the one SSL object and drop the connection (python-engineio issue 461). Here reads and writes take
    turns under one lock, and a read waits for data before taking it, so a write never waits on a quiet socket."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.turn = threading.RLock()  # re-entrant: recv answers a ping with a send

    def recv(self):
        while self.sock is not None:
            pending = getattr(self.sock, "pending", lambda: 0)()
            if pending or select.select([self.sock], [], [], 0.5)[0]:
                with self.turn:
                    return super().recv()
        return super().recv()

    def send(self, payload, opcode=websocket.ABNF.OPCODE_TEXT):
        with self.turn:
            return super().send(payload, opcode)


class SocketClient:
    """A python-socketio client on one namespace that records the server events it is told to listen for."""

    def __init__(self, url, namespace, token, events, on_event=None, path="socket.io", http_session=None,
                 reconnection=False):
        self.namespace = namespace
        self.events = []
        self.client = socketio.Client(reconnection=reconnection, reconnection_delay=0.5, reconnection_delay_max=2,
                                      http_session=http_session,
                                      websocket_extra_options={"class_": SerializedWebSocket})
        self.offsets = []
        for name in events:
            # Emits to rooms carry their recovery offset as a last argument (Socket.IO connection state recovery).
            self.client.on(name, (lambda event: lambda data, *offset: self._record(event, data, offset, on_event))(name),
                           namespace=namespace)
        # As an app sends its device id: the gateway keeps the client's long-polling requests on one instance by it.
        url = f"{url}?affinity={uuid.uuid4().hex}"
        self.client.connect(url, namespaces=[namespace], auth={"token": token}, socketio_path=path, wait_timeout=10)

    def _record(self, event, data, offset, on_event):
        self.events.append([event, data])
        if offset:
            self.offsets.append(offset[-1])
        if on_event:
            on_event(self, event, data)

    def call(self, event, data):
        return self.client.call(event, data, namespace=self.namespace, timeout=10)

    def emit(self, event, data):
        self.client.emit(event, data, namespace=self.namespace)

    def received(self, name):
        return [data for event, data in self.events if event == name]

    def wait_for(self, name, count=1, seconds=10):
        deadline = time.time() + seconds
        while len(self.received(name)) < count and time.time() < deadline:
            time.sleep(0.02)
        return self.received(name)

    def close(self):
        self.client.disconnect()


def refused_connection(url, namespace, token, **options):
    """The reason the server gives for refusing a connection to `namespace`, or None if it accepted it."""
    try:
        SocketClient(url, namespace, token, [], **options).close()
        return None
    except socketio.exceptions.ConnectionError as error:
        return str(error)


class TopicReader:
    """Reads every partition of a topic from the beginning (assigned directly: no consumer-group join to wait for),
    keeping the events that match a filter."""

    def __init__(self, config, topic):
        self.consumer = Consumer({
            "bootstrap.servers": config["brokers"], "group.id": f"scenario-{uuid.uuid4()}", "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        })
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions])

    def collect(self, matches, until, seconds=20):
        """Decoded envelopes for which `matches` holds, until `until(found)` holds or `seconds` pass."""
        found, deadline = [], time.time() + seconds
        while time.time() < deadline and not until(found):
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                continue
            envelope = json.loads(message.value())
            if matches(envelope):
                found.append(envelope)
        return found

    def close(self):
        self.consumer.close()
