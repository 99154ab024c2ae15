"""`tinystream users`: SCRAM credentials in a broker's sasl.users.file (salted; no password is stored).

    tinystream users add alice --file ./sasl-users.json --password-file alice.pw
    tinystream users list --file ./sasl-users.json
    tinystream users delete alice --file ./sasl-users.json

Brokers read the file at start-up (restart them after a change).
"""

from __future__ import annotations

from pathlib import Path

import click

from tinystream.scram_users import MIN_ITERATIONS, SCRAM_MECHANISMS, UserStore

_FILE = click.option("--file", "path", type=click.Path(dir_okay=False), required=True,
                     help="The credentials file (the brokers' sasl.users.file).")


@click.group()
def users() -> None:
    """SASL/SCRAM users of a SASL listener (sasl.users.file)."""


@users.command("add")
@click.argument("name")
@_FILE
@click.option("--password-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Read the password from this file (else it is prompted for).")
@click.option("--iterations", type=click.IntRange(MIN_ITERATIONS), default=MIN_ITERATIONS, show_default=True)
def add(name: str, path: str, password_file: str | None, iterations: int) -> None:
    """Add NAME, or change its password (SCRAM-SHA-256 and SCRAM-SHA-512; PLAIN checks the same)."""
    password = Path(password_file).read_text().strip() if password_file else click.prompt(
        f"password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("the password is empty")
    store = UserStore.load(path) if Path(path).exists() else UserStore()
    try:
        store.set_password(name, password, iterations=iterations)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    store.save(path)
    click.echo(f"{name}: {', '.join(SCRAM_MECHANISMS)} credentials written to {path}")


@users.command("list")
@_FILE
def list_users(path: str) -> None:
    """The users and their mechanisms."""
    for name, mechs in sorted(UserStore.load(path).users.items()):
        click.echo(f"{name}  {' '.join(f'{m}(iterations={c.iterations})' for m, c in sorted(mechs.items()))}")


@users.command("delete")
@click.argument("name")
@_FILE
def delete(name: str, path: str) -> None:
    store = UserStore.load(path)
    if store.users.pop(name, None) is None:
        raise click.ClickException(f"no user {name!r} in {path}")
    store.save(path)
    click.echo(f"{name} deleted from {path}")
