"""Clients of the whole system through its gateway (HTTPS and WSS only), the demo's cast, and the two journeys: a
delivery from order to proof of delivery, and a technician's visit with travel mode. The system tests assert on
what the journeys return; `make demo` plays them against `make run` and prints what each party sees."""
import base64
import itertools
import math
import subprocess
import threading
import time
import uuid
from pathlib import Path

import requests
import socketio

from recovering_client import RecoveringSocket
from scenario_kit import SocketClient, now

ROOT = Path(__file__).resolve().parents[2]
DEV_KEY_DIR = ROOT / ".local" / "dev-keys"

# Each service's Socket.IO endpoint behind the gateway, and the namespace on it.
SOCKETS = {
    "orders": ("orders/socket.io", "/orders"),
    "chat": ("chat/socket.io", "/chat"),
    "rider": ("allocation/socket.io", "/rider"),
    "tracking": ("location/socket.io", "/tracking"),
}

# A 1x1 PNG: what a rider's camera would upload as proof of delivery.
PROOF_PHOTO = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


class ApiError(AssertionError):
    """An answer other than the one expected, with the service's error code."""

    def __init__(self, response, expected):
        self.status = response.status_code
        try:
            self.code = response.json().get("error", {}).get("code")
        except ValueError:
            self.code = None
        super().__init__(f"{response.request.method} {response.url}: expected {expected}, got {self.status} "
                         f"{response.text[:300]}")


class Gateway:
    """The system as a client sees it: one HTTPS origin whose certificate is the gateway's self-signed one."""

    def __init__(self, url, certificate, executables, key_dir=DEV_KEY_DIR):
        self.url = url.rstrip("/")
        self.certificate = str(certificate)
        self.devtoken = Path(executables) / "devtoken"
        self.key_dir = Path(key_dir)
        self.tokens = {}

    def token(self, user_id, role, name):
        """A development token, minted by the devtoken tool with the key pair the services trust."""
        key = (user_id, role, name)
        if key not in self.tokens:
            self.tokens[key] = subprocess.run(
                [self.devtoken, "--sub", user_id, "--role", role, "--name", name, "--key-dir", self.key_dir],
                check=True, capture_output=True, text=True).stdout.strip()
        return self.tokens[key]

    def party(self, user_id, role, name):
        return Party(self, user_id, role, name)

    def session(self, token=None):
        session = requests.Session()
        # Only the gateway's certificate is trusted (REQUESTS_CA_BUNDLE and proxies from the environment would win).
        session.trust_env = False
        session.verify = self.certificate
        if token:
            session.headers["Authorization"] = f"Bearer {token}"
        return session


class Party:
    """One signed-in user: HTTP calls and Socket.IO connections through the gateway."""

    def __init__(self, gateway, user_id, role, name):
        self.gateway, self.id, self.role, self.name = gateway, user_id, role, name
        self.token = gateway.token(user_id, role, name)
        self.http = gateway.session(self.token)

    def request(self, method, path, **options):
        """The raw answer, retried while the gateway says the service behind it is (re)starting."""
        deadline = time.time() + options.pop("retry_unavailable_for", 60)
        while True:
            response = self.http.request(method, self.gateway.url + path, timeout=15, **options)
            if response.status_code not in (502, 503, 504) or time.time() > deadline:
                return response
            time.sleep(0.5)

    def call(self, method, path, expect=200, **options):
        """The decoded body of an answer with status `expect`; anything else raises ApiError."""
        response = self.request(method, path, **options)
        if response.status_code != expect:
            raise ApiError(response, expect)
        return response.json() if response.content else None

    def refusal(self, method, path, **options):
        """(status, error code) of an answer expected to be an error."""
        response = self.request(method, path, **options)
        assert response.status_code >= 400, f"{method} {path} succeeded: {response.text[:300]}"
        return response.status_code, response.json()["error"]["code"]

    def socket(self, kind, events, reconnection=True, on_event=None, retry_unavailable_for=60):
        """A Socket.IO client of one service's namespace; connecting is retried while the service is (re)starting,
        and with `reconnection` a dropped connection is re-established (with the same token)."""
        path, namespace = SOCKETS[kind]
        deadline = time.time() + retry_unavailable_for
        while True:
            try:
                return SocketClient(self.gateway.url, namespace, self.token, events, on_event=on_event, path=path,
                                    http_session=self.gateway.session(), reconnection=reconnection)
            except socketio.exceptions.ConnectionError as error:
                if "503" not in str(error) and "502" not in str(error) or time.time() > deadline:
                    raise
                time.sleep(0.5)

    def recovering_socket(self, kind, url=None):
        """A raw-protocol client of one namespace that recovers its session as socket.io-client 4.x does; through
        the gateway, or straight to a service instance at `url`."""
        path, namespace = SOCKETS[kind]
        if url:
            path = "socket.io"
        return RecoveringSocket(url or self.gateway.url, namespace, {"token": self.token}, path=path,
                                ca_file=self.gateway.certificate)

    def register_device(self, platform="android"):
        # APNs device tokens are 64 hexadecimal digits; FCM tokens use a URL-safe alphabet.
        token = uuid.uuid4().hex * 2 if platform == "ios" else f"{platform}-{self.id}-{uuid.uuid4().hex[:8]}"
        return self.call("PUT", "/v1/devices", json={"platform": platform, "token": token})


