"""A local HTTP server for the download tests: files from memory, HTTP Range, forced errors, dropped connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Served:
    """What the server holds and how it misbehaves; ``body_bytes`` counts every body byte it sent."""

    files: dict[str, bytes] = field(default_factory=dict)
    status: dict[str, int] = field(default_factory=dict)  # path -> forced error status
    drops: dict[str, list[int]] = field(default_factory=dict)  # path -> bytes sent by each next request, then close
    ignore_range: bool = False
    content_type: str = "application/octet-stream"
    throttle: float = 0.0  # seconds of sleep after each 64 KiB of body (a slow link)
    body_bytes: int = 0
    ranges: list[str | None] = field(default_factory=list)
    url: str = ""


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # http.server's name
            served.ranges.append(self.headers.get("Range"))
            if self.path in served.status:
                self.send_error(served.status[self.path])
                return
            if self.path not in served.files:
                self.send_error(404)
                return
            data = served.files[self.path]
            start, asked = 0, self.headers.get("Range")
            if asked and not served.ignore_range:
                start = int(asked.removeprefix("bytes=").split("-")[0])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Type", served.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            drops = served.drops.get(self.path)
            if drops:
                body = body[: drops.pop(0)]
                self.close_connection = True
            step = 1 << 16 if served.throttle else max(len(body), 1)
            try:
                for start in range(0, len(body), step):
                    self.wfile.write(body[start : start + step])
                    served.body_bytes += len(body[start : start + step])
                    time.sleep(served.throttle)
            except (BrokenPipeError, ConnectionResetError):  # the client went away
                self.close_connection = True

    return Handler


@contextmanager
def serving(served: Served) -> Iterator[Served]:
    """Serve ``served`` on 127.0.0.1 (a free port) from a thread; ``served.url`` is its address."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
