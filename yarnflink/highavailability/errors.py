"""Errors of the high-availability services.

::

    HighAvailabilityError
     +-- LeadershipLostError ...... a fenced action of a leader that is no longer (or never was) the
     |                              leader: its leader session ended, or its latch node is gone
     +-- HaStoreError ............. HA metadata that cannot be read or written (a pointer in ZooKeeper
                                    whose file in the storageDir is missing, a corrupt entry, ...)
"""

from __future__ import annotations


class HighAvailabilityError(Exception):
    pass


class LeadershipLostError(HighAvailabilityError):
    """Raised instead of writing when the writer's leadership is over (ZooKeeper refused the
    transaction whose first operation checks the writer's leader latch node)."""


class HaStoreError(HighAvailabilityError):
    pass
