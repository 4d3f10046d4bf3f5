"""Opening a session's WebSocket to its provider: through the SSRF guard, on the worker's aiohttp connector (so the
connection goes to the pinned address the guard checked), through the outbound proxy when one applies, never
following a redirect. aiohttp's ``ws_connect`` follows redirects and takes no option against it (aiohttp 3.14), so
the sockets go through a client session of their own over the worker's connector whose middleware refuses any 3xx
before aiohttp could follow it; any other answer but 101 is a failed handshake.

Failures are the gateway's errors, answered to the client before its upgrade is accepted: a refused host 403, an
unreachable provider 502, a connect that takes longer than GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS 504, a handshake the
provider refuses with its 4xx status (a 5xx is a 502), all naming the provider and never its key.
"""

from __future__ import annotations

import aiohttp

from gateway.http.errors import Forbidden, GatewayError, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from gateway.realtime.target import RealtimeTarget
from gateway.upstream.client import UpstreamClient, failure_text
from gateway.upstream.ssrf import HostBlocked, check_url
from gateway.waiting import within

#: the longest wait for the provider's answer to the gateway's close frame
CLOSE_TIMEOUT_S = 5.0


_REDIRECTS = frozenset({301, 302, 303, 307, 308})


async def _refuse_redirects(request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
                            ) -> aiohttp.ClientResponse:
    response = await handler(request)
    if response.status in _REDIRECTS:
        response.release()
        raise aiohttp.WSServerHandshakeError(response.request_info, (), status=response.status,
                                             message="redirect refused", headers=response.headers)
    return response


class ProviderSockets:
    """Opens the providers' sockets of one worker over ``client``'s connector (made on first use, closed by
    ``close``; the connector stays the client's)."""

    def __init__(self, client: UpstreamClient) -> None:
        self.client = client
        self._session: aiohttp.ClientSession | None = None

    def _sockets_session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            base = self.client.session
            assert base is not None, "UpstreamClient.start() was not awaited"
            session = self._session = aiohttp.ClientSession(
                connector=base.connector, connector_owner=False, headers=base.headers,
                cookie_jar=aiohttp.DummyCookieJar(), middlewares=(_refuse_redirects,))
        return session

    async def open(self, target: RealtimeTarget, max_bytes: int, connect_s: float) -> aiohttp.ClientWebSocketResponse:
        return await open_upstream(self.client, self._sockets_session(), target, max_bytes, connect_s)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def open_upstream(client: UpstreamClient, session: aiohttp.ClientSession, target: RealtimeTarget,
                        max_bytes: int, connect_s: float) -> aiohttp.ClientWebSocketResponse:
    """The provider's socket for ``target`` on ``session``, its messages bounded by ``max_bytes``; a GatewayError
    when it cannot be opened."""
    host, port, scheme = check_url(target.url, "custom_host")
    await client.check(target.url)
    proxy = client.proxies.for_url(scheme, host, port)
    where = f"upstream {target.provider} ({host})"
    try:
        return await within(session.ws_connect(
            target.url, headers=target.headers, autoping=True, autoclose=True, max_msg_size=max_bytes,
            timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=CLOSE_TIMEOUT_S),
            proxy=proxy.url if proxy else None, proxy_auth=proxy.auth if proxy else None), connect_s)
    except aiohttp.WSServerHandshakeError as exc:
        raise handshake_refused(target, exc.status) from None
    except TimeoutError:
        raise UpstreamTimeout(f"timed out opening the {target.api} WebSocket to {where}") from None
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, HostBlocked):
            raise Forbidden(str(exc.os_error), param="custom_host") from None
        raise UpstreamUnreachable(f"{where} {failure_text(exc)}") from None
    except aiohttp.ClientError as exc:
        raise UpstreamUnreachable(f"{where} {failure_text(exc)}") from None


def handshake_refused(target: RealtimeTarget, status: int) -> GatewayError:
    """The error of a provider that answered the upgrade with ``status`` instead of 101."""
    relayed = status if 400 <= status < 500 else 502
    why = " (a redirect: the gateway does not follow them)" if status in _REDIRECTS else ""
    return UpstreamError(f"upstream {target.provider} refused the {target.api} WebSocket upgrade with HTTP "
                         f"{status}{why}",
                         status=relayed, code="upstream_refused_upgrade", extra={"provider": target.provider})
