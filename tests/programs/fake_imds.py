"""A small HTTP server that imitates the EC2 instance metadata service (IMDSv2) for tests.

What it imitates (EC2 User Guide, IMDSv2 and "Spot Instance interruption notices"):
- ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds`` (1..21600) -> a token;
  without the header, or out of range: 400.
- every ``GET /latest/meta-data/...`` needs ``X-aws-ec2-metadata-token`` with a token that is
  known and not expired: else 401.
- ``spot/instance-action``: 404 until a notice is posted, then ``{"action", "time"}``.
- ``events/recommendations/rebalance``: 404 until posted, then ``{"noticeTime"}``.
- ``instance-type``: 404 until set, then the type as plain text (``p5.48xlarge``).

The test drives it through paths of its own (never part of IMDS):
- ``POST /_fake/notice`` body ``{"action": "terminate", "in_s": 120}`` posts a notice (``DELETE``
  withdraws it); ``POST /_fake/rebalance`` likewise (``{"in_s": 0}``); ``POST
  /_fake/instance-type`` body ``{"type": "p5.48xlarge"}`` sets the instance type;
- ``POST /_fake/expire`` expires every token; ``POST /_fake/down`` body ``{"polls": N}`` makes the
  next N metadata GETs drop the connection (a network error);
- ``GET /_fake/stats`` -> counters ``{"tokens", "gets", "unauthorized", "ttl_seen"}``.

Run alone: ``python fake_imds.py [--port N]`` prints ``http://127.0.0.1:<port>`` and serves; or
``start()`` in a thread of the test process.
"""

from __future__ import annotations

import argparse
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
INSTANCE_TYPE_PATH = "/latest/meta-data/instance-type"


def utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tokens: dict[str, float] = {}
        self.notice: dict | None = None
        self.rebalance: dict | None = None
        self.instance_type: str | None = None
        self.down = 0
        self.stats = {"tokens": 0, "gets": 0, "unauthorized": 0, "ttl_seen": []}


class Handler(BaseHTTPRequestHandler):
    server: FakeImds

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: str = "", ctype: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def do_PUT(self) -> None:  # noqa: N802
        st = self.server.state
        if self.path != TOKEN_PATH:
            return self._send(404)
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self._send(400, "bad ttl")
        token = secrets.token_urlsafe(24)
        with st.lock:
            st.tokens[token] = time.monotonic() + int(ttl)
            st.stats["tokens"] += 1
            st.stats["ttl_seen"].append(int(ttl))
        return self._send(200, token)

    def do_GET(self) -> None:  # noqa: N802
        st = self.server.state
        if self.path == "/_fake/stats":
            with st.lock:
                return self._send(200, json.dumps(st.stats), "application/json")
        if not self.path.startswith("/latest/meta-data/"):
            return self._send(404)
        with st.lock:
            st.stats["gets"] += 1
            if st.down > 0:
                st.down -= 1
                self.close_connection = True
                self.wfile.flush()
                self.connection.close()
                return None
            token = self.headers.get("X-aws-ec2-metadata-token", "")
            if st.tokens.get(token, 0.0) <= time.monotonic():
                st.stats["unauthorized"] += 1
                return self._send(401, "Unauthorized")
            doc = {ACTION_PATH: st.notice, REBALANCE_PATH: st.rebalance}.get(self.path)
            if self.path == INSTANCE_TYPE_PATH and st.instance_type:
                return self._send(200, st.instance_type)
        if doc is None:
            return self._send(404, "Not Found")
        return self._send(200, json.dumps(doc), "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        st = self.server.state
        body = self._body()
        with st.lock:
            if self.path == "/_fake/notice":
                st.notice = {"action": body.get("action", "terminate"),
                             "time": utc(time.time() + float(body.get("in_s", 120)))}
            elif self.path == "/_fake/rebalance":
                st.rebalance = {"noticeTime": utc(time.time() + float(body.get("in_s", 0)))}
            elif self.path == "/_fake/instance-type":
                st.instance_type = str(body.get("type", ""))
            elif self.path == "/_fake/expire":
                st.tokens = {k: 0.0 for k in st.tokens}
            elif self.path == "/_fake/down":
                st.down = int(body.get("polls", 1))
            else:
                return self._send(404)
        return self._send(200, "ok")

    def do_DELETE(self) -> None:  # noqa: N802
        st = self.server.state
        with st.lock:
            if self.path == "/_fake/notice":
                st.notice = None
            elif self.path == "/_fake/rebalance":
                st.rebalance = None
            else:
                return self._send(404)
        return self._send(200, "ok")


class FakeImds(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.state = State()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def start(port: int = 0) -> FakeImds:
    """Serve in a daemon thread; call ``shutdown()`` and ``server_close()`` when done."""
    server = FakeImds(port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeImds(args.port)
    print(server.url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
