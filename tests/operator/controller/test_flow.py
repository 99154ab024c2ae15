"""The planner's min-cost flow against a plain Bellman-Ford reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.operator.controller.flow import MinCostFlow


def _reference(n, edges, source, sink):
    """Successive shortest paths, one Bellman-Ford per augmentation."""
    to, cap, cost, adj = [], [], [], [[] for _ in range(n)]
    for u, v, c, w in edges:
        for a, b, cc, ww in ((u, v, c, w), (v, u, 0, -w)):
            adj[a].append(len(to))
            to.append(b)
            cap.append(cc)
            cost.append(ww)
    flow = total = 0
    while True:
        dist = [None] * n
        via = [-1] * n
        dist[source] = 0
        for _ in range(n):
            for u in range(n):
                if dist[u] is None:
                    continue
                for e in adj[u]:
                    if cap[e] > 0 and (dist[to[e]] is None or dist[u] + cost[e] < dist[to[e]]):
                        dist[to[e]] = dist[u] + cost[e]
                        via[to[e]] = e
        if dist[sink] is None:
            return flow, total
        push, v = None, sink
        while v != source:
            e = via[v]
            push = cap[e] if push is None else min(push, cap[e])
            v = to[e ^ 1]
        v = sink
        while v != source:
            e = via[v]
            cap[e] -= push
            cap[e ^ 1] += push
            v = to[e ^ 1]
        flow += push
        total += push * dist[sink]


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 8),
    raw=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 3), st.integers(0, 3)), max_size=25),
)
def test_matches_reference(n, raw) -> None:
    edges = [(u % n, v % n, c, w) for u, v, c, w in raw if u % n != v % n]
    g = MinCostFlow()
    for _ in range(n):
        g.node()
    ids = [g.edge(u, v, cap=c, cost=w) for u, v, c, w in edges]
    flow, cost = g.run(0, n - 1)
    assert (flow, cost) == _reference(n, edges, 0, n - 1)
    # Conservation: what leaves the source is the flow.
    assert sum(g.flow_on(e) for e, (u, _, _, _) in zip(ids, edges) if u == 0) - sum(
        g.flow_on(e) for e, (_, v, _, _) in zip(ids, edges) if v == 0
    ) == flow
