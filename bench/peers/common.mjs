// Shared by the Node peer scripts: the environment `pad bench --peers` sets,
// and the one JSON line each prints.
export const env = {
  url: process.env.PEER_DATABASE_URL,
  schema: process.env.PEER_SCHEMA ?? 'peer_bench',
  workers: Number(process.env.PEER_WORKERS ?? 8),
  jobs: Number(process.env.PEER_JOBS ?? 10000),
  mode: process.env.PEER_MODE ?? 'per-job',
};
if (!env.url) throw new Error('PEER_DATABASE_URL is not set');

/**
 * Marks the timed window on stdout (`started`, then `finished`), where
 * `pad bench` reads the peer's and PostgreSQL's CPU time as each appears.
 */
export function mark(what) {
  console.log(what);
}

export function report(version, tuning, jobs, seconds) {
  console.log(JSON.stringify({ jobs, seconds, version, tuning }));
}

/** Resolves once `n` calls to the returned `tick(k)` have added up to `target`. */
export function counter(target) {
  let done = 0;
  let resolve;
  const finished = new Promise((r) => (resolve = r));
  return {
    finished,
    tick(k = 1) {
      done += k;
      if (done >= target) resolve(done);
    },
  };
}
