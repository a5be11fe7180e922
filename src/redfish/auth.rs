//! Authentication: HTTP Basic and Redfish sessions.
//!
//! The password is never kept in clear once the service runs: only the
//! SHA-256 of `user NUL password` is, and a presented credential is hashed
//! the same way and compared in constant time. SHA-256 costs about a
//! microsecond, so a client that opens a new connection per request (sushy
//! sends `Connection: close`) pays nothing like a bcrypt check each time;
//! no cache of verified credentials is needed. Session tokens are 256 random
//! bits; only their SHA-256 is stored.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::error::RedfishError;

/// Most sessions alive at once; the least recently used is dropped beyond it.
pub const MAX_SESSIONS: usize = 64;

/// Who made an authenticated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Basic { user: String },
    Session { id: String, user: String },
}

#[derive(Debug)]
struct Session {
    id: String,
    user: String,
    last_used: Instant,
}

/// A new session: the token is shown to the client once, in `X-Auth-Token`.
#[derive(Debug)]
pub struct NewSession {
    pub id: String,
    pub token: String,
}

/// Credentials and live sessions.
pub struct Auth {
    /// No credentials required (benchmarks, explicitly requested).
    open: bool,
    user: String,
    digest: [u8; 32],
    idle_timeout: Duration,
    sessions: Mutex<HashMap<[u8; 32], Session>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("user", &self.user)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

fn credential_digest(user: &str, password: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(user.as_bytes());
    h.update([0u8]);
    h.update(password.as_bytes());
    h.finalize().into()
}

fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Constant-time equality of two digests.
fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// `n` random bytes from the operating system.
pub use crate::files::random_bytes;

impl Auth {
    pub fn new(user: &str, password: &str, idle_timeout: Duration) -> Self {
        Auth {
            open: false,
            user: user.to_string(),
            digest: credential_digest(user, password),
            idle_timeout,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Accepts every request without credentials. Sessions still work.
    pub fn open(idle_timeout: Duration) -> Self {
        let mut a = Auth::new("", "", idle_timeout);
        a.digest = credential_digest("", &hex::encode(random_bytes(32).unwrap_or_default()));
        a.open = true;
        a
    }

    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    fn check(&self, user: &str, password: &str) -> bool {
        ct_eq(&credential_digest(user, password), &self.digest)
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Authenticates a request from its `Authorization` and `X-Auth-Token`
    /// headers. A token, when present, wins.
    pub fn authenticate(
        &self,
        authorization: Option<&str>,
        token: Option<&str>,
    ) -> Result<Principal, RedfishError> {
        if let Some(token) = token {
            let key = token_digest(token.trim());
            let mut sessions = self.sessions();
            let now = Instant::now();
            sessions.retain(|_, s| now.duration_since(s.last_used) < self.idle_timeout);
            return match sessions.get_mut(&key) {
                Some(s) => {
                    s.last_used = now;
                    Ok(Principal::Session {
                        id: s.id.clone(),
                        user: s.user.clone(),
                    })
                }
                None => Err(RedfishError::unauthorized()),
            };
        }
        if self.open {
            return Ok(Principal::Basic {
                user: String::new(),
            });
        }
        let header = authorization.ok_or_else(RedfishError::unauthorized)?;
        let (scheme, value) = header
            .trim()
            .split_once(' ')
            .ok_or_else(RedfishError::unauthorized)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(RedfishError::unauthorized());
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|_| RedfishError::unauthorized())?;
        let decoded = String::from_utf8(decoded).map_err(|_| RedfishError::unauthorized())?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(RedfishError::unauthorized)?;
        if self.check(user, password) {
            Ok(Principal::Basic {
                user: user.to_string(),
            })
        } else {
            Err(RedfishError::unauthorized())
        }
    }

    /// Creates a session for valid credentials.
    pub fn login(&self, user: &str, password: &str) -> Result<NewSession, RedfishError> {
        if !self.check(user, password) {
            return Err(RedfishError::unauthorized());
        }
        let token_bytes = random_bytes(32).map_err(|_| RedfishError::internal())?;
        let id_bytes = random_bytes(8).map_err(|_| RedfishError::internal())?;
        let token = hex::encode(token_bytes);
        let id = hex::encode(id_bytes);
        let mut sessions = self.sessions();
        let now = Instant::now();
        sessions.retain(|_, s| now.duration_since(s.last_used) < self.idle_timeout);
        while sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => sessions.remove(&k),
                None => break,
            };
        }
        sessions.insert(
            token_digest(&token),
            Session {
                id: id.clone(),
                user: user.to_string(),
                last_used: now,
            },
        );
        Ok(NewSession { id, token })
    }

    /// Ends a session; false if there was none with that id.
    pub fn logout(&self, id: &str) -> bool {
        let mut sessions = self.sessions();
        let before = sessions.len();
        sessions.retain(|_, s| s.id != id);
        sessions.len() != before
    }

    /// Live sessions as (id, user), sorted by id.
    pub fn list(&self) -> Vec<(String, String)> {
        let now = Instant::now();
        let mut sessions = self.sessions();
        sessions.retain(|_, s| now.duration_since(s.last_used) < self.idle_timeout);
        let mut v: Vec<_> = sessions
            .values()
            .map(|s| (s.id.clone(), s.user.clone()))
            .collect();
        v.sort();
        v
    }

    /// The user of a live session.
    pub fn session_user(&self, id: &str) -> Option<String> {
        self.list()
            .into_iter()
            .find(|(i, _)| i == id)
            .map(|(_, u)| u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pw: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
        )
    }

    #[test]
    fn basic_accepts_only_the_right_pair() {
        let a = Auth::new("admin", "s3cret:with:colons", Duration::from_secs(60));
        assert!(a
            .authenticate(Some(&basic("admin", "s3cret:with:colons")), None)
            .is_ok());
        for bad in [
            basic("admin", "wrong"),
            basic("root", "s3cret:with:colons"),
            "Basic !!!".into(),
            "Bearer x".into(),
            "Basic".into(),
        ] {
            assert_eq!(
                a.authenticate(Some(&bad), None).unwrap_err().status,
                401,
                "{bad}"
            );
        }
        assert_eq!(a.authenticate(None, None).unwrap_err().status, 401);
    }

    #[test]
    fn sessions_log_in_expire_and_log_out() {
        let a = Auth::new("admin", "pw", Duration::from_millis(200));
        assert_eq!(a.login("admin", "nope").unwrap_err().status, 401);
        let s = a.login("admin", "pw").unwrap();
        assert_eq!(
            a.authenticate(None, Some(&s.token)).unwrap(),
            Principal::Session {
                id: s.id.clone(),
                user: "admin".into()
            }
        );
        // a token wins over (even wrong) basic credentials, and a bad token is refused
        assert!(a
            .authenticate(Some(&basic("admin", "x")), Some(&s.token))
            .is_ok());
        assert!(a.authenticate(None, Some("bogus")).is_err());
        assert_eq!(a.list(), vec![(s.id.clone(), "admin".to_string())]);
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            a.authenticate(None, Some(&s.token)).is_err(),
            "idle session must expire"
        );
        let s2 = a.login("admin", "pw").unwrap();
        assert!(a.logout(&s2.id));
        assert!(!a.logout(&s2.id));
        assert!(a.authenticate(None, Some(&s2.token)).is_err());
    }

    #[test]
    fn session_count_is_bounded() {
        let a = Auth::new("admin", "pw", Duration::from_secs(60));
        for _ in 0..MAX_SESSIONS + 5 {
            a.login("admin", "pw").unwrap();
        }
        assert_eq!(a.list().len(), MAX_SESSIONS);
    }
}
