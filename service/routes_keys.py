"""`/v1/keys`: an admin key of a tenant issues, lists and revokes that tenant's keys over HTTP (the bot's
`/key` and `/keys`, and any tool of the owner's), in whichever key store the server runs on.

Only read and write keys are issued here: an admin key cannot mint another admin key, so one leaked admin
key cannot be copied past its own revocation. Another tenant's key id is answered as unknown (404), never
as forbidden, so ids tell nothing about other tenants.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from service.bodies import read_json
from service.calls import Service, key_endpoint
from service.errors import BadRequest, NotFound
from service.tenants import KeyRecord

__all__ = ["create_key_route", "key_json", "list_keys_route", "revoke_key_route"]

ISSUED_SCOPES = ("read", "write")
LABEL_MAX = 200
_BODY_BYTES = 4096


def key_json(record: KeyRecord) -> dict[str, Any]:
    """A key as `GET /v1/keys` lists it: never its secret (only its hash is kept). Times are Unix seconds, as
    `macupos serve keys list --json` and the webhooks API write them."""
    return {
        "id": record.key_id,
        "scope": record.scope,
        "tenant": record.tenant,
        "label": record.label,
        "created_at": record.created_at,
        "revoked_at": record.revoked_at,
    }


def _label(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest("label must be a string")
    if len(value) > LABEL_MAX:
        raise BadRequest(f"label is longer than {LABEL_MAX} characters")
    # Labels are shown in the CLI, the bot and the pages: no control characters (a newline could forge a row).
    if any(unicodedata.category(ch).startswith("C") for ch in value):
        raise BadRequest("label holds a control character")
    return value.strip()


@key_endpoint("/v1/keys", scope="admin")
async def create_key_route(request: Request, key: KeyRecord, svc: Service) -> Response:
    """`{"scope": "read"|"write", "label"?: str}` → 201 the new key of the caller's tenant, shown this once."""
    body = await read_json(request, _BODY_BYTES)
    scope = body.get("scope")
    if scope not in ISSUED_SCOPES:
        raise BadRequest('scope must be "read" or "write"')
    label = _label(body.get("label"))
    # The tenant exists (the admin key's own), so no tenants row is written and its origin is never recorded;
    # "cli" is one both stores' schemas accept.
    new = await svc.tenants.keys.create_key(key.tenant, scope, label=label, origin="cli")
    answer = {"key": new.api_key, **key_json(new.record)}
    del answer["revoked_at"]  # a new key is live; the shape is the one the API documents for a created key
    return JSONResponse(answer, status_code=201, headers={"Cache-Control": "no-store"})


@key_endpoint("/v1/keys", scope="admin")
async def list_keys_route(request: Request, key: KeyRecord, svc: Service) -> Response:
    """`{"keys": [...]}`: every key of the caller's tenant, revoked ones too (with when), oldest first."""
    records = await svc.tenants.keys.list_keys(key.tenant)
    return JSONResponse({"keys": [key_json(r) for r in records]}, headers={"Cache-Control": "no-store"})


@key_endpoint("/v1/keys/{id}", scope="admin")
async def revoke_key_route(request: Request, key: KeyRecord, svc: Service) -> Response:
    """Revoke one of the tenant's keys from its next request on (204; again: 204). The caller's own key may
    be revoked too: it is refused from its next request."""
    key_id = request.path_params["id"]
    store = svc.tenants.keys
    # A key's tenant never changes, so checking it first and revoking after cannot touch another tenant's key.
    if not any(r.key_id == key_id for r in await store.list_keys(key.tenant)):
        raise NotFound("no key of this tenant has that id")
    await store.revoke(key_id)
    return Response(status_code=204)
