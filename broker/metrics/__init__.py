"""The broker's Prometheus metrics, in a registry per broker (several brokers share a test process).

    broker_metrics.py  request counters and latency, partition gauges computed at scrape time

Names and meanings: operator/dashboard/METRICS.md.
"""
