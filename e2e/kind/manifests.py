"""The custom resources the kind suite applies (YAML text for `kubectl apply -f -`)."""

from __future__ import annotations

import json
from collections.abc import Mapping

NAMESPACE = "tinystream-e2e"
CLUSTER = "demo"
TOPIC = "orders"


# Every opt-out of the secure default, each explicit: the clients of this suite are plaintext and anonymous
# (test_kind_secured.py runs a cluster on the defaults). Spec fields, indented for a cluster's spec.
OPEN = """  listeners:
    tls: false
    authentication:
      type: none
  authorization:
    type: none
"""


def cluster(*, brokers: int = 3, image: str | None = None) -> str:
    """None: the brokers run the operator's image (the chart's), and an operator upgrade rolls them."""
    pinned = f"\n  image: {image}" if image else ""
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamCluster
metadata:
  name: {CLUSTER}
  namespace: {NAMESPACE}
spec:
  brokers: {brokers}{pinned}
  imagePullPolicy: Never
  storage:
    size: 1Gi
    deleteClaim: true
  rack:
    topologyKey: topology.kubernetes.io/zone
{OPEN}  config:
    offsets.topic.replication.factor: 3
    default.replication.factor: 3
    min.insync.replicas: 2
    # Follower fetching (KIP-392): a consumer with client.rack reads from an in-sync replica in its zone.
    replica.selector.class: org.apache.kafka.common.replica.RackAwareReplicaSelector
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


WRITES = "writes"  # the topic of the failure tests' acks=all writer
CLIENT_POD = "e2e-client"


def writes_topic() -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {WRITES}
  namespace: {NAMESPACE}
spec:
  cluster: {CLUSTER}
  partitions: 3
  replicationFactor: 3
  config:
    min.insync.replicas: 2
"""


def client_pod(image: str, *, name: str = CLIENT_POD, secret_env: Mapping[str, tuple[str, str]] | None = None,
               secret_volumes: Mapping[str, tuple[str, str]] | None = None) -> str:
    """A pod of the project's image that only waits: the in-cluster Kafka clients run in it (inpod_client.py).

    `secret_env` maps a variable to (Secret, key); `secret_volumes` maps a volume to (Secret, mount path),
    mounted read-only: what a user's application is given.
    """
    env = [f"        - name: {var}\n          valueFrom: {{secretKeyRef: {{name: {secret}, key: {key}}}}}"
           for var, (secret, key) in (secret_env or {}).items()]
    volumes = secret_volumes or {}
    mounts = [f"        - {{name: {volume}, mountPath: {path}, readOnly: true}}" for volume, (_, path) in volumes.items()]
    sources = [f"    - name: {volume}\n      secret: {{secretName: {secret}}}" for volume, (secret, _) in volumes.items()]
    optional = "".join(f"\n{key}\n" + "\n".join(lines) for key, lines in (
        ("      env:", env), ("      volumeMounts:", mounts), ("  volumes:", sources)) if lines)
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: client
      image: {image}
      imagePullPolicy: Never
      command: ["python3", "-c", "import time; time.sleep(10**9)"]{optional}
"""


def bad_topic(name: str, spec: str) -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  cluster: {CLUSTER}
{spec}
"""


def bad_cluster(name: str, spec: str) -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamCluster
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
{spec}
"""


SECURE = "secure"  # a second cluster, secured by default: TLS + SCRAM-SHA-512 + ACLs (test_kind_secured.py)
SECURE_TOPIC = "secure-writes"
EXTERNAL = "ext"  # the secured cluster's external listener
SECURE_CLIENT_POD = "secure-client"


def secured_cluster(*, image: str) -> str:
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamCluster
metadata:
  name: {SECURE}
  namespace: {NAMESPACE}
spec:
  brokers: 3
  image: {image}
  imagePullPolicy: Never
  # Two volumes per broker (JBOD): each is a claim, a mount and a log.dirs entry.
  storage:
    volumes:
      - {{id: 0, size: 1Gi, deleteClaim: true}}
      - {{id: 1, size: 1Gi, deleteClaim: true}}
  # No security fields: the defaults are TLS, SCRAM-SHA-512, ACLs (deny by default), mTLS replication.
  # One external listener (node ports), for clients on the host (test_kind_secured.py), TLS + SCRAM too.
  listeners:
    external:
      - name: {EXTERNAL}
        port: 9094
        type: nodeport
  certificates:
    validityDays: 30
    renewalDays: 5
  config:
    offsets.topic.replication.factor: 3
    default.replication.factor: 3
    min.insync.replicas: 2
