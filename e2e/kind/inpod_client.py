"""A Kafka writer and reader that run inside the cluster (`python3 - write|read ...` in the client pod).

Shipped on stdin to the image's Python (kafka-python is part of the image), so
the clients reach the brokers by the addresses they advertise (pod DNS names
under the headless Service), as any in-cluster application does.

    write BOOTSTRAP TOPIC PREFIX SECONDS   one line per record: `A <value> <t>` acked (acks=all), `E <value> <error>`;
                                           ends after SECONDS or once /tmp/stop-PREFIX exists
    read BOOTSTRAP TOPIC                   every value in the topic, one per line, then `END <count>`
                                           (from a replica in zone KAFKA_CLIENT_RACK when that is set)
    probe BOOTSTRAP TOPIC                  one record sent: `OK`, or `REFUSED <error class>`
    rate BOOTSTRAP TOPIC COUNT SIZE        COUNT records of SIZE bytes sent (acks=all), flushed:
                                           `RATE <records/s> <acknowledged>` (also run on the host, the same
                                           client inside and outside the cluster)
    serial HOST PORT                       the serial (hex) of the certificate a new TLS connection sees
    handshake HOST...                      per host (port 9092), a new TLS connection trusting KAFKA_CAFILE as it
                                           is now: `OK <host>`, `REFUSED <host> <reason>` (certificate not
                                           trusted), `DOWN <host> <error>` (no connection: a broker restarting)
    avro BOOTSTRAP TOPIC REGISTRY SUBJECT  the subject's latest schema from the registry (its login from
                                           REGISTRY_USER / KAFKA_SASL_PASSWORD_FROM), one value framed with its id
                                           sent and read back: `ID <id>`, `READ <id> <value as JSON>`;
                                           `ANONYMOUS <status>`: what the registry answers a caller without login

On a secured cluster the environment says how to log in: KAFKA_SECURITY_PROTOCOL
(SSL, SASL_SSL), KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD, or KAFKA_SASL_PASSWORD_FROM naming
the variable that holds it (the pod's env from the user's Secret) (SCRAM-SHA-512),
KAFKA_CAFILE (the cluster CA's ca.crt, mounted from its Secret).

The writer sends in small synchronous batches so each acknowledgement is
known exactly; values are PREFIX-<n>, distinct, so the caller can count
acknowledged against read.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def security() -> dict:
    """kafka-python's security settings from the environment (none: PLAINTEXT)."""
    protocol = os.environ.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
    found: dict = {"security_protocol": protocol}
    if "SSL" in protocol:
        found["ssl_cafile"] = os.environ["KAFKA_CAFILE"]
    if protocol.startswith("SASL"):
        password = os.environ.get("KAFKA_SASL_PASSWORD") or os.environ[os.environ["KAFKA_SASL_PASSWORD_FROM"]]
        found.update(sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=os.environ["KAFKA_SASL_USERNAME"],
                     sasl_plain_password=password)
    return found


def probe(bootstrap: str, topic: str) -> None:
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_block_ms=20000,
                                 request_timeout_ms=10000, **security())
        producer.send(topic, b"probe").get(timeout=20)
        producer.close(timeout=5)
        print("OK", flush=True)
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer
        print(f"REFUSED {type(exc).__name__} {exc}", flush=True)


def rate(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **security())
    producer.partitions_for(topic)  # metadata and connections before the clock starts
    value = b"r" * size
    start = time.monotonic()
    futures = [producer.send(topic, value) for _ in range(count)]
    producer.flush(timeout=120)
    seconds = time.monotonic() - start
    acked = sum(1 for f in futures if f.succeeded())
    producer.close(timeout=10)
    print(f"RATE {count / seconds:.0f} {acked}", flush=True)


def serial(host: str, port: int) -> None:
    context = ssl.create_default_context(cafile=os.environ["KAFKA_CAFILE"])
    with socket.create_connection((host, port), timeout=10) as raw, context.wrap_socket(raw, server_hostname=host) as s:
        from cryptography import x509  # in the image: the operator's dependency

        print(f"{x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number:x}", flush=True)


