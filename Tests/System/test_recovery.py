"""Connection state recovery (Socket.IO v4.6) through the gateway, checked packet by packet with a client that
speaks the wire protocol as socket.io-client 4.x does: a phone whose connection drops gets back its socket id,
its rooms and every emit it missed, each once and in order."""
import time

from chat_kit import RecoveringChat, join_when_open, message_events, send
from gateway_kit import assert_offer_recovered_once, offer_made_while_away
from recovering_client import parse, strictly_increasing


def test_a_fresh_connect_answers_a_pid_and_every_emit_to_a_room_carries_an_increasing_offset(cast):
    with RecoveringChat(cast) as chat:
        sent = [send(chat.rider, chat.order.id, f"on my way {n}")["id"] for n in range(3)]
        chat.customer.wait_for("message", 3)
        packets = chat.customer.packets_of(1)
        kind, namespace, _, answer = parse(packets[0])
        assert (kind, namespace) == (0, "/chat") and set(answer) == {"sid", "pid"}
        events = message_events(packets)
        assert [message_id for message_id, _ in events] == sent
        offsets = [offset for _, offset in events]
        assert all(isinstance(offset, str) for offset in offsets) and strictly_increasing(offsets)
        # Acknowledgements carry no offset: the join's answer is its one argument.
        acks = [parse(packet)[3] for packet in packets if packet.startswith("3")]
        assert acks and all(len(arguments) == 1 and isinstance(arguments[0], dict) for arguments in acks)


def test_a_dropped_phone_gets_every_missed_message_once_in_order_before_the_connect_answer(cast):
    with RecoveringChat(cast) as chat:
        customer = chat.customer
        first = chat.heard("picked up")
        sid, pid = customer.sid, customer.pid
        customer.drop()
        missed = [send(chat.rider, chat.order.id, f"while you were away {n}")["id"] for n in range(3)]
        # socket.io-client's first attempt comes 0.5 to 1.5 s after the drop: the server has seen it by then.
        time.sleep(1)
        customer.connect()
        assert customer.recovered and (customer.sid, customer.pid) == (sid, pid)
        again = customer.packets_of(2)
        # The missed emits come first, in order, then the CONNECT answer with the same sid and pid.
        assert [message_id for message_id, _ in message_events(again[:3])] == missed
        assert parse(again[3])[:2] == (0, "/chat") and parse(again[3])[3] == {"sid": sid, "pid": pid}
        # The room is back without joining again: live messages arrive.
        live = send(chat.rider, chat.order.id, "at your door")["id"]
        received = [message["id"] for message in customer.wait_for("message", 5)]
        assert received == [first, *missed, live]


def test_a_reconnect_with_a_pid_the_server_does_not_hold_connects_afresh(cast):
    with RecoveringChat(cast) as chat:
        customer = chat.customer
        chat.heard("hello")
        customer.pid = "not-a-session-the-server-knows"
        customer.reconnect()
        assert not customer.recovered and customer.pid != "not-a-session-the-server-knows"
        # Not recovered: the app reloads the chat over REST and joins again; nothing was replayed.
        assert message_events(customer.packets_of(2)) == []
        assert join_when_open(customer, chat.order.id)["messages"]


def test_another_users_token_cannot_take_over_a_session(cast):
    with RecoveringChat(cast) as chat:
        customer = chat.customer
        chat.heard("hello")
        customer.drop()
        send(chat.rider, chat.order.id, "for the customer only")
        customer.auth = {"token": cast.second_rider.token}
        customer.connect()
        assert not customer.recovered
        assert message_events(customer.packets_of(2)) == []


def test_a_socket_that_left_the_namespace_is_not_recovered(cast):
    """Leaving (DISCONNECT, as socket.disconnect() sends it) is not a dropped connection: the session ends, and a
    later connect with its pid starts afresh without replaying what was emitted since."""
    with RecoveringChat(cast) as chat:
        customer = chat.customer
        chat.heard("hello")
        pid = customer.pid
        customer.close()
        send(chat.rider, chat.order.id, "after the customer left")
        customer.connect()
        assert not customer.recovered and customer.pid != pid
        assert message_events(customer.packets_of(2)) == []


def test_a_phone_that_received_nothing_yet_still_recovers(cast):
    """socket.io-client sends no offset before its first event; the server replays everything since the socket
    connected (Socket.IO itself cannot recover such a client)."""
    with RecoveringChat(cast) as chat:
        customer = chat.customer
        customer.drop()
        assert customer.offset is None
        missed = send(chat.rider, chat.order.id, "first message, while you were away")["id"]
        customer.connect()
        assert customer.recovered
        assert [message["id"] for message in customer.wait_for("message", 1)] == [missed]


def test_a_rider_offered_an_order_while_the_connection_was_down_gets_the_offer_once(cast):
    """The offer emitted while the rider's socket was away is replayed on recovery, and the pending offer the
    service sends to a rider who connects is not sent again on top of it."""
    rider = cast.rider.recovering_socket("rider")
    try:
        order_id = offer_made_while_away(cast, rider)
        rider.connect()
        assert_offer_recovered_once(rider, order_id)
    finally:
        rider.close()
