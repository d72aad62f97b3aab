"""docker-compose.yml brought up with podman-compose, as `make test-containers` runs it.

podman-compose 1.0.3 (Debian 12's) starts every service at once: it ignores `depends_on` conditions, and podman runs
healthchecks only through systemd timers, which a host without systemd lacks. So this starts the services one
dependency level at a time itself and waits for each condition the file states: `service_healthy` by running the
service's own healthcheck (`podman healthcheck run`) until it passes, `service_completed_successfully` by waiting
for the one-shot container's exit code. Docker Compose v2 does the same on its own (`docker compose up --wait`).
It also pins the network bridge's MAC address once the bridge exists. Linux gives a bridge whose address was never
set the lowest address among its ports, so it changes whenever a container's veth comes or goes; netavark sets a
fixed one only since 1.9 (containers/netavark#833), and Debian 12 ships 1.4. When the container lending its address
stops (a one-shot like dev-keys ending, a replica stopped), every other container's ARP entry for the gateway, where
aardvark-dns answers, points at an address nobody has: name lookups hang until the entry is probed again, 10 s and
more, which the services saw as `Connect timeout` to Postgres and the broker for up to a minute.
"""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "deploy" / "containers"
COMPOSE_FILES = [ROOT / "docker-compose.yml", HERE / "compose.standins.yml"]


def merge(base, override):
    """`override` laid over `base`: mappings merged key by key, anything else replaced."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    return {**base, **{key: merge(base.get(key), value) for key, value in override.items()}}


def depends_on(spec):
    """A service's `depends_on` as a mapping (the list form means `service_started` for each)."""
    wanted = spec.get("depends_on") or {}
    return {name: None for name in wanted} if isinstance(wanted, list) else wanted


def log(message):
    print(f"==> {message}", flush=True)


