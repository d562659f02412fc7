// graphile-worker: N jobs added with addJobs (one call per 1000), then a
// runner with concurrency W, timed until N tasks have run. per-job: the
// default (each worker fetches its own job); local-queue: the pool fetches
// and locks jobs in batches (localQueue.size = 100). pollInterval 100 ms
// instead of 2 s (LISTEN/NOTIFY wakes it anyway).
import { readFileSync } from 'node:fs';
import { makeWorkerUtils, run } from 'graphile-worker';
import { env, report, counter, mark } from './common.mjs';

const version = 'graphile-worker ' + JSON.parse(readFileSync('node_modules/graphile-worker/package.json')).version;
const utils = await makeWorkerUtils({ connectionString: env.url, schema: env.schema });
await utils.migrate();
for (let i = 0; i < env.jobs; i += 1000) {
  const n = Math.min(1000, env.jobs - i);
  await utils.addJobs(Array.from({ length: n }, (_, k) => ({ identifier: 'bench', payload: { i: i + k } })));
}
await utils.release();
const done = counter(env.jobs);
const localQueue = env.mode === 'local-queue';
const preset = { worker: { localQueue: localQueue ? { size: 100 } : { size: -1 } } };
const { Logger } = await import('graphile-worker');
const logger = new Logger(() => () => {});
mark('started');
const started = performance.now();
const runner = await run({
  connectionString: env.url,
  schema: env.schema,
  concurrency: env.workers,
  maxPoolSize: env.workers + 2,
  pollInterval: 100,
  noHandleSignals: true,
  logger,
  preset,
  taskList: { bench: async () => done.tick() },
});
await done.finished;
const seconds = (performance.now() - started) / 1000;
mark('finished');
await runner.stop();
report(
  version,
  `concurrency ${env.workers}, localQueue.size ${localQueue ? 100 : 'off'}, pollInterval 100 ms`,
  env.jobs,
  seconds,
);
