"""The EC2 instance metadata service (IMDSv2), as far as a spot instance needs it.

Facts (EC2 User Guide, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/: pages
configuring-instance-metadata-service.html, spot-instance-termination-notices.html and
rebalance-recommendations.html):

- "Use the Instance Metadata Service to access instance metadata" (IMDSv2): a session token comes
  from ``PUT /latest/api/token`` with the header ``X-aws-ec2-metadata-token-ttl-seconds`` (1 to
  21600 s); every read sends it back in ``X-aws-ec2-metadata-token``. A missing, invalid or
  expired token gets ``401 Unauthorized``.
- "Spot Instance interruption notices": ``/latest/meta-data/spot/instance-action`` answers 404
  until EC2 marks the instance for interruption, then a JSON object
  ``{"action": "terminate" | "stop" | "hibernate", "time": "2026-12-01T18:20:00Z"}`` (UTC). The
  notice comes two minutes ahead, except for hibernation, which begins at once. AWS recommends
  checking every 5 seconds.
- "EC2 instance rebalance recommendations": ``/latest/meta-data/events/recommendations/rebalance``
  answers 404 until a recommendation is posted, then ``{"noticeTime": "..."}``.

Plain :mod:`urllib`, never through a proxy: no boto3 (the watcher runs on every node, and polls
every few seconds).
Network errors surface as :class:`ImdsError`; the caller decides to log and poll again.
"""

from __future__ import annotations

import calendar
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from hpcflow.errors import HpcflowError

#: The link-local address of the instance metadata service (EC2 User Guide, IMDS).
DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
#: The longest token lifetime IMDSv2 grants (6 hours).
MAX_TOKEN_TTL_S = 21600
#: Actions a spot interruption notice may name (EC2 User Guide, "Spot Instance interruption
#: notices", instance-action).
ACTIONS = ("terminate", "stop", "hibernate")


class ImdsError(HpcflowError):
    """The metadata service could not be asked, or answered something unexpected (the message
    names the URL and the status or the network error). Exit code 7, as for any AWS service
    that could not be asked."""

    exit_code = 7


@dataclass(frozen=True)
class SpotNotice:
    """A spot interruption notice.

    Attributes:
        action: ``terminate``, ``stop`` or ``hibernate``.
        time_s: when EC2 acts, Unix time in whole seconds.
        raw: the notice's ``time`` text as posted (``2026-12-01T18:20:00Z``).
    """

    action: str
    time_s: int
    raw: str


def parse_utc(text: str) -> int:
    """``2026-12-01T18:20:00Z`` (the notices' UTC format; fractional seconds allowed) -> Unix
    time in whole seconds.

    Raises:
        ValueError: not that format; the message quotes the text.
    """
    base = text.strip()
    if base.endswith("Z"):
        base = base[:-1]
    base = base.split(".", 1)[0]
    try:
        return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        raise ValueError(f"{text!r} is not a UTC time like '2026-12-01T18:20:00Z'") from None


def parse_instance_action(body: str) -> SpotNotice:
    """The body of ``spot/instance-action`` -> :class:`SpotNotice`.

    Raises:
        ValueError: not a JSON object with a known ``action`` and a UTC ``time``.
    """
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"spot/instance-action is not JSON: {body[:200]!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"spot/instance-action is not a JSON object: {body[:200]!r}")
    action, when = doc.get("action"), doc.get("time")
    if action not in ACTIONS:
        raise ValueError(f"spot/instance-action: action {action!r} is not one of {', '.join(ACTIONS)}")
    if not isinstance(when, str):
        raise ValueError(f"spot/instance-action: time {when!r} is not a string")
    return SpotNotice(action, parse_utc(when), when)


