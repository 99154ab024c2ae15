"""Broker processes as pods: what the StatefulSet controller and the kubelet do, for one StatefulSet in KMock.

KMock runs no controllers, so nothing would ever start a broker for the
StatefulSet the operator applies. `PodStandIn` plays that part on 127.0.0.1,
from the objects the operator wrote, as a cluster would:

- the StatefulSet controller: one Pod object per ordinal below
  `spec.replicas`, labelled with the template's labels, the pod index and
  the revision (a hash of `spec.template`, as `controller-revision-hash`);
  `status.updateRevision` and the replica counts; `OnDelete`, so a pod is
  replaced (on the newest revision) only after someone deletes it; surplus
  ordinals removed on scale-down.
- the kubelet: each pod runs the container's `args` as `python -m
  tinystream ...`, with the config file from the ConfigMap the pod mounts,
  the container's env (fieldRefs and `$(VAR)` expanded), and a data
  directory per ordinal that outlives the process (the PVC). The Ready
  condition comes from the container's readinessProbe path on its admin
  port, the container state (running, terminated, waiting) from the
  process. A crashed process is restarted (restartPolicy Always) unless a
  test holds it down (CrashLoopBackOff); a deleted pod gets SIGTERM.
- the network: every pod is 127.0.0.1 with ports of its own, kept across
  restarts; the cluster DNS name in `controller.url` resolves to the
  operator's controller API.

Test support only: it does no scheduling, volumes or probes beyond that.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from tinystream.config.layers import env_name
from tinystream.dev.cluster import Child, ClusterError
from tinystream.testing.peers.ports import free_port

log = logging.getLogger(__name__)

REVISION_LABEL = "controller-revision-hash"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
CONFIG_DIR = "/etc/tinystream"
SYNC_INTERVAL_S = 0.2
RESTART_DELAY_S = 1.0
_VAR = re.compile(r"\$\((\w+)\)")
_LABEL_REF = re.compile(r"metadata\.labels\['([^']+)'\]")


def template_revision(statefulset: str, template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
    return f"{statefulset}-{digest}"


def container_env(container: dict[str, Any], pod: dict[str, Any]) -> dict[str, str]:
    """The container's env as the kubelet gives it: fieldRefs resolved, `$(VAR)` expanded in order."""
    env: dict[str, str] = {}
    meta = pod["metadata"]
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), item["value"])
            continue
        path = item["valueFrom"]["fieldRef"]["fieldPath"]
        if path == "metadata.name":
            env[item["name"]] = meta["name"]
        elif path == "metadata.namespace":
            env[item["name"]] = meta["namespace"]
        elif match := _LABEL_REF.fullmatch(path):
            env[item["name"]] = meta["labels"][match.group(1)]
        else:
            raise ValueError(f"the stand-in cannot resolve fieldPath {path!r}")
    return env


@dataclass
class PodRun:
    """One pod's process and its fixed addresses (its "pod IP" ports and its PVC)."""

    ordinal: int
    name: str
    kafka_port: int
    admin_port: int
    data_dir: Path
    replication_port: int = field(default_factory=free_port)  # the REPLICATION listener's
    child: Child | None = None
    starting: asyncio.Task[None] | None = None
    held: bool = False  # a test keeps the crashed container down
    ready: bool | None = None  # as last written to the Pod's status
    state: dict[str, Any] | None = None  # the container state last written
    restarts: int = 0
    probe_failures: int = 0  # readiness probe failures in a row while running
    revision: str = ""
    died_at: float | None = None

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"