class Stack:
    """One compose project: its services, their containers (`PROJECT_SERVICE_N`) and their volumes."""

    def __init__(self, project, environment):
        self.project = project
        self.environment = {**os.environ, "CONTAINERS_CONF": str(HERE / "containers.conf"), **environment}
        self.services = self._config()["services"]

    def _compose(self, *arguments):
        """Runs podman-compose on the project's files; its chatter is shown only when it fails."""
        command = ["podman-compose", "-p", self.project]
        for path in COMPOSE_FILES:
            command += ["-f", str(path)]
        result = subprocess.run(command + list(arguments), cwd=ROOT, env=self.environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command + list(arguments))} failed:\n{result.stdout}")
        return result.stdout

    def podman(self, *arguments, check=True, timeout=None):
        """Runs podman with the project's settings (runc, ulimits); its standard output."""
        result = subprocess.run(["podman", *arguments], env=self.environment, text=True, timeout=timeout,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if check and result.returncode != 0:
            raise RuntimeError(f"podman {' '.join(arguments)} failed ({result.returncode}): {result.stderr[-2000:]}")
        return result.stdout

    def _config(self):
        """The compose files merged as compose merges them (mappings key by key, the later file winning), with
        `${VAR}` and `${VAR:-default}` filled in from the environment. podman-compose 1.0.3 has no `config`."""
        merged = {}
        for path in COMPOSE_FILES:
            text = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}",
                          lambda m: self.environment.get(m.group(1)) or (m.group(2) or ""), path.read_text())
            merged = merge(merged, yaml.safe_load(text))
        return merged

    def replicas(self, service):
        """How many containers the service runs (`deploy.replicas`, from INSTANCES)."""
        return int((self.services[service].get("deploy") or {}).get("replicas", 1))

    def containers(self, service):
        """The service's container names."""
        return [f"{self.project}_{service}_{n}" for n in range(1, self.replicas(service) + 1)]

    def levels(self):
        """The services in dependency order, one list per level (a level needs only the levels before it)."""
        needs = {name: set(depends_on(spec)) for name, spec in self.services.items()}
        placed, levels = set(), []
        while len(placed) < len(needs):
            level = sorted(name for name, wanted in needs.items() if name not in placed and wanted <= placed)
            if not level:
                raise RuntimeError(f"a dependency cycle among {sorted(set(needs) - placed)}")
            levels.append(level)
            placed.update(level)
        return levels

    def conditions(self):
        """What each service's dependants wait for: service_healthy, service_completed_successfully or
        service_started."""
        wanted = {}
        for spec in self.services.values():
            for name, condition in depends_on(spec).items():
                wanted[name] = (condition or {}).get("condition", "service_started")
        return wanted

    def up(self, timeout=300):
        """Creates every container, then starts them in dependency order, each once what it needs holds. Returns
        how long each container took from its start to passing its healthcheck, in seconds."""
        self._compose("up", "--no-start", "--no-build")
        conditions, healthy = self.conditions(), {}
        for level in self.levels():
            log(f"starting {', '.join(level)}")
            for service in level:
                condition = conditions.get(service, "service_started")
                for container in self.containers(service):
                    self.start(container)
                    started = time.monotonic()
                    if condition == "service_healthy":
                        healthy[container] = self.wait_healthy(container, timeout, since=started)
                    elif condition == "service_completed_successfully":
                        self.wait_completed(container, timeout)
        return healthy

    def wait_healthy(self, container, timeout, since=None):
        """Runs the container's healthcheck until it passes; fails with its log if it does not within `timeout`.
        Returns the seconds from `since` (when the container was started) to passing."""
        started = since if since is not None else time.monotonic()
        while True:
            result = subprocess.run(
                ["podman", "healthcheck", "run", container], env=self.environment, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if result.returncode == 0:
                log(f"{container} healthy after {time.monotonic() - started:.1f} s")
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{container} not healthy after {timeout} s:\n{self.logs(container)}")
            time.sleep(1)

    def wait_completed(self, container, timeout):
        """Waits for a one-shot container to end; fails with its log unless it ended with 0."""
        code = self.podman("wait", container, timeout=timeout).strip()
        if code != "0":
            raise RuntimeError(f"{container} ended with {code}:\n{self.logs(container)}")
        log(f"{container} completed")

    def logs(self, container, tail=80):
        """The container's last log lines, standard output and error together."""
        return subprocess.run(
            ["podman", "logs", "--tail", str(tail), container], env=self.environment, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30).stdout

    def stop(self, container, seconds=10):
        """Stops one container (a graceful SIGTERM, then SIGKILL after `seconds`)."""
        self.podman("stop", "-t", str(seconds), container)

    def start(self, container):
        """Starts a container (a stopped one again), then pins the bridge address of its networks."""
        self.podman("start", container)
        self.pin_bridge_addresses(container)

    def pin_bridge_addresses(self, container):
        """Gives each bridge the container is on a fixed MAC address unless it has one (see the module's doc): the
        one Kubernetes' bridge plugin derives from the gateway, 0a:58 and the gateway's IPv4 address."""
        attached = json.loads(self.podman("inspect", "--format", "{{json .NetworkSettings.Networks}}", container))
        for network in attached or {}:
            settings = json.loads(self.podman("network", "inspect", network))[0]
            interface = Path("/sys/class/net") / settings.get("network_interface", "")
            gateways = [subnet["gateway"] for subnet in settings.get("subnets", []) if "." in subnet.get("gateway", "")]
            if settings.get("driver") != "bridge" or not gateways or not (interface / "address").exists():
                continue  # rootless or another driver: the bridge is not ours to set
            if (interface / "addr_assign_type").read_text().strip() == "3":
                continue  # set already (netavark 1.9 and later, or an earlier call)
            address = "0a:58:" + ":".join(f"{int(octet):02x}" for octet in gateways[0].split("."))
            subprocess.run(["ip", "link", "set", "dev", interface.name, "address", address], check=True)
            log(f"bridge {interface.name} of {network} pinned to {address}")

    def copy_out(self, container, source, target):
        """Copies a file out of a container (a stopped one too)."""
        self.podman("cp", f"{container}:{source}", str(target))

    def memory(self):
        """Each running container's memory use as `podman stats` prints it (e.g. "10.69MB")."""
        stats = json.loads(self.podman("stats", "--no-stream", "--no-reset", "--format", "json"))
        return {entry["name"]: entry["mem_usage"].split("/")[0].strip() for entry in stats
                if entry["name"].startswith(f"{self.project}_")}

    def down(self):
        """Removes every container, network and volume of the project."""
        try:
            self._compose("down", "-v", "-t", "10")
        except RuntimeError:
            pass  # what it left is removed below
        for kind, name in (("container", "{{.Names}}"), ("volume", "{{.Name}}"), ("network", "{{.Name}}")):
            listing = ["ls", "-a"] if kind == "container" else ["ls"]
            left = self.podman(kind, *listing, "--filter", f"name=^{self.project}_", "--format", name).split()
            if left:
                self.podman(kind, "rm", "-f", *left, check=False)
