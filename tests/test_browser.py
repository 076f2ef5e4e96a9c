"""The sign-in, consent and connected-apps pages in a real browser (issue 27, items 5 and 6): headless Chromium
(Debian's ``chromium``) driven by Selenium through ``chromedriver`` (Debian's ``chromium-driver``), against a live
uvicorn server of the demo.

A person signs in, reads what the client asks, allows it; the client's code becomes a token that reads at ``/mcp``;
the person disconnects the client on the connected-apps page and the token stops working. None of the three pages
renders inside a frame of another site.

``make test`` installs the browser (``make browser-install``). Without Chromium, chromedriver or Selenium the tests
are skipped with the reason, except under ``CI`` where they fail.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest

from tests import live
from tests.test_oauth_e2e import first_document, mcp_call

pytestmark = pytest.mark.e2e

CLIENT_NAME = "Browser Test Client"


class Callback(BaseHTTPRequestHandler):
    """The client's loopback redirect listener (RFC 8252): keeps the query it was sent."""

    received: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Callback.received.append(self.path)
        body = b"<!DOCTYPE html><title>Signed in</title><p id='done'>You can close this window.</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def redirect_uri() -> Iterator[str]:
    """Where the client listens for its code, as a native MCP client does (not port 9, the suite's usual redirect
    port: Chromium refuses to navigate to it, ERR_UNSAFE_PORT)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Callback)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/callback"
    finally:
        server.shutdown()
        server.server_close()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI requires a browser for these tests: {reason} (make browser-install)")
    pytest.skip(f"{reason} (make browser-install installs Chromium and chromedriver)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system's packages, driven through its own chromedriver (no download)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        _unavailable("Chromium or chromedriver is not installed")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("Selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def by_css(driver: Any, selector: str) -> Any:
    """The element ``selector`` finds, once the page that holds it has loaded (a click that submits a form may
    return before the browser has followed the redirects it answers with)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 30).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, selector)))


def wait_for_text(driver: Any, text: str) -> None:
    """Wait until the page's body holds ``text`` (the page a form's redirect leads to has loaded)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "body"), text))


def register(server: live.Server, redirect_uri: str) -> str:
    response = httpx2.post(
        server.base + "/o/register/",
        json={"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


def test_sign_in_consent_and_disconnect_in_a_browser(browser: Any, demo_server: live.Server, redirect_uri: str) -> None:
    client_id = register(demo_server, redirect_uri)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "documents:read",
        "state": "browser",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": demo_server.url,
    }
    browser.get(f"{demo_server.base}/o/authorize/?{urlencode(query)}")

    # Sign in.
    assert urlsplit(browser.current_url).path == "/accounts/login/"
    by_css(browser, "#id_username").send_keys("alice")
    by_css(browser, "#id_password").send_keys("alice")
    by_css(browser, "#login-form button[type=submit]").click()

    # Consent: who asks, for what, where the browser goes back to.
    by_css(browser, "#authorizationForm")
    assert urlsplit(browser.current_url).path == "/o/authorize/"
    text = by_css(browser, "body").text
    assert f"{CLIENT_NAME} asks to act on your behalf" in text
    assert "Read your documents and notes" in text
    assert urlsplit(redirect_uri).netloc in text
    by_css(browser, "#authorizationForm button[name=allow]").click()

    # The browser is sent to the client's loopback listener with the code.
    assert by_css(browser, "#done").text == "You can close this window."
    landed = urlsplit(browser.current_url)
    assert f"{landed.scheme}://{landed.netloc}{landed.path}" == redirect_uri
    assert [path for path in Callback.received if path.startswith("/callback")] == [landed.path + "?" + landed.query]
    redirect = {key: values[0] for key, values in parse_qs(landed.query).items()}
    assert redirect["state"] == "browser"
    exchanged = httpx2.post(
        demo_server.base + "/o/token/",
        data={
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": demo_server.url,
        },
        timeout=30,
    )
    assert exchanged.status_code == 200, exchanged.text
    token = exchanged.json()["access_token"]
    uri = f"learn://documents/{first_document(demo_server, 'alice')}"
    assert mcp_call(demo_server, "resources/read", {"uri": uri}, token).status_code == 200

    # The connected-apps page lists the client; disconnecting it stops its token at once.
    browser.get(f"{demo_server.base}/o/connected/")
    sections = [section for section in browser.find_elements("css selector", "section.connection")]
    mine = [section for section in sections if CLIENT_NAME in section.text]
    assert len(mine) == 1, [section.text for section in sections]
    assert "Read your documents and notes" in mine[0].text
    assert "Last used" in mine[0].text
    mine[0].find_element("css selector", "button[name=disconnect]").click()
    wait_for_text(browser, f"{CLIENT_NAME} is disconnected")
    assert urlsplit(browser.current_url).path == "/o/connected/"
    page = by_css(browser, "body").text
    assert f"{CLIENT_NAME} is disconnected" in page
    assert not [s for s in browser.find_elements("css selector", "section.connection") if CLIENT_NAME in s.text]
    assert mcp_call(demo_server, "resources/read", {"uri": uri}, token).status_code == 401


@pytest.mark.parametrize("path", ["/accounts/login/", "/o/authorize/?client_id=x&response_type=code", "/o/connected/"])
def test_the_pages_refuse_to_render_in_a_frame(browser: Any, demo_server: live.Server, path: str) -> None:
    """Another site frames the page (a clickjacking attempt): Chromium refuses to render it there."""
    framing = f"<iframe id='victim' src='{demo_server.base}{path}' width=600 height=400></iframe>"
    browser.get("data:text/html;charset=utf-8," + framing)
    browser.switch_to.frame(by_css(browser, "#victim"))
    try:
        location = browser.execute_script("return document.location.href")
        body = browser.execute_script("return document.body ? document.body.innerText : ''")
    finally:
        browser.switch_to.default_content()
    assert location.startswith("chrome-error://"), (location, body[:200])
    assert "Sign in" not in body
    assert "Connected" not in body
