"""The Spark image (spark-on-k8s/k8s/Dockerfile), built and run in a real container engine.

Skips where no engine answers, like test_image.py. The image must run an
example pipeline as is (PySpark, Java, pyarrow and the connector inside),
reading from and writing to a TinyStream broker on this host, and honour
Spark's Kubernetes pod contract (`driver ...` runs spark-submit).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_build import Cli, ensure_image

from tinystream.testing.peers.ports import free_port

TAG = "localhost/tinystream-spark:e2e-image"  # localhost/: the same name in podman and Docker

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def spark_image(engine: str) -> str:
    print(f"image {TAG} ({engine}): {ensure_image(TAG, 'spark-on-k8s/k8s/Dockerfile', engine=engine)}")
    return TAG


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:  # a file, not a pipe: nobody reads a pipe while Spark runs
        process = subprocess.Popen([sys.executable, "-m", "tinystream", "broker", "--port", str(port), "--log-dirs",
                                    str(tmp_path / "data"), "--admin-port", "0"], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "ready bootstrap=" not in log.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, f"the broker did not start: {log.read_text()}"
        time.sleep(0.2)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(20)


def test_example_pipeline_runs_in_the_image(spark_image: str, broker: str, cli: Cli) -> None:
    # Host networking: the container reaches the broker on loopback, as a pod reaches the client Service.
    run = cli("run", "--rm", "--network", "host", spark_image, "python", "/opt/tinystream/pipelines/tumbling.py",
                 "--bootstrap", broker, "--generate", "300", timeout=600)
    assert "rows in page-views-10s" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]

    from kafka import KafkaConsumer

    consumer = KafkaConsumer("page-views-10s", bootstrap_servers=broker, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    rows = [r for r in consumer]
    consumer.close()
    rows_printed = int(run.stdout.split(" rows in page-views-10s")[0].rsplit("\n", 1)[-1])
    assert rows and len(rows) >= rows_printed  # every window row the job printed is in the output topic


def test_driver_entry_point_runs_spark_submit(spark_image: str, cli: Cli) -> None:
    out = cli("run", "--rm", "-e", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1", spark_image, "driver", "--version",
                 timeout=120)
    assert "version 4." in out.stdout + out.stderr
    assert cli("run", "--rm", "--entrypoint", "id", spark_image, "-u").stdout.strip() == "185"
