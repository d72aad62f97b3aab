"""CUS-032: the customer chats with the rider of an active order, through the gateway's /chat namespace (WSS) and
the chat service's REST routes."""
import uuid

import pytest

import gateway_kit
from chat_kit import ChatInTransit, chat_socket, history, join_when_open, send
from gateway_kit import AssignedOrder, PROOF_PHOTO, go_online, place_order, pushes_of, until

CLOSED_TEXT = "This chat is now closed"


def error_code(answer):
    return answer.get("error", {}).get("code")


def test_CUS_032_AC_001_chat_is_open_once_the_order_is_in_transit(cast):
    """The backend's part of the enabled 'Chat with Rider' button: for an In Transit order the customer can join
    the chat (writable, naming the assigned rider) and a message sent there is accepted."""
    order = AssignedOrder(cast)
    customer = chat_socket(cast.customer)
    try:
        picked = order.pick_up()
        assert picked["status"] == "InTransit"
        joined = join_when_open(customer, order.id)
        assert joined["readOnly"] is False
        assert joined["rider"] == {"id": cast.rider.id, "name": cast.rider.name}
        assert joined["messages"] == []
        ack = send(customer, order.id, "Are you close?")
        assert ack["status"] == "sent" and ack["id"]
    finally:
        customer.close()
        order.close()


def test_CUS_032_AC_002_message_reaches_the_rider_live_or_as_a_push(cast):
    """The customer's message is acknowledged as sent and stored; the rider's open chat gets it in real time
    (under 2 s), and once the rider has left the chat screen the next message reaches the rider as a push."""
    cast.rider.register_device("ios")
    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider

        ack = send(customer, order.id, "Hi! The gate code is 4321.")
        assert ack["status"] == "sent"
        heard = rider.wait_for("message", seconds=2)
        assert len(heard) == 1
        assert heard[0]["id"] == ack["id"]
        assert heard[0]["text"] == "Hi! The gate code is 4321."
        assert (heard[0]["senderId"], heard[0]["senderRole"], heard[0]["senderName"]) == (
            cast.customer.id, "customer", cast.customer.name)
        assert customer.received("message") == []  # the sender's own window shows it from the acknowledgement

        assert rider.call("leave", {"orderId": order.id}) == {"ok": True}
        second = send(customer, order.id, "I'm on the 3rd floor.")
        assert second["status"] == "sent"
        pushes = pushes_of(cast.admin, cast.rider.id, kinds=["chat_message"])
        # Only the message the rider was not in the chat for is pushed.
        assert [(p["title"], p["body"]) for p in pushes] == [(cast.customer.name, "I'm on the 3rd floor.")]
        assert [d["platform"] for d in pushes[0]["deliveries"]] == ["ios"]
        assert len(rider.received("message")) == 1
        texts = [m["text"] for m in history(cast.rider, order.id)]
        assert texts == ["I'm on the 3rd floor.", "Hi! The gate code is 4321."]


def test_CUS_032_AC_002_a_backgrounded_app_whose_socket_lingers_gets_the_push_too(cast):
    """The rider's app went to the background but its socket is still open (the OS has not suspended it yet): it
    says so with `app_state`, and the customer's message then comes as a push as well as on the socket; back in
    the foreground, messages arrive on the socket only."""
    cast.rider.register_device("android")
    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider
        assert rider.call("app_state", {"state": "background"}) == {"ok": True}
        backgrounded = send(customer, order.id, "Are you close?")
        assert [m["id"] for m in rider.wait_for("message", seconds=2)] == [backgrounded["id"]]
        pushes = pushes_of(cast.admin, cast.rider.id, kinds=["chat_message"])
        assert [(p["body"], p["status"]) for p in pushes] == [("Are you close?", "sent")]

        assert rider.call("app_state", {"state": "foreground"}) == {"ok": True}
        foreground = send(customer, order.id, "I can see you now")
        assert [m["id"] for m in rider.wait_for("message", count=2, seconds=2)][-1] == foreground["id"]
        # A user's pushes keep their order (keyed by user end to end): once a later one is recorded, one for the
        # foreground message would have been too.
        assert rider.call("leave", {"orderId": order.id}) == {"ok": True}
        send(customer, order.id, "Leave it at the door")
        pushes = pushes_of(cast.admin, cast.rider.id, kinds=["chat_message"], count=2)
        assert sorted(p["body"] for p in pushes) == ["Are you close?", "Leave it at the door"]
        assert rider.call("app_state", {"state": "asleep"})["error"]["code"] == "VALIDATION_FAILED"


