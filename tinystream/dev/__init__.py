"""`tinystream dev`: a local cluster (controller + N brokers as processes on 127.0.0.1) and its dashboard.

    cluster.py    LocalCluster: starts, supervises and stops the child processes; the embedded default
    dashboard.py  the cluster's dashboard, hosted by the supervisor (one host)
"""
