"""The web console (web/console) in a real browser: Debian's chromium, driven by Selenium through chromium-driver,
against the whole system behind its gateway. Each party has a browser of its own (its own storage, location and
network); each test saves screenshots of what it saw as test artifacts (.local/screenshots)."""
import base64
import os
import re
import uuid
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

import gateway_kit

ARTIFACTS = Path(os.environ.get("CONSOLE_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".local" / "screenshots"))
RDR_020_LOCATION = ("Location access is required to go online, receive new delivery tasks, and use navigation. "
                    "Please enable location services in your settings.")


@pytest.fixture
def browsers(request, gateway):
    """Opens browsers, each a fresh profile, headless; the gateway's self-signed certificate is accepted."""
    opened = []

    def open_browser(name):
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        options.accept_insecure_certs = True
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                         "--disable-dev-shm-usage"):
            options.add_argument(argument)
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        driver.implicitly_wait(0)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.screenshot = lambda shot: driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}-{name}-{shot}.png"))
        driver.origin = gateway.url
        opened.append(driver)
        return driver

    yield open_browser
    for driver in opened:
        driver.screenshot("last")
        # Answers the console handles (a 403 while an assignment propagates, an offline request) are logged as failed
        # loads; anything else at this level is a script error.
        errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"
                  and "Failed to load resource" not in entry["message"]
                  and "net::ERR_INTERNET_DISCONNECTED" not in entry["message"]]
        driver.quit()
        assert errors == [], f"script errors in the console: {errors}"


@pytest.fixture
def browser(browsers):
    return browsers("browser")


def wait(driver, condition, seconds=15, what=None):
    return WebDriverWait(driver, seconds, ignored_exceptions=[StaleElementReferenceException]).until(condition, what)


def find(driver, css):
    return wait(driver, shown.visibility_of_element_located((By.CSS_SELECTOR, css)), what=f"{css} to show")


def text_of(driver, css, pattern, seconds=20):
    """Waits until the element's text matches `pattern` (a regular expression); returns the text."""
    seen = []

    def probe(d):
        elements = d.find_elements(By.CSS_SELECTOR, css)
        seen[:] = [e.text for e in elements]
        return next((text for text in seen if re.search(pattern, text)), False)
    try:
        return wait(driver, probe, seconds, f"{css} to read /{pattern}/")
    except TimeoutException as timeout:
        raise TimeoutException(f"{timeout.msg}; it read {seen!r}") from None


# Every visible control of the page: its accessible name (a label, aria-label or text) and its size. Inline links in
# Leaflet's attribution line are text, not targets.
CONTROLS_SCRIPT = """
return [...document.querySelectorAll('button, input:not([type=file]), select, a[href], [role=switch]')]
  .filter((e) => e.offsetParent !== null && !e.closest('.leaflet-control-attribution'))
  .map((e) => ({html: e.outerHTML.slice(0, 120), height: e.getBoundingClientRect().height,
                width: e.getBoundingClientRect().width,
                name: (e.labels?.[0]?.textContent || e.getAttribute('aria-label') || e.textContent || '').trim()}));
"""


def assert_accessible_controls(driver):
    """Each visible control has a name a screen reader reads and is at least 44 by 44 px (checkboxes 24 px with
    their label as the larger target)."""
    for control in driver.execute_script(CONTROLS_SCRIPT):
        assert control["name"], f"a control without an accessible name: {control['html']}"
        smallest = 24 if 'type="checkbox"' in control["html"] else 44
        assert control["height"] >= smallest and control["width"] >= smallest, f"a small target: {control}"


def submit_token(driver, token):
    """Types a token into the picker and submits it, once the console's script handles the form (the button is
    disabled until then: a click before, on a loaded machine, reloaded the page with the token in its URL)."""
    find(driver, "#token").send_keys(token)
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#token-form button").is_enabled(),
         what="the console's script to handle the sign-in form")
    driver.find_element(By.CSS_SELECTOR, "#token-form button").click()


def sign_in(driver, party):
    driver.get(driver.origin + "/console/")
    submit_token(driver, party.token)
    text_of(driver, "#signed-in", f"Signed in as {party.name}")


def locate(driver, fix):
    """The device at `fix`, and the browser's geolocation permission granted."""
    driver.execute_cdp_cmd("Emulation.setGeolocationOverride", {
        "latitude": fix["lat"], "longitude": fix["lng"], "accuracy": fix.get("accuracyMeters", 8)})
    driver.execute_cdp_cmd("Browser.setPermission", {"permission": {"name": "geolocation"}, "setting": "granted",
                                                     "origin": driver.origin})


