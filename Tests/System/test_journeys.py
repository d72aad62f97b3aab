"""The whole journeys through the gateway: a delivery from order to proof of delivery, and a technician's visit."""
import gateway_kit


def test_delivery_journey(cast):
    seen = gateway_kit.DeliveryJourney(cast).play()
    assert seen["order"]["status"] == "Delivered"
    assert seen["order"]["proofPhoto"]["contentType"] == "image/png"
    assert seen["chat"]["rider_heard"][0]["text"] == "Hi! The gate code is 4321."
    assert seen["chat"]["customer_heard"][0]["text"] == seen["chat"]["quick_reply"]["text"]
    assert seen["chat_closed"][0]["text"] == "This chat is now closed"
    assert gateway_kit.map_followed_the_route(seen["map"])
    assert seen["map"]["etas"][-1]["available"] is True
    kinds = {push["kind"] for push in seen["pushes"][cast.rider.id]}
    assert "offer" in kinds


def test_service_visit_journey(cast):
    seen = gateway_kit.ServiceVisitJourney(cast).play()
    assert seen["waiting"]["message"].startswith("Technician is on the way.")
    assert gateway_kit.map_followed_the_route(seen["map"])
    assert seen["ended"]["message"] == "The technician has arrived."
    assert seen["request"]["status"] == "Completed"