_spots = itertools.count()


class Spot:
    """A place of its own for one scenario: a vendor, a delivery address 2 km away, and where riders wait. Spots are
    100 km apart, so one scenario's riders are never the nearest to another's vendor."""

    def __init__(self, index=None, area="Koramangala", at=None):
        index = next(_spots) if index is None else index
        self.lat, self.lng = at or (8.0 + (index % 40) * 0.9, 70.0 + (index // 40) * 0.9)
        self.area = area

    def address(self, line1, north_km=0.0, east_km=0.0, area=None):
        lat = self.lat + north_km / 111.0
        lng = self.lng + east_km / (111.0 * math.cos(math.radians(self.lat)))
        return {"line1": line1, "area": area or self.area, "lat": round(lat, 6), "lng": round(lng, 6)}

    def fix(self, north_km=0.0, east_km=0.0, accuracy=8.0, age_seconds=0.0):
        place = self.address("", north_km, east_km)
        return {"lat": place["lat"], "lng": place["lng"], "accuracyMeters": accuracy, "recordedAt": now(-age_seconds)}


def route(start, end, steps):
    """`steps` positions from `start` to `end` (dicts with lat and lng), evenly spaced, the last one at `end`."""
    return [{"lat": start["lat"] + (end["lat"] - start["lat"]) * i / steps,
             "lng": start["lng"] + (end["lng"] - start["lng"]) * i / steps} for i in range(1, steps + 1)]


def distance_meters(start, end):
    """The great-circle distance between two (lat, lng) pairs."""
    (lat1, lng1), (lat2, lng2) = [(math.radians(a), math.radians(b)) for a, b in (start, end)]
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lng2 - lng1) / 2) ** 2
    return 2 * 6_371_000 * math.asin(math.sqrt(h))


class Cast:
    """The parties of one journey."""

    def __init__(self, gateway, tag, spot):
        self.spot = spot
        self.admin = gateway.party(f"admin-{tag}", "admin", "Operations")
        self.vendor = gateway.party(f"vendor-{tag}", "vendor", "Spice Route")
        self.customer = gateway.party(f"customer-{tag}", "customer", "Asha")
        self.rider = gateway.party(f"rider-{tag}", "rider", "Ravi")
        self.second_rider = gateway.party(f"rider2-{tag}", "rider", "Meena")
        self.technician = gateway.party(f"technician-{tag}", "technician", "Kiran")
        self.vendor_address = spot.address("12 Market Road")
        self.delivery_address = spot.address("4 Lake View, Flat 12B", north_km=1.6, east_km=1.2)

    def ensure_vendor(self):
        response = self.admin.request("POST", "/v1/vendors", json={
            "id": self.vendor.id, "name": self.vendor.name, "address": self.vendor_address})
        if response.status_code not in (201, 409):
            raise ApiError(response, "201 or 409")
        return self.admin.call("GET", f"/v1/vendors/{self.vendor.id}")


