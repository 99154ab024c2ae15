"""A small min-cost max-flow, for the reassignment planner.

Successive shortest paths, batched (primal-dual): each phase computes
shortest distances with Dijkstra over reduced costs (Johnson potentials keep
them non-negative), then pushes flow along every zero-reduced-cost path it
can find before the next phase, like Dinic's blocking flow. The planner's
costs are tiny integers, so there are few phases. Kept apart because it is
a general tool, not controller logic.
"""

from __future__ import annotations

import heapq

_INF = float("inf")


class MinCostFlow:
    def __init__(self) -> None:
        self._adjacent: list[list[int]] = []
        self._to: list[int] = []
        self._cap: list[int] = []
        self._cost: list[int] = []

    def node(self) -> int:
        self._adjacent.append([])
        return len(self._adjacent) - 1

    def edge(self, u: int, v: int, *, cap: int, cost: int = 0) -> int:
        """Add u -> v with a non-negative cost; returns the edge id (see `flow_on`)."""
        if cost < 0:
            raise ValueError("costs must not be negative")
        eid = len(self._to)
        for a, b, c, w in ((u, v, cap, cost), (v, u, 0, -cost)):
            self._adjacent[a].append(len(self._to))
            self._to.append(b)
            self._cap.append(c)
            self._cost.append(w)
        return eid

    def flow_on(self, eid: int) -> int:
        return self._cap[eid ^ 1]

    def run(self, source: int, sink: int) -> tuple[int, int]:
        """Push as much flow as possible at least cost; returns (flow, cost)."""
        n = len(self._adjacent)
        potential = [0] * n
        total_flow = total_cost = 0
        while True:
            dist = self._distances(source, potential)
            if dist[sink] == _INF:
                return total_flow, total_cost
            for v in range(n):
                if dist[v] != _INF:
                    potential[v] += int(dist[v])  # finite distances are sums of integer costs
            arc = [0] * n
            dead = [False] * n
            while True:
                pushed = self._augment(source, sink, potential=potential, arc=arc, dead=dead)
                if not pushed:
                    break
                total_flow += pushed
                total_cost += pushed * (potential[sink] - potential[source])

    def _distances(self, source: int, potential: list[int]) -> list[float]:
        dist: list[float] = [_INF] * len(self._adjacent)
        dist[source] = 0
        heap = [(0, source)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for eid in self._adjacent[u]:
                if self._cap[eid] > 0:
                    v = self._to[eid]
                    nd = d + self._cost[eid] + potential[u] - potential[v]
                    if nd < dist[v]:
                        dist[v] = nd
                        heapq.heappush(heap, (nd, v))
        return dist

    def _augment(self, source: int, sink: int, *, potential: list[int], arc: list[int], dead: list[bool]) -> int:
        """Push along one zero-reduced-cost path (depth first, current-arc)."""
        path: list[int] = []
        on_path = {source}
        u = source
        while u != sink:
            edges = self._adjacent[u]
            while arc[u] < len(edges):
                eid = edges[arc[u]]
                v = self._to[eid]
                if (
                    self._cap[eid] > 0
                    and not dead[v]
                    and v not in on_path
                    and self._cost[eid] + potential[u] - potential[v] == 0
                ):
                    break
                arc[u] += 1
            else:
                dead[u] = True
                if u == source:
                    return 0
                on_path.discard(u)
                u = self._to[path.pop() ^ 1]
                arc[u] += 1
                continue
            path.append(eid)
            on_path.add(v)
            u = v
        push = min(self._cap[eid] for eid in path)
        for eid in path:
            self._cap[eid] -= push
            self._cap[eid ^ 1] += push
        return push
