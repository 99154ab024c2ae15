"""Which replica a consumer should read a partition from (KIP-392, fetch from the closest replica).

The leader of a partition answers a consumer's Fetch (v11+, which carries the
client's `rack_id`) with `preferred_read_replica` when the broker's
`replica.selector.class` picks another replica; the consumer then fetches
from that replica until its metadata refresh, or until an error sends it
back to the leader. Kafka's rules (ReplicaManager.findPreferredReadReplica and
common.replica.RackAwareReplicaSelector):

- Candidates are the leader and the followers in the ISR that hold the fetch
  offset (log start <= offset <= log end): an out-of-sync follower may lag
  for ever, and one without the offset would answer OFFSET_OUT_OF_RANGE.
- Leader selector (Kafka's default, `replica.selector.class` unset): always
  the leader, so nothing is ever redirected.
- Rack-aware selector: with no client rack, or the leader in the client's
  rack, or no candidate in it, the leader; else the most caught-up candidate
  in the client's rack: highest log end offset, then shortest time since it
  was last caught up, then highest broker id (Kafka's ReplicaView.comparator,
  so the choice is deterministic).

Racks compare exactly, as Kafka's `String.equals`. Pure: the caller passes
the views, already filtered to brokers the client can reach.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

#: Kafka's class names, accepted as `replica.selector.class` values.
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
#: KIP-392's name for the default "return the leader" selector (Kafka ships none: it leaves the key unset).
LEADER = "org.apache.kafka.common.replica.LeaderSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the leader sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int  #: 0 for the leader


#: (leader, in-sync candidates including the leader, client rack) -> the chosen replica.
Selector = Callable[[ReplicaView, Collection[ReplicaView], str], ReplicaView]


def leader_selector(leader: ReplicaView, candidates: Collection[ReplicaView], client_rack: str) -> ReplicaView:
    """Kafka's default: the leader serves every consumer."""
    return leader


def _most_caught_up(view: ReplicaView) -> tuple[int, int, int]:
    return view.log_end_offset, -view.time_since_caught_up_ms, view.broker_id


def rack_aware_selector(leader: ReplicaView, candidates: Collection[ReplicaView], client_rack: str) -> ReplicaView:
    """The leader when it shares the client's rack or nothing does; else the client rack's most caught-up replica."""
    if not client_rack:
        return leader
    same_rack = [v for v in candidates if v.rack == client_rack]
    if not same_rack or any(v.broker_id == leader.broker_id for v in same_rack):
        return leader
    return max(same_rack, key=_most_caught_up)


_SELECTORS: dict[str, Selector] = {"": leader_selector, LEADER: leader_selector, RACK_AWARE: rack_aware_selector}
#: The values `replica.selector.class` accepts ("" or unset: the leader selector).
KNOWN_CLASSES = tuple(name for name in _SELECTORS if name)


def selector_for(class_name: str | None) -> Selector:
    """The selector a `replica.selector.class` value names; ValueError names the accepted ones."""
    found = _SELECTORS.get((class_name or "").strip())
    if found is None:
        raise ValueError(f"replica.selector.class {class_name!r} is not one of {', '.join(KNOWN_CLASSES)}")
    return found


def preferred_read_replica(selector: Selector, leader: ReplicaView, followers: Collection[ReplicaView],
                           client_rack: str) -> int:
    """The broker id to redirect the consumer to, or -1 to read from the leader (Kafka never names the
    leader itself as preferred: -1 means "stay")."""
    chosen = selector(leader, (leader, *followers), client_rack)
    return -1 if chosen.broker_id == leader.broker_id else chosen.broker_id