def deny_location(driver):
    driver.execute_cdp_cmd("Browser.setPermission", {"permission": {"name": "geolocation"}, "setting": "denied",
                                                     "origin": driver.origin})


def network(driver, online):
    """Cuts or restores the browser's network (the page gets `offline`/`online`, its sockets lose their transport)."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": not online, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})


def fill(driver, field_id, value):
    element = driver.find_element(By.ID, field_id)
    element.clear()
    element.send_keys(str(value))


def address_near_the_vendor(customer_browser, cast):
    """Names the cast's vendor on the customer's form, which fills in an address near it."""
    fill(customer_browser, "vendor-id", cast.vendor.id + Keys.TAB)
    wait(customer_browser, lambda d: d.find_element(By.ID, "lat").get_attribute("value"),
         what="the address to be filled in")


def go_online(rider_browser, cast):
    locate(rider_browser, cast.spot.fix(0.4, 0.3))
    find(rider_browser, "[data-test=online-toggle]").click()
    text_of(rider_browser, "#rider-status", "Online")


def test_the_gateway_serves_the_console_and_a_token_signs_in(gateway, cast, browser):
    browser.get(gateway.url + "/")
    assert browser.current_url == gateway.url + "/console/"
    find(browser, "#token")
    # No dev-parties.json outside `make run`: the picker asks for a token.
    assert "Paste an access token" in browser.find_element(By.ID, "picker-help").text
    browser.screenshot("sign-in")
    sign_in(browser, cast.customer)
    find(browser, "#order-form")


def test_a_token_that_is_not_a_jwt_is_refused_with_a_message(gateway, browser):
    browser.get(gateway.url + "/console/")
    submit_token(browser, "not-a-token")
    assert text_of(browser, "#picker-error", "JWT") == "this is not a JWT (three dot-separated parts)"
    assert not browser.find_element(By.ID, "signed-in").text


def test_a_whole_delivery_seen_by_the_customer_and_the_rider(cast, browsers, tmp_path):
    customer, rider = browsers("customer"), browsers("rider")
    sign_in(customer, cast.customer)
    sign_in(rider, cast.rider)
    go_online(rider, cast)
    rider.screenshot("online")

    # The customer places the order from the console.
    address_near_the_vendor(customer, cast)
    customer.find_element(By.CSS_SELECTOR, "#order-form button[type=submit]").click()
    card = find(customer, "[data-test=order-card]")
    order_id = card.get_attribute("data-id")
    text_of(customer, f"#status-{order_id}", "Waiting for the vendor")
    cast.vendor.call("POST", f"/v1/orders/{order_id}/accept")
    text_of(customer, f"#status-{order_id}", "Being prepared")
    cast.vendor.call("POST", f"/v1/orders/{order_id}/ready")

    # The offer: vendor, area, earnings in INR and a countdown that counts down.
    offer = find(rider, "[data-test=offer]")
    assert cast.vendor.name in offer.find_element(By.CSS_SELECTOR, "[data-test=offer-vendor]").text
    assert offer.find_element(By.CSS_SELECTOR, "[data-test=offer-earnings]").text.startswith("₹")
    first = int(text_of(rider, "[data-test=countdown]", r"^\d+ s left to answer$").split()[0])
    wait(rider, lambda d: int(d.find_element(By.CSS_SELECTOR, "[data-test=countdown]").text.split()[0]) < first,
         what="the countdown to count down")
    rider.screenshot("offer")
    assert_accessible_controls(rider)
    # The offer takes the focus on its Accept button: the keyboard alone answers it.
    assert rider.switch_to.active_element.get_attribute("data-test") == "accept-offer"
    rider.switch_to.active_element.send_keys(Keys.ENTER)
    text_of(rider, "[data-test=task-status]", "Ready at the store")
    text_of(customer, "[data-test=rider]", f"Rider: {cast.rider.name}")

    find(rider, "[data-test=arrived]").click()
    find(rider, "[data-test=confirm-pickup]").click()
    text_of(rider, "[data-test=task-status]", "Picked up")
    text_of(customer, f"#status-{order_id}", "On the way")

    # The rider rides toward the customer; the customer's marker follows, with the ETA.
    etas = set()
    for step, point in enumerate(gateway_kit.route(cast.vendor_address, cast.delivery_address, 5)):
        locate(rider, {**point, "accuracyMeters": 6})
        wait(customer, lambda d: d.find_element(By.CSS_SELECTOR, "[data-test=tracking-map]")
             .get_attribute("data-courier-lat") == f"{point['lat']:.6f}", what="the marker to move")
        etas.add(customer.find_element(By.CSS_SELECTOR, "[data-test=eta]").text)
        if step == 2:
            find(customer, "[data-test=tracking-map] [data-test=destination-marker]")
            customer.execute_script("document.querySelector('.tracking').scrollIntoView()")
            customer.screenshot("tracking")
    text_of(customer, "[data-test=eta]", r"^Arriving in \d+ minutes? \(\d{1,2}:\d{2} [AP]M\)$|ETA recalculating")
    assert any(re.match(r"^Arriving in \d+ minutes? \(\d{1,2}:\d{2} [AP]M\)$", eta) for eta in etas), etas
    assert re.match(r"^Rider is \d+\.\d km away and expected in \d+ minutes?\.$",
                    customer.find_element(By.CSS_SELECTOR, "[data-test=spoken]").get_attribute("textContent"))
    assert_accessible_controls(customer)

    # Chat both ways: the customer types, the rider answers with a quick reply.
    find(customer, "[data-test=chat-input]").send_keys("Hi! The gate code is 4321.")
    customer.find_element(By.CSS_SELECTOR, "[data-test=chat-send]").click()
    text_of(customer, ".messages .own [data-test=mark]", "^Sent$")
    text_of(rider, ".messages .theirs .text", "The gate code is 4321")
    quick = find(rider, ".quick-replies button")
    quick_text = quick.text
    quick.click()
    text_of(customer, ".messages .theirs .text", re.escape(quick_text))
    customer.screenshot("chat")
    rider.screenshot("chat")

    # Proof photo from a file, delivered: the customer's chat closes.
    photo = tmp_path / "proof.png"
    photo.write_bytes(gateway_kit.PROOF_PHOTO)
    rider.find_element(By.CSS_SELECTOR, "[data-test=proof-file]").send_keys(str(photo))
    find(rider, "[data-test=deliver]").click()
    text_of(customer, f"#status-{order_id}", "Delivered")
    text_of(customer, "[data-test=chat-closed]", "This chat is now closed")
    assert not customer.find_element(By.CSS_SELECTOR, "[data-test=chat-input]").is_displayed()
    customer.screenshot("delivered")
    rider.screenshot("delivered")


# The customer's tracking panel (web/console/js/map.js) driven by a scripted `/tracking` socket: the answer to
# `track` is let go only after a newer `location` came, as the server can order them (its socket is in the job's room
# before the view is read).
TRACKING_PANEL_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  const { TrackingPanel } = await import("./js/map.js");
  const listeners = {};
  let answer;
  const tracking = {
    on: (event, listener) => { listeners[event] = listener; },
    emitWithAck: () => new Promise((resolve) => { answer = resolve; }),
  };
  const panel = new TrackingPanel(tracking, "job-1", { courierWord: "rider" });
  document.body.append(panel.element);
  const box = panel.element.querySelector("[data-test=tracking-map]");
  const at = (lat, second) =>
    ({ jobId: "job-1", lat, lng: 77.6, recordedAt: new Date(Date.UTC(2026, 10, 29, 12, 0, second)).toISOString() });
  const started = panel.start();
  listeners.location(at(12.93, 20));
  answer({ jobId: "job-1", state: "live", version: 3, lastLocation: at(12.91, 10), lastUpdatedAt: at(0, 10).recordedAt,
           destination: { lat: 12.95, lng: 77.62, label: "Home" } });
  await started;
  const afterAnswer = box.dataset.courierLat;
  listeners.location(at(12.92, 15));
  const afterOlder = box.dataset.courierLat;
  listeners.location(at(12.94, 30));
  return [afterAnswer, afterOlder, box.dataset.courierLat];
})().then(done, (error) => done(`error: ${error}`));
"""


