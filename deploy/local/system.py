"""The whole system on this machine: a throwaway Postgres, the Tansu broker, the five services and the nginx gateway
in front of them (TLS with a self-signed certificate, WebSockets, routing). `make run` runs it in the foreground and
seeds demo data; the system tests start it with their own ports and kill and restart services in it.

    system.py run      start everything, seed the demo data, print tokens, stop everything on Ctrl-C
                       (INSTANCES=N: N instances of every service behind the gateway, default 1)
"""
import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / ".local"
SCRIPTS = ROOT / "deploy" / "local"
GATEWAY_TEMPLATES = ROOT / "deploy" / "gateway"
DEV_KEY_DIR = LOCAL / "dev-keys"
TLS_DIR = LOCAL / "gateway-tls"
JWT_ISSUER = "https://auth.delivery.local"
JWT_AUDIENCE = "delivery-platform"

# Each service and the gateway template's variable naming its upstream.
SERVICES = {
    "order-service": "ORDER_SERVICE",
    "chat-service": "CHAT_SERVICE",
    "allocation-service": "ALLOCATION_SERVICE",
    "location-service": "LOCATION_SERVICE",
    "notification-service": "NOTIFICATION_SERVICE",
}

# The broker's wake relay (broker_wake.py) answers a waiting fetch as soon as a record arrives, so consumers can wait
# up to FETCH_WAIT_MS at the broker (Apache Kafka's default is 500 ms; 5 s asks the broker ten times less often at
# rest); without it (BROKER_WAKE=0) they keep the services' default for Tansu alone, asking every 10 ms
# (docs/benchmarks.md, "Idle").
BROKER_WAKE = os.environ.get("BROKER_WAKE", "1") != "0"
FETCH_WAIT_MS = 5000

# The gateway's limits per client address, as in docker-compose.yml (deploy/gateway/gateway.conf.template). Local
# clients (the demo, the system tests, the benchmarks) all come from 127.0.0.1, which is exempt; any other address,
# e.g. 127.0.0.2, is limited.
GATEWAY_LIMITS = {
    "GATEWAY_REST_RATE": 20, "GATEWAY_REST_BURST": 100,
    "GATEWAY_SOCKET_RATE": 10, "GATEWAY_SOCKET_BURST": 50, "GATEWAY_SOCKET_CONNECTIONS": 50,
    "GATEWAY_RATE_LIMIT_EXEMPT": "127.0.0.1/32",
}


@dataclasses.dataclass
class Profile:
    """Where one copy of the system listens, and what its services are told beyond the common settings."""
    name: str
    postgres_port: int
    broker_port: int
    gateway_http_port: int
    gateway_https_port: int
    service_ports: dict
    service_environment: dict = dataclasses.field(default_factory=dict)
    # Instances of every service: instance k (from 1) of a service listens on its port + 10 * (k - 1) and is named
    # SERVICE (the first) or SERVICE-k in logs and in System's methods.
    instances: int = 1
    # Postgres acknowledges a commit only once it is in the WAL, so a crash loses nothing acknowledged (slower; the
    # default off can lose the last commits of a crash).
    durable_commits: bool = False
    # The console's map tiles (CONSOLE_TILE_URL overrides): a tile URL template, or "grid" for a plain offline grid.
    console_tile_url: str = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    # Where the gateway listens: this machine only, unless GATEWAY_LISTEN_ADDRESS says otherwise for `make run`.
    gateway_listen_address: str = "127.0.0.1"

    def instance_names(self, service):
        return [service] + [f"{service}-{k}" for k in range(2, self.instances + 1)]

    def port(self, instance):
        service, _, number = instance.rpartition("-")
        if instance in self.service_ports:
            return self.service_ports[instance]
        return self.service_ports[service] + 10 * (int(number) - 1)

    @property
    def all_instances(self):
        return [name for service in SERVICES for name in self.instance_names(service)]


RUN = Profile(
    name="run", postgres_port=25432, broker_port=29092, gateway_http_port=8080, gateway_https_port=8443,
    service_ports=dict(zip(SERVICES, range(8081, 8086))),
)


def runtime_dir(profile_name):
    """Outside the checkout, so the postgres user can reach the cluster (the same place as common.sh's)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"delivery-platform-{os.getuid()}"
    return base / profile_name


def log(message):
    print(f"\033[1m==>\033[0m {message}", file=sys.stderr, flush=True)


def port_in_use(port):
    import socket
    with socket.socket() as probe:
        probe.settimeout(0.3)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def bin_dir():
    """The debug build's executables (TEST_BIN_PATH when the test script set it)."""
    if os.environ.get("TEST_BIN_PATH"):
        return Path(os.environ["TEST_BIN_PATH"])
    output = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True)
    return Path(output.stdout.strip())


