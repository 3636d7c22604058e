"""The IMDSv2 client against a real local HTTP server that imitates the metadata service
(tests/programs/fake_imds.py): tokens, 404 until a notice, the notice, rebalance, token renewal,
bounded timeouts and network errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from hpcflow.aws.imds import ImdsClient, ImdsError, parse_instance_action, parse_utc


def control(server, method: str, path: str, body: dict | None = None) -> dict | str:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=5) as resp:
        text = resp.read().decode()
    return json.loads(text) if path == "/_fake/stats" else text


def test_the_fake_refuses_a_request_without_a_valid_token(imds):
    # The imitation must be strict, or the client's token handling is not tested at all.
    for headers in ({}, {"X-aws-ec2-metadata-token": "made-up"}):
        req = urllib.request.Request(imds.url + "/latest/meta-data/spot/instance-action",
                                     headers=headers)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 401


def test_no_notice_is_404_then_the_notice_is_parsed(imds):
    client = ImdsClient(imds.url)
    assert client.instance_action() is None
    before = int(time.time())
    control(imds, "POST", "/_fake/notice", {"action": "stop", "in_s": 120})
    notice = client.instance_action()
    assert notice is not None and notice.action == "stop"
    assert before + 119 <= notice.time_s <= int(time.time()) + 121
    assert notice.raw.endswith("Z")
    # one token served both reads, and it was asked for with the longest lifetime
    stats = control(imds, "GET", "/_fake/stats")
    assert stats["tokens"] == 1 and stats["ttl_seen"] == [21600] and stats["unauthorized"] == 0


def test_rebalance_recommendation(imds):
    client = ImdsClient(imds.url)
    assert client.rebalance() is None
    control(imds, "POST", "/_fake/rebalance", {"in_s": 0})
    when = client.rebalance()
    assert when is not None and abs(parse_utc(when) - time.time()) < 5


def test_an_expired_token_is_renewed_once_and_the_read_succeeds(imds):
    client = ImdsClient(imds.url)
    assert client.instance_action() is None
    control(imds, "POST", "/_fake/expire")
    assert client.instance_action() is None
    stats = control(imds, "GET", "/_fake/stats")
    assert stats["unauthorized"] == 1 and stats["tokens"] == 2 and client.tokens_fetched == 2


def test_the_token_is_renewed_before_it_expires(imds):
    now = [1000.0]
    client = ImdsClient(imds.url, token_ttl_s=120, refresh_margin_s=30, clock=lambda: now[0])
    client.instance_action()
    now[0] += 89  # 1 s before the renewal point (120 - 30)
    client.instance_action()
    assert client.tokens_fetched == 1
    now[0] += 2
    client.instance_action()
    assert client.tokens_fetched == 2
    assert control(imds, "GET", "/_fake/stats")["unauthorized"] == 0


def test_a_dropped_connection_is_an_imds_error_and_the_next_read_works(imds):
    client = ImdsClient(imds.url)
    client.token()
    control(imds, "POST", "/_fake/down", {"polls": 1})
    with pytest.raises(ImdsError, match="instance-action"):
        client.instance_action()
    assert client.instance_action() is None


def test_nothing_listening_is_an_imds_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ImdsError, match=f"127.0.0.1:{port}/latest/api/token"):
        ImdsClient(f"http://127.0.0.1:{port}", timeout_s=1).instance_action()


def test_a_server_that_never_answers_times_out_within_the_bound():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)  # accepts the connection, never answers
        client = ImdsClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(ImdsError):
            client.instance_action()
        assert time.monotonic() - started < 3


@pytest.mark.parametrize(("body", "match"), [
    pytest.param("<html>", "not JSON", id="html"),
    pytest.param('["terminate"]', "not a JSON object", id="list"),
    pytest.param('{"action": "reboot", "time": "2026-12-01T18:20:00Z"}', "'reboot' is not one of",
                 id="unknown-action"),
    pytest.param('{"action": "terminate", "time": "soon"}', "'soon' is not a UTC time",
                 id="bad-time"),
])
def test_a_notice_that_cannot_be_read_names_what_is_wrong(body, match):
    with pytest.raises(ValueError, match=match):
        parse_instance_action(body)


def test_parse_utc_is_utc():
    assert parse_utc("1970-01-01T00:01:00Z") == 60
    assert parse_utc("2026-12-01T18:20:00.000Z") == parse_utc("2026-12-01T18:20:00Z")


@pytest.mark.parametrize("ttl", [0, 21601])
def test_token_ttl_outside_the_imds_range_is_refused(ttl):
    with pytest.raises(ValueError, match="token_ttl_s"):
        ImdsClient("http://127.0.0.1:9", token_ttl_s=ttl)


def test_a_proxy_in_the_environment_is_not_used(imds):
    """The per-job watcher inherits the user's environment: an http_proxy there must neither
    see the token nor answer for the metadata service. (A fresh interpreter: urllib reads the
    proxies once, when its default opener is first built.)"""
    control(imds, "POST", "/_fake/notice", {"action": "stop", "in_s": 120})
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen(4)
        proxy.setblocking(False)
        url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
        env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
        env.update({name: url for name in ("http_proxy", "HTTP_PROXY", "all_proxy")})
        code = ("import sys, urllib.request; from hpcflow.aws.imds import ImdsClient; "
                f"assert urllib.request.getproxies()['http'] == {url!r}; "
                f"print(ImdsClient({imds.url!r}, timeout_s=2).instance_action().action)")
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "stop"
        with pytest.raises(BlockingIOError):
            proxy.accept()  # nobody connected to the proxy