def test_CUS_032_AC_003_customer_in_background_gets_a_push_with_a_preview(cast):
    """While the customer's app has the chat open the rider's message arrives live; once the app is in the
    background (left the chat, socket closed) the rider's message becomes a push with the sender and a preview."""
    cast.customer.register_device("android")
    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider
        send(rider, order.id, "Picked up, on my way")
        assert [m["text"] for m in customer.wait_for("message", seconds=2)] == ["Picked up, on my way"]

        assert customer.call("leave", {"orderId": order.id}) == {"ok": True}
        customer.close()
        long_text = "I am at the main gate but the guard will not let me in without your confirmation, " \
                    "could you please call the security desk and tell them I am your delivery rider?"
        assert len(long_text) > 100
        assert send(rider, order.id, long_text)["status"] == "sent"
        pushes = pushes_of(cast.admin, cast.customer.id, kinds=["chat_message"])
        assert len(pushes) == 1
        push = pushes[0]
        assert push["title"] == cast.rider.name
        assert push["body"] == long_text[:97] + "..."
        assert push["priority"] == "high"
        sent = until(lambda: [p for p in pushes_of(cast.admin, cast.customer.id, kinds=["chat_message"])
                              if p["status"] == "sent"], "the chat push to be sent")
        assert [d["platform"] for d in sent[0]["deliveries"]] == ["android"]


@pytest.mark.parametrize("ending", ["Delivered", "Cancelled"])
def test_CUS_032_AC_004_chat_becomes_read_only_when_the_order_ends(cast, ending):
    """When the order is Delivered (rider) or Cancelled (admin, while in transit) both chat windows get
    'This chat is now closed', new messages are refused with CHAT_CLOSED, and the history stays readable."""
    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider
        assert send(customer, order.id, "Please hurry")["status"] == "sent"
        assert rider.wait_for("message")

        if ending == "Delivered":
            cast.rider.call("POST", f"/v1/orders/{order.id}/proof-photo", expect=201, data=PROOF_PHOTO,
                            headers={"Content-Type": "image/png"})
            ended = cast.rider.call("POST", f"/v1/orders/{order.id}/deliver")
        else:
            ended = cast.admin.call("POST", f"/v1/orders/{order.id}/cancel", json={"reason": "customer asked support"})
        assert ended["status"] == ending

        for client in (customer, rider):
            closed = client.wait_for("chat_closed", seconds=20)
            assert closed == [{"orderId": order.id, "text": CLOSED_TEXT}]
        assert error_code(send(customer, order.id, "Thanks!")) == "CHAT_CLOSED"
        assert error_code(send(rider, order.id, "Bye")) == "CHAT_CLOSED"

        messages = history(cast.customer, order.id)
        assert [(m["senderRole"], m["text"]) for m in messages] == [("system", CLOSED_TEXT), ("customer", "Please hurry")]
        rejoined = customer.call("join", {"orderId": order.id})
        assert rejoined["readOnly"] is True
        assert [m["text"] for m in rejoined["messages"]] == ["Please hurry", CLOSED_TEXT]


def test_CUS_032_AC_005_no_chat_before_a_rider_is_assigned(cast):
    """While the order is Pending Vendor Acceptance, Preparing, or Ready For Pickup without a rider, joining its
    chat is refused with CHAT_NOT_AVAILABLE (so the app hides the option); it opens once a rider is assigned."""
    customer = chat_socket(cast.customer)
    offers = cast.rider.socket("rider", ["offer"])
    try:
        order = place_order(cast)
        order_id = order["id"]
        assert order["status"] == "PendingVendorAcceptance"
        assert error_code(customer.call("join", {"orderId": order_id})) == "CHAT_NOT_AVAILABLE"
        # The chat service knows the order (its room waits for a rider), and still refuses.
        until(lambda: cast.customer.request("GET", f"/v1/orders/{order_id}/chat/messages").status_code == 200,
              "the chat service to know the order")
        assert error_code(customer.call("join", {"orderId": order_id})) == "CHAT_NOT_AVAILABLE"
        assert error_code(send(customer, order_id, "hello?")) == "FORBIDDEN"

        assert cast.vendor.call("POST", f"/v1/orders/{order_id}/accept")["status"] == "Preparing"
        assert error_code(customer.call("join", {"orderId": order_id})) == "CHAT_NOT_AVAILABLE"
        assert cast.vendor.call("POST", f"/v1/orders/{order_id}/ready")["status"] == "ReadyForPickup"
        assert error_code(customer.call("join", {"orderId": order_id})) == "CHAT_NOT_AVAILABLE"

        go_online(cast.rider, cast.spot)
        offer = gateway_kit.offer_for(cast.rider, offers, order_id)
        offers.call("received", {"offerId": offer["offerId"]})
        cast.rider.call("POST", f"/v1/offers/{offer['offerId']}/accept")
        joined = join_when_open(customer, order_id)
        assert joined["rider"]["id"] == cast.rider.id
    finally:
        customer.close()
        offers.close()


