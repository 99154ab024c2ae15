"""`tinystream acls`: Kafka ACLs of a running cluster (CreateAcls, DescribeAcls, DeleteAcls), like kafka-acls.sh.

    tinystream acls add --principal User:alice --operation READ --operation WRITE --topic orders
    tinystream acls add --principal User:alice --operation READ --group etl- --prefixed
    tinystream acls list [--topic orders] [--principal User:alice]
    tinystream acls delete --principal User:alice --topic orders

Resource selectors: --topic, --group, --transactional-id, --cluster (one per call);
--prefixed for a PREFIXED pattern, --deny for a DENY. `--command-config FILE`
takes the same client properties as the Java tools (SASL and TLS). The caller
needs ALTER (add, delete) or DESCRIBE (list) on the cluster; the brokers need
`authorizer.class.name` (else SECURITY_DISABLED).
"""

from __future__ import annotations

from typing import Any

import click
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import NoError

from tinystream.acls import CLUSTER_NAME
from tinystream.cli.client_cmds import bootstrap_option, reports_client_errors
from tinystream.cli.kafka_client import ClientError, admin, security_options, translated

_OPERATIONS = [op.name for op in ACLOperation if op.name not in ("ANY", "UNKNOWN")]


def _resource(topic: str | None, group: str | None, transactional_id: str | None,
              cluster: bool) -> tuple[ResourceType, str] | None:
    chosen = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
              (ResourceType.TRANSACTIONAL_ID, transactional_id), (ResourceType.CLUSTER, CLUSTER_NAME if cluster
                                                                   else None)]
    named = [(kind, name) for kind, name in chosen if name is not None]
    if len(named) > 1:
        raise click.UsageError("name one resource: --topic, --group, --transactional-id or --cluster")
    return named[0] if named else None


def _common(fn: Any) -> Any:
    for option in reversed([
        bootstrap_option,
        click.option("--command-config", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                          "ssl.truststore.location as PEM)."),
        click.option("--topic", default=None), click.option("--group", default=None),
        click.option("--transactional-id", default=None),
        click.option("--cluster", is_flag=True, help=f"The cluster resource ({CLUSTER_NAME})."),
        click.option("--prefixed", is_flag=True, help="A PREFIXED pattern (the name is a prefix)."),
        click.option("--principal", default=None, help="User:<name>, or User:* for everyone."),
    ]):
        fn = option(fn)
    return fn


def _security(path: str | None) -> dict[str, object]:
    try:
        return security_options(path)
    except ClientError as exc:
        raise click.UsageError(str(exc)) from None


def _show(acl: ACL) -> str:
    p = acl.resource_pattern
    return (f"{p.resource_type.name}:{p.pattern_type.name}:{p.resource_name}  {acl.principal}  host={acl.host}  "
            f"{acl.permission_type.name} {acl.operation.name}")


@click.group()
def acls() -> None:
    """Kafka ACLs of a running cluster (the brokers need authorizer.class.name)."""


@acls.command("add")
@_common
@click.option("--operation", "operations", multiple=True, required=True, type=click.Choice(_OPERATIONS,
              case_sensitive=False))
@click.option("--host", default="*", show_default=True)
@click.option("--deny", is_flag=True, help="A DENY (overrides any ALLOW).")
@reports_client_errors
def add(bootstrap: str, command_config: str | None, topic: str | None, group: str | None,
        transactional_id: str | None, cluster: bool, prefixed: bool, principal: str | None,
        operations: tuple[str, ...], host: str, deny: bool) -> None:
    """Add ACLs: PRINCIPAL may (or, with --deny, may not) do each OPERATION on the resource."""
    resource = _resource(topic, group, transactional_id, cluster)
    if resource is None or principal is None:
        raise click.UsageError("add needs --principal and a resource (--topic, --group, --transactional-id, --cluster)")
    pattern = ResourcePattern(resource[0], resource[1],
                              ACLResourcePatternType.PREFIXED if prefixed else ACLResourcePatternType.LITERAL)
    permission = ACLPermissionType.DENY if deny else ACLPermissionType.ALLOW
    wanted = [ACL(principal, host, ACLOperation[op.upper()], permission, pattern) for op in operations]
    with admin(bootstrap, **_security(command_config)) as client, translated(bootstrap):
        result = client.create_acls(wanted)
    for acl in result.get("succeeded", ()):
        click.echo(f"added {_show(acl)}")
    failed = result.get("failed", ())
    for acl, error in failed:
        click.echo(f"refused {_show(acl)}: {error}", err=True)
    if failed:
        raise SystemExit(1)


def _filter(topic: str | None, group: str | None, transactional_id: str | None, cluster: bool, prefixed: bool,
            principal: str | None, operation: str | None = None) -> ACLFilter:
    resource = _resource(topic, group, transactional_id, cluster)
    if resource is None:
        pattern = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
    else:
        kind = ACLResourcePatternType.PREFIXED if prefixed else ACLResourcePatternType.LITERAL
        pattern = ResourcePatternFilter(resource[0], resource[1], kind)
    return ACLFilter(principal, None, ACLOperation[operation.upper()] if operation else ACLOperation.ANY,
                     ACLPermissionType.ANY, pattern)


@acls.command("list")
@_common
@reports_client_errors
def list_acls(bootstrap: str, command_config: str | None, topic: str | None, group: str | None,
              transactional_id: str | None, cluster: bool, prefixed: bool, principal: str | None) -> None:
    """The ACLs (all, or those of a resource or principal)."""
    with admin(bootstrap, **_security(command_config)) as client, translated(bootstrap):
        found, error = client.describe_acls(_filter(topic, group, transactional_id, cluster, prefixed, principal))
    if error is not NoError and not isinstance(error, NoError):
        raise click.ClickException(f"the cluster refused: {error}")
    for acl in sorted(found, key=_show):
        click.echo(_show(acl))


@acls.command("delete")
@_common
@click.option("--operation", default=None, type=click.Choice(_OPERATIONS, case_sensitive=False),
              help="Only this operation's ACLs (default: all).")
@reports_client_errors
def delete(bootstrap: str, command_config: str | None, topic: str | None, group: str | None,
           transactional_id: str | None, cluster: bool, prefixed: bool, principal: str | None,
           operation: str | None) -> None:
    """Delete the ACLs of a resource and/or principal (at least one must be named)."""
    if _resource(topic, group, transactional_id, cluster) is None and principal is None:
        raise click.UsageError("delete needs a resource or --principal (it never deletes every ACL at once)")
    with admin(bootstrap, **_security(command_config)) as client, translated(bootstrap):
        results = client.delete_acls([_filter(topic, group, transactional_id, cluster, prefixed, principal,
                                              operation)])
    for _filter_used, matched, error in results:
        if error is not NoError and not isinstance(error, NoError):
            raise click.ClickException(f"the cluster refused: {error}")
        for acl in matched:
            click.echo(f"deleted {_show(acl)}")
