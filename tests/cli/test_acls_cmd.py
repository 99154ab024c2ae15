"""`tinystream acls add|list|delete` against a SASL broker with the authorizer on, logged in by --command-config."""

from __future__ import annotations

from click.testing import CliRunner

from tinystream.cli import cli
from tinystream.cli.kafka_client import ClientError, security_options
from tinystream.testing.broker import BrokerThread, sasl_plaintext_settings

USERS = {"admin": "admin-pw", "alice": "alice-pw"}


def properties(tmp_path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{USERS[user]}";\n')
    return str(path)


def test_acls_add_list_delete_and_a_caller_who_may_not(tmp_path) -> None:
    settings = sasl_plaintext_settings(tmp_path / "broker", users=USERS, **{
        "authorizer.class.name": "acl", "super.users": "User:admin"})
    admin, alice = properties(tmp_path, "admin"), properties(tmp_path, "alice")
    runner = CliRunner()
    with BrokerThread(settings) as broker:
        common = ["--bootstrap", broker.bootstrap, "--command-config", admin]
        added = runner.invoke(cli, ["acls", "add", *common, "--principal", "User:alice", "--operation", "read",
                                    "--operation", "WRITE", "--topic", "orders-", "--prefixed"])
        assert added.exit_code == 0, added.output
        assert "added TOPIC:PREFIXED:orders-  User:alice  host=*  ALLOW READ" in added.output
        denied = runner.invoke(cli, ["acls", "add", *common, "--principal", "User:alice", "--operation", "READ",
                                     "--group", "g", "--deny"])
        assert denied.exit_code == 0, denied.output
        listed = runner.invoke(cli, ["acls", "list", *common])
        assert listed.exit_code == 0, listed.output
        assert listed.output.splitlines() == [
            "GROUP:LITERAL:g  User:alice  host=*  DENY READ",
            "TOPIC:PREFIXED:orders-  User:alice  host=*  ALLOW READ",
            "TOPIC:PREFIXED:orders-  User:alice  host=*  ALLOW WRITE",
        ]
        refused = runner.invoke(cli, ["acls", "list", "--bootstrap", broker.bootstrap, "--command-config", alice])
        assert refused.exit_code != 0 and "Authorization" in refused.output, refused.output
        deleted = runner.invoke(cli, ["acls", "delete", *common, "--topic", "orders-", "--prefixed",
                                      "--operation", "WRITE"])
        assert deleted.exit_code == 0 and "deleted TOPIC:PREFIXED:orders-" in deleted.output, deleted.output
        listed = runner.invoke(cli, ["acls", "list", *common, "--topic", "orders-", "--prefixed"])
        assert listed.output.splitlines() == ["TOPIC:PREFIXED:orders-  User:alice  host=*  ALLOW READ"]
        everything = runner.invoke(cli, ["acls", "delete", *common])
        assert everything.exit_code != 0 and "never deletes every ACL" in everything.output


def test_command_config_is_read_strictly(tmp_path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("security.protocol=SASL_SSL\nssl.truststore.location=/ca.pem\nssl.truststore.type=PEM\n"
                    "sasl.mechanism=PLAIN\nsasl.jaas.config=x required username=\"a\" password=\"b\";\n")
    assert security_options(path) == {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                      "sasl_plain_username": "a", "sasl_plain_password": "b",
                                      "ssl_cafile": "/ca.pem"}
    path.write_text("bootstrap.servers=x\n")
    try:
        security_options(path)
    except ClientError as exc:
        assert "unsupported client properties ['bootstrap.servers']" in str(exc)
    else:
        raise AssertionError("an unknown property was accepted")