def test_CUS_032_AC_006_resend_after_reconnecting_is_stored_once(cast):
    """The app resends a message whose acknowledgement it lost with the same clientMessageId after reconnecting
    and joining again: the backend answers with the first acknowledgement and the rider gets it once."""
    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider
        client_message_id = str(uuid.uuid4())
        first = send(customer, order.id, "Ring twice please", client_message_id=client_message_id)
        assert first["status"] == "sent"
        customer.close()  # connectivity lost before the app saw the acknowledgement

        reconnected = chat.customer = chat_socket(cast.customer)
        # A reconnected socket joins again before resending.
        assert error_code(send(reconnected, order.id, "Ring twice please", client_message_id=client_message_id)) \
            == "FORBIDDEN"
        join_when_open(reconnected, order.id)
        again = send(reconnected, order.id, "Ring twice please", client_message_id=client_message_id)
        assert again == first

        assert len(rider.wait_for("message")) == 1
        stored = [m for m in history(cast.customer, order.id) if m["clientMessageId"] == client_message_id]
        assert [(m["id"], m["text"]) for m in stored] == [(first["id"], "Ring twice please")]
        # A message with a new id after the reconnect is a new message.
        assert send(reconnected, order.id, "Thanks")["id"] != first["id"]
        until(lambda: [m for m in rider.received("message") if m["text"] == "Thanks"], "the rider to get 'Thanks'")
        assert [m["text"] for m in rider.received("message")] == ["Ring twice please", "Thanks"]


def test_CUS_032_AC_007_quick_reply_is_sent_to_the_rider(cast):
    """The customer's quick-reply templates are listed, and sending one by its id delivers its text to the rider
    at once and stores it; an id that is not one of the customer's templates is refused."""
    replies = cast.customer.call("GET", "/v1/chat/quick-replies")
    assert replies["role"] == "customer"
    by_id = {reply["id"]: reply["text"] for reply in replies["replies"]}
    assert by_id["leave-at-door"] == "Please leave it at the door"

    with ChatInTransit(cast) as chat:
        order, customer, rider = chat.order, chat.customer, chat.rider
        ack = send(customer, order.id, quick_reply_id="leave-at-door")
        assert ack["status"] == "sent"
        heard = rider.wait_for("message", seconds=2)
        assert [(m["id"], m["text"], m["senderRole"]) for m in heard] == [
            (ack["id"], "Please leave it at the door", "customer")]
        assert [m["text"] for m in history(cast.rider, order.id)] == ["Please leave it at the door"]

        rider_only = cast.rider.call("GET", "/v1/chat/quick-replies")["replies"][0]["id"]
        assert rider_only not in by_id
        assert error_code(send(customer, order.id, quick_reply_id=rider_only)) == "VALIDATION_FAILED"


def reassign(admin, order_id, rider_id):
    return admin.call("POST", f"/v1/allocations/{order_id}/reassign", expect=202, json={"riderId": rider_id})


