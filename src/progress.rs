//! Where the install targets report what they did ("created …", "preflight: …",
//! how to log in): a sink the command chooses, not the target. On a terminal the
//! progress goes to stdout and the asides (warnings, sub-steps) to stderr, as
//! `create` has always shown them; under `-o json`/`-o yaml` everything goes to
//! stderr so that stdout holds the one document; a test keeps it in memory.
//!
//! Off a terminal there is no spinner: a long wait says once a minute
//! ([`Sink::beating`]) what it waits for, for how long, and the latest news
//! (the installer's INFO line), so a nohup or CI log is never silent for the
//! 15–40 minutes of an install.
//!
//! A sink rather than `tracing` events: this text is the command's output, not
//! a log. It must read the same whatever `RUST_LOG` says, carry no level or
//! timestamp, and keep its stdout/stderr split, none of which a subscriber
//! promises.

use std::fmt::Display;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The heartbeat's interval in seconds, for tests (default [`HEARTBEAT`]).
pub const HEARTBEAT_ENV: &str = "SHIFTLAB_HEARTBEAT_SECS";
/// How often a wait off a terminal says it is still waiting.
pub const HEARTBEAT: Duration = Duration::from_secs(60);

/// Which stream a line went to (recorded by [`Sink::memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// What was done: stdout on a terminal.
    Progress,
    /// Warnings and sub-steps: always stderr.
    Aside,
}

#[derive(Debug)]
enum Dest {
    Terminal,
    Stderr,
    Memory(Mutex<Vec<(Stream, String)>>),
}

/// A target's progress sink; see the module doc.
#[derive(Debug)]
pub struct Sink(Dest);

impl Default for Sink {
    fn default() -> Self {
        Sink::terminal()
    }
}

impl Sink {
    /// Progress on stdout, asides on stderr.
    pub fn terminal() -> Sink {
        Sink(Dest::Terminal)
    }

    /// Everything on stderr: stdout is kept for a document.
    pub fn stderr() -> Sink {
        Sink(Dest::Stderr)
    }

    /// Lines kept in order, each with its stream (tests).
    pub fn memory() -> Sink {
        Sink(Dest::Memory(Mutex::new(Vec::new())))
    }

    /// The sink for a command's output format: a document on stdout (json,
    /// yaml) sends the progress to stderr.
    pub fn for_output(document: bool) -> Sink {
        if document {
            Sink::stderr()
        } else {
            Sink::terminal()
        }
    }

    /// What was done.
    pub fn say(&self, line: impl Display) {
        self.write(Stream::Progress, line);
    }

    /// A warning or a sub-step's note.
    pub fn aside(&self, line: impl Display) {
        self.write(Stream::Aside, line);
    }

    /// The lines a memory sink holds (empty for the others).
    pub fn lines(&self) -> Vec<(Stream, String)> {
        match &self.0 {
            Dest::Memory(m) => m.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => Vec::new(),
        }
    }

    /// Whether a wait should beat: nobody sees a spinner (it draws on stderr,
    /// and only on a terminal), or the lines are kept (a memory sink).
    pub fn wants_heartbeat(&self) -> bool {
        match self.0 {
            Dest::Memory(_) => true,
            _ => !std::io::stderr().is_terminal(),
        }
    }

    /// Run `work`; while it runs, off a terminal, every [`HEARTBEAT_ENV`]
    /// seconds (a minute by default) an aside that `what` is still awaited,
    /// the time since the start and `latest`'s news ([`heartbeat_line`]).
    pub fn beating<T>(&self, what: &str, latest: &Latest, work: impl FnOnce() -> T) -> T {
        if !self.wants_heartbeat() {
            return work();
        }
        self.beating_every(self.heartbeat_every(), what, latest, work)
    }

    /// The heartbeat's interval: [`HEARTBEAT_ENV`]'s, else (unset, or with a
    /// warning when invalid) [`HEARTBEAT`].
    pub fn heartbeat_every(&self) -> Duration {
        match heartbeat_interval(std::env::var(HEARTBEAT_ENV).ok().as_deref()) {
            Ok(d) => d,
            Err(e) => {
                self.aside(format_args!("warning: {e}"));
                HEARTBEAT
            }
        }
    }

