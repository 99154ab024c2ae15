"""The controller state of one cluster in its TinyStreamCluster's status: `ClusterStatusStore`.

On Kubernetes the truth lives in etcd, so the operator keeps each cluster's
`ControllerState` (its `to_dict()` form, as the local driver's state file
holds it) in `status.controller` of the cluster's resource::

    status:
      clusterId: <the Kafka cluster id>
      controller:
        encoding: json | zlib+base64    # how `data` is written
        data: "<the state>"             # a string: never merged, always replaced whole
        bytes: 1234                     # the JSON's size before encoding
        metadataVersion: 17             # the image version saved (for people and tests)

Why a string and not an object: a JSON merge patch (what status updates are)
merges nested objects, so a topic deleted from the state would linger in an
object form unless every removed key were nulled; a string is replaced.

Size: the state grows with partitions (about 170 bytes of JSON per
partition at RF 1, more per extra replica). etcd refuses requests over 1.5 MiB (the API server's
default), for the whole object. States above `COMPRESS_ABOVE` bytes are
stored zlib-compressed (this JSON compresses 5-40x: ids and epochs repeat), and a
state that is still over `MAX_STORED_BYTES` is refused: the save raises
OSError, which the controller service answers as KAFKA_STORAGE_ERROR and
keeps the old state everywhere (nothing diverges). That caps a cluster at
some tens of thousands of partitions; past that, the state needs a ConfigMap or a
Secret per chunk (not built).

Fencing: two operators must never both write a cluster's state (the second
would overwrite the first's newer image with its older one). Each load claims
the next `status.controller.epoch` with a JSON patch whose `test` op makes it
conditional; every save tests that the epoch is still ours, and the first save
of a new cluster's state is made only onto the object as its load saw it (a
resourceVersion precondition: two operators cannot both write epoch 1). An operator whose
epoch was taken over gets `FencedOut` (an OSError: the change is refused and
nothing diverges) and stops serving that cluster until it loads it again.

The CRD must let `status.controller` through (see the report of issue 5:
`x-kubernetes-preserve-unknown-fields` on it); an API server prunes fields a
structural schema does not declare.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from tinystream.operator.controller import ControllerState, StateFormatError
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.errors import Conflict, KubeApiError
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND
from tinystream.operator.service.errors import StateFileError

JSON = "json"
ZLIB = "zlib+base64"
COMPRESS_ABOVE = 64 * 1024
FIRST_SAVE_ATTEMPTS = 5
MAX_STORED_BYTES = 1024 * 1024  # leaves room under etcd's 1.5 MiB for spec, status and metadata


def encode_state(state: ControllerState) -> dict[str, Any]:
    """`status.controller` for `state`; OSError when it would not fit in etcd."""
    raw = orjson.dumps(state.to_dict())
    if len(raw) > COMPRESS_ABOVE:
        encoding, data = ZLIB, base64.b64encode(zlib.compress(raw, 6)).decode()
    else:
        encoding, data = JSON, raw.decode()
    if len(data) > MAX_STORED_BYTES:
        raise OSError(f"the controller state is {len(raw)} bytes ({len(data)} encoded), over the "
                      f"{MAX_STORED_BYTES}-byte limit for a resource status")
    return {"encoding": encoding, "data": data, "bytes": len(raw), "metadataVersion": state.image.version}


def decode_state(stored: Any, *, where: str) -> ControllerState:
    """The state from `status.controller`; StateFileError names what is wrong."""
    if not isinstance(stored, dict) or not isinstance(stored.get("data"), str):
        raise StateFileError(f"{where}: status.controller has no data string")
    try:
        if stored.get("encoding", JSON) == ZLIB:
            raw = zlib.decompress(base64.b64decode(stored["data"]))
        elif stored.get("encoding", JSON) == JSON:
            raw = stored["data"].encode()
        else:
            raise StateFileError(f"{where}: unknown encoding {stored.get('encoding')!r}")
        return ControllerState.from_dict(orjson.loads(raw))
    except (zlib.error, ValueError, orjson.JSONDecodeError, StateFormatError) as exc:
        raise StateFileError(f"{where}: status.controller is not a controller state: {exc}") from exc


class FencedOut(OSError):
    """Another operator claimed this cluster's state (a higher status.controller.epoch): this one must stop."""