def new_cast(gateway, spot=None):
    cast = Cast(gateway, uuid.uuid4().hex[:10], spot or Spot())
    cast.ensure_vendor()
    return cast


# Koramangala, Bengaluru: where the demo's vendor, customer and riders are.
DEMO_SPOT = Spot(index=0, at=(12.9352, 77.6245))


def seed_demo(gateway):
    """The demo's data: one vendor (and the parties whose tokens `make run` prints). Safe to run again."""
    cast = Cast(gateway, "demo", DEMO_SPOT)
    cast.ensure_vendor()
    return cast


def describe_running_system(system, cast):
    lines = ["", "The delivery platform is running (Ctrl-C stops everything).", "",
             f"  gateway    {system.gateway_url}   (http://127.0.0.1:{system.profile.gateway_http_port} redirects)",
             f"  TLS        self-signed: curl --cacert {system.tls_certificate} {system.gateway_url}/health",
             f"  console    {system.gateway_url}/console/   (pick a demo party; one browser window or profile each)"]
    for name in system.profile.all_instances:
        lines.append(f"  {name:<21}http://127.0.0.1:{system.profile.port(name)}  (/health /ready /metrics)")
    lines += [f"  Postgres   postgres://postgres@127.0.0.1:{system.profile.postgres_port}/delivery",
              f"  Kafka      127.0.0.1:{system.profile.broker_port} (Tansu)",
              f"  logs       {system.runtime}/logs/", "",
              f"  Demo data: vendor '{cast.vendor.name}' ({cast.vendor.id}) at {cast.vendor_address['line1']}, "
              f"{cast.vendor_address['area']}. Tokens (12 h):"]
    for party in (cast.customer, cast.vendor, cast.rider, cast.second_rider, cast.technician, cast.admin):
        lines.append(f"    {party.role:<11}{party.id:<20}{party.token}")
    lines += ["", "  Try: make demo    (plays an order and a technician visit through the gateway)", ""]
    return "\n".join(lines)


def quiet(*_):
    pass


def until(probe, what, seconds=30):
    """The first truthy result of `probe()`, polled every 0.2 s; AssertionError after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# The steps of a delivery, each one or two calls through the gateway; the journeys and the criteria tests share them.

def place_order(cast, requires_photo_proof=True, payment_mode="prepaid"):
    return cast.customer.call("POST", "/v1/orders", expect=201, headers={"Idempotency-Key": str(uuid.uuid4())}, json={
        "vendorId": cast.vendor.id, "deliveryAddress": cast.delivery_address, "paymentMode": payment_mode,
        "totalAmount": 349.0, "requiresPhotoProof": requires_photo_proof})


def go_online(rider, spot, north_km=0.4, east_km=0.3):
    return rider.call("PUT", "/v1/riders/me/availability",
                      json={"status": "online", "location": spot.fix(north_km, east_km)})


def offer_for(rider, offers, order_id, seconds=60):
    """The rider's offer for this order: from the socket, or (after the socket was cut) the rider's pending offer."""
    def probe():
        for offer in offers.received("offer") if offers else []:
            if offer["orderId"] == order_id:
                return offer
        response = rider.request("GET", "/v1/riders/me/offer")
        if response.status_code == 200 and response.json().get("orderId") == order_id:
            return response.json()
        return None
    return until(probe, f"an offer for order {order_id} to reach {rider.id}", seconds)


def assigned_rider(party, order_id):
    return until(lambda: party.call("GET", f"/v1/orders/{order_id}").get("rider"), "the rider to be assigned")


def offer_made_while_away(cast, rider_socket):
    """The cast's rider goes online with `rider_socket` (and a device, so an offer can reach them by push); an order
    becomes ready while the socket is down. Returns the order's id once the rider holds its offer."""
    cast.rider.register_device("android")
    go_online(cast.rider, cast.spot)
    order_id = place_order(cast)["id"]
    cast.vendor.call("POST", f"/v1/orders/{order_id}/accept")
    rider_socket.drop()
    cast.vendor.call("POST", f"/v1/orders/{order_id}/ready")
    until(lambda: cast.rider.request("GET", "/v1/riders/me/offer").status_code == 200, "the offer to be made")
    return order_id


