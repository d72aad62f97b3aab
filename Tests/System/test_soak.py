"""A short soak inside `make test`: two instances of every service (a system of its own), parties living journeys
through the gateway for a minute while faults are injected on a fixed seed's schedule; then the checker. `make soak`
runs the long one (deploy/local/soak.py, SOAK_MINUTES and SOAK_SEED)."""
import dataclasses
import os

import pytest

import soak_kit
import system
from conftest import OFFSET, PROFILE

SOAK = dataclasses.replace(
    PROFILE, name=f"soak-test-{OFFSET}", postgres_port=15437 + OFFSET, broker_port=19160 + OFFSET,
    gateway_http_port=18480 + OFFSET, gateway_https_port=18843 + OFFSET,
    service_ports=dict(zip(system.SERVICES, range(18481 + OFFSET, 18486 + OFFSET))), instances=2,
    durable_commits=True, service_environment={**PROFILE.service_environment, **soak_kit.ENVIRONMENT})

SEED = int(os.environ.get("SOAK_TEST_SEED", "20"))


@pytest.fixture(scope="module")
def fcm(tmp_path_factory):
    fake = soak_kit.FakeFCM(18496 + OFFSET, tmp_path_factory.mktemp("fcm"))
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def soak_system(maps, fcm):
    profile = dataclasses.replace(SOAK, service_environment={**SOAK.service_environment, **fcm.environment()})
    with system.started(profile) as running:
        yield running


def test_a_minute_of_journeys_under_random_faults_loses_and_doubles_nothing(soak_system, fcm):
    report = soak_kit.Soak(soak_system, SEED, minutes=1.0, delivery_lanes=4, visit_lanes=1, fcm=fcm).run()
    print(soak_kit.describe(report))
    assert report["violations"] == []
    assert report["events lost"] == 0
    assert report["duplicates seen by a client"] == 0
    assert sum(report["journeys completed"].values()) >= 4
    assert sum(report["faults by kind"].values()) >= 3