def test_the_tracking_map_never_moves_back_to_an_older_position(gateway, browser):
    browser.get(gateway.url + "/console/")
    find(browser, "#token")
    after_answer, after_older, after_newer = browser.execute_async_script(TRACKING_PANEL_SCRIPT)
    # The view's older position (recorded at :10) came after the newer one (:20), and so did one recorded at :15.
    assert (after_answer, after_older) == ("12.930000", "12.930000")
    assert after_newer == "12.940000"


def test_location_denied_blocks_going_online_until_it_is_granted(cast, browser):
    """RDR-020 AC-001 (the screen, its message, Go to Settings, the toggle stays Offline), AC-005 (still denied: the
    screen stays) and AC-004 (granted: the screen goes by itself and the rider goes Online)."""
    deny_location(browser)
    sign_in(browser, cast.rider)
    find(browser, "[data-test=online-toggle]").click()
    screen = find(browser, "[data-test=permission-screen]")
    assert screen.find_element(By.CSS_SELECTOR, "[data-test=permission-message]").text == RDR_020_LOCATION
    assert screen.get_attribute("role") == "alertdialog"
    toggle = browser.find_element(By.CSS_SELECTOR, "[data-test=online-toggle]")
    assert toggle.get_attribute("aria-checked") == "false" and not toggle.is_enabled()
    browser.screenshot("location-denied")
    assert_accessible_controls(browser)
    find(browser, "[data-test=go-to-settings]").click()
    find(browser, "[data-test=permission-help]")
    browser.find_element(By.CSS_SELECTOR, "[data-test=check-again]").click()
    text_of(browser, "[data-test=permission-still-denied]", "still blocked")
    assert browser.find_element(By.CSS_SELECTOR, "[data-test=permission-screen]").is_displayed()
    assert cast.rider.call("GET", "/v1/riders/me")["status"] == "offline"

    locate(browser, cast.spot.fix(0.4, 0.3))
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-test=permission-screen]"),
         what="the permission screen to close by itself")
    text_of(browser, "#rider-status", "Online")
    assert cast.rider.call("GET", "/v1/riders/me")["status"] == "online"
    browser.screenshot("location-granted")


