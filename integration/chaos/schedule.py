"""The chaos schedule: seed + duration + fault kinds -> a list of timed faults. Pure and
deterministic (``random.Random(seed)`` only, no clock, no I/O): the same arguments give the same
schedule on any machine, so the seed of a failing run reproduces its faults.

A fault is one injection with a begin and an end: a SIGKILLed process is started again (a new
standby master, a replacement TaskExecutor, the same ZooKeeper server) at its end, a SIGSTOPped one
gets SIGCONT, the S3 endpoint comes back, the checkpoint disk is writable / fast again.

Constraints (checked by ``check``, which the unit tests run on many seeds):

* never more faults at once than ``Topology.max_concurrent``, and per group no more than the HA
  setup survives: one ZooKeeper server of three (a majority serves), ``masters - 1`` masters (one
  is left to lead), one TaskExecutor (the others hold enough slots), one S3 outage, one disk fault;
* one target is never hit twice at the same time;
* every fault ends within the duration (nothing stays stopped, killed or full after it);
* the kinds asked for are each scheduled at least once (first a seeded shuffle of all of them,
  then seeded random choices), or ``ValueError`` if the duration cannot hold them.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Event", "Fault", "FaultKind", "Schedule", "Topology", "check", "make_schedule"]


class FaultKind(str, enum.Enum):
    MASTER_KILL = "master-kill"
    MASTER_STOP = "master-stop"
    TASKEXECUTOR_KILL = "taskexecutor-kill"
    TASKEXECUTOR_STOP = "taskexecutor-stop"
    ZOOKEEPER_KILL = "zookeeper-kill"
    ZOOKEEPER_STOP = "zookeeper-stop"
    ZOOKEEPER_RESTART = "zookeeper-restart"
    S3_OUTAGE = "s3-outage"
    DISK_FULL = "disk-full"
    DISK_READONLY = "disk-readonly"
    SLOW_IO = "slow-io"

    @property
    def group(self) -> str:
        """What the fault hits: master, taskexecutor, zookeeper, s3 or disk (the checkpoint disk)."""
        return (
            "disk"
            if self in (FaultKind.DISK_FULL, FaultKind.DISK_READONLY, FaultKind.SLOW_IO)
            else self.value.rsplit("-", 1)[0]
        )

    @staticmethod
    def parse(names: Iterable[str]) -> list[FaultKind]:
        """Kinds from their names (``all`` for every kind); ``ValueError`` names the unknown ones."""
        out: list[FaultKind] = []
        for name in names:
            name = name.strip()
            if name == "all":
                out += [k for k in FaultKind if k not in out]
                continue
            try:
                kind = FaultKind(name)
            except ValueError:
                known = ", ".join(k.value for k in FaultKind)
                raise ValueError(f"unknown fault kind {name!r} (known: {known}, or all)") from None
            if kind not in out:
                out.append(kind)
        return out


#: How long a fault lasts (seconds, drawn uniformly). A ZooKeeper restart is a kill and an
#: immediate start: its window is the server's start-up. A master stopped longer than the
#: ZooKeeper session timeout loses its leadership while frozen.
DOWNTIME_S: dict[FaultKind, tuple[float, float]] = {
    FaultKind.MASTER_KILL: (1.0, 6.0),
    FaultKind.MASTER_STOP: (1.0, 8.0),
    FaultKind.TASKEXECUTOR_KILL: (1.0, 5.0),
    FaultKind.TASKEXECUTOR_STOP: (1.0, 6.0),
    FaultKind.ZOOKEEPER_KILL: (1.0, 6.0),
    FaultKind.ZOOKEEPER_STOP: (1.0, 5.0),
    FaultKind.ZOOKEEPER_RESTART: (2.0, 2.0),
    FaultKind.S3_OUTAGE: (1.0, 6.0),
    FaultKind.DISK_FULL: (1.0, 6.0),
    FaultKind.DISK_READONLY: (1.0, 6.0),
    FaultKind.SLOW_IO: (2.0, 8.0),
}


@dataclass(frozen=True)
class Topology:
    """What the faults hit: the HA session's masters and TaskExecutors, the ZooKeeper ensemble."""

    masters: int = 3
    taskexecutors: int = 3
    zookeepers: int = 3
    max_concurrent: int = 2

    def __post_init__(self) -> None:
        if self.masters < 2:
            raise ValueError(f"chaos needs at least 2 masters (a standby to take over), got {self.masters}")
        if self.taskexecutors < 2:
            raise ValueError(f"chaos needs at least 2 TaskExecutors, got {self.taskexecutors}")
        if self.zookeepers < 3:
            raise ValueError(f"chaos needs a ZooKeeper ensemble of at least 3, got {self.zookeepers}")
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {self.max_concurrent}")

    def group_cap(self, group: str) -> int:
        """How many faults of ``group`` the setup survives at once."""
        return {
            "master": self.masters - 1,
            "taskexecutor": 1,
            "zookeeper": (self.zookeepers - 1) // 2,
        }.get(group, 1)

    def targets(self, kind: FaultKind) -> list[str]:
        """The targets a fault of ``kind`` may hit. Masters and ZooKeeper servers by role (the
        injector resolves the role when the fault begins), TaskExecutors by slot number."""
        if kind.group == "master":
            return ["leader", "standby"]
        if kind.group == "zookeeper":
            return ["follower", "leader"]
        if kind.group == "taskexecutor":
            return [f"taskexecutor-{i}" for i in range(self.taskexecutors)]
        return [kind.group]


