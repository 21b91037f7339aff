"""Fakes for unit tests: testing gateways and the resolver that hands them out (``gateways``), a
ResourceManagerDriver that starts no process (``driver``), a leader retrieval driver the test
publishes leaders to (``leadership``), a real endpoint run without its gRPC server
(``endpoints``), and waiting on conditions with deadlines (``conditions``)."""
