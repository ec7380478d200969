"""Pretrained tags are checked offline against timm; hub loading fails at once, plainly, without network."""

from __future__ import annotations

import socket

import pytest

from benchmark.models import factory, hub
from benchmark.models.zoo import ZooError, parse_entry

GOOD = {"arch": "resnet18", "img_size": 32, "seed": 0, "recipe": "r"}


def test_tag_must_be_known_to_timm():
    assert parse_entry("ok", {**GOOD, "init": "timm:tv_in1k"}).init_source == "tv_in1k"
    with pytest.raises(
        ZooError,
        match=r"zoo entry 'x': timm has no pretrained weights resnet18.tv2_in1k; tags for resnet18: \[.*'tv_in1k'",
    ):
        parse_entry("x", {**GOOD, "init": "timm:tv2_in1k"})
    assert parse_entry("unchecked", {**GOOD, "init": "timm:tv2_in1k"}, check_arch=False).init == "timm:tv2_in1k"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hub_probe_on_local_sockets(monkeypatch):
    port = _closed_port()
    monkeypatch.setattr(hub, "hub_address", lambda: ("127.0.0.1", port))
    assert hub.hub_reachable(timeout=1) is False
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setattr(hub, "hub_address", lambda: server.getsockname())
        assert hub.hub_reachable(timeout=1) is True


@pytest.fixture
def connects(monkeypatch):
    """Every outgoing connection attempt (address) made by this process during the test."""
    seen = []
    real = socket.socket.connect

    def connect(self, address):
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def test_no_network_sets_hub_offline_and_fails_plainly(monkeypatch, connects):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    port = _closed_port()
    monkeypatch.setattr(hub, "hub_address", lambda: ("127.0.0.1", port))
    entry = parse_entry("r", {**GOOD, "init": "timm:a1_in1k"})
    with pytest.raises(
        ZooError,
        match=rf"zoo entry 'r': cannot load pretrained weights 'resnet18.a1_in1k' \(no network: 127.0.0.1:{port} "
        r"did not answer within 3 s, so the hub was set offline \(HF_HUB_OFFLINE=1\)",
    ):
        factory.create(entry, 10)
    assert constants.HF_HUB_OFFLINE is True and hub.hub_offline()
    assert connects == [("127.0.0.1", port)]  # the probe only: no request to the hub, hence no retries


def test_offline_mode_skips_the_probe(monkeypatch, connects):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = parse_entry("r", {**GOOD, "init": "timm:a1_in1k"})
    with pytest.raises(ZooError, match="HF_HUB_OFFLINE is set and the weights are not in the local cache"):
        factory.create(entry, 10)
    assert connects == []
