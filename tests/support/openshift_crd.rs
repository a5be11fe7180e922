//! OpenShift CRDs kept whole in tests/fixtures/openshift-crds (README.md there
//! names their sources), turned into JSON Schemas the renders are validated
//! against: the tests of every OpenShift kind shiftlab renders share one reading.

use serde_json::{json, Map, Value};

/// The `v1` schema of the CRD in `tests/fixtures/openshift-crds/<file>`, which
/// must be the CRD `name`, as a JSON Schema validator.
#[allow(dead_code)] // not every test crate that includes this reads openshift-crds
pub fn v1_validator(file: &str, name: &str) -> jsonschema::Validator {
    validator("tests/fixtures/openshift-crds", file, name, "v1")
}

/// The `version` schema of the CRD `name` in `<dir>/<file>` (dir relative to
/// the repository), as a JSON Schema validator.
pub fn validator(dir: &str, file: &str, name: &str, version: &str) -> jsonschema::Validator {
    let path = super::common::repo().join(dir).join(file);
    let crd: Value = yaml_serde::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(crd["metadata"]["name"], name);
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .expect("the CRD serves the version");
    jsonschema::draft202012::new(&structural(&version["schema"]["openAPIV3Schema"])).unwrap()
}

/// An OpenAPI v3 structural schema as JSON Schema: every object with
/// `properties` closed unless it preserves unknown fields; `nullable` allows null.
pub fn structural(s: &Value) -> Value {
    let Some(m) = s.as_object() else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "properties" => {
                let props = v
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, p)| (name.clone(), structural(p)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), structural(v));
            }
            k if k.starts_with("x-kubernetes-") || k == "nullable" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let open = m.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if m.contains_key("properties") && !open {
        out.insert("additionalProperties".into(), json!(false));
    }
    if m.get("nullable") == Some(&json!(true)) {
        if let Some(t) = out.get("type").cloned() {
            out.insert("type".into(), json!([t, "null"]));
        }
    }
    out.remove("description");
    Value::Object(out)
}

pub fn violations(v: &jsonschema::Validator, o: &Value) -> Vec<String> {
    v.iter_errors(o)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}
