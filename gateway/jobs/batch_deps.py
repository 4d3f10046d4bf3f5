"""What every batch runner of a worker shares, in a module of its own: the worker's scheduler holds it from start,
while the runner and its parts are imported only when a gateway-run batch is first picked up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from gateway.controlplane.keys import KeyStore
    from gateway.controlplane.secrets import SecretBox
    from gateway.jobs.batch_dispatch import SendLine
    from gateway.jobs.batch_store import BatchStore
    from gateway.jobs.files import GatewayFiles
    from gateway.settings import Settings


class RunnerDeps:
    """What every runner of a worker shares."""

    def __init__(self, settings: Settings, batches: BatchStore, files: GatewayFiles, send: SendLine,
                 parsers: dict[str, Callable[[bytes], Any]], keys: KeyStore, box: Callable[[], SecretBox]) -> None:
        self.settings = settings
        self.keys = keys
        #: the secret box that opens batch headers (opened on first use: it may read the key file)
        self.box = box
        self.batches = batches
        self.files = files
        #: runs one line through the pipeline (built by the composition root)
        self.send = send
        self.parsers = parsers
