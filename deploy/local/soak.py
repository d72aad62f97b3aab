"""`make soak`: the whole system with two instances of every service, on ports of its own, driven by simulated
parties through the gateway while faults are injected at random; the checker's report at the end (printed, and
written as JSON). Exit status 1 if anything was lost, doubled, illegal or left undone.

    SOAK_MINUTES   how long the parties keep starting journeys (default 10)
    SOAK_SEED      the fault schedule's seed (default: drawn, and printed so the run can be repeated)
    SOAK_LANES     delivery lanes (default 6; each has a vendor, a customer and two riders) plus 2 technician lanes
    SOAK_FAULTS    0 to run without faults (a baseline)
"""
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "python"))

import soak_kit  # noqa: E402
import system  # noqa: E402

# Ports of its own (below the ephemeral range, apart from `make run`'s and the tests'), so it can run beside them;
# the fake FCM listens on 18396.
SOAK = dataclasses.replace(
    system.RUN, name="soak", postgres_port=15436, broker_port=19150, gateway_http_port=18380,
    gateway_https_port=18743, service_ports=dict(zip(system.SERVICES, range(18381, 18386))), instances=2,
    durable_commits=True,
    service_environment={"LOG_LEVEL": os.environ.get("LOG_LEVEL", "notice"), **soak_kit.ENVIRONMENT})


def main():
    minutes = float(os.environ.get("SOAK_MINUTES", "10"))
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1, 1_000_000))
    lanes = int(os.environ.get("SOAK_LANES", "6"))
    faults = os.environ.get("SOAK_FAULTS", "1") != "0"
    system.log(f"soak: {minutes:g} min, seed {seed} (SOAK_SEED={seed} repeats the fault schedule), "
               f"{lanes} delivery lanes and 2 technician lanes, faults {'on' if faults else 'off'}")
    with tempfile.TemporaryDirectory(prefix="soak-fcm-") as directory:
        fcm = soak_kit.FakeFCM(18396, Path(directory))
        profile = dataclasses.replace(SOAK, service_environment={**SOAK.service_environment, **fcm.environment()})
        with system.started(profile) as running:
            report = soak_kit.Soak(running, seed, minutes, delivery_lanes=lanes, faults=faults, fcm=fcm).run()
        fcm.close()
    path = running.runtime / f"soak-{seed}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    print(soak_kit.describe(report), flush=True)
    system.log(f"the full report: {path}; the services' logs: {running.runtime}/logs/")
    sys.exit(1 if report["violations"] else 0)


if __name__ == "__main__":
    main()