def assert_offer_recovered_once(rider_socket, order_id):
    """The rider's socket recovered, got the offer for `order_id` as one missed emit, and confirms receipt."""
    assert rider_socket.recovered
    offers = rider_socket.wait_for("offer", 1)
    assert [offer["orderId"] for offer in offers] == [order_id]
    assert rider_socket.call("received", {"offerId": offers[0]["offerId"]})["offerId"] == offers[0]["offerId"]
    assert len(rider_socket.received("offer")) == 1


class AssignedOrder:
    """An order placed, accepted, ready, offered to the cast's rider (who is online with a socket), accepted and
    assigned: where most criteria start. `offers` is the rider's /rider socket."""

    def __init__(self, cast, requires_photo_proof=True):
        self.cast = cast
        self.order = place_order(cast, requires_photo_proof)
        self.id = self.order["id"]
        cast.vendor.call("POST", f"/v1/orders/{self.id}/accept")
        self.offers = cast.rider.socket(
            "rider", ["offer", "offer_expired", "offer_rescinded", "order_cancelled", "order_unassigned"])
        go_online(cast.rider, cast.spot)
        cast.vendor.call("POST", f"/v1/orders/{self.id}/ready")
        self.offer = offer_for(cast.rider, self.offers, self.id)
        self.offers.call("received", {"offerId": self.offer["offerId"]})
        cast.rider.call("POST", f"/v1/offers/{self.offer['offerId']}/accept")
        self.rider = assigned_rider(cast.customer, self.id)

    def pick_up(self):
        self.cast.rider.call("POST", f"/v1/orders/{self.id}/arrived")
        return self.cast.rider.call("POST", f"/v1/orders/{self.id}/pickup",
                                    headers={"Idempotency-Key": str(uuid.uuid4())})

    def close(self):
        self.offers.close()


class ServiceVisit:
    """A service request created by the cast's customer and assigned to its technician; `watcher` is the customer's
    /tracking socket, already tracking the request. `sender_url` connects the technician's socket straight to that
    location instance instead of through the gateway."""

    def __init__(self, cast, sender_url=None):
        self.cast = cast
        self.request = cast.customer.call("POST", "/v1/service-requests", expect=201, json={
            "serviceAddress": cast.delivery_address, "description": "The kitchen tap leaks"})
        self.id = self.request["id"]
        cast.admin.call("POST", f"/v1/service-requests/{self.id}/assign",
                        json={"technicianId": cast.technician.id, "technicianName": cast.technician.name})
        self.watcher = cast.customer.socket("tracking", ["location", "eta", "tracking_status"])
        self.sender = (cast.technician.recovering_socket("tracking", url=sender_url) if sender_url
                       else cast.technician.socket("tracking", []))

    def status(self, status):
        return self.cast.technician.call("POST", f"/v1/service-requests/{self.id}/status", json={"status": status})

    def travel_mode(self, active):
        """Switches travel mode; the location service learns of the request from orders.events, so right after the
        status change it may still answer 404 for a moment (as an app would, this retries)."""
        def attempt():
            response = self.cast.technician.request("POST", f"/v1/tracking/{self.id}/travel-mode",
                                                    json={"active": active})
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                raise ApiError(response, 200)
            return response.json()
        return until(attempt, "the location service to know the request", seconds=10)

    def view(self, state=None):
        """The customer's tracking view (the `track` acknowledgement), waiting until it is in `state` if given."""
        return until(lambda: (lambda v: v if "error" not in v and (state is None or v["state"] == state) else None)(
            self.watcher.call("track", {"jobId": self.id})), f"the tracking view to be {state}")

    def position(self, point, recorded_at=None):
        return self.sender.call("position", {"lat": point["lat"], "lng": point["lng"], "accuracyMeters": 6,
                                             "headingDegrees": 30, "speedMps": 8, "recordedAt": recorded_at or now()})

    def statuses(self, state):
        return [status for status in self.watcher.received("tracking_status") if status["state"] == state]

    def close(self):
        self.watcher.close()
        self.sender.close()