    /// [`Sink::beating`] at `every`, whatever the sink.
    pub fn beating_every<T>(
        &self,
        every: Duration,
        what: &str,
        latest: &Latest,
        work: impl FnOnce() -> T,
    ) -> T {
        let start = Instant::now();
        let (done, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            s.spawn(move || {
                // Ends when `done` is dropped: the work returned or panicked.
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    let news = latest.get();
                    self.aside(heartbeat_line(what, start.elapsed(), news.as_deref()));
                }
            });
            let out = work();
            drop(done);
            out
        })
    }

    /// Which stream a line of `stream` goes to: true for stdout.
    fn to_stdout(&self, stream: Stream) -> bool {
        matches!((&self.0, stream), (Dest::Terminal, Stream::Progress))
    }

    fn write(&self, stream: Stream, line: impl Display) {
        if let Dest::Memory(m) = &self.0 {
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((stream, line.to_string()));
            return;
        }
        let to_stdout = self.to_stdout(stream);
        let color = if to_stdout {
            crate::color::stdout()
        } else {
            crate::color::stderr()
        };
        let mut line = line.to_string();
        if let Some(rest) = line.strip_prefix("warning:").filter(|_| color) {
            line = crate::color::paint("warning", crate::color::Tone::Warn, true) + ":" + rest;
        }
        // A closed pipe must not fail the target that did the work.
        let _ = if to_stdout {
            writeln!(std::io::stdout().lock(), "{line}")
        } else {
            writeln!(std::io::stderr().lock(), "{line}")
        };
    }
}

/// The latest news of a wait (the installer's last INFO message), shared
/// between whoever reads it and the heartbeat.
#[derive(Debug, Default)]
pub struct Latest(Mutex<Option<String>>);

impl Latest {
    pub fn set(&self, news: impl Into<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(news.into());
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The heartbeat's interval from [`HEARTBEAT_ENV`]'s value. Pure.
pub fn heartbeat_interval(value: Option<&str>) -> Result<Duration, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(HEARTBEAT),
        Some(v) => match v.parse::<u64>() {
            Ok(n @ 1..=86400) => Ok(Duration::from_secs(n)),
            _ => Err(format!(
                "{HEARTBEAT_ENV}={v:?} is not a number of seconds from 1 to 86400; \
                 beating every {}s",
                HEARTBEAT.as_secs()
            )),
        },
    }
}

/// One heartbeat: `    still waiting for WHAT (12m00s): NEWS`. Pure.
pub fn heartbeat_line(what: &str, elapsed: Duration, news: Option<&str>) -> String {
    let mut line = format!("    still waiting for {what} ({})", elapsed_text(elapsed));
    if let Some(n) = news.filter(|n| !n.is_empty()) {
        line.push_str(": ");
        line.push_str(n);
    }
    line
}

/// A polling loop's heartbeat: the loop asks [`Beat::due`] on each round
/// and says the line it gets, at most one per `every` (a loop that already
/// polls needs no second thread, unlike [`Sink::beating`]).
#[derive(Debug, Clone, Copy)]
pub struct Beat {
    start: Instant,
    every: Duration,
    next: Duration,
}

impl Beat {
    /// Beats every `every` from now.
    pub fn every(every: Duration) -> Beat {
        Beat {
            start: Instant::now(),
            every,
            next: every,
        }
    }

    /// The heartbeat line for `what` with the news (what is still pending),
    /// when one is due now.
    pub fn due(&mut self, what: &str, news: impl FnOnce() -> String) -> Option<String> {
        let elapsed = self.start.elapsed();
        self.due_at(elapsed)
            .then(|| heartbeat_line(what, elapsed, Some(&news())))
    }

    /// Whether a beat is due at `elapsed` since the start; one per interval
    /// however late the loop looks. Pure but for the state it advances.
    pub fn due_at(&mut self, elapsed: Duration) -> bool {
        if elapsed < self.next || self.every.is_zero() {
            return false;
        }
        while self.next <= elapsed {
            self.next += self.every;
        }
        true
    }
}

