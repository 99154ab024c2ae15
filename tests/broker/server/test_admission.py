"""Connection quotas and byte budgets as plain objects: no sockets (admission.py, budget.py)."""

from __future__ import annotations

from tinystream.broker.server.admission import BrokerConnections, ConnectionQuotas
from tinystream.broker.server.budget import ByteBudget


def test_a_listener_refuses_past_its_limit_and_one_host_past_its_share() -> None:
    quotas = ConnectionQuotas(3, max_connections_per_ip=2)
    assert quotas.admit("10.0.0.1") and quotas.admit("10.0.0.1")
    assert not quotas.admit("10.0.0.1")  # max.connections.per.ip
    assert quotas.admit("10.0.0.2")
    assert not quotas.admit("10.0.0.3")  # max.connections
    quotas.release("10.0.0.1")
    assert quotas.of("10.0.0.1") == 1 and quotas.count == 2
    assert quotas.admit("10.0.0.3")


def test_the_broker_wide_limit_spares_the_inter_broker_listener() -> None:
    """KIP-402: max.connections over every listener does not refuse the inter-broker listener."""
    seen: list[int] = []
    everyone = BrokerConnections(2, on_change=seen.append)
    client = ConnectionQuotas(10, broker_connections=everyone)
    replication = ConnectionQuotas(10, broker_connections=everyone, protected=True)
    assert client.admit("a") and client.admit("b")
    assert not client.admit("c")  # the broker is full for clients
    assert replication.admit("broker-1")  # ... not for brokers
    assert everyone.count == 3 and seen == [1, 2, 3]
    client.release("a")  # 2 of 2 (the broker's connection counts too): clients still wait
    assert not client.admit("c")
    client.release("b")  # 1 of 2
    assert client.admit("c") and everyone.count == 2


class Waiter:
    def __init__(self) -> None:
        self.told = 0

    def budget_freed(self) -> None:
        self.told += 1


def test_a_spent_budget_makes_takers_wait_and_tells_each_once_when_freed() -> None:
    budget: ByteBudget[Waiter] = ByteBudget(100)
    first, second = Waiter(), Waiter()
    assert not budget.must_wait(first)
    budget.take(150)  # non-strict: a taker may overshoot
    assert budget.must_wait(first) and budget.must_wait(second)
    budget.give_back(40)  # 110: still spent
    assert (first.told, second.told) == (0, 0)
    budget.give_back(20)  # 90: below the bound
    assert (first.told, second.told) == (1, 1)
    budget.give_back(90)
    assert (first.told, second.told) == (1, 1)  # told once; they register again if they must wait on
    budget.take(100)
    assert budget.must_wait(first)
    budget.forget(first)  # a closed connection is not told
    budget.give_back(100)
    assert first.told == 1


def test_no_bound_is_never_spent() -> None:
    budget: ByteBudget[Waiter] = ByteBudget(None)
    budget.take(1 << 40)
    assert not budget.spent() and not budget.must_wait(Waiter())
