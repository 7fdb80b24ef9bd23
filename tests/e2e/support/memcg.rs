//! A memory cgroup (v1) of a test's own, to bound a process tree's memory the way an
//! operator's container does: past the limit the kernel's OOM killer picks a process
//! inside it. Processes stay in it when they fork; the group is emptied and removed
//! when dropped.
use std::path::PathBuf;

const ROOT: &str = "/sys/fs/cgroup/memory";

pub struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    /// A new group limited to `bytes` of memory (and of memory + swap, where the kernel
    /// counts swap).
    pub fn new(name: &str, bytes: u64) -> MemoryCgroup {
        // Tests run side by side in one process: one group each.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = PathBuf::from(ROOT).join(format!("{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e} (the tests need the cgroup v1 memory controller, as root)", dir.display()));
        std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string()).expect("memory.limit_in_bytes");
        let swap = dir.join("memory.memsw.limit_in_bytes");
        if swap.exists() {
            std::fs::write(swap, bytes.to_string()).expect("memory.memsw.limit_in_bytes");
        }
        MemoryCgroup { dir }
    }

    /// Move `pid` into the group; the processes it starts from now on are in it too.
    pub fn add(&self, pid: i32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("cgroup.procs");
    }

    /// Times the kernel's OOM killer acted in the group.
    pub fn oom_kills(&self) -> u64 {
        let control = std::fs::read_to_string(self.dir.join("memory.oom_control")).unwrap_or_default();
        control.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(PathBuf::from(ROOT).join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
