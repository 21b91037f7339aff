"""The OpenAPI description says what the REST API really answers: FastAPI's 422 validation
response is replaced by the 400 (``{"errors": [...]}``) the API sends, path parameters get their
patterns, and the 401 (token) and 413 (body limit) answers of the security middleware are listed.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from yarnflink.dispatcher.rest_models import ErrorResponse

ID_PATTERN = "^[0-9a-fA-F]{32}$"
PATH_PATTERNS = {"jobid": ID_PATTERN, "vertexid": ID_PATTERN}
_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def doc(model: Any, status: int = 200, *, conflict: bool = False) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route answering ``model`` (plus 400/404, and 409 with ``conflict``)."""
    out: dict[int | str, dict[str, Any]] = {
        status: {"model": model, "description": "OK" if status == 200 else "Accepted"},
        400: {"model": ErrorResponse, "description": "bad request"},
        404: {"model": ErrorResponse, "description": "not found"},
    }
    if conflict:
        out[409] = {"model": ErrorResponse, "description": "conflicts with the job's state"}
    return out


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def fix_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    secured = bool(schema.get("security"))
    for path, item in schema.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            responses = op["responses"]
            responses.pop("422", None)
            for code, response in responses.items():
                if code[:1] in "45":  # every error is {"errors": [...]}, whatever the success type
                    response["content"] = {"application/json": {"schema": dict(_ERROR_REF)}}
            has_input = bool(op.get("parameters")) or "requestBody" in op
            if has_input:
                responses.setdefault("400", _error_response("bad request"))
            if "requestBody" in op:
                responses.setdefault("413", _error_response("request body too large"))
            if secured and op.get("security") != []:
                responses.setdefault("401", _error_response("no valid token"))
            for p in op.get("parameters", []):
                pattern = PATH_PATTERNS.get(p.get("name"))
                if p.get("in") == "path" and pattern:
                    p.setdefault("schema", {})["pattern"] = pattern
    schemas = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return schema


def install_openapi_fixups(app: FastAPI) -> None:
    build = app.openapi
    done = False

    def openapi() -> dict[str, Any]:
        nonlocal done
        if done and app.openapi_schema:
            return app.openapi_schema
        schema = fix_openapi(build())
        app.openapi_schema = schema
        done = True
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
