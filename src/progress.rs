//! Where the install targets report what they did ("created …", "preflight: …",
//! how to log in): a sink the command chooses, not the target. On a terminal the
//! progress goes to stdout and the asides (warnings, sub-steps) to stderr, as
//! `create` has always shown them; under `-o json`/`-o yaml` everything goes to
//! stderr so that stdout holds the one document; a test keeps it in memory.
//!
//! A sink rather than `tracing` events: this text is the command's output, not
//! a log. It must read the same whatever `RUST_LOG` says, carry no level or
//! timestamp, and keep its stdout/stderr split, none of which a subscriber
//! promises.

use std::fmt::Display;
use std::io::Write;
use std::sync::Mutex;

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
        // A closed pipe must not fail the target that did the work.
        let _ = if self.to_stdout(stream) {
            writeln!(std::io::stdout().lock(), "{line}")
        } else {
            writeln!(std::io::stderr().lock(), "{line}")
        };
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
