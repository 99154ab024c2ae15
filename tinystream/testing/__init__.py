"""Tooling for tests and benchmarks, not for production use: it ships so `tinystream bench` can run.

    broker.py  a throwaway broker's settings and hand-made requests for tests
    kafka_python.py  keeps kafka-python 3.0.12's own rejoins pending until they finish (a client gap)
    kube_control_plane.py  etcd + kube-apiserver (+ controller-manager) as processes: the operator's fast tier
    waiting.py  poll a condition until it holds (wait_until, wait_until_async), with a timeout that names what
    peers/     other Kafka brokers to compare against (Apache Kafka from Maven, tansu) and their processes
"""
