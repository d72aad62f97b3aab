"""CUS-032 scenarios driven by stock python-socketio clients against the chat service.

The order lifecycle arrives on orders.events exactly as the order service publishes it: the scenarios produce
those events themselves (as the order service would). Each prints one JSON object with what the clients saw.
  chat_scenarios.py conversation CONFIG_JSON
  chat_scenarios.py reassign CONFIG_JSON
  chat_scenarios.py reassign_race CONFIG_JSON   (config tries: how many orders at once)
  chat_scenarios.py offline CONFIG_JSON
  chat_scenarios.py thousand CONFIG_JSON   (two instances: config url and secondUrl)
  chat_scenarios.py killed_after_send CONFIG_JSON   (url: an instance that kills itself once a message committed)
"""
import json
import os
import sys
import threading
import time
import uuid

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from recovering_client import RecoveringSocket  # noqa: E402
from scenario_kit import Orders, SocketClient  # noqa: E402

NS = "/chat"


class ChatClient(SocketClient):
    def __init__(self, url, token):
        super().__init__(url, NS, token, ("message", "chat_closed", "access_revoked"))

    def join_when_open(self, order, seconds=20):
        """Joins, retrying while the room is not open yet (the projection follows orders.events)."""
        deadline = time.time() + seconds
        while True:
            answer = self.call("join", {"orderId": order})
            if "error" not in answer or answer["error"]["code"] != "CHAT_NOT_AVAILABLE" or time.time() > deadline:
                return answer
            time.sleep(0.2)

    def join_when_rider(self, order, rider_id, seconds=20):
        """Joins once the room names `rider_id` as its rider (the projection follows orders.events)."""
        deadline = time.time() + seconds
        while True:
            answer = self.call("join", {"orderId": order})
            if answer.get("rider", {}).get("id") == rider_id or time.time() > deadline:
                return answer
            time.sleep(0.1)


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
    # One character (a letter and 20,000 combining accents): over the limit in bytes.
    result["one_huge_character"] = customer.call(
        "message", {"orderId": order, "clientMessageId": "c-6", "text": "a" + "\u0301" * 20000})
    result["nul_character"] = customer.call("message", {"orderId": order, "clientMessageId": "c-7", "text": "a\u0000b"})
    result["long_client_id"] = customer.call("message", {"orderId": order, "clientMessageId": "é" * 40, "text": "hi"})
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
    result["customer_ack"] = customer.call("message", {"orderId": config["orderId"], "clientMessageId": "c-1", "text": "Hi Ria"})
    result["new_got"] = new.wait_for("message", 1)
    time.sleep(0.5)
    result["old_got"] = old.received("message")
    for client in (customer, old, new):
        client.close()
    print(json.dumps(result))


def reassign_race(config):
    """Issue 34's probe: while an order is re-assigned, the old rider's app sends `join` as fast as the
    acknowledgements come back. Once a join is refused (the room's projection changed) the joining stops; then the
    new rider joins and the customer writes. The old rider's socket must not get that message, however the joins
    and the revocation interleaved; nor must a second socket of theirs whose connection keeps dropping and being
    recovered meanwhile (a recovered session's rooms are checked again). `tries` orders run at once, each with its
    own sockets."""
    tries = int(config["tries"])
    outcomes = [None] * tries

    def attempt(index):
        order = str(uuid.uuid4())
        orders = Orders({**config, "orderId": order})
        orders.created()
        orders.assigned(config["riderId"], "Ravi")
        customer = ChatClient(config["url"], config["customerToken"])
        old = ChatClient(config["url"], config["riderToken"])
        new = ChatClient(config["url"], config["newRiderToken"])
        try:
            customer.join_when_open(order)
            old.join_when_open(order)
            recovering = RecoveringSocket(config["url"], NS, {"token": config["riderToken"]})
            recovering.call("join", {"orderId": order})
            answers, recoveries = [], []
            stop = threading.Event()

            def keep_recovering():
                while not stop.is_set():
                    recovering.reconnect()
                    recoveries.append(recovering.recovered)
                    time.sleep(0.05)

            def keep_joining():
                # Until a join is refused: the room's projection of the re-assignment committed.
                deadline = time.time() + 90
                while time.time() < deadline:
                    answer = old.call("join", {"orderId": order})
                    answers.append(answer)
                    if answer.get("error", {}).get("code") == "FORBIDDEN":
                        return

            joiner, recoverer = threading.Thread(target=keep_joining), threading.Thread(target=keep_recovering)
            joiner.start()
            recoverer.start()
            orders.reassigned(config["newRiderId"], "Ria", config["riderId"])
            joiner.join(100)
            time.sleep(0.3)
            stop.set()
            recoverer.join(20)
            deadline = time.time() + 20
            while not [r for r in old.received("access_revoked") if r["orderId"] == order] and time.time() < deadline:
                time.sleep(0.02)
            # The rider's sockets get access_revoked for each of their orders (this scenario runs several at once).
            revoked = [r for r in old.received("access_revoked") if r["orderId"] == order]
            new.join_when_rider(order, config["newRiderId"])
            time.sleep(0.5)
            customer.call("message", {"orderId": order, "clientMessageId": "after", "text": "Hi Ria"})
            new.wait_for("message", 1)
            time.sleep(0.5)
            outcomes[index] = {
                "joins": len(answers), "acceptedJoins": sum(1 for answer in answers if answer.get("ok")),
                "lastJoin": answers[-1] if answers else None, "revoked": len(revoked),
                "newGot": [message["text"] for message in new.received("message")],
                "oldGot": [message["text"] for message in old.received("message")],
                "recoveries": len(recoveries), "recovered": sum(recoveries),
                "recoveringGot": [message["text"] for message in recovering.received("message")],
                "oldSend": old.call("message", {"orderId": order, "clientMessageId": "o-1", "text": "still here?"}),
            }
        finally:
            for client in (customer, old, new, recovering):
                client.close()

    threads = [threading.Thread(target=attempt, args=(index,)) for index in range(tries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"tries": outcomes}))