@dataclass(frozen=True)
class Fault:
    id: int
    kind: FaultKind
    target: str
    begin_s: float
    end_s: float

    def overlaps(self, t: float) -> bool:
        return self.begin_s <= t < self.end_s

    def describe(self) -> str:
        return f"#{self.id} {self.kind.value} of {self.target} at +{self.begin_s:.2f}s for {self.end_s - self.begin_s:.2f}s"


@dataclass(frozen=True)
class Event:
    """One step for the injectors: ``phase`` is ``begin`` or ``end`` of ``fault``."""

    at_s: float
    phase: str
    fault: Fault

    def describe(self) -> str:
        return f"+{self.at_s:7.2f}s {self.phase:5} {self.fault.kind.value} {self.fault.target} (#{self.fault.id})"


@dataclass(frozen=True)
class Schedule:
    seed: int
    duration_s: float
    topology: Topology
    faults: tuple[Fault, ...]
    events: tuple[Event, ...] = field(default=())

    def kinds(self) -> set[FaultKind]:
        return {f.kind for f in self.faults}

    def describe(self) -> str:
        return "\n".join(e.describe() for e in self.events)


def _events(faults: Sequence[Fault]) -> tuple[Event, ...]:
    evs = [Event(f.begin_s, "begin", f) for f in faults] + [Event(f.end_s, "end", f) for f in faults]
    # at equal times an end goes first: a healed target is free for the next fault
    return tuple(sorted(evs, key=lambda e: (e.at_s, e.phase != "end", e.fault.id)))


def _fits(fault: Fault, placed: Sequence[Fault], topology: Topology) -> bool:
    """Would ``fault`` keep the constraints with ``placed`` at every moment it is active? Checking
    at the begin times of the faults overlapping it is enough: counts only rise at begins."""
    for t in [fault.begin_s] + [p.begin_s for p in placed if fault.begin_s <= p.begin_s < fault.end_s]:
        active = [p for p in placed if p.overlaps(t)] + [fault]
        if len(active) > topology.max_concurrent:
            return False
        group = [p for p in active if p.kind.group == fault.kind.group]
        if len(group) > topology.group_cap(fault.kind.group):
            return False
        if sum(1 for p in active if p.kind.group == fault.kind.group and p.target == fault.target) > 1:
            return False
    return True


def make_schedule(
    seed: int,
    duration_s: float,
    kinds: Sequence[FaultKind] | None = None,
    topology: Topology | None = None,
    *,
    gap_s: tuple[float, float] = (2.0, 8.0),
    warmup_s: float = 0.0,
) -> Schedule:
    """Faults from ``warmup_s`` to ``duration_s``, one every ``gap_s`` seconds (uniform), each kind
    of ``kinds`` (default all) at least once. ``ValueError`` for bad arguments or a duration too
    short to schedule every kind."""
    topology = topology or Topology()
    kinds = list(kinds) if kinds is not None else list(FaultKind)
    if duration_s <= 0:
        raise ValueError(f"duration must be positive, got {duration_s}")
    if not kinds:
        raise ValueError("no fault kinds to schedule")
    lo, hi = gap_s
    if not 0 < lo <= hi:
        raise ValueError(f"gap range must satisfy 0 < low <= high, got {gap_s}")
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    placed: list[Fault] = []
    t = warmup_s
    while True:
        t += rng.uniform(lo, hi)
        kind = first.pop(0) if first else rng.choice(kinds)
        down_lo, down_hi = DOWNTIME_S[kind]
        down = round(rng.uniform(down_lo, down_hi), 2)
        target = rng.choice(topology.targets(kind))
        begin = round(t, 2)
        fault = Fault(len(placed), kind, target, begin, round(begin + down, 2))
        # a busy moment: wait for the next end among the active faults, then try again
        while not _fits(fault, placed, topology):
            later = [p.end_s for p in placed if p.end_s > fault.begin_s]
            begin = min(later)
            fault = Fault(fault.id, kind, target, begin, round(begin + down, 2))
        if fault.end_s > duration_s:
            missing = sorted({k.value for k in kinds} - {p.kind.value for p in placed})
            if missing:
                raise ValueError(
                    f"{duration_s:.0f}s of chaos cannot hold every fault kind asked for ({', '.join(missing)} "
                    f"left out): give a longer duration or fewer kinds"
                )
            break
        placed.append(fault)
        t = fault.begin_s
    schedule = Schedule(seed, duration_s, topology, tuple(placed), _events(placed))
    check(schedule, kinds)
    return schedule


def check(schedule: Schedule, kinds: Sequence[FaultKind] = ()) -> None:
    """``AssertionError`` naming the first broken constraint (see the module docstring)."""
    topo = schedule.topology
    missing = set(kinds) - schedule.kinds()
    assert not missing, f"kinds never scheduled: {sorted(k.value for k in missing)}"
    for f in schedule.faults:
        assert 0 <= f.begin_s < f.end_s <= schedule.duration_s, f"{f.describe()} is outside 0..{schedule.duration_s}s"
        active = [p for p in schedule.faults if p.overlaps(f.begin_s)]
        assert len(active) <= topo.max_concurrent, f"{len(active)} faults at once at +{f.begin_s}s"
        for group in {p.kind.group for p in active}:
            n = sum(1 for p in active if p.kind.group == group)
            assert n <= topo.group_cap(group), (
                f"{n} {group} faults at once at +{f.begin_s}s (cap {topo.group_cap(group)})"
            )
        targets = [(p.kind.group, p.target) for p in active]
        assert len(targets) == len(set(targets)), f"one target hit twice at +{f.begin_s}s: {targets}"
    begins = [e for e in schedule.events if e.phase == "begin"]
    ends = [e for e in schedule.events if e.phase == "end"]
    assert {e.fault.id for e in begins} == {e.fault.id for e in ends} == {f.id for f in schedule.faults}
