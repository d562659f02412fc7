//! CPU time spent by this process — the in-process server and, on threads
//! of their own ([`crate::LOAD_THREAD`]), the load generator — and by the
//! PostgreSQL server's processes on this machine, read from `/proc`, so a row
//! can say what one drained item costs `pad serve`, its load and the
//! database (docs/benchmarks.md, "CPU per item"), and scale-out beyond this
//! machine can be projected.

use std::time::Duration;

/// Kernel clock ticks per second, as `/proc/*/stat` counts CPU time: 100 on
/// every Linux this runs on (`getconf CLK_TCK`).
const TICKS_PER_SECOND: u64 = 100;

/// CPU time used so far: this process, its load generator's threads, and
/// every process named `postgres`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// This whole process: the server, the load and the harness.
    pub own: Duration,
    /// The load generator's threads alone.
    pub load: Duration,
    pub postgres: Duration,
}

impl Cpu {
    pub fn now() -> Cpu {
        Cpu { own: ticks(&read("/proc/self/stat")).unwrap_or_default(), load: load(), postgres: postgres() }
    }

    /// What was used since `earlier`, per `items`, as a row's note:
    /// `cpu ms/item: pad serve 0.21, load 0.12, postgres 0.77`. `pad serve`
    /// is the process less its load threads: the in-process server (HTTP,
    /// auth, the store and its pool), which runs on threads of its own.
    pub fn per_item_since(self, earlier: Cpu, items: u64) -> String {
        let (own, load, pg) = self.since(earlier, items);
        format!("cpu ms/item: pad serve {:.2}, load {:.2}, postgres {:.2}", own - load, load, pg)
    }

    /// [`per_item_since`](Self::per_item_since) for a load with no pad
    /// server (the drain floor): the whole process and the database.
    pub fn per_item_total_since(self, earlier: Cpu, items: u64) -> String {
        let (own, _, pg) = self.since(earlier, items);
        format!("cpu ms/item: this process {own:.2}, postgres {pg:.2}")
    }

    /// Milliseconds per item since `earlier`: the process, its load threads, PostgreSQL.
    fn since(self, earlier: Cpu, items: u64) -> (f64, f64, f64) {
        let per = |now, then| ms_per(now, then, items);
        (per(self.own, earlier.own), per(self.load, earlier.load), per(self.postgres, earlier.postgres))
    }
}

/// CPU time used so far by one process (all its threads) and by PostgreSQL:
/// a peer queue's script, which runs as a child of `pad bench`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerCpu {
    pub peer: Duration,
    pub postgres: Duration,
}

impl PeerCpu {
    pub fn of(pid: u32) -> PeerCpu {
        PeerCpu { peer: ticks(&read(&format!("/proc/{pid}/stat"))).unwrap_or_default(), postgres: postgres() }
    }

    /// What was used since `earlier`, per job: `cpu ms/job: peer 0.40, postgres 0.52`.
    pub fn per_job_since(self, earlier: PeerCpu, jobs: u64) -> String {
        let per = |now, then| ms_per(now, then, jobs);
        format!(
            "cpu ms/job: peer {:.2}, postgres {:.2}",
            per(self.peer, earlier.peer),
            per(self.postgres, earlier.postgres)
        )
    }
}

/// Milliseconds of CPU per item between two readings.
fn ms_per(now: Duration, then: Duration, items: u64) -> f64 {
    now.saturating_sub(then).as_secs_f64() * 1000.0 / items.max(1) as f64
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// utime + stime of a `/proc/PID/stat` line; the fields after the command
/// name, which is in parentheses and may hold spaces.
fn ticks(stat: &str) -> Option<Duration> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3 of the line, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / TICKS_PER_SECOND))
}

/// The CPU time of this process's threads named [`crate::LOAD_THREAD`]. They
/// live as long as the process (the load runtime is never dropped), so
/// none of their time is lost to a thread's exit between two readings.
fn load() -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let stat = read(&format!("/proc/self/task/{}/stat", e.file_name().to_string_lossy()));
            let name = stat.split_once('(')?.1.rsplit_once(')')?.0;
            if name == crate::LOAD_THREAD { ticks(&stat) } else { None }
        })
        .sum()
}

fn postgres() -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Duration::ZERO };
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| {
            let stat = read(&format!("/proc/{}/stat", e.file_name().to_string_lossy()));
            let name = stat.split_once('(')?.1.split_once(')')?.0;
            if name == "postgres" { ticks(&stat) } else { None }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_read_after_a_name_with_spaces() {
        let stat = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 1 0 5 0 0";
        assert_eq!(ticks(stat), Some(Duration::from_millis(4000)));
    }
}
