"""``macupos trigger "TEXT"``: hands the running bot an instruction through its trigger endpoint
(bot/triggers.py), signed with the shared secret, from a script, a git hook or a shell."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping

import click
import httpx

from bot.triggers import DELIVERY_HEADER, SIGNATURE_HEADER, sign

__all__ = ["trigger_command", "trigger_defaults"]

PORT_ENV = "MACUPOS_TRIGGER_PORT"
SECRET_ENV = "MACUPOS_TRIGGER_SECRET"
NOT_RUNNING = f"the bot's trigger endpoint is not running: set {PORT_ENV} and {SECRET_ENV} and restart the bot"


def trigger_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """The options' defaults from the configuration the root loaded (environment, .env, config.toml), as the
    bot reads them: an option on the command line still wins."""
    return {option: env[name] for option, name in (("port", PORT_ENV), ("secret", SECRET_ENV)) if env.get(name)}


def _server_error(response: httpx.Response) -> str:
    """The ``error`` the endpoint gave, or the start of whatever else came back."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason_phrase
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, str):
        return error
    return response.text[:200].strip()


@click.command("trigger")
@click.argument("text")
@click.option("--project", help="The project to run it in (default: the bot's default project).")
@click.option("--branch", help="The branch to run it on (default: the project's current checkout).")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help=f"The bot's trigger port on 127.0.0.1 (default: {PORT_ENV}).",
)
@click.option(
    "--secret",
    help=f"The shared secret (default: {SECRET_ENV}); prefer that, as a command line is visible to others in ps.",
)
@click.option("--timeout", type=click.FloatRange(0.1, 300), default=10.0, show_default=True, help="Seconds.")
def trigger_command(
    text: str, project: str | None, branch: str | None, port: int | None, secret: str | None, timeout: float
) -> None:
    """Start an agent on TEXT in the running bot; prints the delivery id once the bot has stored it."""
    if port is None:
        raise click.ClickException(NOT_RUNNING)
    if not secret:
        raise click.ClickException(f"no secret: set {SECRET_ENV} to the bot's trigger secret")
    if not text.strip():
        raise click.ClickException("the instruction is empty")
    payload: dict[str, str] = {"text": text}
    if project is not None:
        payload["project"] = project
    if branch is not None:
        payload["branch"] = branch
    body = json.dumps(payload).encode()
    delivery_id = str(uuid.uuid4())
    headers = {
        "content-type": "application/json",
        SIGNATURE_HEADER: sign(secret, body),
        DELIVERY_HEADER: delivery_id,
    }
    url = f"http://127.0.0.1:{port}/trigger"
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.ConnectError:
        raise click.ClickException(NOT_RUNNING) from None
    except httpx.TimeoutException:
        raise click.ClickException(f"the bot's trigger endpoint gave no answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise click.ClickException(f"the call to the bot's trigger endpoint failed: {exc}") from None
    status = response.status_code
    if status == 202:
        click.echo(delivery_id)
        return
    if status == 401:
        raise click.ClickException(f"the bot refused the signature (401): {SECRET_ENV} differs from the bot's")
    if status == 503:
        raise click.ClickException(
            f"the bot could not store the instruction (503); try again: {_server_error(response)}"
        )
    if status == 200:  # a duplicate: cannot happen with a fresh id unless something replays it
        raise click.ClickException(f"the bot had already seen delivery {delivery_id}; nothing new runs")
    raise click.ClickException(f"the bot refused the instruction ({status}): {_server_error(response)}")
