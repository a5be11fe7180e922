//! The API calls shiftlab makes by path (users, LVMS after install): the answer
//! as JSON, or the status the caller acts on (404, 409).

use ::kube::Client;
use anyhow::{bail, Context, Result};
use serde_json::Value;

pub const JSON: &str = "application/json";

/// What the API answered: the object, or a status shiftlab acts on.
pub enum Reply {
    Ok(Value),
    NotFound,
    Conflict,
}

pub async fn call(
    client: &Client,
    method: hyper::Method,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
) -> Result<Reply> {
    let bytes = body
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    let req = hyper::Request::builder()
        .method(method.clone())
        .uri(path)
        .header("content-type", content_type)
        .body(bytes)
        .context("building a request")?;
    // As text, parsed here: kube's `request` logs a body it cannot parse, and
    // a Secret's body holds the users' hashes.
    match client.request_text(req).await {
        Ok(text) => Ok(Reply::Ok(serde_json::from_str(&text).map_err(|_| {
            anyhow::anyhow!("{method} {path}: the API's answer is not JSON")
        })?)),
        Err(::kube::Error::Api(s)) if s.code == 404 => Ok(Reply::NotFound),
        Err(::kube::Error::Api(s)) if s.code == 409 => Ok(Reply::Conflict),
        Err(e) => Err(e).with_context(|| format!("{method} {path}")),
    }
}

/// GET `path`; `None` when it is not there (404).
pub async fn get(client: &Client, path: &str) -> Result<Option<Value>> {
    match call(client, hyper::Method::GET, path, JSON, None).await? {
        Reply::Ok(v) => Ok(Some(v)),
        Reply::NotFound => Ok(None),
        Reply::Conflict => bail!("GET {path}: 409"),
    }
}

/// DELETE `path`; `false` when it was not there (404).
pub async fn delete(client: &Client, path: &str) -> Result<bool> {
    match call(client, hyper::Method::DELETE, path, JSON, None).await? {
        Reply::Ok(_) => Ok(true),
        Reply::NotFound => Ok(false),
        Reply::Conflict => bail!("DELETE {path}: 409"),
    }
}
