"""Admin adapters: the same topic and group operations through each client's admin API.

Each adapter answers in plain Python values (sets, ints, strings, dicts) so
the scenarios in test_admin.py and test_group_admin.py compare like with
like. Errors are raised as `AdminError(code_name)` with Kafka's error name
(TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, ...)
so a test can check the reason, whichever client reported it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from dataclasses import dataclass

TOPIC = "TOPIC"


class AdminError(Exception):
    def __init__(self, name: str, detail: str = ""):
        super().__init__(f"{name}: {detail}")
        self.name = name


def _kafka_error_name(exc: BaseException) -> str:
    """Map a client's exception to Kafka's error name (best effort, by class or text)."""
    text = f"{type(exc).__name__} {exc}"
    table = [
        ("TOPIC_ALREADY_EXISTS", r"TopicAlreadyExists|TOPIC_ALREADY_EXISTS|already exists"),
        ("UNKNOWN_TOPIC_OR_PARTITION", r"UnknownTopicOrPartition|UNKNOWN_TOPIC_OR_PART|does not exist|not exist"),
        ("INVALID_PARTITIONS", r"InvalidPartitions|INVALID_PARTITIONS"),
        ("INVALID_REPLICATION_FACTOR", r"InvalidReplicationFactor|INVALID_REPLICATION_FACTOR"),
        ("INVALID_CONFIG", r"InvalidConfiguration|INVALID_CONFIG|InvalidConfig"),
        ("INVALID_TOPIC_EXCEPTION", r"InvalidTopic|INVALID_TOPIC"),
    ]
    for name, pattern in table:
        if re.search(pattern, text, re.IGNORECASE):
            return name
    return f"OTHER({text[:200]})"


@dataclass
class GroupOffsets:
    committed: dict[int, int]  # partition -> committed offset


# --------------------------------------------------------------------------- confluent


class ConfluentAdmin:
    name = "confluent"

    def __init__(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def _wait(self, futures: dict) -> None:
        for future in futures.values():
            try:
                future.result(30)
            except Exception as exc:
                raise AdminError(_kafka_error_name(exc), str(exc)) from exc

    def create(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import NewTopic

        self._wait(self.admin.create_topics([NewTopic(topic, partitions, 1, config=configs)], operation_timeout=30))

    def list(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def partitions(self, topic: str) -> int:
        from confluent_kafka import TopicCollection

        futures = self.admin.describe_topics(TopicCollection([topic]), request_timeout=10)
        try:
            description = futures[topic].result(20)
        except Exception as exc:
            raise AdminError(_kafka_error_name(exc), str(exc)) from exc
        assert all(p.leader is not None for p in description.partitions)
        return len(description.partitions)

    def config(self, topic: str) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        futures = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=10)
        (future,) = futures.values()
        try:
            entries = future.result(20)
        except Exception as exc:
            raise AdminError(_kafka_error_name(exc), str(exc)) from exc
        return {k: e.value for k, e in entries.items()}

    def set_config(self, topic: str, key: str, value: str) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        self._wait(self.admin.incremental_alter_configs([resource]))

    def grow(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions

        self._wait(self.admin.create_partitions([NewPartitions(topic, total)], operation_timeout=30))

    def delete(self, topic: str) -> None:
        self._wait(self.admin.delete_topics([topic], operation_timeout=30))

    # groups
    def list_groups(self) -> set[str]:
        result = self.admin.list_consumer_groups(request_timeout=10).result(20)
        return {g.group_id for g in result.valid}

    def describe_group(self, group: str) -> dict:
        (future,) = self.admin.describe_consumer_groups([group], request_timeout=10).values()
        d = future.result(20)
        state = getattr(d.state, "name", str(d.state))
        members = [{"client_id": m.client_id,
                    "partitions": sorted(tp.partition for tp in (m.assignment.topic_partitions if m.assignment else []))}
                   for m in d.members]
        return {"state": state.upper(), "protocol": d.partition_assignor, "members": members}

    def group_offsets(self, group: str, topic: str) -> dict[int, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        (future,) = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
        result = future.result(20)
        return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}

    def delete_group(self, group: str) -> None:
        self._wait(self.admin.delete_consumer_groups([group], request_timeout=10))


# --------------------------------------------------------------------------- kafka-python


class KafkaPythonAdmin:
    name = "kafka-python"

    def __init__(self, bootstrap: str):
        from kafka import KafkaAdminClient

        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)

    def close(self) -> None:
        self.admin.close()

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise AdminError(_kafka_error_name(exc), str(exc)) from exc

    def create(self, topic, partitions, configs):
        self._call(self.admin.create_topics,
                   {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": configs}})

    def list(self):
        return set(self.admin.list_topics())

    def partitions(self, topic):
        (described,) = self._call(self.admin.describe_topics, [topic])
        if described.get("error_code"):
            raise AdminError(_kafka_error_name(Exception(str(described))), str(described))
        return len(described["partitions"])

    def config(self, topic):
        from kafka.admin import ConfigResource

        result = self._call(self.admin.describe_configs, [ConfigResource("TOPIC", topic)], config_filter="all")
        entries = result["topic"][topic]
        return {k: (v["value"] if isinstance(v, dict) else v) for k, v in entries.items()}

    def set_config(self, topic, key, value):
        from kafka.admin import ConfigResource

        self._call(self.admin.alter_configs, [ConfigResource("TOPIC", topic, {key: value})])

    def grow(self, topic, total):
        self._call(self.admin.create_partitions, {topic: total})

    def delete(self, topic):
        self._call(self.admin.delete_topics, [topic])

    def list_groups(self):
        return {g["group_id"] for g in self.admin.list_groups()}

    def describe_group(self, group):
        d = self.admin.describe_groups([group])[group]
        members = []
        for m in d.get("members", []):
            assignment = m.get("member_assignment") or {}
            parts = []
            for t in (assignment.get("assigned_partitions") or assignment.get("partitions") or []):
                parts += list(t.get("partitions", []))
            members.append({"client_id": m.get("client_id"), "partitions": sorted(parts)})
        return {"state": str(d.get("group_state", d.get("state"))).upper(), "protocol": d.get("protocol_data",
                d.get("protocol")), "members": members}

    def group_offsets(self, group, topic):
        result = self.admin.list_group_offsets({group: None})[group]
        return {tp.partition: om.offset for tp, om in result.items() if tp.topic == topic and om.offset >= 0}

    def delete_group(self, group):
        self._call(self.admin.delete_groups, [group])


# --------------------------------------------------------------------------- aiokafka


class AiokafkaAdmin:
    name = "aiokafka"

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.loop = asyncio.new_event_loop()
        from aiokafka.admin import AIOKafkaAdminClient

        async def make():
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
            await admin.start()
            return admin

        self.admin = self.loop.run_until_complete(make())

    def close(self) -> None:
        self.loop.run_until_complete(self.admin.close())
        self.loop.close()

    def _run(self, coro):
        try:
            return self.loop.run_until_complete(coro)
        except Exception as exc:
            raise AdminError(_kafka_error_name(exc), str(exc)) from exc

    @staticmethod
    def _check(response) -> None:
        """aiokafka returns raw responses: raise on a per-topic error code."""
        for attr in ("topic_errors", "topic_error_codes", "results"):
            for item in getattr(response, attr, None) or []:
                code = item[1] if isinstance(item, tuple) else getattr(item, "error_code", 0)
                if code:
                    from aiokafka.errors import for_code

                    raise AdminError(_kafka_error_name(for_code(code)()), str(item))

    def create(self, topic, partitions, configs):
        from aiokafka.admin import NewTopic

        self._check(self._run(self.admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])))

    def list(self):
        return set(self._run(self.admin.list_topics()))

    def partitions(self, topic):
        (described,) = self._run(self.admin.describe_topics([topic]))
        if described.get("error_code"):
            from aiokafka.errors import for_code

            raise AdminError(_kafka_error_name(for_code(described["error_code"])()), str(described))
        return len(described["partitions"])

    def config(self, topic):
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        (response,) = self._run(self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
        (resource,) = response.resources
        error_code, entries = resource[0], resource[4]
        if error_code:
            from aiokafka.errors import for_code

            raise AdminError(_kafka_error_name(for_code(error_code)()), str(resource))
        return {e[0]: e[1] for e in entries}

    def set_config(self, topic, key, value):
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        (response,) = self._run(self.admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={key: value})]))
        for resource in response.resources:
            if resource[0]:
                from aiokafka.errors import for_code

                raise AdminError(_kafka_error_name(for_code(resource[0])()), str(resource))

    def grow(self, topic, total):
        from aiokafka.admin import NewPartitions

        self._check(self._run(self.admin.create_partitions({topic: NewPartitions(total)})))

    def delete(self, topic):
        self._check(self._run(self.admin.delete_topics([topic])))

    def list_groups(self):
        return {g[0] for g in self._run(self.admin.list_consumer_groups())}

    def describe_group(self, group):
        (response,) = self._run(self.admin.describe_consumer_groups([group]))
        (g,) = response.groups
        # (error_code, group_id, state, protocol_type, protocol, members[, authorized_operations]);
        # a member is (member_id, client_id, host, metadata, assignment), v4+ adds
        # group_instance_id after member_id.
        members = [{"client_id": m[1] if len(m) == 5 else m[2], "partitions": None} for m in g[5]]
        return {"state": str(g[2]).upper(), "protocol": g[4], "members": members}

    def group_offsets(self, group, topic):
        result = self._run(self.admin.list_consumer_group_offsets(group))
        return {tp.partition: om.offset for tp, om in result.items() if tp.topic == topic and om.offset >= 0}

    def delete_group(self, group):
        raise NotImplementedError("aiokafka has no delete_consumer_groups")


# --------------------------------------------------------------------------- java tools


class JavaAdmin:
    """kafka-topics / kafka-configs / kafka-consumer-groups, as main classes in the jars."""

    name = "java"

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def _tool(self, main_class: str, args: list[str], timeout: float = 60) -> str:
        from tinystream.testing.peers.apache_kafka import run_java_tool

        out = run_java_tool(main_class, ["--bootstrap-server", self.bootstrap, *args], timeout=timeout)
        text = out.stdout + out.stderr
        if out.returncode != 0 or re.search(r"^Error while executing|Exception", out.stderr, re.MULTILINE):
            raise AdminError(_kafka_error_name(Exception(text)), text[-2000:])
        return out.stdout

    def topics(self, args: list[str]) -> str:
        from tinystream.testing.peers.apache_kafka import TOPIC_COMMAND

        return self._tool(TOPIC_COMMAND, args)

    def create(self, topic, partitions, configs):
        args = ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
        for k, v in configs.items():
            args += ["--config", f"{k}={v}"]
        self.topics(args)

    def list(self):
        return {line.strip() for line in self.topics(["--list"]).splitlines() if line.strip()}

    def partitions(self, topic):
        out = self.topics(["--describe", "--topic", topic])
        match = re.search(r"PartitionCount:\s*(\d+)", out)
        if not match:
            raise AdminError("UNKNOWN_TOPIC_OR_PARTITION", out)
        return int(match.group(1))

    def config(self, topic):
        out = self._tool(CONFIG_COMMAND, ["--describe", "--entity-type", "topics", "--entity-name", topic, "--all"])
        values = {}
        for match in re.finditer(r"^\s+([a-z0-9.]+)=(\S*)", out, re.MULTILINE):
            values.setdefault(match.group(1), match.group(2))
        return values

    def set_config(self, topic, key, value):
        self._tool(CONFIG_COMMAND, ["--alter", "--entity-type", "topics", "--entity-name", topic,
                                    "--add-config", f"{key}={value}"])

    def grow(self, topic, total):
        self.topics(["--alter", "--topic", topic, "--partitions", str(total)])

    def delete(self, topic):
        self.topics(["--delete", "--topic", topic])

    def groups(self, args: list[str]) -> str:
        from tinystream.testing.peers.apache_kafka import CONSUMER_GROUPS

        return self._tool(CONSUMER_GROUPS, args)

    def list_groups(self):
        return {line.strip() for line in self.groups(["--list"]).splitlines() if line.strip()}

    def describe_offsets(self, group: str) -> list[dict[str, str]]:
        """Rows of `kafka-consumer-groups --describe --group G` (GROUP TOPIC PARTITION CURRENT-OFFSET ...)."""
        return _table(self.groups(["--describe", "--group", group]))

    def describe_group(self, group):
        state_rows = _table(self.groups(["--describe", "--group", group, "--state"]))
        member_rows = _table(self.groups(["--describe", "--group", group, "--members", "--verbose"]))
        members = []
        for row in member_rows:
            # Kafka 4.x: CURRENT-ASSIGNMENT "topic:0,1,2"; 3.x: ASSIGNMENT "topic(0,1,2)".
            assignment = row.get("CURRENT-ASSIGNMENT", row.get("ASSIGNMENT", ""))
            parts: list[int] = []
            for _, numbers in re.findall(r"([^\s:(,]+)[:(]([\d,]+)", assignment):
                parts += [int(n) for n in numbers.split(",") if n]
            members.append({"client_id": row.get("CLIENT-ID"), "partitions": sorted(parts)})
        state = state_rows[0] if state_rows else {}
        return {"state": state.get("STATE", "").upper(), "protocol": state.get("ASSIGNMENT-STRATEGY"),
                "members": members}

    def group_offsets(self, group, topic):
        return {int(r["PARTITION"]): int(r["CURRENT-OFFSET"]) for r in self.describe_offsets(group)
                if r.get("TOPIC") == topic and r.get("CURRENT-OFFSET", "-").isdigit()}

    def delete_group(self, group):
        self.groups(["--delete", "--group", group])


CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def _table(text: str) -> list[dict[str, str]]:
    """Parse the whitespace-aligned tables the Java tools print (header line, then rows)."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            header = None
            continue
        cells = line.split()
        if cells[0] in {"GROUP", "CONSUMER-ID"} or (header is None and cells[0].isupper() and "-" in line):
            header = cells
            continue
        if header is None:
            continue
        if "ASSIGNMENT" in header and len(cells) > len(header):
            cells = cells[: len(header) - 1] + [" ".join(cells[len(header) - 1:])]
        rows.append(dict(zip(header, cells)))
    return rows


ADMINS = {"confluent": ConfluentAdmin, "kafka-python": KafkaPythonAdmin, "aiokafka": AiokafkaAdmin,
          "java": JavaAdmin}


def open_admin(client: str, bootstrap: str):
    return ADMINS[client](bootstrap)


def close_admin(admin) -> None:
    close = getattr(admin, "close", None)
    if close is not None:
        close()


def kcat_metadata(bootstrap: str, topic: str) -> dict:
    """`kcat -L -J -t topic` as a dict."""
    import json

    from compat_helpers import kcat_binary

    out = subprocess.run([kcat_binary(), "-L", "-J", "-b", bootstrap, "-t", topic], capture_output=True, timeout=30)
    return json.loads(out.stdout)
