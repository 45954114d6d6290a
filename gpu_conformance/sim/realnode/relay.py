"""A TCP relay from 127.0.0.1:<port> inside a network namespace to 127.0.0.1:<port> of this process's own.

The real node's kubelet runs in a network namespace of its own, where 127.0.0.1 is not the host's: the
simulated API server listens only on the host's loopback, and its certificate names 127.0.0.1. This relay
opens its listening socket inside the node's namespace (setns on this thread, bind, setns back) and
forwards every connection to the host's loopback, so the kubelet talks TLS to https://127.0.0.1:<port>
unchanged and nothing listens on a host address.

    python -m gpu_conformance.sim.realnode.relay --netns-pid PID --port PORT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
from collections.abc import Sequence

CLONE_NEWNET = 0x40000000
LOOPBACK = "127.0.0.1"


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in_netns(netns_pid: int, port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1:port inside the network namespace of netns_pid."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{netns_pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((LOOPBACK, port))
            sock.listen(64)
        finally:
            _setns(own)  # connections to the host side are made from the host's namespace
    finally:
        os.close(own)
        os.close(target)
    sock.setblocking(False)
    return sock


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: the event loop is already closed
            writer.close()


async def _serve(sock: socket.socket, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, sock=sock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.realnode.relay", description=__doc__)
    p.add_argument("--netns-pid", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args(argv)
    try:
        sock = listen_in_netns(a.netns_pid, a.port)
    except OSError as e:
        print(f"relay: cannot listen on {LOOPBACK}:{a.port} in the namespace of pid {a.netns_pid}: {e}",
              file=sys.stderr)
        return 1
    print(f"relay: {LOOPBACK}:{a.port} in the namespace of pid {a.netns_pid} -> {LOOPBACK}:{a.port}", flush=True)
    asyncio.run(_serve(sock, a.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
