"""timm's model hub: its pretrained models (:func:`create`, zoo entries ``init: timm:<tag>``), its reachability (a TCP
probe before a download) and the hub library's offline mode.

The hub library retries an unreachable host for about a minute per file; probing first lets a build without
network fail at once with a plain message (:mod:`benchmark.models.factory`, :mod:`benchmark.models.torchvision_zoo`).
"""

from __future__ import annotations

import os
import socket

from benchmark.models.zoo import ZooError

HUB_PROBE_TIMEOUT = 3.0  # seconds to wait for a TCP connection to the hub before going offline


def hub_address() -> tuple[str, int]:
    """(host, port) a hub download connects to first: the HTTPS proxy if set, else the hub endpoint."""
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or constants.ENDPOINT)
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def reachable(host: str, port: int, timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:  # DNS failure, refused, unreachable, timeout
        return False


def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """Whether a TCP connection to :func:`hub_address` opens within ``timeout`` seconds."""
    return reachable(*hub_address(), timeout=timeout)


def hub_offline() -> bool:
    """Whether the Hugging Face hub may not be reached (``HF_HUB_OFFLINE``)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")


def set_hub_offline() -> None:
    """Offline mode for this process: the hub library serves its local cache and makes no request."""
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True


def create(entry, num_classes: int, kwargs: dict):
    """The pretrained timm model of a ``timm:<tag>`` zoo entry (``kwargs``: further ``timm.create_model`` arguments,
    :func:`benchmark.models.factory.timm_kwargs`); without network, from the local cache or a plain error at once.

    The hub library retries an unreachable host for about a minute per file, so the hub is probed first
    (:func:`hub_reachable`); when it does not answer, the process switches to offline mode (:func:`set_hub_offline`)
    before loading. The module of init kind ``timm`` (:data:`benchmark.models.zoo.FAMILIES`).
    """
    import timm

    name = f"{entry.arch}.{entry.init_source}"
    if hub_offline():
        hint = "HF_HUB_OFFLINE is set and the weights are not in the local cache"
    elif not hub_reachable():
        set_hub_offline()
        host, port = hub_address()
        hint = (
            f"no network: {host}:{port} did not answer within {HUB_PROBE_TIMEOUT:g} s, so the hub was set offline "
            "(HF_HUB_OFFLINE=1), and the weights are not in the local cache"
        )
    else:
        hint = "download failed or unknown tag"
    try:
        return timm.create_model(name, pretrained=True, num_classes=num_classes, **kwargs)
    except Exception as e:  # hub errors come in many types
        raise ZooError(
            f"zoo entry {entry.name!r}: cannot load pretrained weights {name!r} ({hint}; {type(e).__name__}: {e}). "
            "Download them once with network (they are cached by huggingface_hub) or point HF_HOME at a cache that "
            "has them."
        ) from e
