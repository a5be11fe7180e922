//! The htpasswd file of an identity provider's Secret (key `htpasswd`), edited
//! line by line: `name:hash` lines as `htpasswd -B` writes them; any other
//! line (a comment, a blank) is kept as it was, since another tool may have
//! written it. Pure; no `Debug` that could print a hash.

/// One line of the file.
#[derive(Clone, PartialEq, Eq)]
enum Line {
    User { name: String, hash: String },
    Other(String),
}

/// The file as lines, in order.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Htpasswd {
    lines: Vec<Line>,
}

impl Htpasswd {
    /// The file's lines; a line without `:` is kept as it is.
    pub fn parse(text: &str) -> Htpasswd {
        let lines = text
            .lines()
            .map(|l| match l.split_once(':') {
                Some((name, hash)) if !name.is_empty() && !l.starts_with('#') => Line::User {
                    name: name.to_string(),
                    hash: hash.to_string(),
                },
                _ => Line::Other(l.to_string()),
            })
            .collect();
        Htpasswd { lines }
    }

    /// The users' names, in the file's order.
    pub fn users(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::User { name, .. } => Some(name.as_str()),
                Line::Other(_) => None,
            })
            .collect()
    }

    /// `name`'s hash (its first line: the one the OAuth server reads).
    pub fn hash_of(&self, name: &str) -> Option<&str> {
        self.lines.iter().find_map(|l| match l {
            Line::User { name: n, hash } if n == name => Some(hash.as_str()),
            _ => None,
        })
    }

    /// Give `name` the hash `hash`: its line replaced where it is (a second
    /// line of the same name dropped), else a line added at the end.
    pub fn set(&mut self, name: &str, hash: &str) {
        let mut seen = false;
        self.lines.retain_mut(|l| match l {
            Line::User { name: n, hash: h } if n == name => {
                if seen {
                    return false;
                }
                seen = true;
                *h = hash.to_string();
                true
            }
            _ => true,
        });
        if !seen {
            self.lines.push(Line::User {
                name: name.to_string(),
                hash: hash.to_string(),
            });
        }
    }

    /// Remove every line of `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.lines.len();
        self.lines
            .retain(|l| !matches!(l, Line::User { name: n, .. } if n == name));
        self.lines.len() != before
    }

    /// The file's text, one line each, a final newline when not empty.
    pub fn render(&self) -> String {
        self.lines
            .iter()
            .map(|l| match l {
                Line::User { name, hash } => format!("{name}:{hash}\n"),
                Line::Other(t) => format!("{t}\n"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# by hand\nalice:$2y$10$aaa\nbob:$2y$10$bbb\n\ncarol:$2y$10$ccc\n";

    #[test]
    fn parse_and_render_keep_every_line() {
        let h = Htpasswd::parse(FILE);
        assert_eq!(h.users(), ["alice", "bob", "carol"]);
        assert_eq!(h.hash_of("bob"), Some("$2y$10$bbb"));
        assert_eq!(h.hash_of("dave"), None);
        assert_eq!(h.render(), FILE);
        assert_eq!(Htpasswd::parse("").render(), "");
        // No final newline in: one out.
        assert_eq!(Htpasswd::parse("a:x").render(), "a:x\n");
    }

    #[test]
    fn set_replaces_in_place_or_appends() {
        let mut h = Htpasswd::parse(FILE);
        h.set("bob", "$2y$10$new");
        assert_eq!(
            h.render(),
            "# by hand\nalice:$2y$10$aaa\nbob:$2y$10$new\n\ncarol:$2y$10$ccc\n"
        );
        h.set("dave", "$2y$10$ddd");
        assert_eq!(h.users(), ["alice", "bob", "carol", "dave"]);
        assert!(h.render().ends_with("carol:$2y$10$ccc\ndave:$2y$10$ddd\n"));
        // A name twice (a hand edit): one line stays, the new hash.
        let mut twice = Htpasswd::parse("x:1\ny:2\nx:3\n");
        twice.set("x", "9");
        assert_eq!(twice.render(), "x:9\ny:2\n");
    }

    #[test]
    fn remove_takes_only_that_users_lines() {
        let mut h = Htpasswd::parse(FILE);
        assert!(h.remove("bob"));
        assert!(!h.remove("bob"));
        assert_eq!(
            h.render(),
            "# by hand\nalice:$2y$10$aaa\n\ncarol:$2y$10$ccc\n"
        );
        // A prefix of a name is another name.
        let mut p = Htpasswd::parse("al:1\nalice:2\n");
        assert!(p.remove("al"));
        assert_eq!(p.render(), "alice:2\n");
    }
}
