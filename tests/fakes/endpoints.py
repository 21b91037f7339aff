"""Running a real endpoint in the test process without its gRPC server: the endpoint starts on its
own thread and loop as in production (``RpcEndpoint.start``), but ``serve`` only picks an address,
so the only way in is the test calling the endpoint's gateway methods, and the only way out is the
``TestingGatewayResolver`` it was given::

    class JobMasterUnderTest(NoGrpcServer, JobMaster):
        pass
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["NoGrpcServer"]

#: fake ports, unique per endpoint of the test process, so that addresses differ
_ports = itertools.count(41000)


class NoGrpcServer:
    """Mixin (first among the bases) replacing ``RpcEndpoint.serve``: no server, a unique port."""

    rpc_port: int
    #: what the endpoint would have served (its servicer)
    served: tuple[Any, ...] = ()

    async def serve(self, *args: Any, **kwargs: Any) -> int:
        self.served = args
        self.rpc_port = next(_ports)
        return self.rpc_port