class DeliveryJourney:
    """An order from placement to proof of delivery, every step through the gateway. `narrate(party, text)` is told
    what each party sees; `after(step)` runs after each named step (the system tests kill services there)."""

    STEPS = ("placed", "ready", "offered", "accepted", "picked_up", "tracked", "chatted", "delivered")

    def __init__(self, cast, narrate=quiet, after=quiet, positions=6, position_interval=0.3):
        self.cast, self.narrate, self.after = cast, narrate, after
        self.positions, self.position_interval = positions, position_interval
        self.seen = {}
        self.sockets = []

    def socket(self, party, kind, events, on_event=None):
        client = party.socket(kind, events, on_event=on_event)
        self.sockets.append(client)
        return client

    def play(self):
        try:
            return self._play()
        finally:
            for client in self.sockets:
                client.close()

    def _play(self):
        cast, say = self.cast, self.narrate
        customer, vendor, rider = cast.customer, cast.vendor, cast.rider
        customer.register_device("android")
        rider.register_device("ios")

        updates = self.socket(customer, "orders", ["order_update"])
        dashboard = self.socket(vendor, "orders", ["order_update"])
        order = place_order(cast)
        self.order_id = order_id = order["id"]
        say(customer, f"placed order {order_id[:8]} at {order['vendor']['name']} for ₹{order['totalAmount']:.0f}: "
                      f"{order['status']}")
        dashboard.wait_for("order_update")
        say(vendor, f"new order {order_id[:8]} on the dashboard")
        self.after("placed")

        vendor.call("POST", f"/v1/orders/{order_id}/accept")
        say(vendor, "accepted the order")
        def confirm_receipt(_client, event, data):
            # As the app's offer handler does: confirm receipt the moment the offer arrives, whatever the screen
            # (or a test's fault injection) is doing.
            if event == "offer":
                threading.Thread(target=rider.request, args=("POST", f"/v1/offers/{data['offerId']}/received"),
                                 daemon=True).start()

        offers = self.socket(rider, "rider", ["offer", "offer_expired", "offer_rescinded"], on_event=confirm_receipt)
        go_online(rider, cast.spot)
        say(rider, "went online (precise GPS fix)")
        vendor.call("POST", f"/v1/orders/{order_id}/ready")
        say(vendor, "marked the order ready for pickup")
        self.after("ready")

        offer = offer_for(rider, offers, order_id)
        self.seen["offer"] = offer
        say(rider, f"offer on screen: {offer['vendor']['name']} ({offer['vendor']['address']}) -> "
                   f"{offer['deliveryArea']}, {offer['distanceKm']:.1f} km away, {offer['tripDistanceKm']:.1f} km trip, earn ₹{offer['earnings']['amount']:.0f}, "
                   f"{offer['timeoutSeconds']} s countdown")
        rider.call("POST", f"/v1/offers/{offer['offerId']}/received")
        self.after("offered")

        rider.call("POST", f"/v1/offers/{offer['offerId']}/accept")
        say(rider, "accepted the offer")
        assigned = assigned_rider(customer, order_id)
        say(customer, f"{assigned['name']} is your rider")
        self.after("accepted")

        rider.call("POST", f"/v1/orders/{order_id}/arrived")
        say(rider, "arrived at the store")
        picked = rider.call("POST", f"/v1/orders/{order_id}/pickup", headers={"Idempotency-Key": str(uuid.uuid4())})
        say(rider, f"confirmed pickup: the order is {picked['status']}")
        self.after("picked_up")

        self.seen["map"] = self._track(customer, rider, order_id, start=cast.vendor_address, end=cast.delivery_address)
        self.after("tracked")

        self.seen["chat"] = self._chat(customer, rider, order_id)
        self.after("chatted")

        upload = rider.call("POST", f"/v1/orders/{order_id}/proof-photo", expect=201, data=PROOF_PHOTO,
                            headers={"Content-Type": "image/png"})
        say(rider, f"uploaded the proof-of-delivery photo ({upload['proofPhoto']['sizeBytes']} bytes)")
        delivered = rider.call("POST", f"/v1/orders/{order_id}/deliver")
        say(rider, f"delivered: the order is {delivered['status']}")
        self.seen["chat_closed"] = self.chat_customer.wait_for("chat_closed", seconds=20)
        if self.seen["chat_closed"]:
            say(customer, f"chat: \"{self.seen['chat_closed'][0]['text']}\"")
        self.seen["updates"] = until(lambda: (lambda types: types if "OrderDelivered" in types else None)(
            [update["type"] for update in updates.received("order_update")]), "the delivered update", 20)
        say(customer, f"order updates received live: {', '.join(self.seen['updates'])}")
        self.after("delivered")

        self.seen["pushes"] = {party.id: pushes_of(cast.admin, party.id) for party in (customer, rider)}
        for party in (customer, rider):
            for push in self.seen["pushes"][party.id]:
                devices = ", ".join(f"{d['platform']} {d['status']}" for d in push["deliveries"])
                say(party, f"push ({push['kind']}): \"{push['title']}\" / \"{push['body']}\" -> {devices}")
        self.seen["order"] = customer.call("GET", f"/v1/orders/{order_id}")
        # Allocation learns the delivery from orders.events: until it has (moments; after an instance died, until its
        # consumer group reassigned the dead member's partitions) going offline is RIDER_ON_DELIVERY.
        until(lambda: rider.request("PUT", "/v1/riders/me/availability", json={"status": "offline"}).ok,
              "allocation to learn the delivery", 30)
        say(rider, "went offline")
        return self.seen

    def _track(self, customer, courier, job_id, start, end):
        say = self.narrate

        def show(_, event, data):
            if event == "location":
                say(customer, f"map: {courier.name} at {data['lat']:.5f}, {data['lng']:.5f}")
            elif event == "eta":
                say(customer, f"ETA: {data.get('text')}")
            else:
                say(customer, f"map status: {data['state']} - {data.get('message', '')}")

        watcher = self.socket(customer, "tracking", ["location", "eta", "tracking_status"], on_event=show)
        view = until(lambda: (lambda v: v if v.get("state") == "live" else None)(
            watcher.call("track", {"jobId": job_id})), "the map to go live")
        say(customer, f"map opened: {view['state']} - {view.get('message', '')}")
        sender = self.socket(courier, "tracking", [])
        answers, sent = [], []
        # The journey is fast-forwarded: each position is stamped as if the courier rode the route at 12 m/s, the
        # last one now, so a deployment's POSITION_MAX_SPEED_MPS does not take the steps for GPS jumps.
        step_seconds = distance_meters((start["lat"], start["lng"]), (end["lat"], end["lng"])) / self.positions / 12
        for index, point in enumerate(route(start, end, self.positions)):
            sent.append(point)
            answers.append(sender.call("position", {
                "lat": point["lat"], "lng": point["lng"], "accuracyMeters": 6, "headingDegrees": 45, "speedMps": 12,
                "recordedAt": now(-(self.positions - 1 - index) * step_seconds)}))
            time.sleep(self.position_interval)
        last = (sent[-1]["lat"], sent[-1]["lng"])
        locations = until(lambda: (lambda got: got if got and (got[-1]["lat"], got[-1]["lng"]) == last else None)(
            watcher.received("location")), "the map to show the last position", seconds=10)
        etas = watcher.wait_for("eta", seconds=10)
        return {"view": view, "answers": answers, "sent": sent, "locations": locations, "etas": etas,
                "statuses": watcher.received("tracking_status")}

    def _chat(self, customer, rider, order_id):
        say = self.narrate
        self.chat_customer = self.socket(customer, "chat", ["message", "chat_closed"])
        chat_rider = self.socket(rider, "chat", ["message", "chat_closed"])
        joined = until(lambda: (lambda a: a if a.get("ok") else None)(
            self.chat_customer.call("join", {"orderId": order_id})), "the chat to open")
        chat_rider.call("join", {"orderId": order_id})
        say(customer, f"chat with {joined['rider']['name']} opened")
        sent = self.chat_customer.call("message", {"orderId": order_id, "clientMessageId": str(uuid.uuid4()),
                                                   "text": "Hi! The gate code is 4321."})
        say(customer, f"sent \"Hi! The gate code is 4321.\" ({sent['status']})")
        heard = chat_rider.wait_for("message")
        if heard:
            say(rider, f"chat: {heard[0]['senderName']}: {heard[0]['text']}")
        replies = rider.call("GET", "/v1/chat/quick-replies")["replies"]
        chat_rider.call("message", {"orderId": order_id, "clientMessageId": str(uuid.uuid4()),
                                    "quickReplyId": replies[0]["id"]})
        answer = self.chat_customer.wait_for("message")
        if answer:
            say(customer, f"chat: {answer[0]['senderName']}: {answer[0]['text']}")
        return {"sent": sent, "rider_heard": heard, "customer_heard": answer, "quick_reply": replies[0]}


