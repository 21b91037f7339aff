"""An aborted checkpoint's directory is deleted by the JobMaster, with whatever a task that
failed while writing left in it (Flink's ``disposeOnFailure``); completed checkpoints and the
directories of other checkpoints stay. A real JobMaster and checkpoint storage on local disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.unit.scheduler.helpers import graph
from yarnflink.checkpoint import coordinator as cc
from yarnflink.jobmaster.jobmaster import JobMaster


def test_an_aborted_checkpoints_directory_is_deleted(tmp_path: Path) -> None:
    jg = graph([("src", 1), ("sink", 1)], [("src", "sink", "forward", "P")])
    jg.config = {"execution.checkpointing.interval": "1 h", "execution.checkpointing.dir": f"file://{tmp_path}"}

    async def run() -> None:
        jm = JobMaster(jg, "127.0.0.1", "127.0.0.1:1", on_terminated=lambda jm: None)
        driver = jm.checkpoints
        assert driver is not None
        job_dir = tmp_path / jm.job_id
        for cid in (6, 7):  # 7: a task wrote one file of its snapshot, then failed
            (job_dir / f"chk-{cid}").mkdir(parents=True)
            (job_dir / f"chk-{cid}" / "keyed-0-127-chk7-0001.arrow").write_bytes(b"half of a snapshot")
        driver._apply([cc.DiscardIncomplete(7)])  # the coordinator aborted checkpoint 7
        for _ in range(200):  # (the deletion runs off the loop; 10 s at most)
            if not (job_dir / "chk-7").exists() and not jm._io:
                break
            await asyncio.sleep(0.05)
        assert not (job_dir / "chk-7").exists()
        assert (job_dir / "chk-6" / "keyed-0-127-chk7-0001.arrow").exists()  # another checkpoint's: kept

    asyncio.run(run())
