"""Fakes for unit tests: testing gateways and a resolver that hands them out (``gateways``), and
waiting on conditions with deadlines (``conditions``)."""
