"""The custom resources the kind suite applies (YAML text for `kubectl apply -f -`)."""

from __future__ import annotations

NAMESPACE = "tinystream-e2e"
CLUSTER = "demo"
TOPIC = "orders"


def cluster(*, brokers: int = 3, image: str) -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamCluster
metadata:
  name: {CLUSTER}
  namespace: {NAMESPACE}
spec:
  brokers: {brokers}
  image: {image}
  imagePullPolicy: Never
  storage:
    size: 1Gi
    deleteClaim: true
  rack:
    topologyKey: topology.kubernetes.io/zone
  config:
    offsets.topic.replication.factor: 3
    default.replication.factor: 3
    min.insync.replicas: 2
"""


def topic(*, partitions: int = 6) -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {TOPIC}
  namespace: {NAMESPACE}
spec:
  cluster: {CLUSTER}
  partitions: {partitions}
  replicationFactor: 3
  config:
    min.insync.replicas: 2
"""
