"""``pyflink.datastream.connectors.hybrid_source``: refused (HybridSource is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

HybridSource = refused("HybridSource", "HybridSource")
HybridSourceBuilder = refused("HybridSourceBuilder", "HybridSource")

__all__ = [
    "HybridSource",
    "HybridSourceBuilder",
]
