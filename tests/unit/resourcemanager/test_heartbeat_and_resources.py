"""Heartbeat bookkeeping, the worker-start failure rater, and TaskExecutor resources from config."""

from yarnflink.common.config import Configuration
from yarnflink.resourcemanager.heartbeat import FailureRater, HeartbeatMonitor
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile, worker_spec_from_config


def test_a_target_is_lost_after_the_timeout_or_after_consecutive_unreachable_rpcs() -> None:
    hb = HeartbeatMonitor(timeout=10.0, rpc_failure_threshold=2)
    hb.monitor("te1", 0.0)
    hb.monitor("te2", 0.0)
    assert not hb.rpc_failed("te1")
    hb.received("te1", 1.0)  # an answer resets the count
    assert not hb.rpc_failed("te1")
    assert hb.rpc_failed("te1")  # two in a row
    hb.received("te2", 5.0)
    assert hb.timed_out(11.5) == ["te1"]
    assert hb.timed_out(15.5) == ["te1", "te2"]
    hb.unmonitor("te1")
    assert "te1" not in hb and not hb.rpc_failed("te1")


def test_rpc_failure_detection_can_be_turned_off() -> None:
    hb = HeartbeatMonitor(timeout=10.0, rpc_failure_threshold=-1)
    hb.monitor("jm", 0.0)
    assert not any(hb.rpc_failed("jm") for _ in range(100))


def test_failure_rater_pauses_beyond_the_rate_within_a_minute() -> None:
    r = FailureRater(max_per_minute=2, retry_interval=5.0)
    assert not r.record_failure(0.0) and not r.record_failure(1.0)
    assert r.may_start(1.0)
    assert r.record_failure(2.0)  # the third within a minute
    assert not r.may_start(6.9) and r.may_start(7.0)
    assert not r.record_failure(70.0)  # the old ones have left the window


def test_worker_resources_follow_flinks_memory_model_unless_given() -> None:
    spec = worker_spec_from_config(Configuration({"taskmanager.numberOfTaskSlots": "4"}))
    assert spec.total == ResourceProfile(4.0, 384, 0, 512)  # 1728m: Flink's defaults
    assert spec.default_slot == ResourceProfile(1.0, 96, 0, 128)
    spec = worker_spec_from_config(
        Configuration(
            {
                "taskmanager.numberOfTaskSlots": "2",
                "taskmanager.cpu.cores": "3",
                "taskmanager.memory.task.heap.size": "1 gb",
                "taskmanager.memory.managed.size": "0",
                "taskmanager.memory.task.off-heap.size": "64 mb",
            }
        )
    )
    assert spec.total == ResourceProfile(3.0, 1024, 64, 0)


def test_profiles_fit_add_and_come_from_slot_sharing_groups() -> None:
    a = ResourceProfile(1.0, 100, 0, 50)
    assert a.fits_into(ResourceProfile(1.0, 100, 0, 50)) and not a.fits_into(ResourceProfile(0.5, 1000, 0, 1000))
    assert (a + a) - a == a and UNKNOWN.is_unknown and not a.is_unknown
    assert ResourceProfile.of_slot_sharing_group({"cpuCores": 2.0, "taskHeapMemoryMB": 10.0}) == ResourceProfile(
        2.0, 10, 0, 0
    )
    assert ResourceProfile.of_slot_sharing_group(None) == UNKNOWN
    assert a.to_json()["taskHeapMemory"] == 100 << 20