def handshake(hosts: list[str]) -> None:
    context = ssl.create_default_context(cafile=os.environ["KAFKA_CAFILE"])  # read now: the mounted bundle
    for host in hosts:
        try:
            with socket.create_connection((host, 9092), timeout=5) as raw, context.wrap_socket(raw, server_hostname=host):
                print(f"OK {host}", flush=True)
        except ssl.SSLError as exc:
            print(f"REFUSED {host} {exc}", flush=True)
        except OSError as exc:
            print(f"DOWN {host} {type(exc).__name__}", flush=True)


def write(bootstrap: str, topic: str, prefix: str, seconds: float) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=3, linger_ms=2, **security(),
                             request_timeout_ms=8000, max_block_ms=8000, metadata_max_age_ms=2000,
                             reconnect_backoff_max_ms=1000)
    start = time.monotonic()
    n = 0
    stop_file = f"/tmp/stop-{prefix}"
    if os.path.exists(stop_file):  # an earlier writer of this prefix (a rerun on a kept cluster) was stopped
        os.remove(stop_file)
    while time.monotonic() - start < seconds and not os.path.exists(stop_file):
        batch = []
        for _ in range(20):
            value = f"{prefix}-{n}"
            n += 1
            try:
                batch.append((value, producer.send(topic, value.encode())))
            except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal
                print(f"E {value} {type(exc).__name__}", flush=True)
        for value, future in batch:
            try:
                future.get(timeout=15)
                print(f"A {value} {time.monotonic() - start:.3f}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"E {value} {type(exc).__name__}", flush=True)
        time.sleep(0.05)
    producer.close(timeout=10)
    print("DONE", flush=True)


def read(bootstrap: str, topic: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, request_timeout_ms=30000, **security(),
                             client_rack=os.environ.get("KAFKA_CLIENT_RACK", ""))  # KIP-392: read in this zone
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    ends = consumer.end_offsets(partitions)
    count = 0
    for record in consumer:
        print(record.value.decode(), flush=False)
        count += 1
        if all(consumer.position(tp) >= ends[tp] for tp in partitions):
            break
    print(f"END {count}", flush=True)


def _registry_get(url: str, login: str | None) -> tuple[int, dict]:
    import base64
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json"})
    if login:
        request.add_header("Authorization", "Basic " + base64.b64encode(login.encode()).decode())
    context = ssl.create_default_context(cafile=os.environ.get("KAFKA_CAFILE"))
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def avro(bootstrap: str, topic: str, registry: str, subject: str) -> None:
    """A producer as a registry serializer works: the schema's id from the registry, Confluent's 5-byte frame."""
    import io
    import json
    import struct

    import fastavro  # in the image: the registry's dependency

    login = f"{os.environ['REGISTRY_USER']}:{os.environ[os.environ['KAFKA_SASL_PASSWORD_FROM']]}"
    print(f"ANONYMOUS {_registry_get(f'{registry}/subjects', None)[0]}", flush=True)
    status, latest = _registry_get(f"{registry}/subjects/{subject}/versions/latest", login)
    assert status == 200, (status, latest)
    print(f"ID {latest['id']}", flush=True)
    parsed = fastavro.parse_schema(json.loads(latest["schema"]))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, {"id": "o-1", "amount": 42})
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security())
    producer.send(topic, struct.pack(">bI", 0, latest["id"]) + out.getvalue()).get(timeout=60)
    producer.close(timeout=10)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=30000, **security())
    for record in consumer:
        magic, schema_id = struct.unpack_from(">bI", record.value)
        value = fastavro.schemaless_reader(io.BytesIO(record.value[5:]), parsed, None)
        print(f"READ {schema_id} {json.dumps(value, sort_keys=True)}", flush=True)
        break
    consumer.close()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "write":
        write(args[0], args[1], args[2], float(args[3]))
    elif command == "probe":
        probe(args[0], args[1])
    elif command == "rate":
        rate(args[0], args[1], int(args[2]), int(args[3]))
    elif command == "serial":
        serial(args[0], int(args[1]))
    elif command == "avro":
        avro(*args[:4])
    elif command == "handshake":
        handshake(args)
    else:
        read(args[0], args[1])
