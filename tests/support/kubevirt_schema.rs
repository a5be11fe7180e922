//! The KubeVirt schema extract (tests/fixtures/kubevirt-schema/objects.schema.json)
//! as a JSON Schema validator, for the tests that check objects against it.

#![allow(dead_code)]

use std::path::Path;

use serde_json::{json, Value};

/// The extract, from the repository at `repo`.
pub fn extract(repo: &Path) -> Value {
    let path = repo.join("tests/fixtures/kubevirt-schema/objects.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A validator for one definition of a schema document whose definitions
/// live under `defs_key` (`$defs`, or swagger's `definitions`).
pub fn validator(doc: &Value, defs_key: &str, def: &str) -> jsonschema::Validator {
    let schema = json!({defs_key: doc[defs_key], "$ref": format!("#/{defs_key}/{def}")});
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{def}: {e}"))
}

/// Every way `o` breaks the schema, one line each.
pub fn violations(v: &jsonschema::Validator, o: &Value) -> Vec<String> {
    v.iter_errors(o)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// An object as stored by the API, without what the API server sets itself
/// (`uid`, `creationTimestamp`, `resourceVersion`, `generation`, `status`):
/// what a client wrote.
pub fn as_written(stored: &Value) -> Value {
    let mut o = stored.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in ["uid", "creationTimestamp", "resourceVersion", "generation"] {
            m.remove(f);
        }
    }
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}
