"""A TCP proxy on loopback that delays every byte by a fixed time each way: a slow network.

For the Redis store's slow-Redis tests and benchmark (no pytest import)::

    with DelayProxy(redis_port) as proxy:   # listens on 127.0.0.1:proxy.port
        proxy.delay = 0.2                    # seconds added each way, from now on
        url = proxy.url()                    # redis://127.0.0.1:<proxy port>/0

Each connection gets two pumps (client to server, server to client). A pump's reader
stamps each chunk with its arrival time and its writer sends it ``delay`` seconds later,
so the delay adds latency without limiting throughput and the order of bytes is kept.
Threads, not asyncio: the proxy runs beside a Twisted reactor or a blocking client.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

__all__ = ["DelayProxy"]

_CHUNK = 65536


class DelayProxy:
    """Forward 127.0.0.1:``port`` to 127.0.0.1:``target_port``, ``delay`` seconds each way."""

    def __init__(self, target_port: int, delay: float = 0.0, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self.delay = delay
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, name="delay-proxy", daemon=True)

    def url(self, db: int = 0) -> str:
        return f"redis://{self.target[0]}:{self.port}/{db}"

    def start(self) -> DelayProxy:
        self._acceptor.start()
        return self

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.drop_connections()
        self._acceptor.join(2)

    def drop_connections(self) -> None:
        """Close every proxied connection (both ends): as if the network had dropped them."""
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, server))
            self._pump(client, server)
            self._pump(server, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
        threading.Thread(target=self._read, args=(source, sink, chunks), daemon=True).start()
        threading.Thread(target=self._write, args=(sink, source, chunks), daemon=True).start()

    def _read(self, source: socket.socket, sink: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            try:
                data = source.recv(_CHUNK)
            except OSError:
                data = b""
            chunks.put((time.monotonic(), data))
            if not data:
                return

    def _write(self, sink: socket.socket, source: socket.socket, chunks: queue.Queue[tuple[float, bytes]]) -> None:
        while True:
            arrived, data = chunks.get()
            wait = arrived + self.delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:
                break
            try:
                sink.sendall(data)
            except OSError:
                break
        # one direction is done: so is the connection (both ends closed, the other pump ends too)
        with self._lock:
            self._sockets.difference_update((sink, source))
        for sock in (sink, source):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