/// `45s`, `3m07s`, `1h02m03s`. Pure.
pub fn elapsed_text(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_splits_progress_and_asides_and_a_document_takes_stdout_alone() {
        let t = Sink::terminal();
        assert!(t.to_stdout(Stream::Progress));
        assert!(!t.to_stdout(Stream::Aside));
        let d = Sink::for_output(true);
        assert!(!d.to_stdout(Stream::Progress));
        assert!(!d.to_stdout(Stream::Aside));
        assert!(Sink::for_output(false).to_stdout(Stream::Progress));
    }

    #[test]
    fn a_heartbeat_says_what_how_long_and_the_news() {
        assert_eq!(
            heartbeat_line(
                "openshift-install wait-for bootstrap-complete",
                Duration::from_secs(187),
                Some("Waiting up to 45m0s (until 10:47AM UTC) for bootstrapping to complete...")
            ),
            "    still waiting for openshift-install wait-for bootstrap-complete (3m07s): \
             Waiting up to 45m0s (until 10:47AM UTC) for bootstrapping to complete..."
        );
        assert_eq!(
            heartbeat_line("3 nodes Ready", Duration::from_secs(45), None),
            "    still waiting for 3 nodes Ready (45s)"
        );
        assert_eq!(
            heartbeat_line("x", Duration::from_secs(0), Some("")),
            "    still waiting for x (0s)"
        );
        assert_eq!(elapsed_text(Duration::from_secs(3723)), "1h02m03s");
        assert_eq!(elapsed_text(Duration::from_secs(60)), "1m00s");
        assert_eq!(elapsed_text(Duration::from_millis(59_999)), "59s");
    }

    #[test]
    fn the_interval_is_a_minute_unless_set_to_whole_seconds() {
        assert_eq!(heartbeat_interval(None), Ok(HEARTBEAT));
        assert_eq!(heartbeat_interval(Some("")), Ok(HEARTBEAT));
        assert_eq!(heartbeat_interval(Some("2")), Ok(Duration::from_secs(2)));
        for bad in ["0", "-1", "1.5", "soon", "86401"] {
            let e = heartbeat_interval(Some(bad)).unwrap_err();
            assert!(e.contains(HEARTBEAT_ENV) && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_wait_beats_with_the_latest_news_until_its_work_returns() {
        let s = Sink::memory();
        let latest = Latest::default();
        let got = s.beating_every(Duration::from_millis(20), "it", &latest, || {
            latest.set("step one");
            // Bounded: the outcome (two beats), or give up after 10 s.
            let until = Instant::now() + Duration::from_secs(10);
            while s.lines().len() < 2 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            7
        });
        assert_eq!(got, 7);
        let lines = s.lines();
        assert!(lines.len() >= 2, "{lines:?}");
        for (stream, line) in &lines {
            assert_eq!(*stream, Stream::Aside);
            assert!(
                line.starts_with("    still waiting for it (") && line.ends_with("): step one"),
                "{line}"
            );
        }
    }

    #[test]
    fn a_polling_loop_beats_once_per_interval_however_late_it_looks() {
        let mut b = Beat::every(Duration::from_secs(60));
        let at = |s| Duration::from_secs(s);
        let due: Vec<u64> = [0, 30, 59, 60, 61, 119, 250, 251, 300]
            .into_iter()
            .filter(|&s| b.due_at(at(s)))
            .collect();
        // 250 s makes up for the missed 180 s and 240 s with one line.
        assert_eq!(due, [60, 250, 300]);
        let mut b = Beat::every(Duration::ZERO);
        assert!(!b.due_at(at(5)));
        let mut b = Beat::every(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(2));
        let line = b.due("the ACPI shutdown", || "w-1, w-2 still on".into());
        let line = line.unwrap();
        assert!(
            line.starts_with("    still waiting for the ACPI shutdown (")
                && line.ends_with("): w-1, w-2 still on"),
            "{line}"
        );
    }

    #[test]
    fn memory_keeps_lines_in_order_with_their_stream() {
        let s = Sink::memory();
        s.say("created net");
        s.aside(format_args!("warning: {}", 1));
        s.say(String::from("started vm"));
        assert_eq!(
            s.lines(),
            vec![
                (Stream::Progress, "created net".to_string()),
                (Stream::Aside, "warning: 1".to_string()),
                (Stream::Progress, "started vm".to_string()),
            ]
        );
        assert!(Sink::terminal().lines().is_empty());
    }
}
