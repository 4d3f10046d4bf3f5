"""The compiled kernels and the one switch that turns them off.

Each Cython source ``_speedups/<name>.pyx`` builds as ``gateway._speedups.<name>``, a compiled twin of a pure-Python
module in the package that owns the behaviour. One small module per twin names both implementations and the one in
use, as aiohttp's ``http_parser`` names ``HttpRequestParserPy``, ``HttpRequestParserC`` and ``HttpRequestParser``
under ``NO_EXTENSIONS``; callers import the chosen names from it:

- ``gateway.routing.conditions_in_use``, ``gateway.cache.similarity_in_use``,
  ``gateway.observability.recordrow_in_use``: beside their pure twins;
- ``gateway._speedups.sse_in_use``, ``gateway._speedups.context_in_use``: here, because their pure twins live in
  ``gateway.http``, a layer below this switch.

Such a module uses the compiled twin unless ``NO_EXTENSIONS`` is on or the extension is missing or stale (each
compiled module checks, as it loads, that its public names and shared constants are its pure twin's, and raises
ImportError otherwise); its ``IMPLEMENTATION`` says which (``/health`` lists them). The choice is made once per
process, as the module is imported: a call site calls a plain name. A stub ``<name>.pyi`` here gives the type checker
the compiled module's names, which are its pure twin's.
"""

from __future__ import annotations

from typing import Final

from gateway.settings import no_extensions_at_import

#: True when this process uses the pure twins on purpose: the ``no_extensions`` setting (``GATEWAY_NO_EXTENSIONS``,
#: ``gateway serve --no-extensions``), read once, before the first kernel is imported
NO_EXTENSIONS: Final[bool] = no_extensions_at_import()
