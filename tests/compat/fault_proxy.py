"""A Kafka-aware TCP proxy that loses produce acknowledgements on purpose.

    client ──► proxy (127.0.0.1:P) ──► broker

Every byte is forwarded unchanged, except:

* Metadata and FindCoordinator responses are rewritten so that the broker
  is advertised at the proxy's address: the client then sends everything,
  not just its bootstrap request, through the proxy;
* once armed with `drop_next_produce_responses(n)`, the next `n` Produce
  responses that the broker sends are thrown away and that client
  connection is closed. The broker has appended the batch; the client never
  hears so, reconnects and sends the same batch again. An idempotent
  producer must end up with each record stored once (KIP-98: the broker
  answers a retried batch with its original offset).

Frames are parsed by their size prefix; requests are decoded only as far as
the header (api key, version, correlation id) so that the matching response
can be recognised. Metadata and FindCoordinator bodies are decoded and
re-encoded with kio. Runs its own asyncio loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import struct
import threading

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32

from tinystream.testing.peers.wire import response_header_size

PRODUCE, METADATA, FIND_COORDINATOR = 0, 3, 10


def rewrite_addresses(api_key: int, version: int, payload: bytes, host: str, port: int) -> bytes:
    """A Metadata / FindCoordinator response payload with every broker address replaced."""
    module = load_payload_module(api_key, version, EntityType.response)
    response_type = {METADATA: "MetadataResponse", FIND_COORDINATOR: "FindCoordinatorResponse"}[api_key]
    response_type = getattr(module, response_type)
    header_size = response_header_size(response_type, payload)
    body, _ = entity_reader(response_type)(payload, header_size)
    if api_key == METADATA:
        brokers = tuple(dataclasses.replace(b, host=host, port=i32(port)) for b in body.brokers)
        body = dataclasses.replace(body, brokers=brokers)
    elif version >= 4:
        coordinators = tuple(
            dataclasses.replace(c, host=host, port=i32(port)) if c.node_id >= 0 else c for c in body.coordinators
        )
        body = dataclasses.replace(body, coordinators=coordinators)
    elif body.node_id >= 0:
        body = dataclasses.replace(body, host=host, port=i32(port))
    out = io.BytesIO()
    out.write(payload[:header_size])
    entity_writer(response_type)(out, body)
    return out.getvalue()


class FaultProxy:
    """Start with `start()`, point clients at `.bootstrap`, arm faults, `stop()` at the end."""

    def __init__(self, upstream: str):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.host = "127.0.0.1"
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._lock = threading.Lock()
        self._drops_left = 0
        self.dropped = 0
        self.produce_requests = 0
        self.connections = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        future.result(10)
        return self

    def stop(self) -> None:
        async def close():
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def drop_next_produce_responses(self, count: int = 1) -> None:
        with self._lock:
            self._drops_left = count

    def _take_drop(self) -> bool:
        with self._lock:
            if self._drops_left > 0:
                self._drops_left -= 1
                self.dropped += 1
                return True
            return False

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        upstream = asyncio.create_task(self._client_to_broker(client_reader, broker_writer, pending))
        downstream = asyncio.create_task(self._broker_to_client(broker_reader, client_writer, pending))
        await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
        for task in (upstream, downstream):
            task.cancel()
        for writer in (client_writer, broker_writer):
            writer.close()

    async def _client_to_broker(self, reader, writer, pending) -> None:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 4)
            pending[correlation_id] = (api_key, version)
            if api_key == PRODUCE:
                self.produce_requests += 1
            writer.write(frame)
            await writer.drain()

    async def _broker_to_client(self, reader, writer, pending) -> None:
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            api_key, version = pending.pop(correlation_id, (-1, -1))
            if api_key == PRODUCE and self._take_drop():
                return  # lose the acknowledgement and the connection with it
            if api_key in (METADATA, FIND_COORDINATOR):
                payload = rewrite_addresses(api_key, version, frame[4:], self.host, self.port)
                frame = struct.pack(">i", len(payload)) + payload
            writer.write(frame)
            await writer.drain()


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = struct.unpack(">i", head)
        return head + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
