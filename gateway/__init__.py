"""The gateway package: a fast AI gateway served as a raw ASGI app by Granian.

``__version__`` is the version pyproject.toml installs (``tests/test_package.py`` holds the two equal), so the
package names it without reading its installed metadata: ``importlib.metadata`` would pull zipfile, csv and its
directory scans into every worker for one string (0.8 MB of a worker's RSS).
"""

__version__ = "0.1.0"

#: the ``User-Agent`` of the gateway's own outbound calls: ``gateway/<version>``
USER_AGENT = f"gateway/{__version__}"
