"""A real HTTP server on 127.0.0.1 that records what reaches it: the target of the webhook tests (a loopback
service the dashboard must not call, a relay an admin allowed, a server answering a redirect or an error)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RecordingServer:
    """Serves on a free port of 127.0.0.1 until :meth:`close`; records ``(method, path, Host header)`` of every
    request in ``requests`` and answers ``status`` with ``headers`` and :attr:`BODY`, which must never be shown."""

    BODY = b"SECRET-BODY-OF-AN-INTERNAL-SERVICE"

    def __init__(self, status: int = 204, headers: tuple[tuple[str, str], ...] | list = ()) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.authorizations: list[str | None] = []  # the Authorization header of each request (a token sent)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append((self.command, self.path, self.headers["Host"]))
                server.authorizations.append(self.headers.get("Authorization"))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(RecordingServer.BODY)))
                self.end_headers()
                self.wfile.write(RecordingServer.BODY)

            do_POST = do_GET = do_PUT = _answer  # noqa: N815 - http.server's names

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
