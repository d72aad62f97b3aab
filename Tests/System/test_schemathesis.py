"""Schemathesis against each service's OpenAPI document (Services/*/openapi.yaml) on the running system, through the
gateway, with a valid token for every role: no answer may be a 5xx, have a status the document does not list, or
break the documented schema. Path ids are either generated or real ones (a vendor, an order with a rider on it, a
service request with a technician, an offer, a device), so the success answers get checked too. The liveness,
readiness and metrics routes are not behind the gateway; they are asked of each service directly.

The run is deterministic (a fixed seed). SCHEMATHESIS_EXAMPLES sets the examples per operation and role (5 here;
deploy/local/schemathesis.sh runs 200), SCHEMATHESIS_REPORT a JSON file for the counts, and SCHEMATHESIS_KEEP_GOING
records failures without failing, so a long run counts them all."""
import collections
import json
import os
import re
import urllib.parse
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

import gateway_kit

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "order": "OrderService", "chat": "ChatService", "allocation": "AllocationService",
    "location": "LocationService", "notification": "NotificationService",
}
ROLES = ("customer", "vendor", "rider", "technician", "admin")
PROBES = r"^/(health|ready|metrics)$"
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "5"))
KEEP_GOING = os.environ.get("SCHEMATHESIS_KEEP_GOING") == "1"
# A response the document does not describe is as wrong as one breaking its schema: clients are written from it.
CHECKS = (not_a_server_error, status_code_conformance, response_schema_conformance)

CONFIG = schemathesis.Config.from_dict({
    "seed": 20240516,
    "generation": {"max-examples": EXAMPLES, "deterministic": True, "no-shrink": True, "database": "none"},
})


def load(service):
    return schemathesis.openapi.from_path(ROOT / "Services" / SERVICES[service] / "openapi.yaml", config=CONFIG)


SCHEMAS = {service: load(service) for service in SERVICES}
API = {service: schema.exclude(path_regex=PROBES) for service, schema in SCHEMAS.items()}
PROBE_ROUTES = {service: schema.include(path_regex=PROBES) for service, schema in SCHEMAS.items()}


class Tally:
    """Per service: the operations tested, the requests sent, their answers' statuses, and each distinct failure
    (operation, role, check, status) with the first request that showed it."""

    def __init__(self):
        self.operations = collections.defaultdict(set)
        self.cases = collections.Counter()
        self.statuses = collections.defaultdict(collections.Counter)
        self.failures = collections.defaultdict(dict)

    def record(self, service, case, role, response, failed):
        self.operations[service].add(case.operation.label)
        self.cases[service] += 1
        self.statuses[service][response.status_code] += 1
        for check, message in failed.items():
            key = (case.operation.label, role, check, response.status_code)
            self.failures[service].setdefault(key, f"{message} [{describe(case, response)}]")

    def summary(self):
        lines = [f"{'service':<14}{'operations':>11}{'cases':>8}  failures by check; answers by status"]
        for service in SERVICES:
            by_check = collections.Counter(check for (_, _, check, _) in self.failures[service])
            failures = ", ".join(f"{check} {count}" for check, count in sorted(by_check.items())) or "no failures"
            statuses = " ".join(f"{status}:{count}" for status, count in sorted(self.statuses[service].items()))
            lines.append(f"{service:<14}{len(self.operations[service]):>11}{self.cases[service]:>8}  {failures}; "
                         f"{statuses}")
        for service in SERVICES:
            for (label, role, check, status), message in self.failures[service].items():
                lines.append(f"  {service} {label} as {role or 'anyone'}: {check} ({status}) {message[:200]}")
        return lines

    def as_json(self):
        return {service: {
            "operations": len(self.operations[service]), "cases": self.cases[service],
            "statuses": {str(status): count for status, count in sorted(self.statuses[service].items())},
            "failures": [{"operation": label, "role": role, "check": check, "status": status, "message": message}
                         for (label, role, check, status), message in self.failures[service].items()],
        } for service in SERVICES}


TALLY = Tally()


class Report:
    """Prints the counts after the run (and writes them to SCHEMATHESIS_REPORT as JSON)."""

    @staticmethod
    def pytest_terminal_summary(terminalreporter):
        if os.environ.get("SCHEMATHESIS_REPORT"):
            Path(os.environ["SCHEMATHESIS_REPORT"]).write_text(json.dumps(TALLY.as_json(), indent=2))
        terminalreporter.write_sep("-", f"schemathesis ({EXAMPLES} examples per operation and role)")
        for line in TALLY.summary():
            terminalreporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def report(request):
    if not request.config.pluginmanager.has_plugin("schemathesis-report"):
        request.config.pluginmanager.register(Report(), "schemathesis-report")
    return TALLY


