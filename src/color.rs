//! Whether shiftlab colours its verdict words (FAIL red, WARN yellow, OK green):
//! decided from `--color`, `NO_COLOR` (<https://no-color.org>: any non-empty
//! value) and whether the stream is a terminal, so a file, a pipe or a
//! `-o json|yaml` document never holds an escape code unless asked.
//!
//! The choice is set once by `main` ([`init`]); the decision itself is the pure
//! [`decide`].

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// `--color auto|always|never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always, even into a file or pipe (and over NO_COLOR, as a flag is).
    Always,
    /// Never.
    Never,
}

/// The verdict a word carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Fail,
    Warn,
    Ok,
}

/// Whether to colour a stream. Pure. A command-line flag outranks the
/// environment (no-color.org); `auto` colours a terminal only, and an empty
/// `NO_COLOR` counts as unset.
pub fn decide(choice: ColorChoice, no_color: Option<&OsStr>, terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// `text` in its tone's colour when `on`, else as it is. Pure.
pub fn paint(text: &str, tone: Tone, on: bool) -> String {
    if !on {
        return text.to_string();
    }
    let code = match tone {
        Tone::Fail => "31",
        Tone::Warn => "33",
        Tone::Ok => "32",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

static CHOICE: OnceLock<ColorChoice> = OnceLock::new();

/// Record `--color` (once; later calls keep the first).
pub fn init(choice: ColorChoice) {
    let _ = CHOICE.set(choice);
}

fn decide_for(terminal: bool) -> bool {
    decide(
        CHOICE.get().copied().unwrap_or_default(),
        std::env::var_os("NO_COLOR").as_deref(),
        terminal,
    )
}

/// Whether what goes to stdout is coloured.
pub fn stdout() -> bool {
    decide_for(std::io::stdout().is_terminal())
}

/// Whether what goes to stderr is coloured.
pub fn stderr() -> bool {
    decide_for(std::io::stderr().is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_a_terminal_without_no_color_only() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(decide(ColorChoice::Auto, None, true));
        assert!(decide(ColorChoice::Auto, empty, true));
        assert!(!decide(ColorChoice::Auto, set, true));
        assert!(!decide(ColorChoice::Auto, None, false));
        // Any non-empty value, not only 1.
        assert!(!decide(ColorChoice::Auto, Some(OsStr::new("0")), true));
    }

    #[test]
    fn a_flag_outranks_the_terminal_and_no_color() {
        for no_color in [None, Some(OsStr::new("1"))] {
            for terminal in [true, false] {
                assert!(decide(ColorChoice::Always, no_color, terminal));
                assert!(!decide(ColorChoice::Never, no_color, terminal));
            }
        }
    }

    #[test]
    fn paint_wraps_in_the_tones_colour_or_leaves_the_text() {
        assert_eq!(paint("FAIL", Tone::Fail, true), "\x1b[31mFAIL\x1b[0m");
        assert_eq!(paint("warn", Tone::Warn, true), "\x1b[33mwarn\x1b[0m");
        assert_eq!(paint("ok", Tone::Ok, true), "\x1b[32mok\x1b[0m");
        assert_eq!(paint("FAIL", Tone::Fail, false), "FAIL");
    }
}
