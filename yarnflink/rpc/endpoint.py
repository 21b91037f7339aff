"""RpcEndpoint: a component that owns one asyncio loop on its own thread (Flink's main thread).

All state of a component is read and changed only on its loop, so protocol code never needs locks.
Other threads (task threads, kazoo callbacks, the REST server of another component) hand work to
it with ``call`` / ``call_soon``. A component may also serve its gateway over gRPC, on the same loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import grpc

from yarnflink.rpc.tls import server_credentials

log = logging.getLogger(__name__)
T = TypeVar("T")

#: gRPC message size limit (both directions); a TaskDeploymentDescriptor carries pickled code.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]
#: How long a stopped component's remaining tasks get to end once cancelled.
_CLOSE_TIMEOUT_S = 1.0


class Service(Protocol):
    """A gateway's gRPC servicer (``yarnflink.rpc.servicers``)."""

    def add_to(self, server: grpc.aio.Server) -> None: ...


class RpcEndpoint:
    """Base of every component. Subclasses implement ``on_start`` / ``on_stop`` (coroutines)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = threading.Event()
        self._stopped = threading.Event()
        self._server: grpc.aio.Server | None = None
        self.rpc_port: int = 0
        self._start_error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.on_start())
        except BaseException as e:  # reported to start()'s caller
            log.exception("%s failed to start", self.name)
            self._start_error = e
            self._started.set()
            return
        self._started.set()
        try:
            self.loop.run_forever()
        finally:
            self._close_loop()
            self._stopped.set()

    def _close_loop(self) -> None:
        """Ends what still runs on the stopped loop and closes it, so that a stopped component
        keeps no thread (the loop's executor) or file descriptor: gRPC keeps every loop it served
        on for the life of the process, and a session starts a JobMaster per job."""
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for t in pending:
            t.cancel()
        try:
            if pending:
                self.loop.run_until_complete(asyncio.wait(pending, timeout=_CLOSE_TIMEOUT_S))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        except Exception:  # noqa: BLE001 - closing goes on
            log.debug("%s: ending its tasks failed", self.name, exc_info=True)
        finally:
            self.loop.close()  # its default executor too, without waiting for a call in flight

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the component from any thread other than its own and waits for it."""
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
        try:
            fut.result(timeout)
        except Exception:
            log.exception("%s did not stop cleanly", self.name)
        self._thread.join(timeout)

    async def _shutdown(self) -> None:
        try:
            await self.on_stop()
        finally:
            if self._server is not None:
                await self._server.stop(grace=0.5)
            self.loop.call_soon(self.loop.stop)

    async def on_start(self) -> None:
        pass

    async def on_stop(self) -> None:
        pass

    # ------------------------------------------------------------------ gRPC
    async def serve(self, service: Service, host: str, port: int = 0) -> int:
        """Starts a gRPC server for this component's gateway on its loop; returns the bound port."""
        self._server = grpc.aio.server(options=GRPC_OPTIONS)
        service.add_to(self._server)
        creds = server_credentials()
        target = f"{host}:{port}"
        bound = (
            self._server.add_secure_port(target, creds) if creds is not None else self._server.add_insecure_port(target)
        )
        if bound == 0:
            raise OSError(f"{self.name}: could not bind gRPC server to {target}")
        await self._server.start()
        self.rpc_port = int(bound)
        return self.rpc_port

    # ------------------------------------------------------------------ hand-over from other threads
    def call(self, fn: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = 30.0) -> T:
        """Runs coroutine function ``fn`` on this endpoint's loop and waits for its result.
        Must not be called from the endpoint's own thread."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}.call() from its own main thread would deadlock")
        return asyncio.run_coroutine_threadsafe(fn(), self.loop).result(timeout)

    async def call_async(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """From another loop: runs ``fn`` on this endpoint's loop and awaits it."""
        cf: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(fn(), self.loop)
        return await asyncio.wrap_future(cf)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Runs plain function ``fn(*args)`` on this endpoint's loop, without waiting. Once the
        endpoint has stopped (its loop closed, maybe while this call runs) ``fn`` is dropped: the
        threads that hand work over (tasks, ZooKeeper callbacks) must not fail for it."""
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            if not self.loop.is_closed():
                raise
            log.debug("%s has stopped; dropped %r", self.name, fn)

    def assert_main_thread(self) -> None:
        assert threading.current_thread() is self._thread, f"not on {self.name}'s main thread"
