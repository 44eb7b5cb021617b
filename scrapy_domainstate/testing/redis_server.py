"""A real ``redis-server`` on a free loopback port, for the Redis store's tests and benchmark.

Not a test module: the tests import it. No pytest import at module level, so the
benchmark can use it too::

    server = RedisServer(tmp_dir)
    server.start()        # waits for PING
    server.url            # redis://127.0.0.1:<port>/0
    server.stop()         # SIGTERM, then SIGKILL
    server.start()        # again, on the same port (fault tests)
    server.pause() / server.resume()   # SIGSTOP / SIGCONT: a server that hangs

``persist=True`` turns the append-only file on (fsync always), so data survives a
stop/start; by default nothing is written to disk (a restart comes back empty).
``extra_args`` go to ``redis-server`` as they are (``("--maxmemory", "4mb")``). ``cluster=True`` starts a one-node
Redis Cluster owning every slot. ``redis_store_factory`` builds stores the way the
shared store contract suite does (``factory(config, policy) -> store``).
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "RedisClusterNodes",
    "RedisServer",
    "redis_binary",
    "redis_corrupt",
    "redis_store_factory",
    "require_redis_server",
    "shared_redis_url",
]

SKIP_REASON = "redis-server not found (install Debian's redis-server, or set REDIS_SERVER_BIN)"


def redis_binary() -> str | None:
    """Path of ``redis-server`` ($REDIS_SERVER_BIN, then PATH, then /usr/bin), or None."""
    for candidate in (os.environ.get("REDIS_SERVER_BIN"), shutil.which("redis-server"), "/usr/bin/redis-server"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_redis_server() -> str:
    """The binary, or skip the calling test with a clear reason."""
    binary = redis_binary()
    if binary is None:
        import pytest

        pytest.skip(SKIP_REASON)
    return binary


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too (so at most 55535)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20000, 55535)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _pack(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(f"${len(data)}\r\n".encode() + data + b"\r\n")
    return b"".join(out)


def _command(port: int, *args: str, password: str | None = None, timeout: float = 1.0) -> bytes:
    """Send one command in RESP (after AUTH if needed); return its reply's payload (no redis-py needed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        reader = sock.makefile("rb")
        if password:
            sock.sendall(_pack("AUTH", password))
            reader.readline()
        sock.sendall(_pack(*args))
        line = reader.readline()
        if line.startswith(b"$") and line[1:].strip().lstrip(b"-").isdigit():
            size = int(line[1:])
            return reader.read(size + 2)[:-2] if size >= 0 else b""
        return line


class RedisServer:
    """One ``redis-server`` process bound to 127.0.0.1 in its own directory."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        persist: bool = False,
        cluster: bool = False,
        password: str | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.binary = redis_binary()
        if self.binary is None:
            raise RuntimeError(SKIP_REASON)
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="redis-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or (_free_cluster_port() if cluster else _free_port())
        self.persist = persist
        self.cluster = cluster
        self.password = password
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def logfile(self) -> Path:
        return self.directory / "redis.log"

    def _args(self) -> list[str]:
        args = [
            self.binary or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.logfile),
        ]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", str(self.directory / "nodes.conf")]
        if self.password:
            args += ["--requirepass", self.password]
        return args + list(self.extra_args)

    def command(self, *args: str) -> bytes:
        """One raw command to this server (for tests that need no client)."""
        return _command(self.port, *args, password=self.password)

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(
            self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                log = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
                raise RuntimeError(f"redis-server exited with {self.process.returncode} on port {self.port}:\n{log}")
            try:
                if b"PONG" in self.command("PING"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not answer PING within {timeout} s")
            time.sleep(0.02)
        if self.cluster:
            self._form_cluster(deadline)
        return self

    def _form_cluster(self, deadline: float) -> None:
        if b"cluster_state:ok" in self.command("CLUSTER", "INFO"):
            return
        reply = self.command("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        if not reply.startswith(b"+OK") and b"busy" not in reply.lower():
            raise RuntimeError(f"CLUSTER ADDSLOTSRANGE failed: {reply!r}")
        while b"cluster_state:ok" not in self.command("CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                raise RuntimeError("one-node cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        self.resume(process)
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a hung server)."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self, process: subprocess.Popen[bytes] | None = None) -> None:
        process = process or self.process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def redis_store_factory(
    redis_url: str, tmp_path: os.PathLike[str] | None = None, *, prefix: str | None = None, **store_kwargs: Any
) -> Callable[..., Any]:
    """``make(config=None, cls=None) -> RedisStore`` (unopened): the contract suite's ``Backend.make``.

    Every store it builds uses ``redis_url`` and one key prefix unique to this factory
    (named after ``tmp_path`` when given), so a second store object sees what the first
    one flushed (``persistent=True``) and tests sharing one server never see each other.
    The prefix is ``make.prefix``.
    """
    from scrapy_domainstate.core.config import Config
    from scrapy_domainstate.store.redis import RedisStore

    if prefix is None:
        tag = Path(tmp_path).name if tmp_path is not None else "t"
        prefix = f"test:{tag}:{uuid.uuid4().hex[:8]}:"

    def make(config: Config | None = None, cls: type[Any] | None = None) -> Any:
        config = dataclasses.replace(config or Config(), redis_url=redis_url, redis_prefix=prefix)
        return (cls or RedisStore)(config, **store_kwargs)

    make.prefix = prefix  # type: ignore[attr-defined]
    return make


def redis_corrupt(store: Any, domain: str, data: bytes) -> None:
    """The contract suite's ``Backend.corrupt``: overwrite the stored bytes of a record."""
    store._client.set(store._rkey(domain), data)


