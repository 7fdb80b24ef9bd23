//! CPU seconds of this process and of a PostgreSQL cluster's processes, from getrusage
//! and /proc: the postmaster's own time, its exited children's, and its live children's.
use std::path::Path;

pub fn this_process() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// CPU seconds of this process's children that have exited and been waited for.
pub fn children() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// (utime + stime, cutime + cstime, ppid) of a process, in seconds.
fn stat(pid: u32) -> Option<(f64, f64, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; fields resume after its closing parenthesis.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / tick;
    let ppid = f.get(1)?.parse().ok()?;
    Some((n(11) + n(12), n(13) + n(14), ppid))
}

pub fn cluster(data_dir: &Path) -> Option<f64> {
    let pid: u32 = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()?;
    let (own, exited, _) = stat(pid)?;
    let mut total = own + exited;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
            if let Some((cpu, _, ppid)) = stat(child) {
                if ppid == pid {
                    total += cpu;
                }
            }
        }
    }
    Some(total)
}
