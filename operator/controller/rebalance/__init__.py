"""Rebalancing (Strimzi's KafkaRebalance, Cruise Control's goals), pure: a load model, goals, a greedy
optimizer that proposes moves. Executing a proposal is the service's job (reassignments + throttles)."""

from tinystream.operator.controller.rebalance.goals import GOALS, BrokerLoad, goal_scores, score
from tinystream.operator.controller.rebalance.model import LoadModel, PartitionLoad, model_from_image
from tinystream.operator.controller.rebalance.optimizer import Mode, PartitionMove, Proposal, apply, propose

__all__ = ["GOALS", "BrokerLoad", "LoadModel", "Mode", "PartitionLoad", "PartitionMove", "Proposal", "apply",
           "goal_scores", "model_from_image", "propose", "score"]
