"""Exceptions of the shuffle stack.

They are deliberately few: a consuming task only needs to tell "my upstream result is gone"
(``PartitionException``; the JobMaster restarts the producer's region) from "I was told to stop"
(``CancelledTransfer``; the task is being cancelled or the partition released). Both keep their
constructor arguments in ``args`` so they pickle across RPC unchanged.
"""

from __future__ import annotations


class PartitionException(Exception):
    """Reading an upstream result partition failed on the consumer side.

    Raised by ``InputGate.next()`` when a channel's connection is refused or lost, the producer
    called ``fail()`` or released its partition, or the partition was not registered within the
    partition request timeout. ``partition_id`` and ``address`` name the upstream result so the
    scheduler can decide what to restart.
    """

    def __init__(self, message: str, partition_id: str = "", address: str = "") -> None:
        super().__init__(message, partition_id, address)
        self.message = message
        self.partition_id = partition_id
        self.address = address

    def __str__(self) -> str:
        where = f" [partition {self.partition_id} at {self.address}]" if self.partition_id else ""
        return f"{self.message}{where}"


class CancelledTransfer(Exception):
    """A blocked ``emit()``/``next()`` was aborted by ``release()``/``close()`` (not a data error)."""


class ProducerFailed(Exception):
    """Stored in a subpartition after ``ResultPartition.fail()``; its text travels to consumers."""


class ProtocolError(Exception):
    """A peer sent a frame that violates the wire protocol (bad type, length, or content)."""
