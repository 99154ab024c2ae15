"""Apache Kafka as a peer: a single-node KRaft broker and the Java tools.

The jars come from Maven Central through `tools/install-kafka-jars.sh` (into
`.cache/kafka-jars`, or `$TINYSTREAM_KAFKA_JARS`). A node is started the way
`bin/kafka-server-start.sh` does it, without the scripts:

    java -cp 'jars/*' kafka.tools.StorageTool format -t <cluster id> -c server.properties
    java -cp 'jars/*' kafka.Kafka server.properties

in combined mode (`process.roles=broker,controller`) with a static one-voter
quorum, plaintext listeners on free loopback ports, and the single-node
values Kafka's own `config/server.properties` uses (replication factor 1 for
the offsets and transaction topics). `run_java_tool` runs any main class in
the same jars: ConsoleProducer, ConsoleConsumer, ConsumerGroupCommand,
ProducerPerformance, TopicCommand.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from tinystream.testing.peers.errors import PeerStartError, PeerUnavailable
from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.process import (
    RunningBroker,
    make_workdir,
    start_broker_process,
)

REPO_ROOT = Path(__file__).resolve().parents[3]  # tinystream/testing/peers/ -> the repository
INSTALL_HINT = "run tools/install-kafka-jars.sh (Maven Central, needs java and mvn)"

# Main classes in the jars (Kafka 4.x names; 3.x kept ConsoleConsumer in kafka.tools).
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_MAIN = "kafka.Kafka"

# JVM flags for short-lived tools: a small heap and the C1 compiler only start fastest.
TOOL_JVM_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
BROKER_JVM_OPTS = ("-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true")

LOG4J2_PROPERTIES = """\
status = error
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.apache.name = org.apache.kafka
logger.apache.level = {level}
"""


def jars_dir() -> Path:
    """The folder of Kafka jars, or PeerUnavailable with the install hint."""
    path = Path(os.environ.get("TINYSTREAM_KAFKA_JARS") or REPO_ROOT / ".cache" / "kafka-jars")
    if not any(path.glob("kafka_2.13-*.jar")) or not any(path.glob("kafka-tools-*.jar")):
        raise PeerUnavailable(f"Apache Kafka jars not found in {path}: {INSTALL_HINT}")
    return path


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return str(Path(java_home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise PeerUnavailable("java not found: install a JDK 17+ (Debian: openjdk-17-jre-headless)")
    return found


def kafka_version(jars: Path | None = None) -> str:
    for jar in (jars or jars_dir()).glob("kafka-clients-*.jar"):
        match = re.match(r"kafka-clients-(.+)\.jar$", jar.name)
        if match:
            return match.group(1)
    return "unknown"


def _log4j_config(workdir: Path, level: str) -> Path:
    path = workdir / "log4j2.properties"
    path.write_text(LOG4J2_PROPERTIES.format(level=level))
    return path


def java_tool_argv(main_class: str, args: Sequence[str], *, jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
                   log_config: Path | None = None) -> list[str]:
    """argv that runs `main_class` from the Kafka jars."""
    jars = jars_dir()
    argv = [java_executable(), *jvm_opts]
    if log_config is not None:
        argv.append(f"-Dlog4j2.configurationFile={log_config}")
    else:
        argv.append("-Dlog4j2.level=WARN")  # tools: quiet unless something is wrong
    return [*argv, "-cp", f"{jars}/*", main_class, *args]


def run_java_tool(
    main_class: str,
    args: Sequence[str],
    *,
    timeout: float = 120.0,
    input: str | bytes | None = None,
    check: bool = False,
    jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
) -> subprocess.CompletedProcess:
    """Run a Kafka tool to completion; stdout/stderr captured as text."""
    argv = java_tool_argv(main_class, args, jvm_opts=jvm_opts)
    text_input = input.decode() if isinstance(input, bytes) else input
    return subprocess.run(  # noqa: S603
        argv, input=text_input, capture_output=True, text=True, timeout=timeout, check=check,
        stdin=None if text_input is not None else subprocess.DEVNULL,
    )


def server_properties(*, port: int, controller_port: int, log_dir: Path,
                      overrides: Mapping[str, object] | None = None,
                      extra_listeners: Mapping[str, int] | None = None) -> dict[str, str]:
    """A combined broker+controller node on loopback, single-node values. `extra_listeners` (protocol ->
    port, e.g. {"SSL": 9093}) adds a listener per protocol beside PLAINTEXT; its ssl.* settings go in
    `overrides`."""
    extra = "".join(f",{name}://127.0.0.1:{extra_port}" for name, extra_port in (extra_listeners or {}).items())
    protocols = "".join(f",{name}:{name}" for name in extra_listeners or {})
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}{extra},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}{extra}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{protocols}",
        "log.dirs": str(log_dir),
        "num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "auto.create.topics.enable": "true",
        "num.network.threads": 3,
        "num.io.threads": 4,
    }
    props.update(overrides or {})
    return {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in props.items()}


def _cluster_id() -> str:
    """A random cluster id as Kafka's Uuid prints it; like Uuid.randomUuid(), never one that
    starts with '-', which the tools' argument parser would take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def start_apache_kafka(
    *,
    workdir: str | Path | None = None,
    port: int | None = None,
    overrides: Mapping[str, object] | None = None,
    timeout: float = 120.0,
    jvm_opts: Sequence[str] = BROKER_JVM_OPTS,
    log_level: str = "WARN",
    extra_listeners: Mapping[str, int] | None = None,
) -> RunningBroker:
    """Format storage and start a KRaft node; returns when it serves Metadata (on PLAINTEXT). A `workdir`
    whose storage is formatted already starts again as the same node (a restart: its logs are kept)."""
    jars = jars_dir()
    java = java_executable()
    directory, created = make_workdir(workdir, "kafka")
    port = port or free_port()
    controller_port = free_port()
    log_dir = directory / "kraft-logs"
    props = server_properties(port=port, controller_port=controller_port, log_dir=log_dir, overrides=overrides,
                              extra_listeners=extra_listeners)
    config = directory / "server.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    log_config = _log4j_config(directory, log_level)

    if not (log_dir / "meta.properties").exists():  # else formatted before: a restart of the same node
        fmt = subprocess.run(  # noqa: S603
            java_tool_argv(STORAGE_TOOL, ["format", "-t", _cluster_id(), "-c", str(config)], log_config=log_config),
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )
        if fmt.returncode != 0:
            raise PeerStartError(f"kafka storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")

    argv = [java, *jvm_opts, f"-Dlog4j2.configurationFile={log_config}", "-cp", f"{jars}/*", KAFKA_MAIN, str(config)]
    return start_broker_process(
        name="kafka",
        argv=argv,
        workdir=directory,
        remove_workdir=created,
        address=("127.0.0.1", port),
        timeout=timeout,
        version=kafka_version(jars),
    )
