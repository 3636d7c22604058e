"""``hpcflow doctor`` asks the instance metadata service directly: an ``http_proxy`` in the
environment (set by whoever wrote the user's profile, or pointing at a process another user
runs) neither sees the IMDSv2 token nor answers for the service."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request

import pytest

from hpcflow.doctor.probe import Probe


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A proxy that answers every request itself, as a hostile one would."""

    seen: list[str] = []

    def _answer(self) -> None:
        type(self).seen.append(f"{self.command} {self.path} {self.headers.get('X-aws-ec2-metadata-token')}")
        body = b"m1.evil"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = _answer  # noqa: N815

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@pytest.fixture
def proxy():
    _Proxy.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Proxy.seen
    server.shutdown()
    server.server_close()


def test_the_instance_type_never_goes_through_a_proxy(imds, proxy, monkeypatch):
    url, seen = proxy
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, url)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    opener.open(urllib.request.Request(imds.url + "/_fake/instance-type", method="POST",
                                       data=json.dumps({"type": "p5.48xlarge"}).encode()),
                timeout=5).read()
    assert Probe(imds_endpoint=imds.url).instance_type() == "p5.48xlarge"
    assert seen == []


def test_a_proxy_cannot_answer_for_the_metadata_service(proxy, monkeypatch):
    """Off EC2 (here) the real address does not answer: the type is unknown, not the proxy's."""
    url, seen = proxy
    monkeypatch.setenv("http_proxy", url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert Probe().instance_type() is None
    assert seen == []
