"""A local cluster: a controller and N brokers as processes on 127.0.0.1.

Start-up order: the controller first (its API URL is every broker's
`--controller-url`), then the brokers, then (for `tinystream dev`) the
dashboard inside this supervisor and, when the [registry] extra is installed,
a `tinystream schema-registry` child on the brokers. Each child is a plain
`python -m tinystream controller|broker ...` process in its own session
(Ctrl-C reaches the supervisor only, which stops children in order). Its
recorded command line and environment alone start it again on its data:
ports chosen by the OS (`--port 0`) are written back into the command line
once the child reports them, so a restart comes back on the same address.
Clients use PLAINTEXT on 127.0.0.1; brokers replicate on their own
authenticated listener (replication.py), the only place a request may act
as a broker.

Readiness is read from each child's stdout: `controller ready url=...`,
`broker N ready bootstrap=...`, `broker N listener NAME=host:port` and
`broker N admin=...`, `schema-registry=URL`. Everything a child
writes (stdout and stderr) goes to `<logs>/<name>.log`, appended across
restarts, so a failed test or a dead broker leaves its story behind.

The supervisor reports a child that dies and keeps the rest running; it
restarts nothing by itself. Tests (the chaos suite) drive the children
directly: `kill` (SIGKILL), `stop` (SIGTERM), `start`, `restart`, `pause`
(SIGSTOP), `resume` (SIGCONT), `wipe` (delete its data).

    with LocalCluster(brokers=3, data_dir=tmp, first_port=0) as cluster:
        cluster.bootstrap                       # "127.0.0.1:40001,127.0.0.1:40002,..."
        cluster.broker(1).kill(); cluster.broker(1).start()
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tinystream.config import COMPONENTS
from tinystream.controller_auth import ADMIN, broker_principal, ensure_secret_file, token_for, write_token_file
from tinystream.dev.dashboard import Dashboard
from tinystream.dev.replication import owned_by_user, replication_settings

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
CONTROLLER_PORT = 9091  # next to Kafka's 9092, as KRaft's controller listener usually is
DASHBOARD_PORT = 3200
SCHEMA_REGISTRY_PORT = 8081  # Confluent's

_CONTROLLER_READY = re.compile(r"controller ready url=(\S+)")
_BOOTSTRAP = re.compile(r"ready bootstrap=(\S+)")
_ADMIN = re.compile(r"admin=(http://\S+)")
_LISTENER = re.compile(r"broker \d+ listener ([A-Z0-9_]+)=(\S+)")
_REGISTRY = re.compile(r"schema-registry=(http://\S+)")
_PORT = re.compile(r":(\d+)$")

# Keys `dev` sets itself on each child; a `--set` of one of these would break the layout.
_OWNED_KEYS = frozenset({"broker.id", "port", "host", "log.dirs", "admin.port", "controller.url", "state.file",
                         "dashboard.port"})


class ClusterError(RuntimeError):
    """A child did not start, or exited before it was ready."""


@dataclass(slots=True, eq=False)
class Child:
    """One supervised process: its command line, environment, log, and state."""

    name: str  # "controller", "broker-0", ...
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    data_path: Path  # what `wipe` deletes: a broker's log dir, the controller's state dir
    broker_id: int | None = None
    process: subprocess.Popen[bytes] | None = None
    url: str | None = None  # controller API URL
    bootstrap: str | None = None  # broker "host:port"
    admin_url: str | None = None  # broker admin HTTP
    paused: bool = False
    exit_reported: bool = False
    _ready: threading.Event = field(default_factory=threading.Event)
    _reader: threading.Thread | None = None

    # -- state -------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process else None

    @property
    def command(self) -> str:
        return subprocess.list2cmdline(self.argv)

    # -- control -----------------------------------------------------------------

    def start(self, *, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start the process from its recorded command line and wait until it says it is ready."""
        if self.running:
            raise ClusterError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._ready.clear()
        self.paused = False
        self.exit_reported = False
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child's reader thread
        log.write(f"--- {time.strftime('%H:%M:%S')} start: {self.command}\n".encode())
        log.flush()
        self.process = subprocess.Popen(
            self.argv, env=self.env, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children in order
        )
        self._reader = threading.Thread(target=self._read, args=(self.process, log), daemon=True,
                                        name=f"{self.name}-stdout")
        self._reader.start()
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if not self.running:
                raise ClusterError(f"{self.name} exited with code {self.returncode} before it was ready "
                                   f"(log: {self.log_path})")
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.name} not ready after {timeout_s:.0f} s (log: {self.log_path})")

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would: no shutdown code runs."""
        self._signal(signal.SIGKILL)
        self._wait()

    def stop(self, *, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (a clean shutdown), SIGKILL after `timeout_s`; returns the exit code."""
        if not self.running:
            return self.returncode
        if self.paused:
            self.resume()
        self._signal(signal.SIGTERM)
        try:
            return self._wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.returncode

    def restart(self, *, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.stop()
        self.start(timeout_s=timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the process is frozen (a long GC pause, a hung VM), its sockets stay open."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def wipe(self) -> None:
        """Delete the child's data (it must be stopped): it comes back empty."""
        if self.running:
            raise ClusterError(f"stop {self.name} before wiping its data")
        shutil.rmtree(self.data_path, ignore_errors=True)

    # -- internals ---------------------------------------------------------------

    def _signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    def _wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        if self.process is None:
            return None
        code = self.process.wait(timeout_s)
        if self._reader is not None:
            self._reader.join(5)
        return code

    def _read(self, process: subprocess.Popen[bytes], log) -> None:  # type: ignore[no-untyped-def]
        assert process.stdout is not None
        try:
            for raw in process.stdout:
                log.write(raw)
                log.flush()
                self._parse(raw.decode(errors="replace").rstrip())
        finally:
            code = process.wait()
            log.write(f"--- {time.strftime('%H:%M:%S')} exit code {code}\n".encode())
            log.close()

    def _parse(self, line: str) -> None:
        if match := _CONTROLLER_READY.search(line):
            self.url = match.group(1)
            self._pin("--port", _port(self.url))
            self._ready.set()
        if match := _BOOTSTRAP.search(line):
            self.bootstrap = match.group(1)
            self._pin("--port", _port(self.bootstrap))
        if match := _LISTENER.search(line):
            self._pin_listener(match.group(1), _port(match.group(2)))
        if match := _ADMIN.search(line):
            self.admin_url = match.group(1)
            self._pin("--admin-port", _port(self.admin_url))
            self._ready.set()
        if match := _REGISTRY.search(line):
            self.url = match.group(1)
            self._pin("--port", _port(self.url))
            self._ready.set()

    def _pin(self, flag: str, port: int) -> None:
        """Write an OS-chosen port back into the command line, so a restart keeps the address."""
        if flag in self.argv:
            self.argv[self.argv.index(flag) + 1] = str(port)


    def _pin_listener(self, name: str, port: int) -> None:
        """The same for one listener of a `--set listeners=...` item."""
        for i, item in enumerate(self.argv):
            if item.startswith("listeners="):
                self.argv[i] = re.sub(rf"(\b{name}://[^,]*:)\d+", rf"\g<1>{port}", item)


def _port(address: str) -> int:
    match = _PORT.search(address.rstrip("/"))
    if not match:
        raise ClusterError(f"no port in {address!r}")
    return int(match.group(1))


def split_settings(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """`--set KEY=VALUE` items -> (broker items, controller items), by which component knows the key.

    A key both know (num.partitions, default.replication.factor) goes to
    both, so a topic created either way gets the same default.
    """
    broker, controller = COMPONENTS["broker"], COMPONENTS["controller"]
    to_broker: list[str] = []
    to_controller: list[str] = []
    for item in items:
        key, sep, _ = item.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        if key in _OWNED_KEYS:
            raise ValueError(f"{key} is chosen by the local cluster (use --port / --data-dir)")
        if not broker.accepts(key) and not controller.accepts(key):
            raise ValueError(f"unknown setting {key!r} (not a broker or controller key)")
        if broker.accepts(key):
            to_broker.append(item)
        if controller.accepts(key):
            to_controller.append(item)
    return to_broker, to_controller


def _with_settings(argv: list[str], items: Sequence[str]) -> list[str]:
    for item in items:
        argv += ["--set", item]
    return argv


def broker_argv(*, broker_id: int, port: int, log_dir: Path, controller_url: str | None,
                overrides: Sequence[str], token_file: Path | None = None,
                listeners: Mapping[str, str] | None = None) -> list[str]:
    """A broker's command line; `listeners`: its listener settings (replication.py), before `overrides`."""
    argv = [sys.executable, "-m", "tinystream", "broker", "--broker-id", str(broker_id),
            "--port", str(port), "--log-dirs", str(log_dir), "--admin-port", "0"]
    if controller_url:
        argv += ["--controller-url", controller_url]
    if token_file:
        argv += ["--set", f"controller.token.file={token_file}"]
    return _with_settings(argv, [*(f"{k}={v}" for k, v in (listeners or {}).items()), *overrides])


def registry_argv(*, port: int, bootstrap: str, replication_factor: int) -> list[str]:
    """The schema registry's command line (loopback, no logins: a local cluster's clients have none either)."""
    return [sys.executable, "-m", "tinystream", "schema-registry", "--bootstrap", bootstrap, "--port", str(port),
            "--replication-factor", str(replication_factor)]


def registry_installed() -> bool:
    """Whether the [registry] extra is there (aiokafka, fastavro); `dev` starts a registry only then."""
    return all(importlib.util.find_spec(name) is not None for name in ("aiokafka", "fastavro"))


def controller_argv(*, port: int, state_file: Path, overrides: Sequence[str]) -> list[str]:
    # The supervisor hosts the cluster's dashboard itself (it knows every broker's admin URL, and
    # keeps answering while the controller is down), so the controller child hosts none.
    argv = [sys.executable, "-m", "tinystream", "controller", "--port", str(port), "--state-file", str(state_file),
            "--set", "dashboard.enabled=false"]
    return _with_settings(argv, overrides)


def replicated_defaults(brokers: int) -> list[str]:
    """Cluster defaults for N local brokers: RF min(N, 3) like Kafka's production advice, Kafka's own
    offsets.topic.replication.factor and transaction.state.log.replication.factor of 3 (capped at N),
    and groups that start without the 3 s wait."""
    rf = min(brokers, 3)
    return [f"default.replication.factor={rf}", f"offsets.topic.replication.factor={rf}",
            f"transaction.state.log.replication.factor={rf}", "group.initial.rebalance.delay.ms=0"]


class LocalCluster:
    """A controller, N brokers and (optionally) the dashboard; see the module docstring."""

    def __init__(self, *, brokers: int, data_dir: str | Path, first_port: int = 9092,
                 overrides: Sequence[str] = (), controller_port: int | None = None,
                 dashboard_port: int | None = None, log_dir: str | Path | None = None,
                 schema_registry_port: int | None = None, echo: Callable[[str], None] = print,
                 broker_overrides: Mapping[int, Sequence[str]] | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.log_dir = Path(log_dir).resolve() if log_dir else self.data_dir / "logs"
        self.echo = echo
        self.failed = False
        self.dashboard_port = (DASHBOARD_PORT if first_port else 0) if dashboard_port is None else dashboard_port
        self.dashboard_url: str | None = None
        self._dashboard: Dashboard | None = None
        self.schema_registry_port = ((SCHEMA_REGISTRY_PORT if first_port else 0) if schema_registry_port is None
                                     else schema_registry_port)
        self.schema_registry: Child | None = None
        to_broker, to_controller = split_settings([*replicated_defaults(brokers), *overrides])
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        port = (CONTROLLER_PORT if first_port else 0) if controller_port is None else controller_port
        # The controller API takes only tokens its secret made (tinystream/controller_auth.py);
        # each broker gets its own, beside the secret.
        self.secret_file = self.data_dir / "controller" / "controller.secret"
        self.controller = Child(
            name="controller",
            argv=controller_argv(port=port, state_file=self.data_dir / "controller" / "state.json",
                                 overrides=[*to_controller, f"controller.secret.file={self.secret_file}"]),
            env=dict(env), log_path=self.log_dir / "controller.log", data_path=self.data_dir / "controller",
        )
        self._broker_settings = to_broker
        self._own_settings = dict(broker_overrides or {})  # broker id -> its own KEY=VALUEs (broker.rack, ...)
        # Brokers replicate on their own authenticated listener unless the user sets listeners herself.
        self._replication_dir = None if owned_by_user(to_broker) else self.data_dir / "replication"
        self._first_port = first_port
        self.brokers = [
            Child(name=f"broker-{i}", argv=[], env=dict(env), log_path=self.log_dir / f"broker-{i}.log",
                  data_path=self.data_dir / f"broker-{i}", broker_id=i)
            for i in range(brokers)
        ]
        self._stopping = False

    # -- lookups -------------------------------------------------------------------

    @property
    def children(self) -> list[Child]:
        return [self.controller, *self.brokers, *([self.schema_registry] if self.schema_registry else [])]

    @property
    def controller_url(self) -> str:
        assert self.controller.url, "the controller has not started"
        return self.controller.url

    @property
    def admin_token(self) -> str:
        """A token for the controller API's admin principal."""
        return token_for(ensure_secret_file(self.secret_file), ADMIN)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap or "?" for b in self.brokers)

    def broker(self, broker_id: int) -> Child:
        return self.brokers[broker_id]

    # -- whole cluster ---------------------------------------------------------------

    def open(self, *, dashboard: bool = False, schema_registry: bool = False) -> str:
        """Start the controller, every broker, then (if asked) the dashboard and a schema registry; returns
        the bootstrap list. Raises ClusterError."""
        self._stopping = False
        try:
            secret = ensure_secret_file(self.secret_file)
            self.controller.start()
            for b in self.brokers:
                if not b.argv:
                    assert b.broker_id is not None
                    port = (self._first_port + b.broker_id) if self._first_port else 0
                    token_file = self.data_dir / "controller" / f"broker-{b.broker_id}.token"
                    write_token_file(token_file, token_for(secret, broker_principal(b.broker_id)))
                    listeners = (replication_settings(self._replication_dir, host="127.0.0.1", port=port)
                                 if self._replication_dir else None)
                    b.argv = broker_argv(broker_id=b.broker_id, port=port, log_dir=b.data_path,
                                         controller_url=self.controller.url,
                                         overrides=[*self._broker_settings, *self._own_settings.get(b.broker_id, ())],
                                         token_file=token_file, listeners=listeners)
            threads = [threading.Thread(target=self._start_quietly, args=(b,)) for b in self.brokers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            not_ready = [b for b in self.brokers if not b._ready.is_set()]
            if not_ready:
                raise ClusterError(", ".join(f"{b.name} did not become ready (log: {b.log_path})"
                                             for b in not_ready))
            if dashboard:
                self._dashboard = Dashboard(
                    controller_url=lambda: self.controller.url,
                    controller_token=token_for(secret, ADMIN),
                    admin_urls=lambda: {b.broker_id: b.admin_url for b in self.brokers
                                        if b.admin_url and b.broker_id is not None},
                    port=self.dashboard_port,
                )
                self.dashboard_url = self._dashboard.start()
            if schema_registry:
                self._start_schema_registry()
        except BaseException:
            self.failed = True
            self.close()
            raise
        return self.bootstrap

    def _start_schema_registry(self) -> None:
        if self.schema_registry is None:
            self.schema_registry = Child(
                name="schema-registry",
                argv=registry_argv(port=self.schema_registry_port, bootstrap=self.bootstrap,
                                   replication_factor=min(3, len(self.brokers))),
                env=dict(self.controller.env), log_path=self.log_dir / "schema-registry.log",
                data_path=self.data_dir / "schema-registry")  # nothing on disk: its state is the _schemas topic
        try:
            self.schema_registry.start()
        except ClusterError as exc:  # an optional extra: the cluster runs without it (port 8081 taken, ...)
            self.echo(f"dev: the schema registry did not start ({exc}); the cluster runs without it")
            self.schema_registry = None

    def _start_quietly(self, child: Child) -> None:
        try:
            child.start()
        except ClusterError:
            pass  # reported by open()

    def announce(self) -> None:
        """The lines `tinystream dev` prints once everything is ready."""
        self.echo(f"cluster ready bootstrap={self.bootstrap}")
        if self._replication_dir is not None:
            self.echo("security: clients use PLAINTEXT without logins on 127.0.0.1 (a local cluster); brokers "
                      f"replicate on their own SCRAM listener (credentials in {self._replication_dir})")
        self.echo(f"controller api {self.controller.url}  (pid {self.controller.pid}, "
                  f"state {self.controller.data_path})")
        if self.dashboard_url:
            self.echo(f"dashboard {self.dashboard_url}  (no login: it listens on 127.0.0.1 alone)")
        if self.schema_registry is not None and self.schema_registry.url:
            self.echo(f"schema-registry={self.schema_registry.url}  (Confluent's REST API; no login: 127.0.0.1 alone; "
                      f"pid {self.schema_registry.pid})")
        for b in self.brokers:
            self.echo(f"broker {b.broker_id} admin {b.admin_url}  (/healthz, /metrics; pid {b.pid}, "
                      f"kafka {b.bootstrap}, data {b.data_path})")
        self.echo(f"logs {self.log_dir}")

    def check_children(self) -> list[Child]:
        """Report (once) every child that exited on its own; returns them."""
        dead = []
        for child in self.children:
            if child.process is None or child.running or child.exit_reported or self._stopping:
                continue
            child.exit_reported = True
            self.failed = True
            dead.append(child)
            self.echo(f"dev: {child.name} (pid {child.pid}) exited with code {child.returncode}; "
                      f"the others keep running. Log: {child.log_path}")
            self.echo(f"dev: restart it with: {child.command}")
        return dead

    def close(self) -> None:
        """Stop brokers (in parallel, cleanly), then the controller; idempotent."""
        self._stopping = True
        if self._dashboard is not None:
            self._dashboard.stop()
            self._dashboard = None
        if self.schema_registry is not None:
            self.schema_registry.stop()
        threads = [threading.Thread(target=b.stop) for b in self.brokers if b.running]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.controller.stop()

    def __enter__(self) -> LocalCluster:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run_until_stopped(self) -> None:
        """`tinystream dev`: start, announce, watch children until SIGINT / SIGTERM, stop."""
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                self.open(dashboard=True, schema_registry=registry_installed())
            except ClusterError as exc:
                self.echo(f"dev: {exc}")
                return
            self.announce()
            while not stop.wait(0.2):
                self.check_children()
            self.echo("dev: stopping")
        finally:
            self.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- async wrappers (tinystream demo) ------------------------------------------

    async def start(self) -> str:
        bootstrap = await asyncio.to_thread(self.open)
        self.announce()
        return bootstrap

    async def stop(self) -> None:
        await asyncio.to_thread(self.close)
