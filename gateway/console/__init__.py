"""The web console's files (``static/``: the page, plain JS modules, CSS and the vendored uPlot chart library),
served by ``gateway.api.console``; nothing is built at install time and nothing is fetched from elsewhere."""
