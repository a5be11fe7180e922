//! Is the host's clock synchronised? The installer signs the cluster's first
//! certificates with this clock, and shiftlab its lab CA and BMC certificates:
//! a host off by minutes hands nodes certificates "not yet valid" or expired
//! (etcd, kubelet and the API refuse them), a known cause of failed labs.
//!
//! Read from the kernel, as `timedatectl`'s `NTPSynchronized` is: adjtimex(2)
//! with no mode set changes nothing and needs no privilege.

use serde::{Deserialize, Serialize};

/// What the kernel says of its clock's discipline (adjtimex(2)), and which
/// time services run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// `maxerror`: the kernel's bound on the clock's error, µs. A time service
    /// lowers it on each update; the kernel raises it by 500 µs a second and
    /// stops at 16 s (kernel/time/ntp.c, `NTP_PHASE_LIMIT`).
    pub maxerror_us: i64,
    /// `esterror`: the time service's estimate of the error, µs.
    pub esterror_us: i64,
    /// `status` bits (`STA_UNSYNC` 0x40, `STA_PLL` 0x1, …).
    pub status: i32,
    /// adjtimex's return value: the clock state (`TIME_OK` 0, `TIME_ERROR` 5).
    pub state: i32,
    /// Time services found running (`chronyd`, `systemd-timesyncd`, `ntpd`).
    pub services: Vec<String>,
}

/// `maxerror` at and above which the clock counts as not synchronised: the
/// kernel's ceiling.
pub const UNSYNC_MAXERROR_US: i64 = 16_000_000;

/// The process names (`/proc/<pid>/comm`, 15 bytes at most) of the time
/// services a Debian host may run, and how they are called.
pub const SERVICES: &[(&str, &str)] = &[
    ("chronyd", "chronyd"),
    ("systemd-timesyn", "systemd-timesyncd"),
    ("ntpd", "ntpd"),
];

impl Clock {
    /// systemd's rule (src/timedate/timedated.c, `ntp_synced`): synchronised
    /// while the kernel's maximum error is below 16 s. `STA_UNSYNC` is not
    /// looked at: a time service may set it only to keep the kernel from
    /// writing the RTC.
    pub fn synced(&self) -> bool {
        self.maxerror_us < UNSYNC_MAXERROR_US
    }
}

/// The kernel's answer, without the services (the caller looks for those).
pub fn read() -> Option<Clock> {
    // SAFETY: a zeroed `timex` is valid (all integers); `modes` 0 only reads.
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, exclusively borrowed `timex`.
    let state = unsafe { libc::adjtimex(&mut t) };
    if state < 0 {
        return None;
    }
    Some(Clock {
        maxerror_us: t.maxerror,
        esterror_us: t.esterror,
        status: t.status,
        state,
        services: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(maxerror_us: i64, status: i32, state: i32) -> Clock {
        Clock {
            maxerror_us,
            esterror_us: 0,
            status,
            state,
            services: Vec::new(),
        }
    }

    #[test]
    fn synced_is_a_maximum_error_below_sixteen_seconds() {
        // This build machine's container, no time service: the kernel's ceiling,
        // STA_UNSYNC, TIME_ERROR.
        assert!(!clock(16_000_000, 0x40, 5).synced());
        // chrony disciplining the clock (STA_PLL | STA_NANO).
        assert!(clock(13_500, 0x2001, 0).synced());
        // chrony without rtcsync may leave STA_UNSYNC set: still synchronised.
        assert!(clock(2_000, 0x2041, 0).synced());
        // A service that stopped updating 9 hours ago (500 µs a second): the ceiling again.
        assert!(!clock(16_000_000, 0x2001, 0).synced());
        assert!(clock(15_999_999, 0x41, 5).synced());
    }

    #[test]
    fn the_kernel_answers_without_privilege() {
        let c = read().expect("adjtimex with modes 0 reads the clock");
        // A service may set any bound; the kernel clamps it at 16 s within a second.
        assert!(c.maxerror_us >= 0, "{c:?}");
        assert!((0..=5).contains(&c.state), "{c:?}");
    }
}
