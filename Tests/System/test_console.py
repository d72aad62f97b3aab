"""The web console (web/console) in a real browser: Debian's chromium, driven by Selenium through chromium-driver,
against the whole system behind its gateway. Each test saves screenshots of what it saw as test artifacts."""
import os
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

ARTIFACTS = Path(os.environ.get("CONSOLE_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".local" / "screenshots"))


@pytest.fixture
def browser(request):
    """A fresh browser context (its own storage), headless; the gateway's self-signed certificate is accepted."""
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    options.accept_insecure_certs = True
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,800"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.implicitly_wait(0)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.screenshot = lambda name: driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}-{name}.png"))
    yield driver
    driver.quit()


def wait(driver, condition, seconds=10):
    return WebDriverWait(driver, seconds).until(condition)


def test_the_gateway_serves_the_console_and_a_token_signs_in(gateway, cast, browser):
    browser.get(gateway.url + "/")
    assert browser.current_url == gateway.url + "/console/"
    wait(browser, shown.visibility_of_element_located((By.ID, "token")))
    # No dev-parties.json outside `make run`: the picker asks for a token.
    assert "Paste an access token" in browser.find_element(By.ID, "picker-help").text
    browser.screenshot("sign-in")
    browser.find_element(By.ID, "token").send_keys(cast.customer.token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    signed_in = wait(browser, shown.visibility_of_element_located((By.ID, "signed-in")))
    assert signed_in.text == f"Signed in as {cast.customer.name} (customer)"
    # The one failed load is the absent dev-parties.json; no script error.
    assert [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"
            and "dev-parties.json" not in entry["message"]] == []


def test_a_token_that_is_not_a_jwt_is_refused_with_a_message(gateway, browser):
    browser.get(gateway.url + "/console/")
    wait(browser, shown.visibility_of_element_located((By.ID, "token"))).send_keys("not-a-token")
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    error = wait(browser, lambda driver: driver.find_element(By.ID, "picker-error").text)
    assert error == "this is not a JWT (three dot-separated parts)"
    assert not browser.find_element(By.ID, "signed-in").text
