"""Each LIST says at DEBUG what it read (visible with --log-cli-level=DEBUG)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

import gpu_conformance.cluster.reader as reader


def test_each_list_logs_what_it_read(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    body = SimpleNamespace(stream=lambda n: iter([b'{"items": [{}, {}]}']), release_conn=lambda: None)
    monkeypatch.setattr(reader, "raw_stream", lambda *a, **k: body)
    r = reader.ClusterReader(SimpleNamespace(api=None, server="https://x", context="c", user="u"))  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="gpu_conformance.cluster.reader"):
        items = r.list_raw(reader.ListSpec("nodes", "/api/v1/nodes", "", "nodes"))
    assert len(items) == 2
    assert any("list nodes: 2 items" in m for m in caplog.messages), caplog.messages
