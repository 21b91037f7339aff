"""How components talk: ``RpcEndpoint`` (one loop per component) and the gateways' gRPC adapter.

This is the only package that imports grpc and the code generated from ``proto/`` (``pb``):

* ``resolver``: ``GatewayResolver``, the seam an endpoint reaches its peers through;
* ``clients``: each gateway Protocol over gRPC stubs, and ``GrpcGatewayResolver``;
* ``servicers``: an endpoint served over gRPC (it implements its own gateway Protocol);
* ``convert``: the gateways' dataclasses to protobuf and back;
* ``status``: gRPC status codes to ``yarnflink.common.rpc_errors`` and back;
* ``endpoint``, ``tls``: the endpoint base and the cluster's mutual TLS for gRPC.
"""