class ClusterStatusStore:
    """A `StateStore` (tinystream.operator.service) over one TinyStreamCluster's status."""

    def __init__(self, client: KubeClient, cluster: ClusterKey) -> None:
        self.client = client
        self.cluster = cluster
        self.saves = 0
        self.epoch = 0  # the status.controller.epoch this operator owns (claimed by load)
        self._unclaimed_version: str | None = None  # resourceVersion load saw with no state yet
        self.on_fenced: Callable[[], None] | None = None  # told once another operator took over

    async def load(self) -> ControllerState | None:
        try:
            obj = await self.client.get(API_VERSION, CLUSTER_KIND, self.cluster.name, self.cluster.namespace)
        except KubeApiError as exc:
            raise StateFileError(f"cannot read TinyStreamCluster {self.cluster}: {exc}") from exc
        stored = ((obj or {}).get("status") or {}).get("controller")
        if stored is None:
            # The first save must find the object as read here, so two operators cannot both write a
            # first state (both with epoch 1, each believing it owns the cluster).
            self._unclaimed_version = ((obj or {}).get("metadata") or {}).get("resourceVersion")
            return None
        state = decode_state(stored, where=f"TinyStreamCluster {self.cluster}")
        await self._claim(int(stored.get("epoch") or 0))
        return state

    async def _claim(self, seen: int) -> None:
        """Take the next epoch, if nobody took it since we read `seen`."""
        ops = [*self._expect(seen), {"op": "add", "path": "/status/controller/epoch", "value": seen + 1}]
        await self._patch(ops, what="claim the controller state")
        self.epoch = seen + 1

    @staticmethod
    def _expect(epoch: int) -> list[dict[str, Any]]:
        if epoch == 0:  # written before epochs existed (or never claimed): nothing to test yet
            return []
        return [{"op": "test", "path": "/status/controller/epoch", "value": epoch}]

    async def _patch(self, ops: list[dict[str, Any]], *, what: str) -> None:
        try:
            await self.client.patch(API_VERSION, CLUSTER_KIND, self.cluster.name, self.cluster.namespace, ops,
                                    subresource="status", json_patch=True)
        except KubeApiError as exc:
            if exc.status == 422 and await self._taken_over():  # the test op failed (the server says only 422)
                if self.on_fenced is not None:
                    self.on_fenced()
                raise FencedOut(f"another operator took over TinyStreamCluster {self.cluster} (its state epoch "
                                f"is no longer {self.epoch}); this one stops serving it") from exc
            raise OSError(f"cannot {what} of TinyStreamCluster {self.cluster}: {exc}") from exc

    async def _taken_over(self) -> bool:
        try:
            obj = await self.client.get(API_VERSION, CLUSTER_KIND, self.cluster.name, self.cluster.namespace)
        except KubeApiError:
            return False
        stored = ((obj or {}).get("status") or {}).get("controller") or {}
        return int(stored.get("epoch") or 0) != self.epoch

    async def save(self, state: ControllerState) -> None:
        """Write `state` if this operator still owns the cluster's state (OSError otherwise: not saved)."""
        if self.epoch == 0:  # a new cluster: its first state claims epoch 1
            await self._save_first(state)
            self.epoch = 1
        else:
            ops = [*self._expect(self.epoch),
                   {"op": "add", "path": "/status/controller", "value": {**encode_state(state), "epoch": self.epoch}},
                   {"op": "add", "path": "/status/clusterId", "value": state.image.cluster_id}]
            await self._patch(ops, what="save the controller state")
        self.saves += 1

    async def _save_first(self, state: ControllerState) -> None:
        """The first state, only onto the object as `load` saw it without one (resourceVersion precondition).
        Anything else that changed the object meanwhile (a spec edit, kopf's own status) only retries; a
        controller state that appeared meanwhile means another operator won: FencedOut."""
        body = {"controller": {**encode_state(state), "epoch": 1}, "clusterId": state.image.cluster_id}
        for _ in range(FIRST_SAVE_ATTEMPTS):
            patch: dict[str, Any] = {"status": body}
            if self._unclaimed_version is not None:
                patch["metadata"] = {"resourceVersion": self._unclaimed_version}
            try:
                await self.client.patch(API_VERSION, CLUSTER_KIND, self.cluster.name, self.cluster.namespace, patch,
                                        subresource="status")
                return
            except Conflict:
                obj = await self.client.get(API_VERSION, CLUSTER_KIND, self.cluster.name, self.cluster.namespace)
                if ((obj or {}).get("status") or {}).get("controller") is not None:
                    if self.on_fenced is not None:
                        self.on_fenced()
                    raise FencedOut(f"another operator wrote the first state of TinyStreamCluster {self.cluster}; "
                                    "this one stops serving it") from None
                self._unclaimed_version = ((obj or {}).get("metadata") or {}).get("resourceVersion")
            except KubeApiError as exc:  # the service's contract: OSError = not saved, old state kept
                raise OSError(f"cannot save the controller state to TinyStreamCluster {self.cluster}: {exc}") from exc
        raise OSError(f"cannot save the first controller state of TinyStreamCluster {self.cluster}: it kept changing")

    async def close(self) -> None:
        return None
