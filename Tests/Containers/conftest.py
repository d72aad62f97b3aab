"""The container tests' set-up (`make test-containers`): docker-compose.yml brought up once with podman, every
service twice (INSTANCES=2), the third-party images swapped for the stand-ins built here
(deploy/containers/compose.standins.yml), and torn down at the end with its volumes. Every client call goes through
the containerized gateway over TLS, trusting the certificate the compose made; tokens are minted by the tools
image's devtoken with the key pair the compose made."""
import os
import shutil
import sys
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
for folder in ("Tests/System", "Tests/python", "deploy/containers", "deploy/local"):
    sys.path.insert(0, str(ROOT / folder))

import gateway_kit  # noqa: E402
import stack  # noqa: E402

PROJECT = "delivery-platform-ci"
HTTPS_PORT = int(os.environ.get("CONTAINERS_TEST_HTTPS_PORT", "28443"))
HTTP_PORT = int(os.environ.get("CONTAINERS_TEST_HTTP_PORT", "28080"))
LOGS = ROOT / ".local" / "container-logs"
# The published ports reach the gateway from the compose network's gateway address, not 127.0.0.1: the tests'
# many parties are one client address, exempt from the per-address limits as a local run's are.
ENVIRONMENT = {
    "INSTANCES": "2",
    "GATEWAY_PUBLISHED_HTTPS_PORT": str(HTTPS_PORT),
    "GATEWAY_PUBLISHED_HTTP_PORT": str(HTTP_PORT),
    "GATEWAY_RATE_LIMIT_EXEMPT": "10.0.0.0/8",
    # At most `info`: the librdkafka test reads each service's info-level `starting` line. (A `LOG_LEVEL=warning`
    # exported for the other suites failed it.)
    "LOG_LEVEL": os.environ["LOG_LEVEL"] if os.environ.get("LOG_LEVEL") in ("trace", "debug") else "info",
}


@pytest.fixture(scope="session")
def compose(request, tmp_path_factory):
    """The whole compose, up and healthy; the figures a user would see of it in `compose.figures`."""
    running = stack.Stack(PROJECT, ENVIRONMENT)
    running.down()
    shutil.rmtree(LOGS, ignore_errors=True)
    failed = True
    try:
        running.figures = {"healthy_after_seconds": running.up()}
        files = tmp_path_factory.mktemp("compose")
        running.copy_out(f"{PROJECT}_gateway-cert_1", "/certs/gateway.crt", files / "gateway.crt")
        (files / "keys").mkdir()
        running.copy_out(f"{PROJECT}_dev-keys_1", "/keys/.", files / "keys")
        running.copy_out(f"{PROJECT}_dev-keys_1", "/usr/local/bin/devtoken", files / "devtoken")
        running.files = files
        # The gateway has no healthcheck of its own: it is up once it answers.
        gateway_kit.until(lambda: _answers(files / "gateway.crt"), "the gateway to answer", seconds=60)
        failed = False
        yield running
        failed = request.session.testsfailed > 0
    finally:
        if failed:
            keep_logs(running)
        running.down()


def keep_logs(running):
    """Every container's log into .local/container-logs, before the containers go."""
    LOGS.mkdir(parents=True, exist_ok=True)
    for service in running.services:
        for container in running.containers(service):
            (LOGS / f"{container}.log").write_text(running.logs(container, tail=400))


def _answers(certificate):
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment
    try:
        answer = session.get(f"https://127.0.0.1:{HTTPS_PORT}/", verify=str(certificate), timeout=2,
                             allow_redirects=False)
        return answer.status_code < 500
    except requests.RequestException:
        return False


@pytest.fixture(scope="session")
def gateway(compose):
    return gateway_kit.Gateway(
        f"https://127.0.0.1:{HTTPS_PORT}", compose.files / "gateway.crt", compose.files, key_dir=compose.files / "keys")


@pytest.fixture
def cast(gateway):
    """New parties and a vendor at a place no other test uses."""
    return gateway_kit.new_cast(gateway)


def pytest_terminal_summary(terminalreporter, exitstatus):
    """After a failure, the end of every container's log (CI shows nothing else of them)."""
    if exitstatus == 0 or not LOGS.exists():
        return
    for log in sorted(LOGS.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()[-25:]
        terminalreporter.write_sep("-", f"{log.stem} (last {len(lines)} lines)")
        terminalreporter.write_line("\n".join(lines))