def test_CUS_032_8_2_an_operator_reassigns_the_order_and_chat_and_tracking_follow_the_new_rider(cast):
    """Operations give an order not yet picked up to another rider: the new rider is told and holds it, the order
    names them, the previous rider loses the chat room at once (`access_revoked`), is told (`order_unassigned`) and
    is Online again; the new rider chats with the customer, picks up, and the map follows the new rider."""
    order = AssignedOrder(cast)
    first, second = cast.rider, cast.second_rider
    first_chat, customer_chat = chat_socket(first), chat_socket(cast.customer)
    second_offers = second.socket("rider", ["offer", "order_assigned"])
    second_chat = chat_socket(second)
    try:
        join_when_open(first_chat, order.id)
        join_when_open(customer_chat, order.id)
        go_online(second, cast.spot, north_km=0.6)

        assert cast.customer.refusal("POST", f"/v1/allocations/{order.id}/reassign",
                                     json={"riderId": second.id}) == (403, "FORBIDDEN")
        assert cast.admin.refusal("POST", f"/v1/allocations/{order.id}/reassign",
                                  json={"riderId": f"nobody-{uuid.uuid4().hex[:8]}"}) == (409, "RIDER_NOT_AVAILABLE")
        assert cast.admin.refusal("POST", f"/v1/allocations/{uuid.uuid4()}/reassign",
                                  json={"riderId": second.id}) == (404, "NOT_FOUND")
        decision = reassign(cast.admin, order.id, second.id)
        assert (decision["riderId"], decision["previousRiderId"], decision["status"]) == (
            second.id, first.id, "assigned")

        assert second_offers.wait_for("order_assigned")[0]["orderId"] == order.id
        until(lambda: cast.customer.call("GET", f"/v1/orders/{order.id}")["rider"]["id"] == second.id,
              "the order to name the new rider")
        assert first_chat.wait_for("access_revoked")[0]["orderId"] == order.id
        unassigned = order.offers.wait_for("order_unassigned")[0]
        assert unassigned["orderId"] == order.id and "re-assigned" in unassigned["message"]
        assert error_code(send(first_chat, order.id, "Still coming?")) == "FORBIDDEN"
        assert first.refusal("POST", f"/v1/orders/{order.id}/arrived") == (403, "NOT_ASSIGNED_RIDER")
        until(lambda: first.call("GET", "/v1/riders/me")["status"] == "online", "the previous rider to be free")
        me = second.call("GET", "/v1/riders/me")
        assert (me["status"], me["currentOrderId"]) == ("delivering", order.id)

        joined = join_when_open(second_chat, order.id)
        assert joined["rider"] == {"id": second.id, "name": second.name}
        assert send(customer_chat, order.id, "New rider? The gate code is 4321.")["status"] == "sent"
        assert second_chat.wait_for("message")[0]["text"] == "New rider? The gate code is 4321."

        second.call("POST", f"/v1/orders/{order.id}/arrived")
        picked = second.call("POST", f"/v1/orders/{order.id}/pickup", headers={"Idempotency-Key": str(uuid.uuid4())})
        assert picked["status"] == "InTransit" and picked["rider"]["id"] == second.id
        # Allocation learns of the pickup from orders.events; from then on the order keeps its rider.
        until(lambda: cast.admin.call("GET", f"/v1/allocations/{order.id}")["status"] == "in_transit",
              "allocation to see the pickup")
        assert cast.admin.refusal("POST", f"/v1/allocations/{order.id}/reassign",
                                  json={"riderId": first.id}) == (409, "ORDER_NOT_REASSIGNABLE")
        assert cast.admin.refusal("POST", f"/v1/allocations/{order.id}/release") == (409, "ORDER_NOT_REASSIGNABLE")
        until(lambda: cast.customer.request("GET", f"/v1/tracking/{order.id}").status_code == 200, "tracking")
        fix = cast.spot.fix(north_km=0.3, east_km=0.2)
        first.call("POST", "/v1/couriers/me/positions", json={"positions": [cast.spot.fix(north_km=0.9)]})
        assert second.call("POST", "/v1/couriers/me/positions", json={"positions": [fix]})["results"] == ["applied"]
        shown = until(lambda: cast.customer.call("GET", f"/v1/tracking/{order.id}").get("lastLocation"),
                      "the new rider on the map")
        assert (shown["lat"], shown["lng"]) == (fix["lat"], fix["lng"])
    finally:
        for client in (first_chat, customer_chat, second_offers, second_chat, order):
            client.close()


def test_CUS_032_8_2_an_operator_releases_the_order_back_to_allocation(cast):
    """Operations take an order from its rider before pickup: the rider is told and free, loses the chat, the
    order has no rider (the customer's chat waits for the next one), and the next rider is offered it at once."""
    order = AssignedOrder(cast)
    first, second = cast.rider, cast.second_rider
    first_chat = chat_socket(first)
    second_offers = second.socket("rider", ["offer"])
    try:
        join_when_open(first_chat, order.id)
        go_online(second, cast.spot, north_km=0.6)
        decision = cast.admin.call("POST", f"/v1/allocations/{order.id}/release", expect=202)
        assert (decision.get("riderId"), decision["previousRiderId"]) == (None, first.id)

        assert order.offers.wait_for("order_unassigned")[0]["orderId"] == order.id
        assert first_chat.wait_for("access_revoked")[0]["orderId"] == order.id
        until(lambda: cast.customer.call("GET", f"/v1/orders/{order.id}").get("rider") is None, "the rider to go")
        assert first.call("GET", "/v1/riders/me")["status"] == "online"
        assert cast.admin.refusal("POST", f"/v1/allocations/{order.id}/release") == (409, "NO_RIDER_ASSIGNED")

        offer = gateway_kit.offer_for(second, second_offers, order.id)
        second.call("POST", f"/v1/offers/{offer['offerId']}/accept")
        until(lambda: (cast.customer.call("GET", f"/v1/orders/{order.id}").get("rider") or {}).get("id") == second.id,
              "the next rider to be assigned")
        assert first.refusal("POST", f"/v1/orders/{order.id}/arrived") == (403, "NOT_ASSIGNED_RIDER")
    finally:
        for client in (first_chat, second_offers, order):
            client.close()
