"""In-cluster workloads of the kind suite: waits, an acks=all writer and a reader in a client pod.

The writer and the reader are inpod_client.py run by the pod's Python; a
`Client` says which pod, which bootstrap address and, on a secured cluster,
which credentials (environment variables inpod_client.py reads: protocol,
SASL user and password, the CA file).
"""

from __future__ import annotations

import functools
import subprocess
import threading
import time
from dataclasses import dataclass, field

from kind_helpers import HERE, Kube, measure, tool
from manifests import CLIENT_POD, CLUSTER, NAMESPACE, WRITES

from tinystream.testing import waiting

CLIENT_SCRIPT = (HERE / "inpod_client.py").read_text()


# kubectl every 3 s unless a wait says otherwise; a check's failed assertion means "not yet".
wait_until = functools.partial(waiting.wait_until, interval=3.0, retry_on=(AssertionError,))


@dataclass(frozen=True)
class Client:
    """Where an in-cluster client runs and how it reaches the brokers."""

    pod: str = CLIENT_POD
    bootstrap: str = f"{CLUSTER}-kafka:9092"
    env: tuple[tuple[str, str], ...] = ()  # e.g. (("KAFKA_SECURITY_PROTOCOL", "SASL_SSL"), ...)

    def command(self, *args: str) -> list[str]:
        """`kubectl exec` arguments running inpod_client.py (on stdin) with these arguments."""
        env = [f"{k}={v}" for k, v in self.env]
        return ["exec", "-i", self.pod, "--", "env", *env, "python3", "-", *args]

    def run(self, kube: Kube, *args: str, timeout: float = 300) -> list[str]:
        return kube.kubectl(*self.command(*args), input=CLIENT_SCRIPT, timeout=timeout).stdout.splitlines()


PLAIN_CLIENT = Client()


def read_topic(kube: Kube, name: str, client: Client = PLAIN_CLIENT) -> list[str]:
    """Every value of a topic, read by a consumer in the client pod."""
    out = client.run(kube, "read", client.bootstrap, name)
    assert out and out[-1].startswith("END "), out[-5:]
    return out[:-1]


@dataclass
class Writer:
    """An acks=all writer in the client pod, run in the background for `seconds`."""

    kube: Kube
    prefix: str
    seconds: float
    client: Client = PLAIN_CLIENT
    topic: str = WRITES
    acked: dict[str, float] = field(default_factory=dict)  # value -> seconds since the writer started
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    done: bool = False

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()  # the reader thread adds to `acked` while tests look at it

    def start(self) -> Writer:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        proc = subprocess.Popen(
            [tool("kubectl") or "kubectl", "--kubeconfig", self.kube.env_kubeconfig, "-n", NAMESPACE,
             *self.client.command("write", self.client.bootstrap, self.topic, self.prefix, str(self.seconds))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(CLIENT_SCRIPT)
        proc.stdin.close()
        for line in proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "A":
                value, at = rest.split()
                with self._lock:
                    self.acked[value] = float(at)
            elif kind == "E":
                self.errors.append(rest)
            elif kind == "DONE":
                self.done = True
        proc.wait()
        if not self.done:
            self.errors.append("writer ended early: " + proc.stderr.read()[-2000:])

    def stop(self) -> None:
        """Ask the writer to finish its batch and end (it looks for a stop file)."""
        self.kube.kubectl("exec", self.client.pod, "--", "touch", f"/tmp/stop-{self.prefix}", timeout=60)

    def join(self) -> None:
        self._thread.join(self.seconds + 120)
        assert self.done, f"the writer did not finish: {self.errors[-5:]}"
        assert self.acked, f"nothing was acknowledged: {self.errors[-5:]}"

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def acked_since(self, moment: float) -> int:
        """How many records were acknowledged after `moment` (a time.monotonic() of this process).

        The writer stamps acks with seconds since it started in the pod, a little after `started`:
        the count errs on the side of too few."""
        since = moment - self.started
        with self._lock:
            return sum(1 for t in self.acked.values() if t > since)

    def longest_stall(self) -> float:
        """The longest time (s) without an acknowledgement."""
        with self._lock:
            times = sorted(self.acked.values())
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    def check_nothing_lost(self, kube: Kube, what: str) -> None:
        read = set(read_topic(kube, self.topic, self.client))
        with self._lock:
            acked = set(self.acked)
        lost = sorted(acked - read, key=lambda v: int(v.rsplit("-", 1)[1]))
        measure(f"{what}: records acked / lost / send errors",
                f"{len(acked)} / {len(lost)} / {len(self.errors)}")
        assert not lost, f"{len(lost)} acknowledged records lost, first {lost[:10]}"