_SHARED: RedisServer | None = None


def shared_redis_url() -> str:
    """URL of one server for the whole test process (started on first use, stopped at exit).

    For the contract suite, whose backend factories get only ``tmp_path``::

        def _redis(tmp_path):
            make = redis_store_factory(shared_redis_url(), tmp_path)
            return Backend("redis", make, persistent=True, corrupt=redis_corrupt)

    Skips the calling test when ``redis-server`` is missing.
    """
    global _SHARED
    require_redis_server()
    if _SHARED is None or _SHARED.process is None or _SHARED.process.poll() is not None:
        import atexit

        server = RedisServer()
        server.start()
        atexit.register(server.close)
        _SHARED = server
    return _SHARED.url


class RedisClusterNodes:
    """A real Redis Cluster of ``size`` primaries on loopback (no replica), slots spread by
    ``redis-cli --cluster create``. Each node keeps an append-only file, so a node that is
    stopped and started again (:meth:`restart`) comes back with its slots and its data.

    ::

        with RedisClusterNodes(tmp_path / "cluster") as cluster:
            store = RedisStore(Config(redis_url=cluster.url))
            cluster.restart(1)
    """

    def __init__(self, directory: str | os.PathLike[str], size: int = 3) -> None:
        self.directory = Path(directory)
        self.nodes: list[RedisServer] = []
        ports: set[int] = set()
        for i in range(size):
            port = _free_cluster_port()
            while port in ports or port + 10000 in ports or port - 10000 in ports:
                port = _free_cluster_port()
            ports.add(port)
            node_dir = self.directory / f"node{i}"
            args = (
                *("--cluster-enabled", "yes", "--cluster-config-file", str(node_dir / "nodes.conf")),
                *("--cluster-node-timeout", "2000"),
            )
            self.nodes.append(RedisServer(node_dir, port=port, persist=True, extra_args=args))

    @property
    def url(self) -> str:
        """The first node's URL (redis-py discovers the others)."""
        return self.nodes[0].url

    def _ok(self, node: RedisServer) -> bool:
        try:
            return b"cluster_state:ok" in node.command("CLUSTER", "INFO")
        except OSError:
            return False

    def wait_ok(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not all(self._ok(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def start(self) -> RedisClusterNodes:
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli") or str(Path(self.nodes[0].binary or "").with_name("redis-cli"))
        create = [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes)]
        subprocess.run(
            [*create, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        self.wait_ok()
        return self

    def restart(self, index: int, down: float = 0.0) -> None:
        """Stop node ``index`` (SIGTERM: it writes its append-only file), wait ``down`` seconds,
        start it again on the same port and directory, and wait for the cluster to be whole.
        (Blocking: from a running reactor, call :meth:`stop_node` and :meth:`start_node`.)"""
        self.stop_node(index)
        if down:
            time.sleep(down)
        self.start_node(index)

    def stop_node(self, index: int) -> None:
        self.nodes[index].stop()

    def start_node(self, index: int) -> None:
        self.nodes[index].start()
        self.wait_ok()

    def close(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisClusterNodes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED_CLUSTER: RedisClusterNodes | None = None


def shared_redis_cluster_url() -> str:
    """URL of one 3-node Redis Cluster for the whole test process (started on first use in a
    temporary directory, stopped at exit): the contract suite's ``redis-cluster`` backend.

    Skips the calling test when ``redis-server`` is missing.
    """
    global _SHARED_CLUSTER
    require_redis_server()
    if _SHARED_CLUSTER is None:
        import atexit
        import tempfile

        directory = tempfile.mkdtemp(prefix="domainstate-cluster-")
        cluster = RedisClusterNodes(directory).start()
        atexit.register(cluster.close)
        _SHARED_CLUSTER = cluster
    return _SHARED_CLUSTER.url