---
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {SECURE_TOPIC}
  namespace: {NAMESPACE}
spec:
  cluster: {SECURE}
  partitions: 3
  replicationFactor: 3
  config:
    min.insync.replicas: 2
"""


def users() -> str:
    """`app` may use the secure-* topics; `nobody` may log in and nothing else."""
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamUser
metadata:
  name: app
  namespace: {NAMESPACE}
spec:
  cluster: {SECURE}
  authentication:
    type: scram-sha-512
  authorization:
    acls:
      - resource: {{type: topic, name: "secure-", patternType: prefix}}
        operations: [Read, Write, Describe]
---
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamUser
metadata:
  name: nobody
  namespace: {NAMESPACE}
spec:
  cluster: {SECURE}
  authentication:
    type: scram-sha-512
"""


def secure_client_pod(image: str) -> str:
    """A client pod given what a user's application gets: the CA's Secret and the users' password Secrets."""
    return client_pod(image, name=SECURE_CLIENT_POD,
                      secret_env={"APP_PASSWORD": ("app", "password"), "NOBODY_PASSWORD": ("nobody", "password")},
                      secret_volumes={"ca": (f"{SECURE}-cluster-ca-cert", "/etc/tinystream-ca")})


TYPED_TOPIC = "secure-typed"  # app may write it (its ACLs: the secure- prefix)
TYPED_SUBJECT = f"{TYPED_TOPIC}-value"  # TopicNameStrategy, as Confluent's serializers name it


def typed_schema() -> str:
    """A Topic and the TinyStreamSchema of its values (Avro), applied once the cluster has spec.schemaRegistry."""
    schema = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                         "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}]})
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {TYPED_TOPIC}
  namespace: {NAMESPACE}
spec:
  cluster: {SECURE}
  partitions: 1
  replicationFactor: 3
  config:
    min.insync.replicas: 2
---
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamSchema
metadata:
  name: {TYPED_SUBJECT}
  namespace: {NAMESPACE}
spec:
  cluster: {SECURE}
  subject: {TYPED_SUBJECT}
  schemaType: AVRO
  schema: '{schema}'
"""


def rebalance(name: str, *, mode: str, brokers: tuple[int, ...] = ()) -> str:
    """A TinyStreamRebalance of the demo cluster (Strimzi's KafkaRebalance): a proposal, carried out on approval."""
    listed = f"\n  brokers: [{', '.join(map(str, brokers))}]" if brokers else ""
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamRebalance
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  cluster: {CLUSTER}
  mode: {mode}{listed}
"""


POOLED = "pooled"  # the node pools test's cluster
POOLED_WRITES = "pooled-writes"


def pooled_cluster(image: str) -> str:
    """A cluster whose brokers are its node pools' (plaintext and anonymous, as `cluster()`)."""
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamCluster
metadata:
  name: {POOLED}
  namespace: {NAMESPACE}
  annotations: {{tinystream.io/node-pools: enabled}}
spec:
  brokers: 1
  image: {image}
  imagePullPolicy: Never
  storage:
    size: 1Gi
    deleteClaim: true
{OPEN}  config:
    offsets.topic.replication.factor: 2
    default.replication.factor: 2
---
apiVersion: tinystream.io/v1alpha1
kind: Topic
metadata:
  name: {POOLED_WRITES}
  namespace: {NAMESPACE}
spec:
  cluster: {POOLED}
  partitions: 4
  replicationFactor: 2
  config:
    min.insync.replicas: 1
"""


def node_pool(name: str, *, replicas: int, zone: str) -> str:
    """A pool of the pooled cluster whose brokers run on the nodes of one zone: its "hardware"."""
    return f"""
apiVersion: tinystream.io/v1alpha1
kind: TinyStreamNodePool
metadata:
  name: {name}
  namespace: {NAMESPACE}
  labels: {{tinystream.io/cluster: {POOLED}}}
spec:
  replicas: {replicas}
  storage: {{size: 1Gi, deleteClaim: true}}
  template: {{pod: {{nodeSelector: {{topology.kubernetes.io/zone: {zone}}}}}}}
"""
