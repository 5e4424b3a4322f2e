"""The webhooks API of a tenant: ``POST /v1/webhooks`` (write scope; the secret is in this answer only),
``GET /v1/webhooks`` (read), ``DELETE /v1/webhooks/{id}`` (write), ``GET /v1/webhooks/{id}/deliveries``
(read; newest first, ``limit`` 1-500, 100 by default). Another tenant's webhook is 404, as an unknown one is."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from service.bodies import read_json
from service.calls import Call, brief, endpoint
from service.errors import NotFound, ServiceError
from service.params import int_param
from service.webhooks.hub import Webhooks, webhooks_of

__all__ = ["create_webhook_route", "delete_webhook_route", "list_webhooks_route", "webhook_deliveries_route"]


class NotImplementedHere(ServiceError):
    status, code = 501, "not_implemented"


def _hooks(request: Request) -> Webhooks:
    hooks = webhooks_of(request.app)
    if hooks is None:
        raise NotImplementedHere("this server keeps no webhooks (its key store has no database for them)")
    return hooks


@endpoint("/v1/webhooks", scope="write")
async def create_webhook_route(request: Request, call: Call) -> Response:
    body = await read_json(request, call.service.settings.limits.json_bytes)
    new = await _hooks(request).create(call.tenant.name, body.get("url"), body.get("events"))
    return JSONResponse({**new.webhook.listing(), "secret": new.secret}, status_code=201)


@endpoint("/v1/webhooks")
async def list_webhooks_route(request: Request, call: Call) -> Response:
    hooks = await _hooks(request).webhooks(call.tenant.name)
    return JSONResponse({"webhooks": [h.listing() for h in hooks]})


@endpoint("/v1/webhooks/{id}", scope="write")
async def delete_webhook_route(request: Request, call: Call) -> Response:
    webhook_id = request.path_params["id"]
    if not await _hooks(request).delete(call.tenant.name, webhook_id):
        raise NotFound(f"no webhook with id {brief(webhook_id)}")
    return Response(status_code=204)


@endpoint("/v1/webhooks/{id}/deliveries")
async def webhook_deliveries_route(request: Request, call: Call) -> Response:
    webhook_id = request.path_params["id"]
    limit = int_param(request, "limit", 100, 1, 500)
    hooks = _hooks(request)
    if await hooks.get(call.tenant.name, webhook_id) is None:
        raise NotFound(f"no webhook with id {brief(webhook_id)}")
    found = await hooks.deliveries(call.tenant.name, webhook_id, limit)
    return JSONResponse({"deliveries": [d.listing() for d in found]})
