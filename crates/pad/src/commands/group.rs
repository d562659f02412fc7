//! CMD's process group and the guard that stops it when pad dies
//! (docs/leases.md, S1: no process started under a lease outlives it).
//!
//! CMD is started as the leader of a new process group, so one `kill(-pgid)`
//! reaches it and everything it started (unless a descendant leaves the
//! group with `setsid`/`setpgid`, which only a cgroup could follow). pad
//! stops the group itself when the lease is lost, on `--timeout`, when it is
//! interrupted, and after CMD exits (leftover background processes). For the
//! case where pad cannot — `kill -9`, a crash, the OOM killer — two things
//! act without it:
//!
//! - a **guard** process, forked per item, holds the read end of a pipe whose
//!   only write end is pad's. When pad dies the kernel closes that end, the
//!   guard's `read` returns 0, and the guard sends the group SIGTERM, then
//!   SIGKILL after `--kill-after`. pad disarms it with one byte once the
//!   group is gone. The guard ignores SIGINT/SIGTERM/SIGHUP and sits in its
//!   own process group, so a signal aimed at pad (or pad's group) cannot take
//!   it down before it has done its job;
//! - on Linux, CMD itself also gets `PR_SET_PDEATHSIG(SIGTERM)`, a kernel
//!   backstop in case the guard was killed too (it reaches CMD only, not its
//!   children, which is why the guard exists).
//!
//! Other Unix systems get the guard and the group, not the PDEATHSIG backstop.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

/// How often the guard and pad look whether the group is gone yet.
const POLL: Duration = Duration::from_millis(50);

/// CMD, running as the leader of its own process group, with its guard.
pub struct Group {
    child: Child,
    pgid: libc::pid_t,
    /// `None` once disarmed. Dropping it (pad unwinding, an early return)
    /// closes the pipe, which makes the guard stop the group: the safe side.
    guard: Option<Guard>,
    /// The terminal pad handed to CMD's group, to take back at the end.
    tty: Option<Terminal>,
}

