"""The reader keeps only what is read: bounded memory on objects the size real API servers serve, same findings.

The LIST bodies are factory objects padded to real size (factory.as_served) and served to the real
ClusterReader through its transport; memory is measured with tracemalloc (allocations, not wall time).
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from factory import healthy_snapshot, pod_for, refresh, stuck_init
from tools.factory_apiserver import list_bodies

import gpu_conformance.cluster.reader as reader
from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.settings import Settings

NS = "gpu-operator"
# Python memory the read may hold at its peak, per pod listed (nodes, events and chunks in flight included).
# Measured at 200 GPU nodes: 20 KiB trimmed while streamed; 67 KiB without trimming; 61 KiB when each LIST is
# decoded whole and trimmed afterwards.
PEAK_PER_POD = 28 * 1024


class _Body:
    """What reader.raw_stream returns: a urllib3 response streamed in chunks."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, n: int) -> Iterator[bytes]:
        for i in range(0, len(self.data), n):
            yield self.data[i:i + n]

    def release_conn(self) -> None:
        pass


def _serve(monkeypatch: pytest.MonkeyPatch, snap: ClusterSnapshot) -> None:
    bodies = list_bodies(snap)

    def stream(api: Any, path: str, query: list[tuple[str, str]] | None = None, **_: Any) -> _Body:
        selector = next((v for k, v in query or [] if k in ("labelSelector", "fieldSelector")), "")
        return _Body(bodies.get((path, selector), b'{"items": []}'))

    def request(api: Any, method: str, path: str, query: list[tuple[str, str]] | None = None, *_: Any,
                **__: Any) -> bytes:
        if path == "/version":
            return b'{"gitVersion": "v1.33.1"}'
        pod, container = path.split("/")[-2], dict(query or []).get("container", "")
        return snap.logs.get((pod, container), "").encode()

    monkeypatch.setattr(reader, "raw_stream", stream)
    monkeypatch.setattr(reader, "raw_request", request)


def _findings(snap: ClusterSnapshot) -> list[str]:
    settings = Settings(operator_namespace=NS, run_id="mem")
    inp = check_input(snap, settings)
    return [json.dumps(f.to_dict(), sort_keys=True, default=str)
            for c in catalogue.all_checks() if c.func for f in c.run(inp)]


def _broken(gpu_nodes: int) -> ClusterSnapshot:
    snap = healthy_snapshot(gpu_nodes=gpu_nodes, cpu_nodes=1)
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-2"), "toolkit-validation", restarts=7,
               snapshot=snap, log="nvidia-smi: command not found")
    return refresh(snap)


def _read(monkeypatch: pytest.MonkeyPatch, snap: ClusterSnapshot) -> tuple[ClusterSnapshot, int]:
    _serve(monkeypatch, snap)
    conn: Any = type("Conn", (), {"api": None, "server": "https://x", "context": "c", "user": "u"})()
    tracemalloc.start()
    try:
        read = reader.ClusterReader(conn).read(operator_namespace=NS, preflight=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return read, peak


def test_read_memory_is_bounded_per_pod_and_findings_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _broken(gpu_nodes=200)
    read, peak = _read(monkeypatch, snap)
    pods = len(read.pods)
    print(f"{pods} pods, {len(read.nodes)} nodes: peak {peak / 2**20:.1f} MiB = {peak / pods / 1024:.1f} KiB/pod")
    assert pods == len(snap.pods) > 1500
    assert peak <= PEAK_PER_POD * pods, f"{peak / pods / 1024:.1f} KiB per pod at the read's peak"
    # Trimming keeps every field a finding quotes: the same findings, evidence included, as on the whole objects.
    assert _findings(read) == _findings(snap)
    assert read.logs == snap.logs and read.logs


def test_read_requests_do_not_grow_with_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    small, _ = _read(monkeypatch, _broken(gpu_nodes=3))
    large, _ = _read(monkeypatch, _broken(gpu_nodes=60))
    assert len(large.gpu_nodes) == 60
    assert large.requests == small.requests, (small.requests, large.requests)


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_streamed_decode_equals_json_loads_at_any_chunk_boundary(chunk: int) -> None:
    from gpu_conformance.cluster.stream_list import decode_list

    body = ('{ "kind" : "PodList", "metadata": {"continue": "", "remainingItemCount": 12345},\n "items" : [ '
            '{"n": 1234567, "s": "ünïcødé ✓ \\" \\\\", "l": [1.5e3, true, null, false]} ,\n{"n": -0.25}, 42 ], '
            '"tail": 9876}').encode()
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)]
    assert decode_list(pieces, None) == json.loads(body)
    assert decode_list([b"  "], None) == {}
    bad_bodies = ((b"<html>login</html>", "not JSON"), (b"[1, 2]", "a JSON list"), (b'{"items": [1,', "Expecting"))
    for bad, words in bad_bodies:
        with pytest.raises(ValueError, match=words):
            decode_list([bad], None)