def ensure_tls_certificate():
    """A self-signed certificate for localhost and 127.0.0.1, made once and kept in .local/gateway-tls."""
    cert, key = TLS_DIR / "gateway.crt", TLS_DIR / "gateway.key"
    if not cert.exists() or not key.exists():
        TLS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run([
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "825", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert),
        ], check=True, capture_output=True)
        key.chmod(0o600)
    return cert, key


def render(template, values):
    """The template with each ${NAME} in `values` replaced (others, like nginx's own $host, left alone)."""
    text = template.read_text()
    for name, value in values.items():
        text = text.replace("${" + name + "}", str(value))
    return text


def nginx_executable():
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        raise SystemExit("nginx is not installed; run deploy/local/setup.sh")
    return found


class System:
    """One running copy of the system. `start()` brings everything up and waits until each part is ready."""

    def __init__(self, profile, executables=None, echo_logs=False):
        self.profile = profile
        self.runtime = runtime_dir(profile.name)
        self.bin = Path(executables) if executables else bin_dir()
        self.echo_logs = echo_logs
        self.processes = {}
        self.gateway = None
        self.tls_certificate = None

    # The parts

    @property
    def gateway_url(self):
        return f"https://127.0.0.1:{self.profile.gateway_https_port}"

    def service_url(self, name):
        """The URL of a service instance (its first instance when given the service's name)."""
        return f"http://127.0.0.1:{self.profile.port(name)}"

    def start(self):
        ports = [self.profile.postgres_port, self.profile.broker_port, self.profile.gateway_http_port,
                 self.profile.gateway_https_port, *map(self.profile.port, self.profile.all_instances)]
        busy = [port for port in ports if port_in_use(port)]
        if busy:
            raise SystemExit(f"ports {busy} are in use: is the '{self.profile.name}' system already running? "
                             f"(make run uses 8080-8085, 8443, 25432 and 29092; the system tests 18080-18085, "
                             f"18443, 15433 and 19120)")
        (self.runtime / "logs").mkdir(parents=True, exist_ok=True)
        for old_log in (self.runtime / "logs").glob("*.log"):
            old_log.unlink()
        log(f"starting Postgres on 127.0.0.1:{self.profile.postgres_port}")
        subprocess.run([SCRIPTS / "postgres.sh", "start", self.runtime / "postgres", str(self.profile.postgres_port)],
                       check=True, env=self.postgres_environment())
        log(f"starting the Tansu broker on 127.0.0.1:{self.profile.broker_port}"
            + (", behind its wake relay" if BROKER_WAKE else ""))
        subprocess.run([SCRIPTS / "broker.sh", "start", self.runtime / "broker", str(self.profile.broker_port)]
                       + (["--wake"] if BROKER_WAKE else []), check=True)
        self.public_key = subprocess.run(
            [self.bin / "devtoken", "--init-keys", "--key-dir", DEV_KEY_DIR],
            check=True, capture_output=True, text=True).stdout.strip()
        log("starting the five services" + (f", {self.profile.instances} instances each" if self.profile.instances > 1
                                            else ""))
        for name in self.profile.all_instances:
            self.start_service(name, wait=False)
        for name in self.profile.all_instances:
            self.wait_until_ready(name)
        log(f"starting the gateway on https://127.0.0.1:{self.profile.gateway_https_port}")
        self.start_gateway()
        return self

    def stop(self):
        """Everything down: the services drain in parallel (SIGTERM, SIGKILL after 10 s), then the rest."""
        self.stop_services(list(self.processes))
        if self.gateway and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGQUIT)
            try:
                self.gateway.wait(10)
            except subprocess.TimeoutExpired:
                self.gateway.kill()
        subprocess.run([SCRIPTS / "broker.sh", "stop", self.runtime / "broker"], check=False)
        subprocess.run([SCRIPTS / "postgres.sh", "stop", self.runtime / "postgres"], check=False)

    def crash_postgres(self):
        """Postgres ends abruptly (immediate shutdown): every connection is cut, the data stays."""
        subprocess.run([SCRIPTS / "postgres.sh", "crash", self.runtime / "postgres"], check=True)

    def resume_postgres(self):
        """Postgres starts again on its data, after crash recovery."""
        subprocess.run([SCRIPTS / "postgres.sh", "resume", self.runtime / "postgres", str(self.profile.postgres_port)],
                       check=True, env=self.postgres_environment())

    def pause_broker(self):
        """The broker stops answering (SIGSTOP): connections stay open and requests go unanswered; its log stays."""
        os.kill(int((self.runtime / "broker" / "broker.pid").read_text()), signal.SIGSTOP)

    def resume_broker(self):
        os.kill(int((self.runtime / "broker" / "broker.pid").read_text()), signal.SIGCONT)

    def postgres_environment(self):
        return {**os.environ, "POSTGRES_SYNCHRONOUS_COMMIT": "on" if self.profile.durable_commits else "off"}

    # Services

    def service_environment(self, name):
        environment = dict(os.environ)
        environment.update({
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{self.profile.postgres_port}/delivery",
            "DATABASE_TLS": "disable",
            "KAFKA_BROKERS": f"127.0.0.1:{self.profile.broker_port}",
            # KAFKA_PROPERTIES from the environment comes after the fetch wait, so it can set another.
            "KAFKA_PROPERTIES": ";".join(filter(None, [f"fetch.wait.max.ms={FETCH_WAIT_MS}" if BROKER_WAKE else None,
                                                       os.environ.get("KAFKA_PROPERTIES")])),
            "JWT_ISSUER": JWT_ISSUER, "JWT_AUDIENCE": JWT_AUDIENCE, "JWT_PUBLIC_KEY_FILE": self.public_key,
            "HTTP_HOST": "127.0.0.1", "HTTP_PORT": str(self.profile.port(name)),
            "LOG_LEVEL": os.environ.get("LOG_LEVEL", "info"),
            # No FCM or APNs credentials locally: pushes are logged (redacted) and kept in the notification log.
            "PUSH_LOG_PROVIDER": "true",
            "LD_LIBRARY_PATH": ":".join(filter(None, [str(LOCAL / "lib"), os.environ.get("LD_LIBRARY_PATH")])),
        })
        environment.update(self.profile.service_environment)
        return environment

    def start_service(self, name, wait=True):
        """Starts (or restarts) one service instance; its output is appended to logs/NAME.log (and echoed by `make
        run`)."""
        log_file = open(self.runtime / "logs" / f"{name}.log", "a")
        executable = next(service for service in SERVICES if name in self.profile.instance_names(service))
        process = subprocess.Popen(
            [self.bin / executable], env=self.service_environment(name), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.echo_logs else log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if self.echo_logs:
            threading.Thread(target=self._echo, args=(name, process, log_file), daemon=True).start()
        else:
            log_file.close()
        self.processes[name] = process
        if wait:
            self.wait_until_ready(name)

    @staticmethod
    def _echo(name, process, log_file):
        for line in iter(process.stdout.readline, b""):
            text = line.decode(errors="replace")
            log_file.write(text)
            log_file.flush()
            sys.stdout.write(f"[{name}] {text}")
            sys.stdout.flush()
        log_file.close()

    def wait_until_ready(self, name, seconds=90):
        deadline = time.time() + seconds
        while time.time() < deadline:
            process = self.processes[name]
            if process.poll() is not None:
                raise SystemExit(f"{name} exited with status {process.returncode}; see {self.runtime}/logs/{name}.log")
            try:
                with urllib.request.urlopen(f"{self.service_url(name)}/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise SystemExit(f"{name} did not become ready in {seconds} s; see {self.runtime}/logs/{name}.log")

    def stop_service(self, name, seconds=10):
        """A graceful stop: SIGTERM, then SIGKILL after `seconds`. Returns the exit status (-9 if it was killed)."""
        process = self.processes.pop(name)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def stop_services(self, names, seconds=10):
        """Graceful stops in parallel. Returns {name: (exit status, seconds until it was seen stopped)}, the services
        checked in the given order (so a later one's time is at least an earlier one's); -9 means it was killed."""
        started = time.monotonic()
        for name in names:
            if self.processes[name].poll() is None:
                self.processes[name].terminate()
        return {name: (self.stop_service(name, max(0.1, seconds - (time.monotonic() - started))),
                       round(time.monotonic() - started, 2))
                for name in names}

    def kill_service(self, name):
        """An abrupt end (SIGKILL): no shutdown hooks, nothing flushed."""
        process = self.processes.pop(name)
        process.kill()
        process.wait()

    def running(self, name):
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    # The gateway

    def start_gateway(self):
        self.tls_certificate, key = ensure_tls_certificate()
        directory = self.runtime / "gateway"
        for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (directory / "temp" / temp).mkdir(parents=True, exist_ok=True)
        values = {
            "GATEWAY_LISTEN_ADDRESS": self.profile.gateway_listen_address,
            "GATEWAY_HTTP_PORT": self.profile.gateway_http_port,
            "GATEWAY_HTTPS_PORT": self.profile.gateway_https_port,
            "GATEWAY_PUBLIC_HTTPS_PORT": self.profile.gateway_https_port,
            "GATEWAY_TLS_CERT": self.tls_certificate, "GATEWAY_TLS_KEY": key,
            "GATEWAY_ACCESS_LOG": self.runtime / "logs" / "gateway-access.log",
            "GATEWAY_ERROR_LOG": self.runtime / "logs" / "gateway-error.log",
            "GATEWAY_RUNTIME": directory, "GATEWAY_CONF": directory / "gateway.conf",
            "CONSOLE_ROOT": ROOT / "web" / "console", "LEAFLET_ROOT": "/usr/share/javascript/leaflet",
            "DEV_PARTIES_FILE": directory / "dev-parties.json", "CONSOLE_CONFIG_FILE": directory / "console-config.json",
            # As root, nginx's workers would otherwise run as nobody, who cannot write the temp folders here.
            "NGINX_USER": "user root;" if os.geteuid() == 0 else "",
            **GATEWAY_LIMITS,
        }
        # The console's map tiles: CONSOLE_TILE_URL (OpenStreetMap's by default; "grid" draws a plain grid offline).
        tiles = os.environ.get("CONSOLE_TILE_URL", self.profile.console_tile_url)
        (directory / "console-config.json").write_text(json.dumps({"tileUrl": tiles}))
        gateway_conf = GATEWAY_TEMPLATES.joinpath("gateway.conf.template").read_text()
        for name, variable in SERVICES.items():
            # One `server` line per instance, each with the template's parameters.
            gateway_conf = re.sub(
                r"server \$\{" + variable + r"\}([^;]*);",
                lambda line, name=name: " ".join(f"server 127.0.0.1:{self.profile.port(instance)}{line[1]};"
                                                 for instance in self.profile.instance_names(name)),
                gateway_conf)
        rendered = directory / "gateway.conf.template"
        rendered.write_text(gateway_conf)
        (directory / "gateway.conf").write_text(render(rendered, values))
        (directory / "nginx.conf").write_text(render(GATEWAY_TEMPLATES / "nginx.conf.template", values))
        (directory / "socket.conf").write_text(render(GATEWAY_TEMPLATES / "socket.conf.template", values))
        (directory / "security-headers.conf").write_text(
            render(GATEWAY_TEMPLATES / "security-headers.conf.template", values))
        check = subprocess.run([nginx_executable(), "-t", "-p", directory, "-c", directory / "nginx.conf"],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"the gateway configuration is invalid:\n{check.stderr}")
        self.gateway = subprocess.Popen([nginx_executable(), "-p", directory, "-c", directory / "nginx.conf"],
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 15
        while not port_in_use(self.profile.gateway_https_port):
            if self.gateway.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the gateway did not start; see {self.runtime}/logs/gateway-error.log")
            time.sleep(0.1)


@contextlib.contextmanager
def started(profile, **options):
    """A System for `profile`, started, and stopped when the block ends (however it ends)."""
    running = System(profile, **options)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run"])
    parser.parse_args()

    instances = int(os.environ.get("INSTANCES", "1"))
    if not 1 <= instances <= 9:
        raise SystemExit(f"INSTANCES={instances}: give 1 to 9 instances per service")
    listen = os.environ.get("GATEWAY_LISTEN_ADDRESS", RUN.gateway_listen_address)
    if listen not in ("127.0.0.1", "localhost"):
        log(f"warning: GATEWAY_LISTEN_ADDRESS={listen}: the gateway is reachable from other machines. Anyone who "
            f"reaches it can use the system as its demo parties do: their tokens are printed here (the console's "
            f"party picker serves them to this machine only), and its TLS certificate is self-signed")
    system = System(dataclasses.replace(RUN, instances=instances, gateway_listen_address=listen), echo_logs=True)
    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        system.start()
        sys.path.insert(0, str(ROOT / "Tests" / "python"))
        import gateway_kit
        gateway = gateway_kit.Gateway(system.gateway_url, system.tls_certificate, system.bin)
        cast = gateway_kit.seed_demo(gateway)
        # The console's party picker signs in as these (local runs only: the dev key signed them).
        parties = [{"role": party.role, "id": party.id, "name": party.name, "token": party.token}
                   for party in (cast.customer, cast.vendor, cast.rider, cast.second_rider, cast.technician, cast.admin)]
        (system.runtime / "gateway" / "dev-parties.json").write_text(json.dumps(parties))
        print(gateway_kit.describe_running_system(system, cast), flush=True)
        while not stopping.is_set():
            for name, process in system.processes.items():
                if process.poll() is not None:
                    log(f"{name} exited (status {process.returncode}); stopping the rest")
                    stopping.set()
            if system.gateway.poll() is not None:
                log(f"the gateway exited; see {system.runtime}/logs/gateway-error.log; stopping the rest")
                stopping.set()
            stopping.wait(0.5)
    finally:
        log("stopping")
        system.stop()


if __name__ == "__main__":
    main()