class ServiceVisitJourney(DeliveryJourney):
    """A technician's visit: requested, assigned, on the way (first without, then with travel mode), tracked live
    on the customer's map with an ETA, then arrived and completed."""

    def _play(self):
        cast, say = self.cast, self.narrate
        customer, technician, admin = cast.customer, cast.technician, cast.admin
        request = customer.call("POST", "/v1/service-requests", expect=201, json={
            "serviceAddress": cast.delivery_address, "description": "The kitchen tap leaks"})
        self.request_id = job_id = request["id"]
        say(customer, f"asked for a technician: request {job_id[:8]} is {request['status']}")
        assigned = admin.call("POST", f"/v1/service-requests/{job_id}/assign",
                              json={"technicianId": technician.id, "technicianName": technician.name})
        say(admin, f"assigned {assigned['technician']['name']}: {assigned['status']}")
        watcher = self.socket(customer, "tracking", ["location", "eta", "tracking_status"])
        technician.call("POST", f"/v1/service-requests/{job_id}/status", json={"status": "OnTheWay"})
        say(technician, "is on the way (travel mode still off)")
        waiting = until(lambda: (lambda v: v if v["state"] == "waiting_for_travel_mode" else None)(
            watcher.call("track", {"jobId": job_id})), "the waiting-for-travel-mode view")
        say(customer, f"screen: {waiting['message']}")
        self.seen["waiting"] = waiting
        technician.call("POST", f"/v1/tracking/{job_id}/travel-mode", json={"active": True})
        say(technician, "switched travel mode on")
        self.seen["map"] = self._track(customer, technician, job_id, start=cast.vendor_address,
                                       end=cast.delivery_address)
        technician.call("POST", f"/v1/service-requests/{job_id}/status", json={"status": "WorkInProgress"})
        ended = until(lambda: [s for s in watcher.received("tracking_status") if s["state"] == "ended"],
                            "tracking to end")
        say(customer, f"map replaced by: {ended[-1]['message']}")
        self.seen["ended"] = ended[-1]
        done = technician.call("POST", f"/v1/service-requests/{job_id}/status", json={"status": "Completed"})
        say(technician, f"finished the job: {done['status']}")
        self.seen["request"] = done
        return self.seen