def test_an_offer_that_is_not_answered_expires_on_screen(cast, browser):
    sign_in(browser, cast.rider)
    go_online(browser, cast)
    order_id = gateway_kit.place_order(cast)["id"]
    cast.vendor.call("POST", f"/v1/orders/{order_id}/accept")
    cast.vendor.call("POST", f"/v1/orders/{order_id}/ready")
    find(browser, "[data-test=offer]")
    # OFFER_TIMEOUT_SECONDS is 6 in the system tests.
    text_of(browser, "[data-test=offer-outcome]", "This offer is no longer available", seconds=15)
    browser.screenshot("offer-expired")
    assert not browser.find_element(By.CSS_SELECTOR, "[data-test=accept-offer]").is_displayed()
    browser.find_element(By.CSS_SELECTOR, "[data-test=dismiss-offer]").click()
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-test=offer]"), what="the offer to go")
    gateway_kit.until(lambda: cast.rider.call("GET", "/v1/riders/me")["status"] == "online", "the rider online again")


def test_a_chat_message_sent_offline_is_marked_failed_then_sent_after_reconnecting(cast, browser):
    order = gateway_kit.AssignedOrder(cast)
    chat_rider = cast.rider.socket("chat", ["message"])
    try:
        chat_rider.call("join", {"orderId": order.id})
        sign_in(browser, cast.customer)
        fill(browser, "open-order-id", order.id)
        browser.find_element(By.CSS_SELECTOR, "#open-order-id + button").click()
        find(browser, "[data-test=chat-input]")
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "[data-test=chat-input]").is_enabled(),
             what="the chat to open")
        network(browser, online=False)
        browser.find_element(By.CSS_SELECTOR, "[data-test=chat-input]").send_keys("Please ring twice")
        browser.find_element(By.CSS_SELECTOR, "[data-test=chat-send]").click()
        text_of(browser, ".messages .own [data-test=mark]", "^Sending failed$")
        browser.screenshot("chat-failed")
        network(browser, online=True)
        text_of(browser, ".messages .own [data-test=mark]", "^Sent$", seconds=30)
        browser.screenshot("chat-resent")
        heard = chat_rider.wait_for("message")
        assert [message["text"] for message in heard] == ["Please ring twice"]
    finally:
        chat_rider.close()
        order.close()


def test_the_vendor_dashboard_catches_up_after_being_offline(cast, browser):
    sign_in(browser, cast.vendor)
    first = gateway_kit.place_order(cast)["id"]
    find(browser, f"[data-test=vendor-order][data-id='{first}']").find_element(
        By.CSS_SELECTOR, "[data-test=vendor-accept]").click()
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"[data-test=vendor-order][data-id='{first}']")
         .get_attribute("data-status") == "Preparing", what="the order to be accepted")
    network(browser, online=False)
    second = gateway_kit.place_order(cast)["id"]
    cast.vendor.call("POST", f"/v1/orders/{first}/ready")
    network(browser, online=True)
    find(browser, f"[data-test=column-new] [data-id='{second}']")
    find(browser, f"[data-test=column-ready] [data-id='{first}']")
    browser.screenshot("dashboard")
    assert_accessible_controls(browser)


