//! The process's open-file limit (`RLIMIT_NOFILE`). The daemons (`serve`,
//! `bmc`) raise the soft limit to the hard one when they start: systemd and
//! most shells leave the soft limit at 1,024, which a connection flood uses up.
//! Connections may hold only a share of the limit ([`connection_budget`]), so
//! that HAProxy's pipes, state files, libvirt and the control socket always
//! find a descriptor.

use anyhow::{Context, Result};

/// Descriptors kept out of the connections' reach: HAProxy children and their
/// pipes, state files, libvirt connections, the control socket, DNS sockets.
pub const RESERVE: u64 = 256;

/// The limit as it stands: (soft, hard).
pub fn current() -> Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading the open-file limit");
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raise the soft limit to the hard one (no further than the kernel's
/// `fs.nr_open`, which an unlimited hard limit would exceed). Returns the
/// soft limit in force afterwards.
pub fn raise() -> Result<u64> {
    let (soft, hard) = current()?;
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let want = target(soft, hard, nr_open);
    if want == soft {
        return Ok(soft);
    }
    let r = libc::rlimit {
        rlim_cur: want,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("raising the open-file limit from {soft} to {want}"));
    }
    Ok(want)
}

/// The soft limit to ask for: the hard one, capped by `nr_open`; never lower
/// than what is in force.
pub fn target(soft: u64, hard: u64, nr_open: Option<u64>) -> u64 {
    let ceiling = nr_open.map_or(hard, |n| hard.min(n));
    soft.max(ceiling)
}

/// How many connections the process's listeners may hold at once under a
/// soft limit of `soft`: what is left after [`RESERVE`], halved because a
/// connection serving a file holds a second descriptor.
pub fn connection_budget(soft: u64) -> usize {
    let budget = soft.saturating_sub(RESERVE) / 2;
    usize::try_from(budget).unwrap_or(usize::MAX).max(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_goes_to_the_hard_one_within_nr_open() {
        assert_eq!(target(1024, 524_288, Some(1_048_576)), 524_288);
        assert_eq!(target(1024, u64::MAX, Some(1_048_576)), 1_048_576);
        assert_eq!(target(1024, 4096, None), 4096);
        // Already there, or raised further by someone else: left alone.
        assert_eq!(target(4096, 4096, None), 4096);
        assert_eq!(target(8192, 4096, None), 8192);
    }

    #[test]
    fn connections_leave_the_reserve_free() {
        assert_eq!(connection_budget(1024), 384);
        assert_eq!(connection_budget(4096), 1920);
        // A tiny limit still lets a few clients in.
        assert_eq!(connection_budget(100), 16);
        assert!(connection_budget(65_536) as u64 * 2 + RESERVE <= 65_536);
    }

    #[test]
    fn raising_keeps_the_hard_limit() {
        let (_, hard) = current().unwrap();
        let soft = raise().unwrap();
        assert_eq!(current().unwrap(), (soft, hard));
    }
}