class World:
    """The parties whose tokens the run uses, and real things for path ids: the vendor, an order with the rider
    assigned (its offer accepted), a service request with the technician assigned, and each party's device."""

    def __init__(self, gateway):
        self.cast = cast = gateway_kit.new_cast(gateway)
        self.parties = {party.role: party for party in
                        (cast.customer, cast.vendor, cast.rider, cast.technician, cast.admin)}
        assigned = gateway_kit.AssignedOrder(cast)
        assigned.close()
        self.order_id = assigned.id
        self.offer_id = assigned.offer["offerId"]
        request = cast.customer.call("POST", "/v1/service-requests", expect=201, json={
            "serviceAddress": cast.delivery_address, "description": "The kitchen tap leaks"})
        self.request_id = request["id"]
        cast.admin.call("POST", f"/v1/service-requests/{self.request_id}/assign",
                        json={"technicianId": cast.technician.id, "technicianName": cast.technician.name})
        self.devices = {role: party.register_device()["token"] for role, party in self.parties.items()}

    def real_path_parameters(self, path, role):
        """A real id for each path parameter of `path`, as the role's party would use it."""
        if path.startswith("/v1/vendors/"):
            return {"id": self.cast.vendor.id}
        if path.startswith("/v1/service-requests/"):
            return {"id": self.request_id}
        if path.startswith("/v1/orders/"):
            return {"id": self.order_id, "orderId": self.order_id}
        if path.startswith("/v1/offers/"):
            return {"offerId": self.offer_id}
        if path.startswith("/v1/tracking/"):
            return {"jobId": self.request_id if role == "technician" else self.order_id}
        if path.startswith("/v1/devices/"):
            return {"token": self.devices[role]}
        return {}


@pytest.fixture(scope="module")
def world(gateway):
    return World(gateway)


@pytest.fixture(scope="module")
def http():
    """One connection pool for the whole run; proxies and CA bundles from the environment are ignored."""
    session = requests.Session()
    session.trust_env = False
    return session


def run_checks(case, response):
    """{check name: message} of the checks the response fails."""
    failed = {}
    for check in CHECKS:
        try:
            case.validate_response(response, checks=[check])
        except AssertionError as failure:
            failed[check.__name__] = " ".join(str(failure).split())
        except BaseExceptionGroup as group:
            failed[check.__name__] = " | ".join(" ".join(str(error).split()) for error in group.exceptions)
    return failed


def describe(case, response):
    """The request as sent (the token left out) and the answer."""
    sent = response.request
    headers = {name: value for name, value in sent.headers.items() if name.lower() != "authorization"}
    body = sent.body if not isinstance(sent.body, bytes) or len(sent.body) < 300 else f"<{len(sent.body)} bytes>"
    authorized = "with" if "authorization" in {name.lower() for name in sent.headers} else "without"
    return (f"{sent.method} {sent.url} {authorized} the token, headers {headers}, body {body!r} -> "
            f"{response.status_code} {response.text[:300]}")


def verdict(service, case, response, role):
    failed = run_checks(case, response)
    TALLY.record(service, case, role, response, failed)
    if failed and not KEEP_GOING:
        pytest.fail(f"as {role}: {describe(case, response)}: {failed}", pytrace=False)


def service_of(case):
    title = case.operation.schema.raw_schema["info"]["title"]
    return title.split()[0].lower()


@pytest.mark.parametrize("role", ROLES)
@schemathesis.pytest.parametrize(**API)
@API["order"].given(real_ids=st.booleans())
def test_api(case, real_ids, role, world, running_system, http):
    """One generated request to one operation as one role, through the gateway."""
    party = world.parties[role]
    if real_ids:
        case.path_parameters = {**(case.path_parameters or {}), **{
            name: value for name, value in world.real_path_parameters(case.path, role).items()
            if name in (case.path_parameters or {})}}
        if case.path == "/v1/orders" and isinstance(case.body, dict):
            case.body["vendorId"] = world.cast.vendor.id
        if case.path == "/v1/notifications" and isinstance(case.query, dict):
            case.query["userId"] = world.parties["customer"].id
    response = case.call(base_url=running_system.gateway_url, session=http,
                         headers={"Authorization": f"Bearer {party.token}"}, timeout=15,
                         verify=str(running_system.tls_certificate))
    verdict(service_of(case), case, response, role)