def test_a_technician_visit_from_request_to_arrival(cast, browsers):
    customer, technician = browsers("customer"), browsers("technician")
    sign_in(customer, cast.customer)
    sign_in(technician, cast.technician)
    address_near_the_vendor(customer, cast)
    customer.find_element(By.CSS_SELECTOR, "#service-form button[type=submit]").click()
    visit_id = find(customer, "[data-test=service-card]").get_attribute("data-id")
    cast.admin.call("POST", f"/v1/service-requests/{visit_id}/assign",
                    json={"technicianId": cast.technician.id, "technicianName": cast.technician.name})
    find(technician, f"[data-test=visit-card][data-id='{visit_id}'] [data-test=status-OnTheWay]").click()
    text_of(customer, "[data-test=tracking-message]",
            "^Technician is on the way. Live location will be available once the technician enables it.$")
    customer.screenshot("waiting-for-travel-mode")
    locate(technician, cast.spot.fix(0.2, 0.1))
    find(technician, "[data-test=travel-mode]").click()
    wait(technician, lambda d: d.find_element(By.CSS_SELECTOR, "[data-test=travel-mode]")
         .get_attribute("aria-checked") == "true", what="travel mode on")
    wait(customer, lambda d: d.find_element(By.CSS_SELECTOR, "[data-test=tracking-map]")
         .get_attribute("data-courier-lat"), what="the technician on the map")
    customer.execute_script("document.querySelector('.tracking').scrollIntoView()")
    customer.screenshot("technician-on-map")
    technician.screenshot("travel-mode")
    assert_accessible_controls(technician)
    find(technician, "[data-test=status-WorkInProgress]").click()
    text_of(customer, "[data-test=tracking-message]", "^The technician has arrived.$")
    find(technician, "[data-test=status-Completed]").click()
    text_of(customer, f"#status-{visit_id}", "Completed")


def test_the_admin_reads_an_order_its_saga_chat_and_pushes_and_sees_riders_on_the_map(cast, browser):
    seen = gateway_kit.DeliveryJourney(cast, positions=2, position_interval=0.1).play()
    gateway_kit.go_online(cast.second_rider, cast.spot)
    order_id = seen["order"]["id"]
    sign_in(browser, cast.admin)
    text_of(browser, "[data-test=riders-map-status]", r"\d+ riders? on duty")
    fill(browser, "admin-order-id", order_id)
    browser.find_element(By.CSS_SELECTOR, "#admin-order-id + button").click()
    view = find(browser, "[data-test=order-view] table")
    text_of(browser, "[data-test=order-view]", "OrderDelivered")
    text_of(browser, "[data-test=order-view]", "Pickup saga: completed")
    text_of(browser, "[data-test=chat-log]", "The gate code is 4321")
    assert view.is_displayed()
    fill(browser, "admin-user-id", cast.customer.id)
    browser.find_element(By.CSS_SELECTOR, "#admin-user-id + button").click()
    text_of(browser, "[data-test=notification-view]", "Your order is on the way")
    browser.screenshot("order")
    assert_accessible_controls(browser)


def test_a_pickup_confirmed_offline_waits_then_goes_once_and_a_denied_camera_blocks_the_photo(cast, browser):
    """RDR-016: the pickup confirmed without a network is kept (pending, with its Idempotency-Key) and sent once the
    network is back; RDR-020 AC-002: with the camera denied, the proof photo is blocked behind the camera screen."""
    order = gateway_kit.AssignedOrder(cast)
    try:
        locate(browser, cast.spot.fix(0.1, 0.1))
        sign_in(browser, cast.rider)
        find(browser, "[data-test=arrived]").click()
        find(browser, "[data-test=confirm-pickup]")
        network(browser, online=False)
        browser.find_element(By.CSS_SELECTOR, "[data-test=confirm-pickup]").click()
        text_of(browser, "[data-test=pickup-pending]", "pending")
        browser.screenshot("pickup-pending")
        assert cast.rider.call("GET", f"/v1/orders/{order.id}")["status"] == "ReadyForPickup"
        network(browser, online=True)
        text_of(browser, "[data-test=task-status]", "Picked up", seconds=30)
        events = cast.admin.call("GET", f"/v1/orders/{order.id}/events")["events"]
        assert [event["type"] for event in events].count("OrderPickedUp") == 1

        browser.execute_cdp_cmd("Browser.setPermission", {"permission": {"name": "camera"}, "setting": "denied",
                                                          "origin": browser.origin})
        find(browser, "[data-test=take-photo]").click()
        screen = find(browser, "[data-test=permission-screen]")
        assert screen.find_element(By.CSS_SELECTOR, "[data-test=permission-message]").text == (
            "Camera access is required to take photos for Proof of Delivery. Please enable camera access in your "
            "settings.")
        browser.screenshot("camera-denied")
    finally:
        order.close()
