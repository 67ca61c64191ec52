//! What both whole-system benches (`mesh`, `contention`) read of the
//! machine from `/proc`: CPU model, load average, CPU time of a process.

/// The CPU model (`model name` of `/proc/cpuinfo`), empty if unknown.
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default()
}

/// The three load averages of `/proc/loadavg`.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU seconds (user + system: fields 14 and 15, in clock ticks of 1/100 s
/// on Linux) of a `/proc/<pid>/stat` file; the command name may hold
/// spaces, so fields are counted from its closing parenthesis. NaN when
/// unreadable.
pub(crate) fn cpu_secs_of(stat: &str) -> f64 {
    std::fs::read_to_string(stat)
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(f64::NAN)
}