impl Group {
    /// Starts `cmd` in a new process group and arms its guard. With
    /// `terminal`, CMD's group is given pad's terminal when pad has it; a
    /// drain running several jobs gives it to none (docs/leases.md, S1).
    pub fn spawn(cmd: &mut Command, kill_after: Duration, terminal: bool) -> io::Result<Group> {
        let tty = if terminal { Terminal::foreground() } else { None };
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        let parent = std::process::id() as libc::pid_t;
        let tty_fd = tty.as_ref().map(|t| t.fd);
        // PDEATHSIG fires when the *thread* that forked exits: pad spawns from
        // its main task, on the thread that lives as long as pad. If pad is
        // killed before the guard below is forked, PDEATHSIG alone covers
        // CMD, which has had no time to start children.
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe calls (prctl, getppid, signal, tcsetpgrp,
        // getpid) on values copied in beforehand.
        unsafe {
            cmd.pre_exec(move || {
                #[cfg(target_os = "linux")]
                {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // pad died between fork and prctl: the signal will never come.
                    if libc::getppid() != parent {
                        return Err(io::Error::from_raw_os_error(libc::ESRCH));
                    }
                }
                if let Some(fd) = tty_fd {
                    // An interactive CMD must own the terminal to read it (a
                    // background group that reads it is stopped). Asking
                    // from the background raises SIGTTOU unless ignored.
                    let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                    libc::tcsetpgrp(fd, libc::getpid());
                    libc::signal(libc::SIGTTOU, old);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().inspect_err(|_| {
            if let Some(t) = &tty {
                t.take_back();
            }
        })?;
        let pgid =
            child.id().and_then(|id| libc::pid_t::try_from(id).ok()).ok_or_else(|| io::Error::other("no pid"))?;
        let guard = match Guard::fork(pgid, kill_after) {
            Ok(guard) => guard,
            Err(e) => {
                // No guard, no CMD: S1 would not hold.
                signal_group(pgid, libc::SIGKILL);
                return Err(e);
            }
        };
        Ok(Group { child, pgid, guard: Some(guard), tty })
    }

    /// CMD's pid, which is also the group's id.
    pub fn pgid(&self) -> libc::pid_t {
        self.pgid
    }

    /// Whether CMD was given the terminal (so Ctrl-C reached it, not pad).
    pub fn had_terminal(&self) -> bool {
        self.tty.is_some()
    }

    /// Waits for CMD (the group leader) to exit.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Sends `sig` to every process in the group.
    pub fn signal(&self, sig: i32) {
        signal_group(self.pgid, sig);
    }

    /// After CMD exited: stops what it left running in its group, gives the
    /// terminal back and disarms the guard. Answers whether anything was left.
    ///
    /// `stopping` is the SIGKILL deadline set when pad began stopping the
    /// group: it holds though CMD exited first, since a fresh SIGTERM and
    /// wait could outlast the lease (docs/leases.md, S2). Otherwise the
    /// leftovers get SIGTERM, and SIGKILL at `kill_by`.
    pub async fn finish(mut self, stopping: Option<Instant>, kill_by: Instant) -> bool {
        let left = group_alive(self.pgid);
        if left {
            let deadline = stopping.unwrap_or_else(|| {
                self.signal(libc::SIGTERM);
                kill_by
            });
            self.clear(deadline).await;
        }
        if let Some(t) = self.tty.take() {
            t.take_back();
        }
        if let Some(guard) = self.guard.take() {
            guard.disarm();
        }
        left
    }

    /// Waits until no process is left in the group, SIGKILLing it at
    /// `deadline`. CMD must have been reaped: a zombie leader still counts.
    async fn clear(&self, deadline: Instant) {
        while group_alive(self.pgid) {
            if Instant::now() >= deadline {
                self.signal(libc::SIGKILL);
                // SIGKILL cannot be caught; the last ones only need reaping
                // by their parents (or init).
                let end = Instant::now() + Duration::from_secs(2);
                while group_alive(self.pgid) && Instant::now() < end {
                    sleep(POLL).await;
                }
                return;
            }
            sleep(POLL).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(t) = self.tty.take() {
            t.take_back();
        }
        // The guard, if still armed, sees its pipe close and stops the group.
    }
}

fn signal_group(pgid: libc::pid_t, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; it touches
    // no memory of ours.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Whether any process (zombies included) is still in the group.
fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    let r = unsafe { libc::kill(-pgid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The guard process: see the module documentation.
struct Guard {
    pid: libc::pid_t,
    pipe: OwnedFd,
}

impl Guard {
    fn fork(pgid: libc::pid_t, kill_after: Duration) -> io::Result<Guard> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-int array it is given. CLOEXEC keeps the
        // write end out of CMD and of anything pad starts later: pad must be
        // its only holder, or its death would not close the pipe.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: each fd was just returned by pipe2 and is owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        const DEV_NULL: &CStr = c"/dev/null";
        // SAFETY: a NUL-terminated path; the fd is owned below.
        let null = unsafe { libc::open(DEV_NULL.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if null < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just opened, owned here only.
        let null = unsafe { OwnedFd::from_raw_fd(null) };
        let grace = libc::timespec { tv_sec: 0, tv_nsec: POLL.as_nanos() as libc::c_long };
        let rounds = (kill_after.as_millis() / POLL.as_millis()).max(1);
        // SAFETY: fork in a multi-threaded process: the child below only
        // makes async-signal-safe calls on values prepared above, never
        // allocates or takes a lock, and ends in _exit.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { guard_main(read.as_raw_fd(), write.as_raw_fd(), null.as_raw_fd(), pgid, grace, rounds) },
            pid => Ok(Guard { pid, pipe: write }),
        }
    }

    /// pad is done with the group: tell the guard to exit quietly, and reap it.
    fn disarm(self) {
        // SAFETY: writes one byte from a local buffer to our own pipe fd.
        unsafe {
            libc::write(self.pipe.as_raw_fd(), b"x".as_ptr().cast(), 1);
        }
        drop(self.pipe);
        let mut status = 0;
        // SAFETY: reaps our own child; it exits as soon as it reads the byte.
        unsafe {
            while libc::waitpid(self.pid, &mut status, 0) < 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
    }
}

/// The guard's whole life, in the forked child. Async-signal-safe calls only.
///
/// # Safety
/// Must be called in a freshly forked child, with fds that are open there.
unsafe fn guard_main(read: i32, write: i32, null: i32, pgid: libc::pid_t, poll: libc::timespec, rounds: u128) -> ! {
    unsafe {
        libc::setpgid(0, 0);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGTTOU] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::close(write);
        // Hold none of pad's descriptors (a caller reading pad's stdout to
        // its end must not wait for the guard): stdio to /dev/null, the pipe
        // moved to 3, everything above closed.
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        let read = if read == 3 { read } else { libc::dup2(read, 3) };
        #[cfg(target_os = "linux")]
        let closed = libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) == 0;
        #[cfg(not(target_os = "linux"))]
        let closed = false;
        if !closed {
            for fd in 4..4096 {
                libc::close(fd);
            }
        }
        let mut byte = 0u8;
        loop {
            match libc::read(read, (&raw mut byte).cast(), 1) {
                1 => libc::_exit(0), // disarmed: pad has stopped the group itself
                n if n < 0 && errno() == libc::EINTR => {}
                _ => break, // EOF: pad is gone
            }
        }
        libc::kill(-pgid, libc::SIGTERM);
        for _ in 0..rounds {
            libc::nanosleep(&poll, std::ptr::null_mut());
            if libc::kill(-pgid, 0) != 0 && errno() == libc::ESRCH {
                libc::_exit(0);
            }
        }
        libc::kill(-pgid, libc::SIGKILL);
        libc::_exit(0)
    }
}

/// errno, read without allocating (safe in the forked guard).
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The controlling terminal, when pad runs in its foreground: CMD gets it for
/// its run (it may be interactive), pad takes it back after.
struct Terminal {
    fd: i32,
    pgrp: libc::pid_t,
}

impl Terminal {
    fn foreground() -> Option<Terminal> {
        let fd = libc::STDIN_FILENO;
        // SAFETY: plain queries on fd 0.
        unsafe {
            if libc::isatty(fd) != 1 {
                return None;
            }
            let pgrp = libc::getpgrp();
            (libc::tcgetpgrp(fd) == pgrp).then_some(Terminal { fd, pgrp })
        }
    }

    fn take_back(&self) {
        // SAFETY: pad is now a background group asking for its terminal back,
        // which raises SIGTTOU unless ignored for the call.
        unsafe {
            let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::tcsetpgrp(self.fd, self.pgrp);
            libc::signal(libc::SIGTTOU, old);
        }
    }
}

/// CMD could not be started: the shell's codes for "not found" (127) and
/// "found but not runnable" (126).
pub(super) fn cannot_run(program: &str, e: &std::io::Error) -> crate::error::CliError {
    use crate::error::{CliError, Exit};
    let exit = if e.kind() == std::io::ErrorKind::NotFound { Exit::CommandNotFound } else { Exit::CannotRun };
    CliError::new(exit, format!("cannot run `{program}`: {e}"))
}
