"""Any request that decodes gets an answer (or a deliberate close), never a handler crash.

Hypothesis builds requests of every served API version from kio's schemas
(random names, counts, offsets, nulls) and hands them straight to the
dispatcher of an in-memory broker; every result must be framed bytes, None
(acks=0) or CLOSE_CONNECTION. Requests that may legitimately wait (long-poll
Fetch, parked JoinGroup/SyncGroup) may also time out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.static.primitive import Records

from tinystream.broker.handlers.shared.context import CLOSE_CONNECTION
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import Request, RequestHeader
from tinystream.broker.security.peer import ClientInfo
from tinystream.broker.server.dispatcher import RequestDispatcher
from tinystream.testing.broker import BrokerThread, test_settings

st.register_type_strategy(Records, st.binary(max_size=128).map(Records))

SERVED = [(a.key, v) for a in api_versions.API_TABLE for v in range(a.first_served, a.max_version + 1)]
MAY_WAIT = {api_versions.FETCH, api_versions.JOIN_GROUP, api_versions.SYNC_GROUP, api_versions.PRODUCE}


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("prop") / "d"), in_memory=True) as b:
        b.call(lambda broker: broker.topics.create("existing", num_partitions=2))
        yield b


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{k}v{v}" for k, v in SERVED])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_handlers_answer_any_decodable_request(running, api_key, version, data):
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    request = Request(RequestHeader(api_key, version, 1, "prop"), body, 0, 0)

    async def dispatch(broker):
        dispatcher = RequestDispatcher(broker.ctx)
        return await asyncio.wait_for(dispatcher.dispatch(request, ClientInfo(1, "127.0.0.1", 1)), 0.5)

    try:
        result = running.call(dispatch)
    except (TimeoutError, concurrent.futures.TimeoutError):
        assert api_key in MAY_WAIT
        return
    assert result is None or result is CLOSE_CONNECTION or isinstance(result, (bytes, bytearray))
    if result is None:
        assert api_key == api_versions.PRODUCE and body.acks == 0
