"""Per-subject rules, caps and the failed-login delay over real HTTP, with confluent-kafka's SchemaRegistryClient."""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastavro")

from confluent_kafka.schema_registry import (  # noqa: E402
    ConfigCompatibilityLevel,
    Schema,
    SchemaRegistryClient,
    ServerConfig,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from tinystream.registry.app import RegistryOptions, RegistryServer  # noqa: E402
from tinystream.registry.state import Limits  # noqa: E402
from tinystream.scram_users import UserStore  # noqa: E402

USERS = {"writer": "w-secret", "reader": "r-secret", "stranger": "s-secret", "ops": "o-secret"}
RULES = {
    "admins": ["User:ops"],
    "rules": [
        {"principal": "User:writer", "subject": "orders-", "pattern": "PREFIXED", "operations": ["WRITE"]},
        {"principal": "User:reader", "subject": "orders-value", "operations": ["READ"]},
    ],
}
RECORD = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


@pytest.fixture
def secured(tmp_path, start_registry):
    """start(**options) -> (registry, client(user))."""
    store = UserStore()
    for name, password in USERS.items():
        store.set_password(name, password)
    store.save(tmp_path / "users.json")
    (tmp_path / "rules.json").write_text(json.dumps(RULES))

    def start(**options):
        registry = start_registry(users_file=tmp_path / "users.json", rules_file=tmp_path / "rules.json", **options)

        def client(user: str) -> SchemaRegistryClient:
            return SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": f"{user}:{USERS[user]}"})
        return registry, client
    return start


def _refused(call) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        call()
    return caught.value


def test_a_user_may_what_the_rules_say_and_no_more(secured):
    _, client = secured()
    writer, reader, stranger, ops = client("writer"), client("reader"), client("stranger"), client("ops")
    schema_id = writer.register_schema("orders-value", Schema(RECORD, "AVRO"))
    assert reader.get_latest_version("orders-value").schema_id == schema_id
    assert reader.lookup_schema("orders-value", Schema(RECORD, "AVRO")).version == 1
    assert reader.test_compatibility("orders-value", Schema(RECORD, "AVRO")) is True
    assert json.loads(reader.get_schema(schema_id).schema_str) == json.loads(RECORD)  # the id is under a subject the reader may read

    refused = _refused(lambda: reader.register_schema("orders-value", Schema('"string"', "AVRO")))
    assert (refused.http_status_code, refused.error_code) == (403, 40301)
    assert "reader" in refused.error_message and "orders-value" in refused.error_message
    refused = _refused(lambda: writer.register_schema("payments-value", Schema('"string"', "AVRO")))
    assert refused.error_code == 40301 and "payments-value" in refused.error_message
    assert _refused(lambda: stranger.get_schema(schema_id)).error_code == 40301
    assert _refused(lambda: stranger.get_latest_version("orders-value")).error_code == 40301
    assert stranger.get_subjects() == []  # the list shows only what the caller may read
    assert reader.get_subjects() == ["orders-value"]

    # the registry as a whole (global config, hard deletes) is the admins'
    assert _refused(lambda: writer.set_config(config=ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))).error_code == 40301
    assert ops.set_config(config=ServerConfig(compatibility=ConfigCompatibilityLevel.FULL)) == {"compatibility": "FULL"}
    writer.set_config("orders-value", ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))  # its own subject's config: WRITE
    assert writer.delete_version("orders-value", 1) == 1
    assert _refused(lambda: writer.delete_version("orders-value", 1, permanent=True)).error_code == 40301
    assert ops.delete_version("orders-value", 1, permanent=True) == 1


def test_rules_need_a_users_file(tmp_path):
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    with pytest.raises(ValueError, match="users file"):
        RegistryServer(RegistryOptions(bootstrap="127.0.0.1:9092", rules_file=tmp_path / "rules.json"))


def test_the_caps_refuse_and_keep_what_was_there(secured):
    registry, client = secured(limits=Limits(max_subjects=3, max_subjects_per_user=2, max_versions=100,
                                             max_versions_per_user=3))
    writer, ops = client("writer"), client("ops")
    first = writer.register_schema("orders-a", Schema('"string"', "AVRO"))
    second = writer.register_schema("orders-b", Schema('"long"', "AVRO"))
    refused = _refused(lambda: writer.register_schema("orders-c", Schema('"int"', "AVRO")))
    assert (refused.http_status_code, refused.error_code) == (422, 42291)
    assert "max_subjects_per_user" in refused.error_message
    assert writer.register_schema("orders-a", Schema('"string"', "AVRO")) == first  # already there: no new version
    ops.set_config("orders-a", ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    writer.register_schema("orders-a", Schema('"int"', "AVRO"))  # the writer's third version
    refused = _refused(lambda: writer.register_schema("orders-b", Schema('"int"', "AVRO")))
    assert "max_versions_per_user" in refused.error_message
    ops.register_schema("other", Schema('"bytes"', "AVRO"))  # another user: the third subject
    refused = _refused(lambda: ops.register_schema("fourth", Schema('"bytes"', "AVRO")))
    assert refused.error_code == 42291 and "max_subjects " in refused.error_message
    assert sorted(ops.get_subjects()) == ["orders-a", "orders-b", "other"]
    assert [v.schema_id for v in (ops.get_version("orders-a", 1), ops.get_version("orders-b", 1))] == [first, second]
    assert ops.get_versions("orders-a") == [1, 2] and ops.get_versions("orders-b") == [1]


def _get(url: str, user: str, password: str) -> int:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(f"{url}/subjects", headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_wrong_password_waits_without_holding_other_callers(secured):
    registry, _ = secured(failed_login_delay=10.0, max_concurrent=1)  # the waiting guess holds no turn
    answers: list[int] = []
    guesser = threading.Thread(target=lambda: answers.append(_get(registry.url, "reader", "wrong")), daemon=True)
    guesser.start()
    assert _get(registry.url, "reader", USERS["reader"]) == 200  # answered while the guess still waits
    assert guesser.is_alive() and answers == []
    guesser.join(60)
    assert answers == [401]
