"""SlotPool: offered and idle slots go to requests by ResourceProfile (Flink's DeclarativeSlotPool
matching), and a request can keep away from blocked TaskExecutors. Pure: no servers."""

from __future__ import annotations

from yarnflink.jobmaster.slotpool import SlotPool
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile

SMALL = ResourceProfile(0.5, 100, 0, 100)
LARGE = ResourceProfile(2.0, 800, 0, 400)


def pool(**kw: object) -> SlotPool:
    p = SlotPool(idle_timeout_s=50.0, **kw)  # type: ignore[arg-type]
    p.register_task_manager("te1", "te1:rpc", "te1:data", 0.0)
    p.register_task_manager("te2", "te2:rpc", "te2:data", 0.0)
    return p


def test_an_offer_goes_to_the_request_whose_profile_it_matches_not_the_oldest() -> None:
    p = pool()
    p.request("small/0/0", None, 0.0, SMALL)  # oldest
    p.request("large/0/0", None, 1.0, LARGE)
    accepted, fulfilled = p.offer_slots("te1", [("a-large", 0, LARGE)], 2.0)
    assert accepted == ["a-large"] and fulfilled == [("large/0/0", p.slots["a-large"])]
    accepted, fulfilled = p.offer_slots("te1", [("a-small", 1, SMALL)], 2.0)
    assert [k for k, _ in fulfilled] == ["small/0/0"] and not p.pending


def test_a_slot_too_small_for_every_pending_request_is_rejected() -> None:
    p = pool()
    p.request("large/0/0", None, 0.0, LARGE)
    accepted, fulfilled = p.offer_slots("te1", [("tiny", 0, SMALL)], 1.0)
    assert accepted == [] and fulfilled == [] and p.rejected_offers == 1
    assert "tiny" not in p.slots and list(p.pending) == ["large/0/0"]


def test_an_equal_profile_is_preferred_over_one_that_merely_fits() -> None:
    p = pool()
    p.request("unknown/0/0", None, 0.0)  # UNKNOWN takes any slot, and is the oldest
    p.request("small/0/0", None, 1.0, SMALL)
    _, fulfilled = p.offer_slots("te1", [("s", 0, SMALL)], 2.0)
    assert [k for k, _ in fulfilled] == ["small/0/0"]
    # a larger slot takes a smaller request; a slot of unknown size takes anything
    p.request("small/0/1", None, 3.0, SMALL)
    _, fulfilled = p.offer_slots("te2", [("big", 0, LARGE), ("u", 1, UNKNOWN)], 4.0)
    assert sorted(k for k, _ in fulfilled) == ["small/0/1", "unknown/0/0"]


def test_idle_slots_are_handed_out_by_profile() -> None:
    p = pool()
    p.request("large/0/0", None, 0.0, LARGE)
    p.request("small/0/0", None, 0.0, SMALL)
    p.offer_slots("te1", [("L", 0, LARGE), ("S", 1, SMALL)], 0.0)
    p.release("large/0/0", 1.0)
    p.release("small/0/0", 1.0)
    # the large request of a next region must not get the small idle slot (the first idle one)
    assert p.request("large/1/0", None, 2.0, LARGE).allocation_id == "L"  # type: ignore[union-attr]
    assert p.request("large/1/1", None, 2.0, LARGE) is None and "large/1/1" in p.pending
    # a released slot goes to a waiting request only if it matches
    p.request("small/1/0", None, 2.0, SMALL)
    assert p.slot_for("small/1/0").allocation_id == "S"  # type: ignore[union-attr]
    assert p.release("small/1/0", 3.0) is None  # the large request still waits
    assert p.release("large/1/0", 3.0) == ("large/1/1", p.slots["L"])


def test_without_profile_matching_every_slot_is_equal() -> None:
    p = pool(match_profiles=False)
    p.request("large/0/0", None, 0.0, LARGE)
    accepted, fulfilled = p.offer_slots("te1", [("tiny", 0, SMALL)], 1.0)
    assert accepted == ["tiny"] and [k for k, _ in fulfilled] == ["large/0/0"]


def test_a_request_never_takes_a_slot_of_an_excluded_task_executor() -> None:
    p = pool()
    p.request("a", None, 0.0)
    p.offer_slots("te1", [("s1", 0)], 0.0)
    p.release("a", 1.0)
    assert p.request("spec", None, 2.0, excluded=frozenset({"te1"})) is None
    assert p.offer_slots("te1", [("s1b", 1)], 2.0) == ([], [])
    accepted, fulfilled = p.offer_slots("te2", [("s2", 0)], 3.0)
    assert accepted == ["s2"] and [k for k, _ in fulfilled] == ["spec"]


def test_the_scheduler_asks_for_each_slot_sharing_groups_declared_profile() -> None:
    from yarnflink.executiongraph.executiongraph import ExecutionGraph
    from yarnflink.scheduler.scheduler import DefaultScheduler, DeployTask

    from .helpers import graph

    jg = graph([("a", 1), ("b", 1)], [("a", "b", "rebalance", "P")], groups={"a": "big", "b": "small"})
    jg.slot_sharing_groups = {
        "big": {"cpuCores": 2.0, "taskHeapMemoryMB": 800, "managedMemoryMB": 400},
        "small": {"cpuCores": 0.5, "taskHeapMemoryMB": 100, "managedMemoryMB": 100},
    }
    s = DefaultScheduler(ExecutionGraph(jg), slot_pool=SlotPool())
    s.start(0.0)
    assert {k: r.profile for k, r in s.pool.pending.items()} == {"big/0/0": LARGE, "small/0/0": SMALL}
    s.register_task_manager("te1", "te1:rpc", "te1:data", 0.0)
    # the small slot arrives first: it goes to the small group, not to the oldest request (big)
    accepted, actions = s.slots_offered("te1", [("s", 0, SMALL)], 1.0)
    assert accepted == ["s"] and s.pool.slot_for("small/0/0") is not None and "big/0/0" in s.pool.pending
    accepted, actions = s.slots_offered("te1", [("l", 1, LARGE)], 2.0)
    deployed = [a.execution.vertex for a in actions if isinstance(a, DeployTask)]
    assert sorted(v.task_name_with_subtask for v in deployed) == ["a (1/1)", "b (1/1)"]
    assert s.pool.slot_for("big/0/0").allocation_id == "l"  # type: ignore[union-attr]


def test_idle_slots_that_cannot_serve_waiting_requests_are_declared_on_top() -> None:
    p = pool()
    p.request("default/1/0", None, 0.0)
    p.offer_slots("te1", [("s1", 0)], 0.0)
    p.release("default/1/0", 1.0)
    assert p.idle_held_while_pending() == [] and p.required == 0  # idle, nobody waits
    # a request that must not use te1 waits: the idle slot counts, so the RM allocates another
    assert p.request("default/1/0#1", None, 2.0, excluded=frozenset({"te1"})) is None
    assert [(r.group_name, r.key) for r in p.idle_held_while_pending()] == [("default", "idle:s1")]
    assert p.required == 2
