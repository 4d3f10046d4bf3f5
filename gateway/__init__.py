"""The gateway package: a fast AI gateway served as a raw ASGI app by Granian."""

__version__ = "0.1.0"


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("gateway")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return __version__


#: the ``User-Agent`` of the gateway's own outbound calls: ``gateway/<version>`` from the package metadata
USER_AGENT = f"gateway/{_installed_version()}"
