"""API errors as the real server reports them: `Status` objects with a code and a reason."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error the API server answers with a `Status` body."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.message, self.reason, self.details)


def status_object(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    st: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        st["details"] = details
    return st


def _resource_name(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_resource_name(plural, group)} "{name}" not found',
        details={"name": name, "group": group, "kind": plural},
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_resource_name(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_resource_name(plural, group)} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again",
        reason="Conflict",
        details={"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; causes are (field, message) pairs."""
    text = "; ".join(f"{f}: {m}" for f, m in causes)
    shown = f"{kind}.{group}" if group else kind
    if len(causes) > 1:
        text = "[" + ", ".join(f"{f}: {m}" for f, m in causes) + "]"
    return ApiError(
        422,
        f'{shown} "{name}" is invalid: {text}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
        },
    )


def expired(message: str) -> ApiError:
    return ApiError(410, message, reason="Expired")


def forbidden(
    user: str, verb: str, plural: str, group: str, namespace: str | None, name: str | None = None
) -> ApiError:
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    res = _resource_name(plural.split("/")[0], group)
    subject = f'{res} "{name}" is forbidden' if name else f"{res} is forbidden"
    return ApiError(
        403,
        f'{subject}: User "{user}" cannot {verb} resource "{plural}" in API group "{group}" {where}',
        details={"name": name or "", "group": group, "kind": plural.split("/")[0]},
    )
