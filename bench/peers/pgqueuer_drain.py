"""pgqueuer: N jobs enqueued in batches of 1000, then one QueueManager with
the entrypoint limited to W concurrent jobs, run in drain mode (it returns
once the queue is empty). per-job: batch_size 1 (one job per dequeue);
batch: batch_size 100. dequeue_timeout 100 ms instead of 30 s (only matters
while it finds nothing; LISTEN/NOTIFY wakes it anyway)."""

import asyncio
import json
import os
import time
from datetime import timedelta
from importlib.metadata import version

import asyncpg
from pgqueuer import QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries


async def main() -> None:
    url = os.environ["PEER_DATABASE_URL"]
    schema = os.environ.get("PEER_SCHEMA", "peer_pgqueuer")
    workers = int(os.environ.get("PEER_WORKERS", "8"))
    jobs = int(os.environ.get("PEER_JOBS", "10000"))
    batch = 100 if os.environ.get("PEER_MODE") == "batch" else 1

    setup = await asyncpg.connect(url)
    await setup.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    await setup.close()
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    queries = Queries(AsyncpgDriver(conn))
    await queries.install()
    for i in range(0, jobs, 1000):
        n = min(1000, jobs - i)
        await queries.enqueue(["bench"] * n, [None] * n, [0] * n)

    done = 0
    qm = QueueManager(queries)

    @qm.entrypoint("bench", concurrency_limit=workers)
    async def bench(job) -> None:
        nonlocal done
        done += 1

    from pgqueuer.types import QueueExecutionMode

    print("started", flush=True)
    started = time.perf_counter()
    await qm.run(
        dequeue_timeout=timedelta(milliseconds=100),
        batch_size=batch,
        mode=QueueExecutionMode.drain,
    )
    seconds = time.perf_counter() - started
    print("finished", flush=True)
    await conn.close()
    tuning = f"concurrency_limit {workers}, batch_size {batch}, dequeue_timeout 100 ms, drain mode"
    print(json.dumps({"jobs": done, "seconds": seconds, "version": f"pgqueuer {version('pgqueuer')}", "tuning": tuning}))


asyncio.run(main())
