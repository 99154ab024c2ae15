"""Stage 2: who may do what: the ACL authorizer, the SCRAM users, each listener's login state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinystream.broker.security.authorizer import Authorizer, authorizer_enabled
from tinystream.broker.security.listener import broker_principals, load_users, super_users
from tinystream.broker.security.listener_config import Listener, ListenerPlan, mechanisms
from tinystream.broker.security.peer import ConnectionAuth
from tinystream.broker.security.sasl import SaslSession
from tinystream.config.settings import BrokerSettings
from tinystream.scram_users import UserStore


@dataclass(frozen=True, slots=True)
class Security:
    plan: ListenerPlan
    authorizer: Authorizer | None  # None: authorizer.class.name unset, everything is allowed
    users: UserStore  # sasl.users.file, plus the controller's image's credentials once applied
    broker_principals: frozenset[str]  # who may act as a broker on the inter-broker listener

    def auth_factory(self, listener: Listener) -> Callable[[], ConnectionAuth]:
        """Each connection's auth state: on a SASL listener, a SaslSession over the users with that
        listener's mechanisms."""
        if not listener.sasl:
            return ConnectionAuth
        users, enabled = self.users, mechanisms(listener.settings)
        reauth_ms = listener.settings.connections_max_reauth_ms
        return lambda: ConnectionAuth(sasl=SaslSession(users, enabled=enabled, reauthentication=reauth_ms > 0),
                                      max_reauth_ms=reauth_ms)


def build_security(settings: BrokerSettings, plan: ListenerPlan) -> Security:
    """authorizer.class.name set: ACLs on; super.users and the inter-broker user may do anything."""
    authorizer = None
    if authorizer_enabled(settings.authorizer_class_name):
        authorizer = Authorizer(super_users=super_users(settings),
                                allow_if_no_acl=settings.allow_everyone_if_no_acl_found)
    return Security(plan=plan, authorizer=authorizer, users=load_users(settings),
                    broker_principals=broker_principals(plan.inter_broker))