class ImdsClient:
    """IMDSv2 reads with a cached session token.

    Args:
        endpoint: base URL, default :data:`DEFAULT_ENDPOINT` (a test server's URL in tests).
        timeout_s: per-request timeout in seconds (connect and read).
        token_ttl_s: lifetime asked for each token, 1..21600 s.
        refresh_margin_s: a token is renewed this many seconds before it expires.
        clock: monotonic seconds (a seam for tests).

    Raises:
        ValueError: ``token_ttl_s`` outside 1..21600 or not above ``refresh_margin_s``.
    """

    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, *, timeout_s: float = 2.0,
                 token_ttl_s: int = MAX_TOKEN_TTL_S, refresh_margin_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 1 <= token_ttl_s <= MAX_TOKEN_TTL_S:
            raise ValueError(f"token_ttl_s: {token_ttl_s} is outside 1..{MAX_TOKEN_TTL_S}")
        if token_ttl_s <= refresh_margin_s:
            raise ValueError(f"token_ttl_s: {token_ttl_s} must exceed refresh_margin_s "
                             f"({refresh_margin_s:g})")
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        self.token_ttl_s = token_ttl_s
        self.refresh_margin_s = refresh_margin_s
        self._clock = clock
        self._token: str | None = None
        self._renew_at = 0.0
        # No proxy, whatever http_proxy/HTTPS_PROXY say: urllib's default opener honours them
        # (urllib.request.getproxies) unless no_proxy names this address, and a proxy would
        # see the token, or answer for the metadata service. The per-job watcher inherits the
        # user's environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        #: How many tokens were fetched (for logs and tests).
        self.tokens_fetched = 0

    def _request(self, path: str, *, method: str = "GET",
                 headers: dict[str, str] | None = None) -> tuple[int, str]:
        url = self.endpoint + path
        req = urllib.request.Request(url, method=method, headers=headers or {})
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:  # noqa: S310
                return resp.status, resp.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, ""
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused, bad URL
            reason = getattr(exc, "reason", None) or exc
            raise ImdsError(f"{method} {url}: {reason}") from None

    def token(self) -> str:
        """A valid session token: the cached one, or a new one when it is due for renewal.

        Raises:
            ImdsError: the PUT failed or did not answer 200 with a token.
        """
        if self._token is not None and self._clock() < self._renew_at:
            return self._token
        asked_at = self._clock()
        status, body = self._request(TOKEN_PATH, method="PUT",
                                     headers={TTL_HEADER: str(self.token_ttl_s)})
        if status != 200 or not body.strip():
            raise ImdsError(f"PUT {self.endpoint}{TOKEN_PATH}: status {status}, no token "
                            "(is IMDS enabled on this instance, with a hop limit that reaches here?)")
        self._token = body.strip()
        self._renew_at = asked_at + self.token_ttl_s - self.refresh_margin_s
        self.tokens_fetched += 1
        return self._token

    def get(self, path: str) -> tuple[int, str]:
        """GET a metadata path with the token; a 401 (token expired or revoked) gets one new
        token and one more try.

        Returns:
            ``(status, body)``; the body is ``""`` for an error status.

        Raises:
            ImdsError: network error or timeout.
        """
        status, body = self._request(path, headers={TOKEN_HEADER: self.token()})
        if status == 401:
            self._token = None
            status, body = self._request(path, headers={TOKEN_HEADER: self.token()})
        return status, body

    def instance_action(self) -> SpotNotice | None:
        """The spot interruption notice, or None while there is none (404).

        Raises:
            ImdsError: network error, an unexpected status, or a body that is not a notice.
        """
        status, body = self.get(INSTANCE_ACTION_PATH)
        if status == 404:
            return None
        if status != 200:
            raise ImdsError(f"GET {self.endpoint}{INSTANCE_ACTION_PATH}: status {status}")
        try:
            return parse_instance_action(body)
        except ValueError as exc:
            raise ImdsError(str(exc)) from None

    def rebalance(self) -> str | None:
        """The rebalance recommendation's ``noticeTime`` text (the whole body when it has
        none), or None while there is none (404).

        Raises:
            ImdsError: network error or an unexpected status.
        """
        status, body = self.get(REBALANCE_PATH)
        if status == 404:
            return None
        if status != 200:
            raise ImdsError(f"GET {self.endpoint}{REBALANCE_PATH}: status {status}")
        try:
            doc = json.loads(body)
        except ValueError:
            return body.strip() or "?"
        return str(doc.get("noticeTime", body.strip())) if isinstance(doc, dict) else body.strip()
