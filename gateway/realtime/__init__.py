"""The Realtime API through the gateway (docs/websockets.md): ``/v1/realtime`` upgraded to a WebSocket, relayed to
vendorA or cloudB. ``endpoint.py`` admits a session (key, config, target, policies), ``connect.py`` opens the
provider's socket, ``relay.py`` moves the frames, ``usage.py`` sums the responses' usage, ``budget.py`` checks it
against the session's budgets and ``record.py`` writes the session's one request record; ``secrets.py`` mints and
redeems browsers' client secrets; ``target.py`` holds the providers' URL and auth forms. The app imports this package
on the first Realtime request."""