@schemathesis.pytest.parametrize(**PROBE_ROUTES)
def test_probes(case, running_system, http):
    """Liveness, readiness and metrics, asked of the service itself (the gateway does not route them)."""
    service = service_of(case)
    response = case.call(base_url=running_system.service_url(f"{service}-service"), session=http, timeout=15)
    verdict(service, case, response, None)


# Found by probing next to the generated cases: a NUL in the query reached Postgres and answered 500.
def test_notification_log_refuses_a_nul_character_in_the_user_id(world, running_system, http):
    response = http.get(f"{running_system.gateway_url}/v1/notifications", params={"userId": "a\x00b"},
                        headers={"Authorization": f"Bearer {world.parties['admin'].token}"}, timeout=15,
                        verify=str(running_system.tls_certificate))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "INVALID_CHARACTER"


# Every parameter a client puts in a URL, with hostile values: numbers at and past the 64-bit limits, exponents,
# not-a-number, the page cursor's shape with times far out of range, dates far out, very long text. Generated
# cases rarely hit these edges; a probe did (`after=9223372036854775807.<uuid>` answered 500). Each documented
# query and path parameter of every operation gets each value, as every role: no answer may be a 5xx, and a
# refusal names its error code.
NIL_UUID = "00000000-0000-0000-0000-000000000000"
EXTREMES = [
    "", "0", "-0", "-1", "1.5", "0x10", "1e308", "-1e308", "NaN", "Infinity", "-infinity",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "9" * 400,
    f"9223372036854775807.{NIL_UUID}", f"-9223372036854775808.{NIL_UUID}", f"-9000000000000000000.{NIL_UUID}",
    f"253402300800000000.{NIL_UUID}", f"-1.{NIL_UUID}",
    "0001-01-01T00:00:00Z", "99999-12-31T23:59:59Z", "1970-01-01T00:00:00.000Z",
]


def documented_parameters(location):
    """(service, method, path, parameter name) of every `location` (query or path) parameter in the documents."""
    found = []
    for service, schema in API.items():
        document = schema.raw_schema

        def resolved(parameter):
            if "$ref" not in parameter:
                return parameter
            *_, kind, name = parameter["$ref"].split("/")
            return document["components"][kind][name]

        for path, item in document["paths"].items():
            shared = item.get("parameters", [])
            for method, operation in item.items():
                if method not in ("get", "post", "put", "patch", "delete"):
                    continue
                for parameter in map(resolved, shared + operation.get("parameters", [])):
                    if parameter.get("in") == location:
                        found.append((service, method.upper(), path, parameter["name"]))
    return found


def required_query(path, world):
    """The required query parameters of an operation, with valid values (so the one under test is what is wrong)."""
    return {"userId": world.parties["customer"].id} if path == "/v1/notifications" else {}


def assert_no_server_error(response, label):
    assert response.status_code < 500, f"{label} -> {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        assert response.json()["error"]["code"], f"{label} -> {response.status_code} without a code"


@pytest.mark.parametrize("service,method,path,name", documented_parameters("query"))
def test_query_parameters_refuse_extreme_values_with_a_4xx(service, method, path, name, world, running_system, http):
    for role, party in world.parties.items():
        url = running_system.gateway_url + path.format(**world.real_path_parameters(path, role))
        for value in EXTREMES:
            query = {**required_query(path, world), name: value}
            response = http.request(method, url, params=query, headers={"Authorization": f"Bearer {party.token}"},
                                    timeout=15, verify=str(running_system.tls_certificate))
            assert_no_server_error(response, f"{method} {path}?{name}={value[:60]} as {role}")


@pytest.mark.parametrize("service,method,path,name", documented_parameters("path"))
def test_path_parameters_refuse_extreme_values_with_a_4xx(service, method, path, name, world, running_system, http):
    for role, party in world.parties.items():
        real = world.real_path_parameters(path, role)
        for value in EXTREMES:
            if not value:
                continue  # an empty segment is another route
            parameters = {**{key: real.get(key, NIL_UUID) for key in re.findall(r"{(\w+)}", path)},
                          name: urllib.parse.quote(value, safe="")}
            response = http.request(method, running_system.gateway_url + path.format(**parameters), json={},
                                    headers={"Authorization": f"Bearer {party.token}"}, timeout=15,
                                    verify=str(running_system.tls_certificate))
            assert_no_server_error(response, f"{method} {path} with {name}={value[:60]} as {role}")