def killed_after_send(config):
    """The customer's instance (config url) dies with SIGKILL right after the message's transaction committed,
    before it answers; the rider is on the other instance (secondUrl). The rider gets the message, once."""
    order = config["orderId"]
    orders = Orders(config)
    orders.created()
    orders.assigned(config["riderId"], "Ravi")
    rider = ChatClient(config["secondUrl"], config["riderToken"])
    customer = ChatClient(config["url"], config["customerToken"])
    result = {"customer_join": customer.join_when_open(order), "rider_join": rider.join_when_open(order)}
    customer.emit("message", {"orderId": order, "clientMessageId": "last-words", "text": "Gate code 1234"})
    rider.wait_for("message", 1, 15)
    time.sleep(1.5)  # anything doubled would arrive within this
    result["rider_got"] = [[m["text"], m["clientMessageId"]] for m in rider.received("message")]
    stored = history({**config, "http": config["secondUrl"]}, config["riderToken"], 100)
    result["stored"] = stored.get("texts", [])
    rider.close()
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


def thousand(config):
    """1,000 messages from a customer with a socket on each of two instances, to a rider with a device on each
    instance; every 200 messages both rider devices drop their connection and connect again (alternating which
    instance they reach), as phones do. Each device lists the ids its sockets received, and the full history is
    read at the end."""
    order = config["orderId"]
    orders = Orders(config)
    orders.created()
    orders.assigned(config["riderId"], "Ravi")
    urls = [config["url"], config["secondUrl"]]
    senders = [ChatClient(url, config["customerToken"]) for url in urls]
    for sender in senders:
        sender.join_when_open(order)
    devices = [[] for _ in urls]  # every socket each rider device had, oldest first

    def connect(device, round_):
        client = ChatClient(urls[(device + round_) % 2], config["riderToken"])
        client.join_when_open(order)
        devices[device].append(client)

    def caught_up(last):
        for device in devices:
            deadline = time.time() + 10
            while last not in [m["id"] for m in device[-1].received("message")] and time.time() < deadline:
                time.sleep(0.02)

    for device in range(2):
        connect(device, 0)
    acks = []
    for number in range(1000):
        if number and number % 200 == 0:
            # The phones drop once what was sent reached them (a message sent into the gap would be missed by the
            # socket and come with the reloaded history instead: not what this counts).
            caught_up(acks[-1].get("id"))
            for device in range(2):
                devices[device][-1].close()
                connect(device, number // 200)
        acks.append(senders[number % 2].call("message", {"orderId": order, "clientMessageId": f"m-{number}",
                                                          "text": f"message {number}"}))
    caught_up(acks[-1].get("id"))
    time.sleep(0.5)  # anything doubled would arrive within this
    stored = history(config, config["riderToken"], 100)
    result = {
        "acked": [ack.get("id") for ack in acks],
        "errors": [ack for ack in acks if "error" in ack][:3],
        "received": [[m["id"] for socket in device for m in socket.received("message")] for device in devices],
        "history": [message_id for page in stored.get("pages", []) for message_id in page],
    }
    for client in senders + [socket for device in devices for socket in device]:
        client.close()
    print(json.dumps(result))


if __name__ == "__main__":
    {"conversation": conversation, "reassign": reassign, "reassign_race": reassign_race, "offline": offline,
     "thousand": thousand, "killed_after_send": killed_after_send}[sys.argv[1]](json.loads(sys.argv[2]))
