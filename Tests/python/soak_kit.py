"""The soak: simulated parties living their journeys through the gateway of a system with two instances of every
service, while a fault driver injects faults on a seeded random schedule; then a checker reads the system's own
records and the clients' and says what was lost, doubled or illegal. `make soak` runs it (deploy/local/soak.py);
`make test` runs a short one (Tests/System/test_soak.py).

The schedule (each fault's kind, target, start and length) follows from the seed alone; the interleaving with the
journeys depends on timing, as it would in the field."""
import collections
import http.server
import json
import math
import random
import re
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import requests
import websocket

import gateway_kit
from gateway_kit import PROOF_PHOTO, ApiError, Party, Spot, route, until
from recovering_client import ConnectRefused, RecoveringSocket

# Settings of the soak's system beyond the system tests' (short windows, so expiries happen within a run).
ENVIRONMENT = {
    "OFFER_TIMEOUT_SECONDS": "6",
    "OFFER_RECEIPT_TIMEOUT_SECONDS": "3",
    # The couriers are fast-forwarded (a 2 km route in under 2 s, each position stamped when sent); 70 m/s would take
    # their steps for GPS jumps.
    "POSITION_MAX_SPEED_MPS": "100000",
}

# A broker that stops answering, not one that restarts: the local broker (Tansu) keeps its log in memory, so a restart
# here loses every topic, which is not what restarting a Kafka broker (its log on disk) does.
FAULT_KINDS = ("kill", "term", "postgres", "cut", "push", "broker")
TERMINAL_ORDER_STATUSES = {"Delivered", "Cancelled"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


class Recorder:
    """What the clients saw: every HTTP answer, latencies per path with their time, and counts of events."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = collections.Counter()        # (method, route, status) -> count
        self.server_errors = []                     # (time, method, route, status, error code)
        self.latencies = collections.defaultdict(list)  # path -> [(time, seconds)]
        self.counts = collections.Counter()
        self.problems = []                          # violations seen by clients, as text

    def answer(self, method, path, status, code=None):
        route_name = UUID.sub("{id}", path.split("?")[0])
        with self.lock:
            self.answers[(method, route_name, status)] += 1
            if status >= 500:
                self.server_errors.append((time.time(), method, route_name, status, code))

    def latency(self, path, started, seconds=None):
        with self.lock:
            self.latencies[path].append((started, time.time() - started if seconds is None else seconds))

    def count(self, name, amount=1):
        with self.lock:
            self.counts[name] += amount

    def problem(self, text):
        with self.lock:
            self.problems.append(text)


class SoakParty(Party):
    """A party whose app retries as a phone does: the same request again (with its Idempotency-Key) after a network
    error or while the gateway says the service is restarting, for up to `patience` seconds."""

    def __init__(self, gateway, user_id, role, name, recorder, patience=120):
        super().__init__(gateway, user_id, role, name)
        self.recorder, self.patience = recorder, patience

    def request(self, method, path, **options):
        deadline = time.time() + options.pop("retry_unavailable_for", self.patience)
        while True:
            try:
                response = self.http.request(method, self.gateway.url + path, timeout=15, **options)
            except requests.RequestException:
                self.recorder.count("http network errors (retried)")
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
                continue
            code = None
            if response.status_code >= 500:
                try:
                    code = response.json().get("error", {}).get("code")
                except ValueError:
                    pass
            self.recorder.answer(method, path, response.status_code, code)
            if response.status_code not in (502, 503, 504) or time.time() > deadline:
                return response
            time.sleep(0.5)


class TimedSocket(RecoveringSocket):
    """The raw-protocol client, each event stamped with the time it reached the listeners."""

    def __init__(self, *args, **kwargs):
        self.timeline = []  # (time, event name, first argument)
        super().__init__(*args, **kwargs)

    def _deliver(self, data):
        super()._deliver(data)
        with self._lock:
            self.timeline.append((time.time(), data[0], data[1] if len(data) > 1 else None))


class AppSocket:
    """A phone's socket.io-client 4.x with connection state recovery: after its transport closes it reconnects
    0.5 to 1.5 s later and recovers its session when the server can; after a server DISCONNECT, which the client
    never follows by itself, the app opens a new connection. `on_fresh` runs after every connection that did not
    recover (the app reloads over REST and joins its rooms again)."""

    registry = []
    registry_lock = threading.Lock()

    def __init__(self, party, kind, recorder, rng, on_fresh=None):
        self.party, self.kind, self.recorder, self.rng = party, kind, recorder, rng
        self.on_fresh = on_fresh or (lambda: None)
        self.closed = False
        self.fresh_connections = []  # times of connections that did not recover (the first one included)
        self.lock = threading.Lock()
        self.socket = self._open()
        with AppSocket.registry_lock:
            AppSocket.registry.append(self)
        self.monitor = threading.Thread(target=self._keep_connected, daemon=True)
        self.monitor.start()

    def _open(self):
        path, namespace = gateway_kit.SOCKETS[self.kind]
        deadline = time.time() + self.party.patience
        while True:
            try:
                opened = TimedSocket(self.party.gateway.url, namespace, {"token": self.party.token}, path=path,
                                     ca_file=self.party.gateway.certificate)
                self.fresh_connections.append(time.time())
                return opened
            except (OSError, websocket.WebSocketException, TimeoutError, ConnectionError, ConnectRefused,
                    AssertionError):
                self.recorder.count("socket connects refused or failed (retried)")
                if time.time() > deadline:
                    raise
                time.sleep(self.rng.uniform(0.5, 1.5))

    def _wait_for_loss(self):
        """Until the transport closed or the server sent DISCONNECT (after which the transport may stay open)."""
        while not self.closed and self.socket._reader.is_alive() and not self.socket.disconnected_by_server:
            self.socket._reader.join(0.5)

    def _keep_connected(self):
        while True:
            self._wait_for_loss()
            if self.closed:
                return
            time.sleep(self.rng.uniform(0.5, 1.5))
            fresh = self._reconnect()
            with self.lock:
                if self.closed:
                    self.socket.close()
                    return
            if fresh:
                try:
                    self.on_fresh()
                except Exception as error:  # noqa: BLE001 - the journey's own checks tell what was missed
                    self.recorder.count("reloads after a fresh connection failed")
                    self.recorder.problem(f"{self.party.id} {self.kind}: reload failed: {error}")

    def _reconnect(self):
        """Connects again (recovering if it can); whether the app must reload (the connection started afresh)."""
        while not self.closed:
            try:
                if self.socket.disconnected_by_server:
                    self.recorder.count("server DISCONNECTs (app opened a new connection)")
                    old = self.socket
                    old.close()
                    replacement = self._open()
                    with self.lock:
                        self._carry_over(old, replacement)
                        self.socket = replacement
                    return True
                self.socket.connect()
                self.recorder.count("reconnects")
                if self.socket.recovered:
                    self.recorder.count("reconnects recovered")
                    return False
                self.recorder.count("reconnects not recovered (app reloads)")
                self.fresh_connections.append(time.time())
                return True
            except Exception:  # noqa: BLE001 - any failure to reconnect is retried, as the client does
                self.recorder.count("reconnect attempts failed (retried)")
                time.sleep(self.rng.uniform(0.5, 1.5))
        return False

    @staticmethod
    def _carry_over(old, replacement):
        with old._lock:
            replacement.timeline[:0] = old.timeline
            replacement.events[:0] = old.events

    def call(self, event, data, patience=120):
        """The acknowledgement of `event`, sent again (the same data) until one comes: a socket that was cut may have
        lost the request or the answer."""
        deadline = time.time() + patience
        while True:
            try:
                return self.socket.call(event, data, timeout=5)
            except Exception:  # noqa: BLE001 - a cut socket, a timeout: the app tries again
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def timeline(self, name):
        with self.socket._lock:
            return [(at, payload) for at, event, payload in self.socket.timeline if event == name]

    def received(self, name):
        return [payload for _, payload in self.timeline(name)]

    def connected(self):
        """Whether the socket is connected (and joined) now, or closed for good."""
        return self.closed or (self.socket._reader.is_alive() and self.socket._answered)

    def fresh_since(self, moment):
        """Whether a connection started afresh (the app reloaded) at or after `moment`."""
        return any(fresh >= moment for fresh in self.fresh_connections[1:])

    def cut(self):
        """The network goes away under the phone (no close, no DISCONNECT)."""
        self.socket.drop()

    def close(self):
        with self.lock:
            self.closed = True
            self.socket.close()
        with AppSocket.registry_lock:
            if self in AppSocket.registry:
                AppSocket.registry.remove(self)


class Lane(threading.Thread):
    """One place (a vendor, a customer, riders or a technician) living journeys back to back until told to stop."""

    def __init__(self, soak, index):
        super().__init__(daemon=True, name=f"lane-{index}")
        self.soak, self.index = soak, index
        self.rng = random.Random(soak.seed * 1000 + index)
        self.spot = Spot(index=index)
        self.tag = f"soak{soak.seed}-{index}-{uuid.uuid4().hex[:6]}"
        self.completed, self.failures = [], []

    @staticmethod
    def key():
        return {"Idempotency-Key": str(uuid.uuid4())}

    def party(self, prefix, role, name):
        return SoakParty(self.soak.gateway, f"{prefix}-{self.tag}", role, name, self.soak.recorder)

    def run(self):
        try:
            try:
                self.prepare()
            except Exception as error:  # noqa: BLE001 - recorded; the checker reports it
                self.failures.append((time.time(), f"could not prepare the lane: {type(error).__name__}: {error}"))
                return
            while not self.soak.stopping.is_set():
                started = time.time()
                try:
                    outcome = self.journey()
                    self.completed.append((started, time.time(), outcome))
                except Exception as error:  # noqa: BLE001 - recorded; the checker reports it
                    self.failures.append((started, f"{type(error).__name__}: {error}"))
                    try:
                        self.abandon()
                    except Exception:  # noqa: BLE001 - the lane goes on; the checker lists what was left
                        pass
                    time.sleep(1)
        finally:
            self.finish()

    def prepare(self):
        pass

    def abandon(self):
        """After a failed journey: leave nothing in flight that would block the lane's next one."""

    def finish(self):
        pass


class DeliveryLane(Lane):
    """Orders placed, accepted, offered (the nearer rider accepts, rejects, or lets the offer expire; the other then
    gets it), picked up, tracked, chatted about and delivered with a photo."""

    def prepare(self):
        recorder, rng = self.soak.recorder, self.rng
        self.admin = self.party("admin", "admin", "Operations")
        self.vendor = self.party("vendor", "vendor", "Spice Route")
        self.customer = self.party("customer", "customer", "Asha")
        self.riders = [self.party("rider", "rider", "Ravi"), self.party("rider2", "rider", "Meena")]
        self.vendor_address = self.spot.address("12 Market Road")
        self.delivery_address = self.spot.address("4 Lake View", north_km=1.6, east_km=1.2)
        response = self.admin.request("POST", "/v1/vendors", json={
            "id": self.vendor.id, "name": self.vendor.name, "address": self.vendor_address})
        if response.status_code not in (201, 409):
            raise ApiError(response, "201 or 409")
        self.customer.register_device("android")
        for rider in self.riders:
            rider.register_device("ios")
        self.order_id = None
        self.tracking = False
        self.updates = AppSocket(self.customer, "orders", recorder, rng)
        self.offers = [AppSocket(rider, "rider", recorder, rng) for rider in self.riders]
        self.customer_chat = AppSocket(self.customer, "chat", recorder, rng,
                                       on_fresh=lambda: self.rejoin(self.customer_chat))
        self.rider_chat = None
        self.watcher = AppSocket(self.customer, "tracking", recorder, rng, on_fresh=self.retrack)

    def finish(self):
        clients = [getattr(self, name, None) for name in ("updates", "customer_chat", "watcher", "rider_chat")]
        for client in clients + list(getattr(self, "offers", [])):
            if client:
                client.close()

    def abandon(self):
        if self.order_id:
            self.customer.request("POST", f"/v1/orders/{self.order_id}/cancel", headers=self.key(),
                                  json={"reason": "soak: the journey failed"})
        for rider in self.riders:
            rider.request("PUT", "/v1/riders/me/availability", json={"status": "offline"})

    def rejoin(self, client):
        """After a connection that did not recover the room is gone: the app joins the current chat again."""
        if self.order_id:
            try:
                client.call("join", {"orderId": self.order_id}, patience=30)
            except Exception:  # noqa: BLE001 - the journey's own checks tell whether messages still arrived
                self.soak.recorder.count("chat rejoins failed")

    def retrack(self):
        """After a connection that did not recover the app opens the current job's map again."""
        if self.tracking and self.order_id:
            try:
                self.watcher.call("track", {"jobId": self.order_id}, patience=30)
            except Exception:  # noqa: BLE001 - the journey's own checks tell whether positions still arrived
                self.soak.recorder.count("re-tracks failed")

    def transition(self, party, action, reached, **options):
        """POSTs an order action with an Idempotency-Key, as the app does, so a retry after a lost answer gets the
        first attempt's answer; a 409 is still taken for done when the order shows the step taken (`reached`)."""
        options.setdefault("headers", {"Idempotency-Key": str(uuid.uuid4())})
        response = party.request("POST", f"/v1/orders/{self.order_id}/{action}", **options)
        if response.status_code in (200, 201):
            return response.json()
        order = party.call("GET", f"/v1/orders/{self.order_id}")
        if response.status_code == 409 and reached(order):
            self.soak.recorder.count("retried actions already applied (409 then confirmed)")
            return order
        raise ApiError(response, 200)

    def journey(self):
        recorder, rng = self.soak.recorder, self.rng
        customer, vendor = self.customer, self.vendor
        near, far = self.riders
        for rider, km in ((near, 0.4), (far, 1.5)):
            until(lambda: rider.request("PUT", "/v1/riders/me/availability", json={
                "status": "online", "location": self.spot.fix(km, 0.3)}).ok, f"{rider.id} to go online", 120)
        key = str(uuid.uuid4())
        placed_at = time.time()
        order = customer.call("POST", "/v1/orders", expect=201, headers={"Idempotency-Key": key}, json={
            "vendorId": vendor.id, "deliveryAddress": self.delivery_address, "paymentMode": "prepaid",
            "totalAmount": 349.0, "requiresPhotoProof": True})
        self.order_id = order_id = order["id"]
        self.soak.orders.append(order_id)
        accepted_at = time.time()
        self.transition(vendor, "accept", lambda o: o["status"] != "PendingVendorAcceptance")
        # The nearer rider gets the offer first and accepts, rejects, lets it run out, or has the app in the
        # background (no socket: the offer comes by push, and the app opened from it answers over REST); the other
        # rider accepts what the first did not.
        behaviour = rng.choices(["accept", "reject", "expire", "background"], weights=[55, 15, 15, 15])[0]
        recorder.count(f"offers the first rider meant to {behaviour}")
        if behaviour == "background":
            self.offers[0].close()
        ready_at = time.time()
        self.transition(vendor, "ready", lambda o: o["status"] not in ("PendingVendorAcceptance", "Preparing"))
        holder = self.settle_offer(order_id, behaviour, ready_at)
        if behaviour == "background":
            self.offers[0] = AppSocket(near, "rider", recorder, rng)
        index, rider = holder
        gateway_kit.assigned_rider(customer, order_id)
        self.order_update_latency(order_id, "OrderAccepted", accepted_at)

        self.transition(rider, "arrived", lambda o: o.get("riderArrivedAt") or o["status"] != "ReadyForPickup")
        started = time.time()
        self.transition(rider, "pickup", lambda o: o["status"] in ("InTransit", "Delivered"))
        recorder.latency("pickup (REST)", started)

        self.track(rider, order_id)
        self.chat(rider, order_id)
        upload = rider.request("POST", f"/v1/orders/{order_id}/proof-photo", data=PROOF_PHOTO,
                               headers={"Content-Type": "image/png", **self.key()})
        if upload.status_code not in (201, 409):
            raise ApiError(upload, 201)
        self.transition(rider, "deliver", lambda o: o["status"] == "Delivered")
        self.check_order_updates(order_id, placed_at)
        self.rider_chat.close()
        self.rider_chat = None
        # Allocation frees the rider once it learned the delivery.
        until(lambda: rider.request("PUT", "/v1/riders/me/availability", json={"status": "offline"}).ok,
              "allocation to learn the delivery", 120)
        other = far if rider is near else near
        other.request("PUT", "/v1/riders/me/availability", json={"status": "offline"})
        return "delivered"

    def settle_offer(self, order_id, behaviour, ready_at, seconds=180):
        """Answers the order's offers as they come: the first (normally the nearer rider's) as `behaviour` says, every
        later one (to whichever rider allocation picks next) accepted. Returns (index, rider) of the rider who got
        the order."""
        handled, first = set(), True
        deadline = time.time() + seconds
        while time.time() < deadline:
            found = self.pending_offer(order_id, handled, skip_socket=behaviour == "background")
            if not found:
                time.sleep(0.3)
                continue
            index, rider, offer = found
            handled.add(offer["offerId"])
            action = behaviour if first else "accept"
            if first and index == 0 and behaviour != "background":
                self.offer_latency(self.offers[0], order_id, ready_at)
            first = False
            rider.request("POST", f"/v1/offers/{offer['offerId']}/received", headers=self.key())
            if action == "reject":
                rider.request("POST", f"/v1/offers/{offer['offerId']}/reject", headers=self.key())
            elif action in ("accept", "background"):
                answer = rider.request("POST", f"/v1/offers/{offer['offerId']}/accept", headers=self.key())
                if answer.status_code == 200:
                    return index, rider
                self.soak.recorder.count(f"offer accepts refused ({answer.status_code})")
        raise AssertionError(f"no rider got order {order_id} within {seconds} s")

    def pending_offer(self, order_id, handled, skip_socket):
        """(index, rider, offer) of an offer for the order that is not handled yet: from a rider's socket, or (the
        app opened from the push, or after a socket was cut) the rider's pending offer over REST."""
        for index, rider in enumerate(self.riders):
            if not (skip_socket and index == 0):
                for offer in self.offers[index].received("offer"):
                    if offer and offer.get("orderId") == order_id and offer["offerId"] not in handled:
                        return index, rider, offer
            response = rider.request("GET", "/v1/riders/me/offer")
            if response.status_code == 200:
                offer = response.json()
                if offer.get("orderId") == order_id and offer["offerId"] not in handled:
                    return index, rider, offer
        return None

    def offer_latency(self, socket, order_id, since):
        for at, offer in socket.timeline("offer"):
            if offer and offer.get("orderId") == order_id:
                self.soak.recorder.latency("offer (ready -> rider's socket)", since, at - since)
                return

    def order_update_latency(self, order_id, kind, since):
        for at, update in self.updates.timeline("order_update"):
            if update and update.get("orderId") == order_id and update.get("type") == kind:
                self.soak.recorder.latency("order update (vendor accept -> customer's socket)", since, at - since)
                return

    def check_order_updates(self, order_id, since):
        """The customer's live order updates: none twice; the delivery's own steps all there unless the socket did
        not recover (the app then reloads the order)."""
        wanted = {"OrderAccepted", "OrderPickedUp", "OrderDelivered"}
        try:
            until(lambda: wanted <= {u["type"] for u in self.updates.received("order_update")
                                     if u and u.get("orderId") == order_id}, "the live order updates", 30)
        except AssertionError:
            pass
        seen = [(u["type"], u["occurredAt"]) for u in self.updates.received("order_update")
                if u and u.get("orderId") == order_id]
        duplicates = len(seen) - len(set(seen))
        self.soak.recorder.count("order updates received", len(seen))
        if duplicates:
            self.soak.recorder.count("duplicates seen by a client", duplicates)
            self.soak.recorder.problem(f"order {order_id}: {duplicates} order_update received twice")
        missing = wanted - {kind for kind, _ in seen}
        if missing and not self.updates.fresh_since(since):
            self.soak.recorder.count("events lost", len(missing))
            self.soak.recorder.problem(f"order {order_id}: updates {sorted(missing)} never reached a socket that "
                                       f"always recovered")

    def track(self, rider, order_id):
        """The rider sends positions along the route; the customer's map follows."""
        self.tracking = False
        sender = AppSocket(rider, "tracking", self.soak.recorder, self.rng)
        try:
            until(lambda: self.ensure_tracking(order_id), "the map to track the order", 120)
            for point in route(self.vendor_address, self.delivery_address, 5):
                started = time.time()
                answer = sender.call("position", {"lat": point["lat"], "lng": point["lng"], "accuracyMeters": 6,
                                                  "headingDegrees": 45, "speedMps": 12, "recordedAt": gateway_kit.now()})
                outcome = "accepted" if answer.get("accepted") else (
                    answer.get("reason") or (answer.get("error") or {}).get("code") or json.dumps(answer)[:80])
                self.soak.recorder.count(f"position answers: {outcome}")
                if outcome == "accepted":
                    self.position_latency(point, started)
                time.sleep(0.3)
        finally:
            sender.close()

    def ensure_tracking(self, order_id):
        """Whether the customer's map tracks the order: live, or stale (tracking on, no recent position). A job goes
        stale when no position follows the pickup for a while, as when the rider's first positions wait on a fault
        (seen in the soak: Postgres crashed 0.2 s after a pickup and the job was stale by the first look); the
        positions sent next make it live again."""
        if not self.tracking:
            view = self.watcher.call("track", {"jobId": order_id})
            self.tracking = view.get("state") in ("live", "stale")
        return self.tracking

    def position_latency(self, point, started):
        def arrival():
            for at, location in self.watcher.timeline("location"):
                if location and at >= started and abs(location.get("lat", 0) - point["lat"]) < 1e-7 \
                        and abs(location.get("lng", 0) - point["lng"]) < 1e-7:
                    return at
            return None
        try:
            at = until(arrival, "the position on the map", 5)
            self.soak.recorder.latency("position (courier -> customer's map)", started, at - started)
        except AssertionError:
            self.soak.recorder.count("positions not seen live within 5 s (only the latest is replayed)")

    def chat(self, rider, order_id):
        """Both sides send messages (each with its clientMessageId, resent as is until acknowledged); each must
        reach the other exactly once and in order."""
        self.rider_chat = AppSocket(rider, "chat", self.soak.recorder, self.rng,
                                    on_fresh=lambda: self.rejoin(self.rider_chat))
        sides = [(self.customer, self.customer_chat), (rider, self.rider_chat)]
        for _, client in sides:
            until(lambda: client.call("join", {"orderId": order_id}).get("ok"), "the chat to open", 120)
        sent = {0: [], 1: []}
        for number in range(6):
            side = number % 2
            party, client = sides[side]
            started = time.time()
            message = {"orderId": order_id, "clientMessageId": str(uuid.uuid4()),
                       "text": f"message {number} from {party.role}"}
            answer = client.call("message", message)
            if "id" not in answer:
                # The room was lost with a connection that did not recover: join again and resend the same message
                # (its clientMessageId stores it once), as the app does.
                until(lambda: client.call("join", {"orderId": order_id}).get("ok"), "the chat to reopen", 60)
                answer = client.call("message", message)
            sent[side].append((answer["id"], started))
        for side, (party, client) in enumerate(sides):
            self.check_chat(order_id, sent[1 - side], party, client)

    def check_chat(self, order_id, expected, party, client):
        wanted = [message_id for message_id, _ in expected]
        try:
            until(lambda: set(wanted) <= {m["id"] for m in client.received("message") if m}, "the chat messages", 30)
        except AssertionError:
            pass
        arrivals = [(at, m["id"]) for at, m in client.timeline("message") if m and m["id"] in wanted]
        ids = [message_id for _, message_id in arrivals]
        recorder = self.soak.recorder
        recorder.count("chat messages expected", len(wanted))
        duplicates = len(ids) - len(set(ids))
        if duplicates:
            recorder.count("duplicates seen by a client", duplicates)
            recorder.problem(f"chat {order_id}: {duplicates} message(s) reached {party.id} twice")
        first_seen = list(dict.fromkeys(ids))
        if first_seen != [message_id for message_id in wanted if message_id in first_seen]:
            recorder.count("chat messages out of order", 1)
            recorder.problem(f"chat {order_id}: {party.id} got {first_seen}, sent in the order {wanted}")
        times = dict((message_id, at) for at, message_id in reversed(arrivals))
        for message_id, started in expected:
            if message_id in times:
                recorder.latency("chat message (send -> counterpart)", started, times[message_id] - started)
        missing = [message_id for message_id, started in expected if message_id not in times]
        if not missing:
            return
        # The app of a socket that did not recover reloads the page: what it missed live must be in the history.
        history = {m["id"] for m in party.call("GET", f"/v1/orders/{order_id}/chat/messages?limit=100")["messages"]}
        for message_id, started in expected:
            if message_id not in missing:
                continue
            reloaded = client.fresh_since(started)
            if message_id not in history:
                recorder.count("events lost")
                recorder.problem(f"chat {order_id}: message {message_id} is not even in the history")
            elif reloaded:
                recorder.count("chat messages missed live, reloaded after a fresh connection")
            else:
                recorder.count("events lost")
                recorder.problem(f"chat {order_id}: message {message_id} never reached {party.id}'s socket, "
                                 f"which always recovered")


class VisitLane(Lane):
    """A technician's visits: requested, assigned, on the way, travel mode on, positions on the customer's map,
    work in progress, completed."""

    def prepare(self):
        self.admin = self.party("admin", "admin", "Operations")
        self.customer = self.party("customer", "customer", "Asha")
        self.technician = self.party("technician", "technician", "Kiran")
        self.address = self.spot.address("4 Lake View", north_km=1.6, east_km=1.2)
        self.start = self.spot.address("Depot")
        self.sender = AppSocket(self.technician, "tracking", self.soak.recorder, self.rng)

    def finish(self):
        if getattr(self, "sender", None):
            self.sender.close()

    def upload(self, positions):
        result = self.technician.call("POST", "/v1/couriers/me/positions", json={"positions": positions})
        self.soak.recorder.count("queued positions uploaded in a batch", len(positions))
        # A batch sent again after a lost answer finds its positions applied already (older_than_last).
        refused = [outcome for outcome in result["results"] if outcome not in ("applied", "older_than_last")]
        if refused:
            self.soak.recorder.problem(f"queued positions refused: {refused}")

    def status(self, request_id, status):
        response = self.technician.request("POST", f"/v1/service-requests/{request_id}/status",
                                           json={"status": status})
        if response.status_code == 200:
            return
        current = self.technician.call("GET", f"/v1/service-requests/{request_id}")
        if response.status_code == 409 and current["status"] == status:
            return
        raise ApiError(response, 200)

    def journey(self):
        request = self.customer.call("POST", "/v1/service-requests", expect=201, headers=self.key(), json={
            "serviceAddress": self.address, "description": "The kitchen tap leaks"})
        request_id = request["id"]
        self.soak.visits.append(request_id)
        assigned = self.admin.request("POST", f"/v1/service-requests/{request_id}/assign",
                                      json={"technicianId": self.technician.id, "technicianName": self.technician.name})
        if assigned.status_code != 200:
            current = self.admin.call("GET", f"/v1/service-requests/{request_id}")
            if assigned.status_code != 409 or (current.get("technician") or {}).get("id") != self.technician.id:
                raise ApiError(assigned, 200)
        self.status(request_id, "OnTheWay")
        until(lambda: self.technician.request("POST", f"/v1/tracking/{request_id}/travel-mode",
                                              json={"active": True}).status_code == 200,
              "travel mode to switch on", 120)
        # Every other visit the phone loses its network on the way: the app queues the positions it takes and
        # uploads them in one batch when it is back (US-072-AC-006), then goes on live.
        offline = set(range(1, 3)) if self.rng.random() < 0.5 else set()
        queued = []
        for number, point in enumerate(route(self.start, self.address, 4)):
            position = {"lat": point["lat"], "lng": point["lng"], "accuracyMeters": 6, "headingDegrees": 30,
                        "speedMps": 8, "recordedAt": gateway_kit.now()}
            if number in offline:
                queued.append(position)
            else:
                if queued:
                    self.upload(queued)
                    queued = []
                self.sender.call("position", position)
            time.sleep(0.3)
        self.status(request_id, "WorkInProgress")
        self.status(request_id, "Completed")
        return "completed"


class FakeFCM:
    """FCM HTTP v1 on 127.0.0.1 for the soak's notification service (Android pushes; iOS ones go to the log
    provider): the OAuth token endpoint and messages:send, answering as FCM does, or, while a `push` fault lasts,
    slowly (2 s), with 503 UNAVAILABLE, or with 429 and Retry-After: 1. Records every messages:send call."""

    MODES = ("slow", "unavailable", "throttled")

    def __init__(self, port, directory):
        directory.mkdir(parents=True, exist_ok=True)
        key = directory / "fcm.pem"
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out",
                        str(key)], check=True, capture_output=True)
        self.account = directory / "service-account.json"
        self.account.write_text(json.dumps({
            "type": "service_account", "project_id": "soak", "client_email": "soak@soak.iam.gserviceaccount.com",
            "private_key": key.read_text(), "token_uri": f"http://127.0.0.1:{port}/token"}))
        self.port, self.mode, self.lock = port, None, threading.Lock()
        self.calls = []  # (time, notificationId, device token, status)
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - the standard library's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/token":
                    return self.answer(200, {"access_token": "soak-access-token", "expires_in": 3600,
                                             "token_type": "Bearer"})
                message = json.loads(body or b"{}").get("message", {})
                mode = fake.mode
                if mode == "slow":
                    time.sleep(2.0)
                status = {"unavailable": 503, "throttled": 429}.get(mode, 200)
                with fake.lock:
                    fake.calls.append((time.time(), message.get("data", {}).get("notificationId"),
                                       message.get("token"), status))
                if status == 200:
                    return self.answer(200, {"name": f"projects/soak/messages/{uuid.uuid4()}"})
                self.answer(status, {"error": {"code": status, "status": "UNAVAILABLE" if status == 503
                                               else "RESOURCE_EXHAUSTED"}},
                            {"Retry-After": "1"} if status == 429 else {})

            def answer(self, status, document, headers=None):
                data = json.dumps(document).encode()
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True, name="fake-fcm").start()

    def environment(self):
        """The notification service's settings pointing FCM here."""
        return {"FCM_SERVICE_ACCOUNT_FILE": str(self.account), "FCM_BASE_URL": f"http://127.0.0.1:{self.port}"}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class FaultDriver(threading.Thread):
    """Faults one at a time, each after a quiet gap of `gap` seconds. The seed alone decides each fault's kind,
    target, gap and length (the draws never depend on timing); when each starts depends on how long the ones before
    took to recover."""

    def __init__(self, soak, seed, gap=(6.0, 14.0), kinds=FAULT_KINDS):
        super().__init__(daemon=True, name="faults")
        self.soak, self.rng, self.gap, self.kinds = soak, random.Random(seed), gap, kinds
        self.injected = []  # dicts: kind, target, start, end (recovered), seconds to recover

    def run(self):
        while True:
            gap, kind = self.rng.uniform(*self.gap), self.rng.choice(self.kinds)
            instance, down_for, share = self.rng.choice(self.soak.system.profile.all_instances), \
                self.rng.uniform(0.5, 3.0), self.rng.random()
            if self.soak.stopping.wait(gap):
                return
            start = time.time()
            try:
                target = self.inject(kind, instance, down_for, share)
            except BaseException as error:  # noqa: BLE001 - start_service raises SystemExit; nothing may stay down
                target = f"{instance} (failed: {type(error).__name__}: {error})"
                self.soak.recorder.problem(f"fault {kind} on {instance}: {type(error).__name__}: {error}")
                self.restore()
            self.injected.append({"kind": kind, "target": target, "start": start, "end": time.time(),
                                  "recover_seconds": round(time.time() - start, 2)})

    def inject(self, kind, instance, down_for, share):
        system = self.soak.system
        if kind == "kill":
            system.kill_service(instance)
            time.sleep(down_for)
            system.start_service(instance)
        elif kind == "term":
            status = system.stop_service(instance)
            if status != 0:
                self.soak.recorder.problem(f"{instance} did not stop cleanly on SIGTERM (exit status {status})")
            time.sleep(down_for)
            system.start_service(instance)
        elif kind == "postgres":
            instance = "postgres"
            system.crash_postgres()
            time.sleep(down_for + 0.5)
            system.resume_postgres()
            self.wait_until_all_ready()
        elif kind == "broker":
            instance = f"the broker, unanswering for {down_for * 2:.1f} s"
            system.pause_broker()
            time.sleep(down_for * 2)
            system.resume_broker()
            # Recovered when every outbox published what was written meanwhile.
            deadline = time.time() + 60
            while time.time() < deadline and any(
                    count for name, count in self.soak.pending_work().items() if "outbox" in name):
                time.sleep(0.2)
        elif kind == "push":
            fcm = self.soak.fcm
            if fcm is None:
                return "no fake FCM"
            mode = FakeFCM.MODES[int(share * len(FakeFCM.MODES))]
            fcm.mode = mode
            time.sleep(down_for * 2)
            fcm.mode = None
            instance = f"FCM {mode} for {down_for * 2:.1f} s"
            # Recovered when every delivery held up by it was sent (or failed and recorded).
            deadline = time.time() + 60
            while time.time() < deadline and self.soak.sql(
                    "SELECT count(*) FROM notification.deliveries WHERE platform = 'android' "
                    "AND status IN ('pending', 'sending')")[0][0] != "0":
                time.sleep(0.2)
        else:
            with AppSocket.registry_lock:
                sockets = sorted(AppSocket.registry, key=lambda client: (client.party.id, client.kind))
            # A third of the sockets, from a place the seed chose: the same draw whatever their number.
            count = max(1, len(sockets) // 3) if sockets else 0
            first = int(share * len(sockets)) if sockets else 0
            chosen = [sockets[(first + step) % len(sockets)] for step in range(count)]
            for client in chosen:
                client.cut()
            deadline = time.time() + 60
            while time.time() < deadline and not all(client.connected() for client in chosen):
                time.sleep(0.1)
            instance = f"{len(chosen)} client sockets"
        return instance

    def restore(self):
        """Everything up again after a fault that failed half way."""
        system = self.soak.system
        try:
            system.resume_postgres()
        except Exception:  # noqa: BLE001 - it was running
            pass
        try:
            system.resume_broker()
        except Exception:  # noqa: BLE001 - it was running
            pass
        if self.soak.fcm:
            self.soak.fcm.mode = None
        for name in system.profile.all_instances:
            if not system.running(name):
                try:
                    system.start_service(name)
                except BaseException as error:  # noqa: BLE001 - start_service raises SystemExit
                    self.soak.recorder.problem(f"{name} could not be started again: {error}")

    def wait_until_all_ready(self, seconds=120):
        for name in self.soak.system.profile.all_instances:
            self.soak.system.wait_until_ready(name, seconds)

    def active(self, moment, kinds=FAULT_KINDS, grace=2.0):
        return any(fault["start"] <= moment <= fault["end"] + grace and fault["kind"] in kinds
                   for fault in self.injected)

    def started_within(self, moment, seconds, kind, target):
        """Whether a fault of `kind` on an instance whose name starts with `target` began within `seconds` after
        `moment`."""
        return any(fault["kind"] == kind and fault["target"].startswith(target)
                   and moment <= fault["start"] <= moment + seconds for fault in self.injected)


class Soak:
    """Lanes of journeys and the fault driver over a running system, then the checker."""

    def __init__(self, system, seed, minutes, delivery_lanes=6, visit_lanes=2, faults=True, fcm=None):
        self.system, self.seed, self.minutes, self.fcm = system, seed, minutes, fcm
        self.recorder = Recorder()
        self.gateway = gateway_kit.Gateway(system.gateway_url, system.tls_certificate, system.bin)
        self.stopping = threading.Event()
        self.orders, self.visits = [], []
        self.lanes = [DeliveryLane(self, index) for index in range(delivery_lanes)]
        self.lanes += [VisitLane(self, delivery_lanes + index) for index in range(visit_lanes)]
        self.faults = FaultDriver(self, seed) if faults else None

    def run(self):
        self.started = time.time()
        for lane in self.lanes:
            lane.start()
        if self.faults:
            self.faults.start()
        self.stopping.wait(self.minutes * 60)
        self.stopping.set()
        deadline = time.time() + 300
        if self.faults:
            self.faults.join(max(1, deadline - time.time()))
        for lane in self.lanes:
            lane.join(max(1, deadline - time.time()))
        self.ended = time.time()
        return self.check()

    # The checker

    def sql(self, query):
        psql = shutil.which("psql") or sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))[-1]
        output = subprocess.run([str(psql), "-h", "127.0.0.1", "-p", str(self.system.profile.postgres_port),
                                 "-U", "postgres", "-d", "delivery", "-AtX", "-F", "\t", "-c", query],
                                check=True, capture_output=True, text=True).stdout
        return [line.split("\t") for line in output.splitlines() if line]

    def wait_until_drained(self, seconds=120):
        """Every outbox published and every delivery settled (or `seconds` passed)."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            pending = self.pending_work()
            if not any(pending.values()):
                return pending
            time.sleep(1)
        return self.pending_work()

    def pending_work(self):
        pending = {}
        for schema in ("orders", "chat", "allocation", "location", "notification"):
            pending[f"{schema}.outbox unpublished"] = int(self.sql(
                f"SELECT count(*) FROM {schema}.outbox WHERE published_at IS NULL")[0][0])
        pending["notification deliveries not settled"] = int(self.sql(
            "SELECT count(*) FROM notification.deliveries WHERE status IN ('pending', 'sending')")[0][0])
        pending["pickup sagas still open"] = int(self.sql(
            "SELECT count(*) FROM orders.pickup_sagas WHERE completed_at IS NULL AND failed_at IS NULL")[0][0])
        return pending

    def check(self):
        violations = [f"{lane.name} was still running 300 s after the end" for lane in self.lanes if lane.is_alive()]
        with self.recorder.lock:
            violations += list(self.recorder.problems)
        pending = self.wait_until_drained()
        violations += [f"{name}: {count}" for name, count in pending.items() if count]
        tables = [(schema, table) for schema in ("orders", "chat", "allocation", "location", "notification")
                  for table in ("dead_letters", "outbox_dead_letters")] + [("notification", "push_dead_letters")]
        for schema, table in tables:
            count = int(self.sql(f"SELECT count(*) FROM {schema}.{table}")[0][0])
            if count:
                violations.append(f"{schema}.{table}: {count} rows")
        failed_sagas = self.sql("SELECT order_id, failure FROM orders.pickup_sagas WHERE failed_at IS NOT NULL")
        violations += [f"pickup saga of order {order}: failed ({failure})" for order, failure in failed_sagas]
        violations += self.check_pushes()
        violations += self.check_order_logs()
        violations += self.check_offers()
        violations += self.check_positions()
        failed = [failure for lane in self.lanes for failure in lane.failures]
        for when, reason in failed:
            violations.append(f"a journey started at +{when - self.started:.0f} s did not finish: {reason}")
        for moment, method, route_name, status, code in self.recorder.server_errors:
            # Allowed: the gateway's 503 while an instance restarts, and a 503 while Postgres itself is down.
            restarting = self.faults and self.faults.active(moment, kinds=("kill", "term"))
            postgres_down = self.faults and self.faults.active(moment, kinds=("postgres",))
            if status == 503 and (code == "SERVICE_UNAVAILABLE" and restarting or postgres_down):
                self.recorder.count(f"503 {code} while {'Postgres was down' if postgres_down else 'restarting'}")
                continue
            violations.append(f"{status} {code or ''} on {method} {route_name} at +{moment - self.started:.0f} s"
                              f"{' during a fault' if restarting or postgres_down else ' outside any fault'}")
        return self.report(violations)

    def check_order_logs(self):
        """Each order of the soak's customers: sequence numbers 1..n with no gap, each event allowed in the state the
        log reached before it (status, whether a rider is assigned and has arrived: OrderRules), exactly one
        OrderPickedUp for a delivered order, and the order row in the state the log ends in, a final one."""
        before_pickup = {"Preparing", "ReadyForPickup"}
        logs = collections.defaultdict(list)
        for aggregate, sequence, kind in self.sql(
                "SELECT e.aggregate_id, e.sequence, e.event_type FROM orders.order_events e "
                "JOIN orders.orders o ON o.id = e.aggregate_id "
                f"WHERE e.aggregate_type = 'order' AND o.customer_id LIKE 'customer-soak{self.seed}-%' "
                "ORDER BY e.aggregate_id, e.sequence"):
            logs[aggregate].append((int(sequence), kind))
        statuses = dict(self.sql(
            f"SELECT id, status FROM orders.orders WHERE customer_id LIKE 'customer-soak{self.seed}-%'"))
        self.recorder.count("order event logs checked", len(statuses))
        missing = set(self.orders) - set(statuses)
        violations = [f"order {order_id} (placed by the soak) is not in the orders table" for order_id in missing]
        for order_id, status in statuses.items():
            log = logs.get(order_id, [])
            if [sequence for sequence, _ in log] != list(range(1, len(log) + 1)):
                violations.append(f"order {order_id}: event sequence {[s for s, _ in log]} has gaps or repeats")
            state, rider, arrived = None, False, False
            for sequence, kind in log:
                legal = {
                    "OrderCreated": state is None,
                    "OrderAccepted": state == "PendingVendorAcceptance",
                    "OrderReadyForPickup": state == "Preparing",
                    "RiderAssigned": state in before_pickup and not rider,
                    "RiderReassigned": state in before_pickup and rider,
                    "RiderUnassigned": state in before_pickup and rider,
                    "RiderAssignmentRefused": state in ("PendingVendorAcceptance", "InTransit", "Delivered",
                                                        "Cancelled"),
                    "RiderArrivedAtStore": state in before_pickup and rider and not arrived,
                    "OrderPickedUp": state == "ReadyForPickup" and rider and arrived,
                    "OrderDelivered": state == "InTransit",
                    "OrderCancelled": state in ("PendingVendorAcceptance", "Preparing", "ReadyForPickup", "InTransit"),
                }.get(kind, False)
                if not legal:
                    violations.append(f"order {order_id}: {kind} (#{sequence}) is not allowed in state {state} "
                                      f"(rider {'assigned' if rider else 'none'}, {'arrived' if arrived else 'away'})")
                state = {"OrderCreated": "PendingVendorAcceptance", "OrderAccepted": "Preparing",
                         "OrderReadyForPickup": "ReadyForPickup", "OrderPickedUp": "InTransit",
                         "OrderDelivered": "Delivered", "OrderCancelled": "Cancelled"}.get(kind, state)
                if kind in ("RiderAssigned", "RiderReassigned"):
                    rider, arrived = True, False
                elif kind == "RiderUnassigned":
                    rider, arrived = False, False
                elif kind == "RiderArrivedAtStore":
                    arrived = True
            pickups = sum(1 for _, kind in log if kind == "OrderPickedUp")
            if status == "Delivered" and pickups != 1:
                violations.append(f"order {order_id}: {pickups} OrderPickedUp events")
            if status != state:
                violations.append(f"order {order_id}: status {status}, but its log ends in {state}")
            if status not in TERMINAL_ORDER_STATUSES:
                violations.append(f"order {order_id}: left in {status}")
        for request_id, status in self.sql(
                f"SELECT id, status FROM orders.service_requests WHERE customer_id LIKE 'customer-soak{self.seed}-%'"):
            if status not in ("Completed", "Cancelled"):
                violations.append(f"service request {request_id}: left in {status}")
        return violations

    def topic(self, name):
        """Every record of a topic, decoded, from its start to its end now."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{self.system.profile.broker_port}",
                             "group.id": f"soak-check-{uuid.uuid4()}", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 10})
        try:
            partitions = consumer.list_topics(name, timeout=10).topics[name].partitions
            ends = {p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in partitions}
            consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in partitions])
            records, deadline = [], time.time() + 120
            remaining = {p for p, end in ends.items() if end > 0}
            # Tansu 0.6 answers the end with the last batch's first offset + 1; its fetches carry the true one.
            fetched_ends = {}
            while remaining and time.time() < deadline:
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                records.append(json.loads(message.value()))
                partition = message.partition()
                if partition not in fetched_ends:
                    fetched = consumer.get_watermark_offsets(TopicPartition(name, partition), cached=True)[1]
                    fetched_ends[partition] = max(ends[partition], fetched)
                if message.offset() + 1 >= fetched_ends[partition]:
                    remaining.discard(partition)
            if remaining:
                raise AssertionError(f"{name}: could not read partitions {sorted(remaining)} to their end")
            return records
        finally:
            consumer.close()

    def check_pushes(self):
        """Every push the services requested for the soak's parties became a notification, with one delivery for the
        party's one device (a unique key keeps it at one), settled. A delivery leased more than once may have reached
        the provider twice (the soak's log provider never fails, so only a crash or a lost write between the call and
        its record leads to a second lease)."""
        violations = []
        parties = f"soak{self.seed}-"
        requested = {record["payload"]["notificationId"] for record in self.topic("notifications.requests")
                     if record.get("type") == "PushRequested" and parties in record["payload"].get("userId", "")}
        rows = {notification: (user, status, int(deliveries)) for notification, user, status, deliveries in self.sql(
            "SELECT n.notification_id, n.user_id, n.status, count(d.id) FROM notification.notifications n "
            "LEFT JOIN notification.deliveries d ON d.notification_id = n.notification_id "
            f"WHERE n.user_id LIKE '%{parties}%' GROUP BY n.notification_id, n.user_id, n.status")}
        with_device = {user for (user,) in self.sql(
            f"SELECT DISTINCT user_id FROM notification.devices WHERE user_id LIKE '%{parties}%'")}
        self.recorder.count("pushes requested for the soak's parties", len(requested))
        for notification in sorted(requested - set(rows)):
            violations.append(f"push {notification} was requested but never became a notification")
        for notification, (user, status, deliveries) in rows.items():
            wanted = 1 if user in with_device else 0
            if deliveries != wanted:
                violations.append(f"push {notification} to {user} ({status}) has {deliveries} deliveries for "
                                  f"{wanted} device")
        for status, count in self.sql("SELECT status, count(*) FROM notification.deliveries GROUP BY status"):
            self.recorder.count(f"push deliveries {status}", int(count))
        leased_again = int(self.sql("SELECT count(*) FROM notification.deliveries "
                                    "WHERE status = 'sent' AND attempts > 1")[0][0])
        self.recorder.count("push deliveries leased more than once (the provider may have been called twice)",
                            leased_again)
        return violations + self.check_provider_calls(parties)

    def check_provider_calls(self, parties):
        """Exactly one accepted FCM call per Android delivery the service recorded as sent, none for one it recorded
        as failed, and no accepted call the service has no delivery for."""
        if self.fcm is None:
            return []
        with self.fcm.lock:
            calls = list(self.fcm.calls)
        accepted = collections.Counter((notification, token) for _, notification, token, status in calls
                                       if status == 200)
        refused = collections.Counter(status for _, _, _, status in calls if status != 200)
        self.recorder.count("FCM calls accepted", sum(accepted.values()))
        for status, count in sorted(refused.items()):
            self.recorder.count(f"FCM calls answered {status} (a push fault)", count)
        deliveries = {(notification, token): status for notification, token, status in self.sql(
            "SELECT d.notification_id, d.token, d.status FROM notification.deliveries d "
            "JOIN notification.notifications n ON n.notification_id = d.notification_id "
            f"WHERE d.platform = 'android' AND n.user_id LIKE '%{parties}%'")}
        first_accepted = {}
        for moment, notification, token, status in calls:
            if status == 200:
                first_accepted.setdefault((notification, token), moment)
        violations = []
        for key, status in sorted(deliveries.items()):
            wanted = 1 if status == "sent" else 0
            if accepted[key] == wanted:
                continue
            # A notification instance that dies between the provider's answer and its record cannot know the call
            # was made: the delivery is sent again once its lease runs out (the app drops the copy by its
            # notificationId). Only that is allowed.
            if accepted[key] == 2 and status == "sent" and self.faults and self.faults.started_within(
                    first_accepted[key], 2.0, kind="kill", target="notification-service"):
                self.recorder.count("pushes sent twice: the notification instance died before recording the first")
                continue
            violations.append(f"push {key[0]}: FCM accepted {accepted[key]} calls for a delivery {status}")
        soak_calls = {key for key in accepted if key[1] and parties in key[1]}
        for key in sorted(soak_calls - set(deliveries)):
            violations.append(f"push {key[0]}: FCM accepted a call the service has no delivery for")
        return violations

    def check_offers(self):
        """Every offer decided; no rider ever held two offers at once; no order accepted by two riders."""
        violations = []
        for status, count in self.sql("SELECT status, count(*) FROM allocation.offers GROUP BY status"):
            self.recorder.count(f"offers {status}", int(count))
            if status == "pending":
                violations.append(f"{count} offers still pending after every journey ended")
        # No rider got an order while holding another: each order's hold runs from its rider's assignment to its
        # delivery (or cancellation) in the order's own log.
        holds = collections.defaultdict(list)
        for order_id, rider, held_from, held_until in self.sql(
                "SELECT a.aggregate_id, a.envelope->'payload'->'rider'->>'id', extract(epoch FROM a.occurred_at), "
                "coalesce(extract(epoch FROM (SELECT min(e.occurred_at) FROM orders.order_events e "
                "WHERE e.aggregate_id = a.aggregate_id AND e.sequence > a.sequence "
                "AND e.event_type IN ('OrderDelivered', 'OrderCancelled', 'RiderUnassigned', 'RiderReassigned'))), "
                "1e12) FROM orders.order_events a WHERE a.event_type IN ('RiderAssigned', 'RiderReassigned')"):
            holds[rider].append((float(held_from), float(held_until), order_id))
        for rider, spans in holds.items():
            spans.sort()
            for (_, first_until, first), (second_from, _, second) in zip(spans, spans[1:]):
                if second_from < first_until:
                    violations.append(f"rider {rider} was given order {second} while holding {first}")
        for order_id, count in self.sql("SELECT order_id, count(*) FROM allocation.offers WHERE status = 'accepted' "
                                        "GROUP BY order_id HAVING count(*) > 1"):
            violations.append(f"order {order_id}: {count} accepted offers")
        return violations

    def check_positions(self):
        """Positions are never written to the location service's tables (only each job's destination is)."""
        columns = self.sql("SELECT table_name, column_name FROM information_schema.columns "
                           "WHERE table_schema = 'location' AND column_name ~ '(lat|lng|position)' "
                           "AND column_name NOT LIKE 'destination%'")
        violations = [f"location.{table}.{column} could hold a position" for table, column in columns]
        # Nor do they pass through its outbox (positions go straight to the broker).
        rows = int(self.sql("SELECT count(*) FROM location.outbox WHERE event_type = 'PositionUpdated'")[0][0])
        if rows:
            violations.append(f"location.outbox holds {rows} PositionUpdated rows")
        return violations

    def report(self, violations):
        recorder, minutes = self.recorder, (self.ended - self.started) / 60
        completed = [outcome for lane in self.lanes for _, _, outcome in lane.completed]
        faults = self.faults.injected if self.faults else []
        by_kind = collections.defaultdict(list)
        for fault in faults:
            by_kind[fault["kind"]].append(fault["recover_seconds"])
        latencies = {}
        for path, samples in sorted(recorder.latencies.items()):
            split = {"during faults": [], "outside faults": []}
            for moment, seconds in samples:
                split["during faults" if self.faults and self.faults.active(moment) else "outside faults"].append(
                    seconds * 1000)
            latencies[path] = {window: {"count": len(values), "p50_ms": percentile(values, 0.5),
                                        "p95_ms": percentile(values, 0.95), "p99_ms": percentile(values, 0.99)}
                               for window, values in split.items()}
        status_classes = collections.Counter()
        for (_, _, status), count in recorder.answers.items():
            status_classes[f"{status // 100}xx" if status not in (502, 503, 504) else str(status)] += count
        return {
            "seed": self.seed, "minutes": round(minutes, 2),
            "journeys completed": dict(collections.Counter(completed)),
            "journeys per minute": round(len(completed) / minutes, 1) if minutes else 0,
            "journeys failed": sum(len(lane.failures) for lane in self.lanes),
            "faults by kind": {kind: len(times) for kind, times in sorted(by_kind.items())},
            "recovery seconds by kind (p50, max)": {kind: (percentile(times, 0.5), max(times))
                                                    for kind, times in sorted(by_kind.items())},
            "events lost": recorder.counts.get("events lost", 0),
            "duplicates seen by a client": recorder.counts.get("duplicates seen by a client", 0),
            "latency": latencies,
            "http answers": dict(status_classes),
            "counts": dict(sorted(recorder.counts.items())),
            "faults": faults,
            "violations": violations,
        }


def describe(report):
    """The report as text for a terminal."""
    lines = [f"soak: seed {report['seed']}, {report['minutes']} min, "
             f"{sum(report['journeys completed'].values())} journeys completed "
             f"({report['journeys per minute']}/min: {report['journeys completed']}), "
             f"{report['journeys failed']} failed",
             f"faults: {report['faults by kind']}; recovery s (p50, max): {report['recovery seconds by kind (p50, max)']}",
             f"events lost: {report['events lost']}; duplicates seen by a client: {report['duplicates seen by a client']}",
             f"http answers: {report['http answers']}", "latency (ms):"]
    for path, windows in report["latency"].items():
        for window, figures in windows.items():
            if figures["count"]:
                lines.append(f"  {path:<52} {window:<15} n={figures['count']:<5} p50={figures['p50_ms']:.1f} "
                             f"p95={figures['p95_ms']:.1f} p99={figures['p99_ms']:.1f}")
    lines.append("counts: " + json.dumps(report["counts"]))
    lines.append(f"violations: {len(report['violations'])}")
    lines += [f"  - {violation}" for violation in report["violations"][:50]]
    return "\n".join(lines)
