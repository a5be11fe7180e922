//! The Redfish client side of the Ironic stand-in: what sushy (the library
//! Ironic's redfish driver talks through) puts on the wire, so shiftlab's BMC
//! sees the stand-in as it sees real Ironic (tests/fixtures/ironic-39/).
//!
//! sushy: the service root unauthenticated, then one session
//! (`SessionService/Sessions`) and its `X-Auth-Token` on every later request
//! (sushy/auth.py `SessionOrBasicAuth`); `Accept: */*`, `OData-Version: 4.0`
//! and a JSON `Content-Type` on bodies (sushy/connector.py).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// sushy sends python-requests' User-Agent (it sets none of its own); the
/// stand-in says the same so the BMC sees the client real Ironic is.
const USER_AGENT: &str = "python-requests/2.34.2";

/// How the BMC's certificate is checked (Ironic's `redfish_verify_ca`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verify {
    /// disableCertificateVerification: nothing checked.
    Off,
    /// The system's web roots.
    System,
    /// This PEM file's CAs only.
    Ca(std::path::PathBuf),
}

/// One BMC with one session.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

/// An answer: status, headers, body.
type Answer = (u16, Vec<(String, String)>, String);

/// A BMC's refusal: the status and the message of its Redfish error body.
#[derive(Debug, thiserror::Error)]
#[error("{status} {message}")]
pub struct Refused {
    pub status: u16,
    pub message: String,
}

/// The message of a Redfish error body (`error.message`, else the first
/// extended info's), else the text as it came. Pure.
pub fn error_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let e = &v["error"];
    let info = &e["@Message.ExtendedInfo"][0]["Message"];
    match (e["message"].as_str(), info.as_str()) {
        (_, Some(m)) if !m.is_empty() => m.to_string(),
        (Some(m), _) if !m.is_empty() => m.to_string(),
        _ => body.trim().chars().take(300).collect(),
    }
}

fn agent(verify: &Verify) -> Result<ureq::Agent> {
    let tls = ureq::tls::TlsConfig::builder();
    let tls = match verify {
        Verify::Off => tls.disable_verification(true),
        Verify::System => tls,
        Verify::Ca(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading the BMC's CA {}", path.display()))?;
            let mut roots = Vec::new();
            for item in ureq::tls::parse_pem(&pem) {
                if let ureq::tls::PemItem::Certificate(c) =
                    item.with_context(|| format!("parsing {}", path.display()))?
                {
                    roots.push(c);
                }
            }
            if roots.is_empty() {
                bail!("{}: no PEM certificate in it", path.display());
            }
            tls.root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        }
    };
    Ok(ureq::Agent::config_builder()
        .tls_config(tls.build())
        .http_status_as_error(false)
        .proxy(None)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(120)))
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .build()
        .into())
}

/// How long a connection to the BMC may take to open, and how often the first
/// one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const FIRST_CONTACT_TRIES: u32 = 8;

impl Client {
    /// Reads the service root and opens a session (sushy.Sushy()).
    pub fn login(base: &str, verify: &Verify, user: &str, password: &str) -> Result<Client> {
        let mut c = Client {
            agent: agent(verify)?,
            base: base.trim_end_matches('/').to_string(),
            token: None,
        };
        // The first contact is tried again on a new connection, as
        // baremetal-operator requeues a host whose BMC did not answer: an
        // IPv6 BMC address on the lab bridge is tentative until the bootstrap
        // VM brings the link up, and a first GET the host sent around then
        // once waited out its whole 120 s (likely its route, taken while the
        // address was tentative, led out of the bridge).
        let mut tries = FIRST_CONTACT_TRIES;
        let root = loop {
            tries -= 1;
            match c.get("/redfish/v1/") {
                Err(e) if tries > 0 && e.downcast_ref::<Refused>().is_none() => {
                    std::thread::sleep(Duration::from_secs(2));
                }
                other => break other?,
            }
        };
        let sessions = root["Links"]["Sessions"]["@odata.id"]
            .as_str()
            .unwrap_or("/redfish/v1/SessionService/Sessions")
            .to_string();
        let (status, headers, body) = c.send(
            "POST",
            &sessions,
            Some(json!({"UserName": user, "Password": password})),
        )?;
        if status != 201 && status != 200 {
            return Err(Refused {
                status,
                message: error_message(&body),
            })
            .context("opening a session");
        }
        let token = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("x-auth-token"))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| anyhow!("opening a session: no X-Auth-Token in the answer"))?;
        c.token = Some(token);
        Ok(c)
    }

    /// GET a resource: its JSON.
    pub fn get(&self, path: &str) -> Result<Value> {
        let (status, _, body) = self.send("GET", path, None)?;
        if status != 200 {
            return Err(Refused {
                status,
                message: error_message(&body),
            })
            .with_context(|| format!("GET {path}"));
        }
        serde_json::from_str(&body).with_context(|| format!("GET {path}: not JSON"))
    }

    /// POST (an action) or PATCH; a refusal carries the BMC's message.
    pub fn act(&self, method: &str, path: &str, body: Option<Value>) -> Result<()> {
        let (status, _, text) = self.send(method, path, body)?;
        if !(200..300).contains(&status) {
            return Err(Refused {
                status,
                message: error_message(&text),
            })
            .with_context(|| format!("{method} {path}"));
        }
        Ok(())
    }

    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Accept", "*/*")
            .header("OData-Version", "4.0")
            .header("User-Agent", USER_AGENT);
        if let Some(t) = &self.token {
            req = req.header("X-Auth-Token", t);
        }
        let text = match &body {
            Some(b) => {
                req = req.header("Content-Type", "application/json");
                b.to_string()
            }
            None => String::new(),
        };
        let req = req
            .body(text)
            .with_context(|| format!("{method} {path}: request"))?;
        // The error names the URL and the cause, never the body (a password).
        let mut resp = self
            .agent
            .run(req)
            .map_err(|e| anyhow!("{method} {url}: {e}"))?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let text = resp
            .body_mut()
            .with_config()
            .limit(4 << 20)
            .read_to_string()
            .unwrap_or_default();
        Ok((status, headers, text))
    }
}

/// The `@odata.id`s of a collection's members. Pure.
pub fn members(collection: &Value) -> Vec<String> {
    collection["Members"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|l| l["@odata.id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `@odata.id` of `v[key]` (a link), or of its first element (a list). Pure.
pub fn link(v: &Value, key: &str) -> Option<String> {
    let l = &v[key];
    l["@odata.id"]
        .as_str()
        .or_else(|| l[0]["@odata.id"].as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bmcs_message_is_taken_from_its_error_body() {
        let body = r#"{"error":{"code":"Base.1.8.GeneralError","message":"short",
            "@Message.ExtendedInfo":[{"Message":"TLS: unknown CA"}]}}"#;
        assert_eq!(error_message(body), "TLS: unknown CA");
        assert_eq!(error_message(r#"{"error":{"message":"m"}}"#), "m");
        assert_eq!(error_message("Bad Gateway\n"), "Bad Gateway");
    }

    #[test]
    fn links_and_members() {
        let v = json!({"Members": [{"@odata.id": "/a"}, {"@odata.id": "/b"}],
            "Links": {"ManagedBy": [{"@odata.id": "/m"}]}, "Bios": {"@odata.id": "/bios"}});
        assert_eq!(members(&v), ["/a", "/b"]);
        assert_eq!(link(&v["Links"], "ManagedBy").as_deref(), Some("/m"));
        assert_eq!(link(&v, "Bios").as_deref(), Some("/bios"));
        assert_eq!(link(&v, "Nope"), None);
    }
}