def map_followed_the_route(seen_map):
    """The watcher's map never moved back along the positions sent and ended at the last one. A position may be
    passed over: `location` is a latest-only emit, and one still waiting to be sent is replaced by a newer one
    (docs/architecture.md), as when the watcher's socket is still upgrading from long-polling. A position may be
    shown twice in a row: a socket that recovers on another instance gets each room's latest value again, which it
    may have had already."""
    sent = [(point["lat"], point["lng"]) for point in seen_map["sent"]]
    shown = [(location["lat"], location["lng"]) for location in seen_map["locations"]]
    indexes = [sent.index(point) for point in shown if point in sent]
    return (len(indexes) == len(shown) and indexes == sorted(indexes) and bool(indexes)
            and indexes[-1] == len(sent) - 1)


def pushes_of(admin, user_id, kinds=None, count=1, seconds=20):
    """The user's notifications as the notification service recorded them (the log provider's deliveries), once at
    least `count` of the wanted kinds are there and none is still pending, or `seconds` pass."""
    deadline = time.time() + seconds
    while True:
        notifications = admin.call("GET", f"/v1/notifications?userId={user_id}&limit=100")["notifications"]
        wanted = [n for n in notifications if kinds is None or n["kind"] in kinds]
        settled = all(n["status"] != "pending" for n in wanted)
        if len(wanted) >= count and settled or time.time() > deadline:
            return wanted
        time.sleep(0.3)
