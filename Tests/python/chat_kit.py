"""The chat of an order as its parties use it: sockets on /chat, joining the room, sending, and the history."""
import uuid

from gateway_kit import AssignedOrder, until
from recovering_client import parse


def chat_socket(party):
    return party.socket("chat", ["message", "chat_closed", "access_revoked"])


def join_when_open(client, order_id):
    """The `join` acknowledgement once the room is open (the chat service follows orders.events)."""
    return until(lambda: (lambda answer: answer if answer.get("ok") else None)(
        client.call("join", {"orderId": order_id})), "the chat to open")


def send(client, order_id, text=None, quick_reply_id=None, client_message_id=None):
    request = {"orderId": order_id, "clientMessageId": client_message_id or str(uuid.uuid4())}
    if quick_reply_id:
        request["quickReplyId"] = quick_reply_id
    else:
        request["text"] = text
    return client.call("message", request)


def history(party, order_id, limit=100):
    """The chat's messages as its REST route gives them, newest first."""
    return party.call("GET", f"/v1/orders/{order_id}/chat/messages?limit={limit}")["messages"]


class ChatInTransit:
    """An order picked up, with the customer's and the rider's chat sockets joined to its room; closed on exit."""

    def __init__(self, cast):
        self.order = AssignedOrder(cast)
        self.customer, self.rider = chat_socket(cast.customer), chat_socket(cast.rider)

    def __enter__(self):
        self.order.pick_up()
        join_when_open(self.customer, self.order.id)
        join_when_open(self.rider, self.order.id)
        return self

    def __exit__(self, *_):
        for client in (self.customer, self.rider, self.order):
            client.close()


def message_events(packets):
    """The `message` EVENT packets among raw packets, as (message id, offset)."""
    found = []
    for packet in packets:
        kind, _, _, data = parse(packet)
        if kind == 2 and data[0] == "message":
            found.append((data[1]["id"], data[-1]))
    return found


class RecoveringChat:
    """An order picked up, whose customer chats on a recovering raw-protocol socket and rider on a python-socketio
    one (through the gateway unless instance URLs are given), both joined; closed on exit."""

    def __init__(self, cast, customer_url=None, rider_url=None):
        self.order = AssignedOrder(cast)
        self.customer = cast.customer.recovering_socket("chat", url=customer_url)
        self.rider = cast.rider.recovering_socket("chat", url=rider_url) if rider_url else chat_socket(cast.rider)

    def __enter__(self):
        self.order.pick_up()
        join_when_open(self.customer, self.order.id)
        join_when_open(self.rider, self.order.id)
        return self

    def heard(self, text):
        """The rider sends `text`; returns its id once the customer got it."""
        message_id = send(self.rider, self.order.id, text)["id"]
        until(lambda: message_id in [m["id"] for m in self.customer.received("message")], "the message to arrive")
        return message_id

    def __exit__(self, *_):
        for client in (self.customer, self.rider, self.order):
            client.close()
