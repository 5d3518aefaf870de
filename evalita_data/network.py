"""What a failed Hub call says: the endpoint that could not be reached and why, in one line.

``huggingface_hub`` raises its HTTP client's bare transport errors
(``ConnectError: [Errno -2] Name or service not known``), which name neither the
host nor the dataset; ``push`` and ``fetch`` put both in front.
"""

from __future__ import annotations

try:  # the HTTP client of huggingface_hub 1.x is httpx, of 2.x its fork httpx2
    import httpx2 as _httpx
except ImportError:  # pragma: no cover - depends on the installed huggingface_hub
    import httpx as _httpx  # type: ignore[no-redef]

# Failures of the connection itself (refused, no DNS, timed out, cut, offline mode), not answers.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (_httpx.TransportError, ConnectionError, TimeoutError)


def hub_endpoint() -> str:
    """The Hub URL the client talks to (``HF_ENDPOINT``, default https://huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def short_error(err: BaseException) -> str:
    """The first line of an error, at most 200 characters, with its type when it is a bare transport error."""
    text = str(err).splitlines()[0] if str(err) else ""
    if isinstance(err, NETWORK_ERRORS) or not text:
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text[:200]


def unreachable(what: str, err: BaseException) -> str:
    """``cannot reach the Hub at <endpoint> for <what> (<error>)``."""
    return f"cannot reach the Hub at {hub_endpoint()} for {what} ({short_error(err)})"
