"""Fakes for unit tests: testing gateways and the resolver that hands them out (``gateways``), a
real endpoint run without its gRPC server (``endpoints``), and waiting on conditions with
deadlines (``conditions``)."""
