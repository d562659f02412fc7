// pg-boss: N jobs in one queue, W workers, timed until all N are complete.
// per-job: W loops of fetch() (batchSize 1) + complete(), one job per fetch
// and no poll delay between jobs, as pad's workers do. (pg-boss 12.38's
// work() with batchSize 1 sleeps pollingIntervalSeconds, >= 0.5 s, between
// fetches: 2 jobs/s per worker, which measures the poll interval.)
// batch: work() with localConcurrency W, batchSize 100, burstWhenBatchFull.
import { readFileSync } from 'node:fs';
import { PgBoss } from 'pg-boss';
import { env, report, counter, mark } from './common.mjs';

const version = 'pg-boss ' + JSON.parse(readFileSync('node_modules/pg-boss/package.json')).version;
const boss = new PgBoss({ connectionString: env.url, schema: env.schema, max: env.workers + 4 });
boss.on('error', (e) => console.error(e));
await boss.start();
await boss.createQueue('bench');
for (let i = 0; i < env.jobs; i += 1000) {
  const n = Math.min(1000, env.jobs - i);
  await boss.insert('bench', Array.from({ length: n }, (_, k) => ({ data: { i: i + k } })));
}
let tuning;
mark('started');
const started = performance.now();
if (env.mode === 'batch') {
  const opts = { localConcurrency: env.workers, batchSize: 100, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 };
  tuning = `work() localConcurrency ${env.workers}, batchSize 100, burstWhenBatchFull, pollingIntervalSeconds 0.5`;
  const done = counter(env.jobs);
  await boss.work('bench', opts, async (jobs) => done.tick(jobs.length));
  await done.finished;
} else {
  tuning = `${env.workers} loops of fetch() + complete(), one job per fetch`;
  let done = 0;
  await Promise.all(
    Array.from({ length: env.workers }, async () => {
      for (;;) {
        const [job] = await boss.fetch('bench');
        if (!job) break;
        await boss.complete('bench', job.id);
        done += 1;
      }
    }),
  );
  if (done !== env.jobs) throw new Error(`completed ${done} of ${env.jobs}`);
}
const seconds = (performance.now() - started) / 1000;
mark('finished');
await boss.stop({ graceful: true, wait: true, timeout: 10000 });
report(version, tuning, env.jobs, seconds);
