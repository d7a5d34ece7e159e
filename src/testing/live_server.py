"""A real `dagrag serve` app on uvicorn in a background thread of this process, on a free loopback port.

For tests and benchmarks: the embedded Qdrant folder admits one process, so the server shares this one's.
"""

from __future__ import annotations

import threading
import time

import uvicorn

from ..server import DagragService, create_app


class LiveServer:
    """`with LiveServer(service) as server:` serves `create_app(service)` at `server.url` until the block ends."""

    def __init__(self, service: DagragService, *, start_timeout_s: float = 30.0) -> None:
        self.service = service
        self.start_timeout_s = start_timeout_s
        config = uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="dagrag-live-server", daemon=True)
        self.url = ""

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        if self.thread.is_alive():
            raise RuntimeError("the server did not stop")
