"""`make demo`: plays a delivery and a technician's visit against the system `make run` started, through its
gateway only, and prints what each party sees."""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "python"))

import requests  # noqa: E402

import gateway_kit  # noqa: E402
import system  # noqa: E402

COLOURS = {"customer": "36", "vendor": "33", "rider": "32", "technician": "35", "admin": "34"}
started = time.time()


def narrate(party, text):
    colour = COLOURS.get(party.role, "0")
    print(f"{time.time() - started:6.1f}s  \033[{colour}m{party.role:<10} {party.name:<12}\033[0m {text}", flush=True)


def main():
    gateway_url = os.environ.get("GATEWAY_URL", f"https://127.0.0.1:{system.RUN.gateway_https_port}")
    certificate, _ = system.ensure_tls_certificate()
    try:
        requests.get(f"{gateway_url}/health", verify=str(certificate), timeout=3).raise_for_status()
    except requests.RequestException as error:
        sys.exit(f"The system does not answer at {gateway_url} ({error.__class__.__name__}). "
                 f"Start it with `make run` in another terminal first.")
    gateway = gateway_kit.Gateway(gateway_url, certificate, system.bin_dir())
    cast = gateway_kit.new_cast(gateway, gateway_kit.DEMO_SPOT)
    print(f"\n== A delivery (the parties are new users, so the demo can run again: {cast.customer.id}, ...)\n")
    delivery = gateway_kit.DeliveryJourney(cast, narrate=narrate, position_interval=0.5)
    delivery.play()
    print("\n== A technician's visit with travel mode\n")
    visit = gateway_kit.ServiceVisitJourney(cast, narrate=narrate, position_interval=0.5)
    visit.play()
    console = f"{gateway_url}/console/"
    print(f"\nDone in {time.time() - started:.0f} s. The gateway's access log: "
          f"{system.runtime_dir('run')}/logs/gateway-access.log\n")
    print(f"See it in the web console: {console}")
    print(f"  admin       pick Operations, then open order {delivery.order_id}: its event log, pickup saga and chat")
    print(f"              and the notification log of {cast.customer.id}")
    print(f"  customer    pick Asha: place an order at the demo vendor and follow it")
    print(f"  rider       pick Ravi in another window (or browser profile): go Online, take the offer, deliver")
    print(f"  vendor      pick {cast.vendor.name}: the live dashboard;  technician: pick Kiran\n")


if __name__ == "__main__":
    main()