@dataclass
class PodStandIn:
    """See the module docstring. `api` is a kmock_helpers.Api in the cluster's namespace."""

    api: Any
    statefulset: str
    workdir: Path
    controller_url: str  # the operator's controller API base (scheme://host:port), as cluster DNS resolves it
    # The kubelet's TokenRequest for a projected service-account token: ordinal -> a token the test's
    # controller takes for that broker (KMock reviews no tokens, so the test's controller checks its own).
    mint_token: Callable[[int], Awaitable[str]] | None = None
    pods: dict[int, PodRun] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _http: aiohttp.ClientSession | None = None
    _status_written: dict[str, Any] = field(default_factory=dict)

    # -- life ---------------------------------------------------------------------------------

    async def __aenter__(self) -> PodStandIn:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        self._task = asyncio.create_task(self._run(), name="pod-standin")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.gather(*(self._stop(run, graceful=True) for run in self.pods.values()))
        if self._http is not None:
            await self._http.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(run.bootstrap for _, run in sorted(self.pods.items()) if run.ready is not None)

    def run_of(self, broker_id: int) -> PodRun:
        return self.pods[broker_id]

    # -- what tests do to pods ----------------------------------------------------------------

    async def crash(self, ordinal: int, *, hold: bool = False) -> None:
        """SIGKILL the pod's process (an OOM kill, a node loss); held: not restarted until `release`."""
        run = self.pods[ordinal]
        run.held = hold
        if run.child is not None:
            await asyncio.to_thread(run.child.kill)

    def release(self, ordinal: int) -> None:
        self.pods[ordinal].held = False

    # -- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bad round must not stop the stand-in; the next one retries
                log.exception("pod stand-in round failed")
            await asyncio.sleep(SYNC_INTERVAL_S)

    async def sync(self) -> None:
        sts = await self.api.get("apps/v1", "statefulsets", self.statefulset)
        pods = {p["metadata"]["name"]: p for p in await self.api.list("v1", "pods")
                if p["metadata"]["name"].startswith(self.statefulset + "-")}
        # A deleted pod's container gets SIGTERM (kubectl delete pod, the operator's roll).
        for run in list(self.pods.values()):
            if run.name not in pods and (run.child is not None or run.starting is not None):
                await self._stop(run, graceful=True)
        if sts is None:
            return
        replicas = int(sts["spec"].get("replicas") or 0)
        template = sts["spec"]["template"]
        revision = template_revision(self.statefulset, template)
        for name in list(pods):  # scale-down: pods of ordinals beyond spec.replicas go
            ordinal = int(name.rsplit("-", 1)[1])
            if ordinal >= replicas:
                await self.api.delete("v1", "pods", name)
                if ordinal in self.pods:
                    await self._stop(self.pods[ordinal], graceful=True)
        for ordinal in range(replicas):
            name = f"{self.statefulset}-{ordinal}"
            run = self.pods.get(ordinal)
            if run is None:
                run = self.pods[ordinal] = PodRun(ordinal, name, free_port(), free_port(),
                                                  self.workdir / f"pvc-data-{name}")
            if name not in pods:
                pods[name] = await self._create_pod(run, sts, revision)
            await self._keep_running(run, pods[name], sts)
            await self._report_readiness(run, template)
        await self._write_statefulset_status(sts, replicas, revision)

    # -- pods ---------------------------------------------------------------------------------

    async def _create_pod(self, run: PodRun, sts: dict[str, Any], revision: str) -> dict[str, Any]:
        template = sts["spec"]["template"]
        labels = {**(template["metadata"].get("labels") or {}), REVISION_LABEL: revision,
                  POD_INDEX_LABEL: str(run.ordinal), "statefulset.kubernetes.io/pod-name": run.name}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": run.name, "labels": labels,
                            "annotations": dict(template["metadata"].get("annotations") or {}),
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                 "name": self.statefulset, "controller": True}]},
               "spec": {**template["spec"], "nodeName": f"node-{run.ordinal % 3}"},
               "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}}
        await self.api.create("v1", "pods", pod)
        run.revision, run.ready, run.held, run.restarts = revision, False, False, 0
        created = await self.api.get("v1", "pods", run.name)
        assert created is not None
        return created

    async def _keep_running(self, run: PodRun, pod: dict[str, Any], sts: dict[str, Any]) -> None:
        if run.running or run.held or (run.starting is not None and not run.starting.done()):
            return
        loop = asyncio.get_running_loop()
        if run.child is not None:  # crashed: restartPolicy Always, after a short back-off
            if run.died_at is None:
                run.died_at = loop.time()
            if loop.time() - run.died_at < RESTART_DELAY_S:
                return
            run.restarts += 1
        run.died_at = None
        run.child = await self._container(run, pod, sts)
        run.starting = asyncio.create_task(self._start(run))

    async def _start(self, run: PodRun) -> None:
        assert run.child is not None
        try:
            await asyncio.to_thread(run.child.start)
        except ClusterError as exc:
            log.warning("%s did not start: %s", run.name, exc)

    async def _container(self, run: PodRun, pod: dict[str, Any], sts: dict[str, Any]) -> Child:
        """The broker container of `pod`: its args, env and mounted ConfigMap, on this pod's ports and PVC."""
        spec = sts["spec"]["template"]["spec"]
        container = spec["containers"][0]
        etc = self.workdir / run.name / "etc"
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
        local_mounts: dict[str, Path] = {}  # a Secret's mount path -> where its files are here
        for volume in spec.get("volumes") or []:
            if "secret" in volume and volume["name"] in mounts:
                local_mounts[mounts[volume["name"]]] = await self._secret_files(run, volume["secret"]["secretName"])
            if "projected" in volume and volume["name"] in mounts:
                local_mounts[mounts[volume["name"]]] = await self._projected_tokens(run, volume)
            if "configMap" in volume:
                config_map = await self.api.get("v1", "configmaps", volume["configMap"]["name"])
                assert config_map is not None, f"{run.name}: ConfigMap {volume['configMap']['name']} is missing"
                etc.mkdir(parents=True, exist_ok=True)
                for key, text in (config_map.get("data") or {}).items():
                    (etc / key).write_text(text)
        args = [str(etc) + a[len(CONFIG_DIR):] if a.startswith(CONFIG_DIR) else a for a in container["args"]]
        env = container_env(container, pod)
        config = self._broker_config(etc)
        assert "controller.url" in config, f"controller.url is not in the mounted ConfigMap ({etc})"
        env.update({  # one host for every pod: its own ports; pod DNS and Service DNS resolve here
            "TINYSTREAM_HOST": "127.0.0.1", "TINYSTREAM_ADVERTISED_HOST": "127.0.0.1",
            "TINYSTREAM_PORT": str(run.kafka_port), "TINYSTREAM_ADVERTISED_PORT": str(run.kafka_port),
            "TINYSTREAM_ADMIN_PORT": str(run.admin_port), "TINYSTREAM_LOG_DIRS": str(run.data_dir),
            "TINYSTREAM_CONTROLLER_URL": self._resolve(str(config["controller.url"])),
        })
        if "listeners" in config:  # CLIENT on the pod's Kafka port, REPLICATION on its own
            ports = {"CLIENT": run.kafka_port, "REPLICATION": run.replication_port}
            env["TINYSTREAM_LISTENERS"] = ",".join(
                f"{name}://127.0.0.1:{ports[name]}"
                for name in (item.partition("://")[0] for item in str(config["listeners"]).split(",")))
            del env["TINYSTREAM_ADVERTISED_PORT"]  # each listener advertises its own port
        for key, value in config.items():  # files in a mounted Secret: where the kubelet put them here
            for mount, local in local_mounts.items():
                if isinstance(value, str) and value.startswith(mount + "/"):
                    env[env_name(key)] = str(local) + value[len(mount):]
        return Child(name=run.name, argv=[sys.executable, "-m", "tinystream", *args],
                     env={**os.environ, **env}, log_path=self.workdir / "logs" / f"{run.name}.log",
                     data_path=run.data_dir, broker_id=run.ordinal)

    async def _projected_tokens(self, run: PodRun, volume: dict[str, Any]) -> Path:
        """A projected volume's service-account tokens, as the kubelet writes them (minted by the test)."""
        folder = self.workdir / run.name / "projected" / volume["name"]
        folder.mkdir(parents=True, exist_ok=True)
        for source in volume["projected"]["sources"]:
            if "serviceAccountToken" in source:
                assert self.mint_token is not None, f"{run.name}: a projected token, and no mint_token given"
                (folder / source["serviceAccountToken"]["path"]).write_text(await self.mint_token(run.ordinal))
        return folder

    async def _secret_files(self, run: PodRun, name: str, *, timeout_s: float = 30.0) -> Path:
        """A Secret volume's files; like the kubelet, wait for a Secret that does not exist yet."""
        deadline = time.monotonic() + timeout_s
        while (secret := await self.api.get("v1", "secrets", name)) is None:
            assert time.monotonic() < deadline, f"{run.name}: Secret {name} never appeared"
            await asyncio.sleep(0.2)
        folder = self.workdir / run.name / "secrets" / name
        folder.mkdir(parents=True, exist_ok=True)
        for key, data in (secret.get("data") or {}).items():
            (folder / key).write_bytes(base64.b64decode(data))
        return folder

    @staticmethod
    def _broker_config(etc: Path) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for path in etc.glob("*.toml"):
            found.update(tomllib.loads(path.read_text()).get("broker", {}))
        return found

    def _resolve(self, url: str) -> str:
        """Cluster DNS: any in-cluster host in `url` is the operator's controller API here."""
        parts, target = urlsplit(url), urlsplit(self.controller_url)
        return urlunsplit((target.scheme, target.netloc, parts.path, parts.query, parts.fragment))

    async def _stop(self, run: PodRun, *, graceful: bool) -> None:
        if run.starting is not None:
            with contextlib.suppress(Exception):
                await run.starting
            run.starting = None
        if run.child is not None:
            child, run.child = run.child, None
            await asyncio.to_thread(child.stop if graceful else child.kill)
        run.ready = None

    # -- status ---------------------------------------------------------------------------------

    async def _probe(self, run: PodRun, template: dict[str, Any]) -> bool:
        """The readiness probe as the kubelet runs it: a running container stays Ready until the probe
        fails failureThreshold times in a row, each within timeoutSeconds (one slow answer under load
        does not take a broker out, as it would not on a real node)."""
        if not run.running or run.starting is None or not run.starting.done():
            run.probe_failures = 0
            return False
        probe = template["spec"]["containers"][0]["readinessProbe"]
        assert self._http is not None
        try:
            async with self._http.get(f"http://127.0.0.1:{run.admin_port}{probe['httpGet']['path']}",
                                      timeout=aiohttp.ClientTimeout(total=probe.get("timeoutSeconds", 1))) as r:
                passed = r.status == 200
        except (TimeoutError, aiohttp.ClientError):
            passed = False
        run.probe_failures = 0 if passed else run.probe_failures + 1
        if passed or not run.ready:
            return passed
        return run.probe_failures < probe.get("failureThreshold", 3)

    @staticmethod
    def _container_state(run: PodRun) -> dict[str, Any]:
        """The container's state as the kubelet reports it."""
        if run.running:
            return {"running": {}}
        if run.child is None or run.child.process is None:
            return {"waiting": {"reason": "ContainerCreating"}}  # not started yet: it registered nothing
        if run.held:
            return {"waiting": {"reason": "CrashLoopBackOff"}}
        return {"terminated": {"reason": "Error", "exitCode": run.child.returncode}}

    async def _report_readiness(self, run: PodRun, template: dict[str, Any]) -> None:
        ready = await self._probe(run, template)
        state = self._container_state(run)
        if (ready, state) == (run.ready, run.state):
            return
        run.ready, run.state = ready, state
        container: dict[str, Any] = {"name": "broker", "ready": ready, "restartCount": run.restarts, "state": state}
        if run.restarts or (run.child is not None and not run.running):
            container["lastState"] = {"terminated": {"reason": "Error"}}
        await self.api.patch("v1", "pods", run.name, {"status": {
            "phase": "Running" if run.running else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [container]}})

    async def _write_statefulset_status(self, sts: dict[str, Any], replicas: int, revision: str) -> None:
        runs = [self.pods[i] for i in range(replicas) if i in self.pods]
        status = {"replicas": replicas, "readyReplicas": sum(1 for r in runs if r.ready),
                  "updatedReplicas": sum(1 for r in runs if r.revision == revision),
                  "updateRevision": revision, "observedGeneration": sts["metadata"].get("generation", 1)}
        if status != self._status_written:
            await self.api.patch("apps/v1", "statefulsets", self.statefulset, {"status": status})
            self._status_written = status
