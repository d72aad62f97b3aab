"""Scenarios driven by the stock python-socketio client against the project's Socket.IO server.

Each prints one JSON object on stdout for the Swift test to check. Usage:
  client_scenarios.py basic URL TOKEN TRANSPORTS SECONDS
  client_scenarios.py rooms URL_OF_A_AND_B URL_OF_C TOKEN_A TOKEN_B TOKEN_C
"""
import json
import sys
import time

import socketio

NAMESPACE = "/secure"


def connect(url, token, transports=None):
    client = socketio.Client(reconnection=False)
    events = []
    client.on("welcome", lambda data: events.append(["welcome", data]), namespace=NAMESPACE)
    client.on("said", lambda data: events.append(["said", data]), namespace=NAMESPACE)
    auth = {"token": token} if token else None
    client.connect(url, namespaces=[NAMESPACE], auth=auth, transports=transports, wait_timeout=10)
    return client, events


def basic(url, token, transports, seconds):
    result = {}
    try:
        client, events = connect(url, token, transports.split(","))
    except socketio.exceptions.ConnectionError as error:
        result["connected"] = False
        result["error"] = str(error)
        print(json.dumps(result))
        return
    result["connected"] = True
    result["whoami"] = client.call("whoami", {}, namespace=NAMESPACE, timeout=5)
    result["bad_payload"] = client.call("join", {"rooom": "typo"}, namespace=NAMESPACE, timeout=5)
    time.sleep(float(seconds))
    result["transport"] = client.transport()
    result["still_connected"] = client.connected
    result["after_wait"] = client.call("whoami", {}, namespace=NAMESPACE, timeout=5)
    result["events"] = events
    client.disconnect()
    print(json.dumps(result))


def rooms(url_ab, url_c, token_a, token_b, token_c):
    a, a_events = connect(url_ab, token_a)
    b, b_events = connect(url_ab, token_b)
    c, _ = connect(url_c, token_c)
    a.call("join", {"room": "room-a"}, namespace=NAMESPACE, timeout=5)
    b.call("join", {"room": "room-b"}, namespace=NAMESPACE, timeout=5)
    # Another instance's adapter may still be joining its consumer group: say again until A hears it.
    deadline = time.time() + 20
    sent = 0
    while time.time() < deadline and not any(event[0] == "said" for event in a_events):
        c.call("say", {"room": "room-a", "text": "hello room a"}, namespace=NAMESPACE, timeout=5)
        sent += 1
        time.sleep(0.5)
    time.sleep(0.5)
    result = {
        "sent": sent,
        "a": [event[1] for event in a_events if event[0] == "said"],
        "b": [event[1] for event in b_events if event[0] == "said"],
    }
    for client in (a, b, c):
        client.disconnect()
    print(json.dumps(result))


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    {"basic": basic, "rooms": rooms}[command](*arguments)
