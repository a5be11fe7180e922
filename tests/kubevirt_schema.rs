//! Rendered objects against the API's own schemas.
//!
//! - KubeVirt's VirtualMachine (with CDI's DataVolume templates) and Multus'
//!   NetworkAttachmentDefinition are validated by a JSON Schema validator
//!   against tests/fixtures/kubevirt-schema/objects.schema.json, an extract of
//!   kubevirt/kubevirt `api/openapi-spec/swagger.json`, CDI's
//!   `api/openapi-spec/swagger.json` and the NAD CRD (README.md there names
//!   the commits): an unknown field, a wrong type, a missing required field or
//!   a value outside an enum fails.
//! - Core kinds round-trip through k8s-openapi's types (generated from
//!   Kubernetes' OpenAPI): a field those types do not know is dropped and the
//!   round trip differs.
//! - An ignored test checks the extract against the upstream files themselves
//!   and validates the renders against the whole upstream schema (README.md:
//!   `KUBEVIRT_OPENAPI`, `CDI_OPENAPI`, `NAD_CRD`).

mod common;
#[path = "support/kubevirt_schema.rs"]
mod schema;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use schema::{validator, violations};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use shiftlab::kubevirt::render::{self, Inputs, Kind, Object};
use shiftlab::plan;
use shiftlab::spec::{self, Env};

const FIXTURES: [&str; 3] = ["pod.yaml", "multus.yaml", "ipi.yaml"];

fn objects(file: &str) -> Vec<Object> {
    let dir = common::repo().join("tests/fixtures/kubevirt");
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    let plan = plan::derive(&spec::from_str(&text, file, &env).unwrap().spec);
    let kp = plan.kubevirt.clone().unwrap();
    let userdata = plan
        .nodes
        .iter()
        .map(|n| (n.name.clone(), "{}".to_string()))
        .collect();
    render::render(
        &plan,
        &Inputs {
            image: kp.image.as_deref().unwrap(),
            userdata: &userdata,
        },
    )
    .unwrap()
}

fn extract() -> Value {
    schema::extract(&common::repo())
}

/// The definition an object of a custom kind is checked against.
fn definition(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::VirtualMachine => Some("v1.VirtualMachine"),
        Kind::NetworkAttachmentDefinition => Some("NetworkAttachmentDefinition"),
        _ => None,
    }
}

/// Through `T` and back: the same JSON, or a field `T` does not know.
fn round_trip<T: DeserializeOwned + Serialize>(o: &Object) {
    let typed: T =
        serde_json::from_value(o.body.clone()).unwrap_or_else(|e| panic!("{}: {e}", o.reference()));
    let back: Value = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, o.body, "{} changed in the round trip", o.reference());
}

#[test]
fn rendered_objects_validate_against_the_schemas() {
    let doc = extract();
    let mut seen = std::collections::BTreeSet::new();
    for file in FIXTURES {
        for o in objects(file) {
            seen.insert(o.kind);
            match o.kind {
                Kind::Namespace => round_trip::<Namespace>(&o),
                Kind::Secret => round_trip::<Secret>(&o),
                Kind::Service => round_trip::<Service>(&o),
                Kind::ConfigMap => round_trip::<ConfigMap>(&o),
                Kind::Deployment => round_trip::<Deployment>(&o),
                Kind::VirtualMachine | Kind::NetworkAttachmentDefinition => {
                    let v = validator(&doc, "$defs", definition(o.kind).unwrap());
                    let bad = violations(&v, &o.body);
                    assert!(
                        bad.is_empty(),
                        "{file} {}:\n{}",
                        o.reference(),
                        bad.join("\n")
                    );
                    if o.kind == Kind::NetworkAttachmentDefinition {
                        let cfg: Value =
                            serde_json::from_str(o.body["spec"]["config"].as_str().unwrap())
                                .unwrap();
                        assert!(cfg["cniVersion"].is_string() && cfg["type"] == "bridge");
                    }
                }
            }
        }
    }
    assert_eq!(seen.len(), Kind::ALL.len(), "every kind is checked");
}

/// With the pull secret's registry credentials: the Secret round-trips through
/// k8s-openapi's type and the VMs naming it in `source.registry.secretRef`
/// (CDI's DataVolumeSourceRegistry) pass the extract.
#[test]
fn the_registry_secret_and_its_references_validate() {
    use shiftlab::kubevirt::registry::{self, RegistryAuth};
    let doc = extract();
    let v = validator(&doc, "$defs", "v1.VirtualMachine");
    let dir = common::repo().join("tests/fixtures/kubevirt");
    let text = std::fs::read_to_string(dir.join("pod.yaml")).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    let plan = plan::derive(&spec::from_str(&text, "pod.yaml", &env).unwrap().spec);
    let mut objs = objects("pod.yaml");
    let auth = RegistryAuth {
        username: "robot".into(),
        password: "pw".into(),
    };
    let ns = plan.kubevirt.as_ref().unwrap().namespace.clone();
    registry::use_secret(&mut objs, registry::secret(&plan, &ns, &auth));
    let mut refs = 0;
    for o in &objs {
        match o.kind {
            Kind::Secret => round_trip::<Secret>(o),
            Kind::VirtualMachine => {
                let bad = violations(&v, &o.body);
                assert!(bad.is_empty(), "{}:\n{}", o.reference(), bad.join("\n"));
                refs += o.body["spec"]["dataVolumeTemplates"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["spec"]["source"]["registry"]["secretRef"] == "kv1-registry")
                    .count();
            }
            _ => {}
        }
    }
    assert_eq!(refs, plan.nodes.len(), "one registry disk per node");
}

fn first_vm(file: &str) -> Value {
    objects(file)
        .into_iter()
        .find(|o| o.kind == Kind::VirtualMachine)
        .unwrap()
        .body
}

#[test]
fn the_check_bites_on_a_mutated_object() {
    let doc = extract();
    let v = validator(&doc, "$defs", "v1.VirtualMachine");
    let vm = first_vm("pod.yaml");
    assert!(violations(&v, &vm).is_empty());
    type Mutation = (&'static str, fn(&mut Value));
    let mutations: &[Mutation] = &[
        ("an unknown field", |vm| {
            vm.pointer_mut("/spec/template/spec/domain/devices/disks/0")
                .unwrap()["bootOrdr"] = json!(1)
        }),
        ("a wrong type", |vm| {
            vm.pointer_mut("/spec/template/spec/domain/cpu").unwrap()["cores"] = json!("4")
        }),
        ("a run strategy KubeVirt does not have", |vm| {
            vm["spec"]["runStrategy"] = json!("Sometimes")
        }),
        ("a missing required field", |vm| {
            vm["spec"].as_object_mut().unwrap().remove("template");
        }),
        ("a quantity Kubernetes cannot parse", |vm| {
            vm.pointer_mut("/spec/template/spec/domain/memory").unwrap()["guest"] = json!("16 GiB")
        }),
        ("two sources on one volume", |vm| {
            vm.pointer_mut("/spec/template/spec/volumes/0").unwrap()["cloudInitConfigDrive"] =
                json!({"secretRef": {"name": "x"}})
        }),
        ("two sources on one DataVolume", |vm| {
            vm.pointer_mut("/spec/dataVolumeTemplates/0/spec/source")
                .unwrap()["blank"] = json!({})
        }),
        ("a disk bus that does not exist", |vm| {
            vm.pointer_mut("/spec/template/spec/domain/devices/disks/0/disk")
                .unwrap()["bus"] = json!("ide")
        }),
        ("the wrong apiVersion", |vm| {
            vm["apiVersion"] = json!("kubevirt.io/v1alpha3")
        }),
    ];
    for (what, mutate) in mutations {
        let mut bad = vm.clone();
        mutate(&mut bad);
        assert!(
            !violations(&v, &bad).is_empty(),
            "{what} passed the schema check"
        );
    }
    // The attachment: a config that is not a string.
    let nad = objects("multus.yaml")
        .into_iter()
        .find(|o| o.kind == Kind::NetworkAttachmentDefinition)
        .unwrap()
        .body;
    let v = validator(&doc, "$defs", "NetworkAttachmentDefinition");
    let mut bad = nad.clone();
    bad["spec"]["config"] = json!({"type": "bridge"});
    assert!(!violations(&v, &bad).is_empty());
    let mut bad = nad;
    bad["spec"]["ipam"] = json!({});
    assert!(!violations(&v, &bad).is_empty());
}

#[test]
fn the_core_round_trip_bites_on_an_unknown_field() {
    let mut svc = objects("pod.yaml")
        .into_iter()
        .find(|o| o.kind == Kind::Service)
        .unwrap();
    svc.body["spec"]["loadBalancerClas"] = json!("metallb");
    let r = std::panic::catch_unwind(|| round_trip::<Service>(&svc));
    assert!(r.is_err(), "an unknown Service field passed the round trip");
}

// ---- the extract against the upstream files (ignored: needs them) ----

fn load_env(var: &str) -> Value {
    let path = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var}: give the upstream file (tests/fixtures/kubevirt-schema/README.md)")
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if path.ends_with(".json") {
        serde_json::from_str(&text).unwrap()
    } else {
        yaml_serde::from_str(&text).unwrap()
    }
}

/// Unknown fields refused throughout, as the renders are checked: every
/// object schema that lists properties (or is an empty struct) gets
/// `additionalProperties: false`.
fn closed(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let is_object = m.get("type") == Some(&json!("object"));
            let open = m.contains_key("additionalProperties")
                || m.contains_key("x-kubernetes-preserve-unknown-fields");
            if is_object && !open {
                m.insert("additionalProperties".into(), json!(false));
            }
            m.values_mut().for_each(closed);
        }
        Value::Array(a) => a.iter_mut().for_each(closed),
        _ => {}
    }
}

/// The last name of a `$ref` (`v1.Disk`), or of its last dotted part when
/// names differ between publishers (CDI's `v1.VolumeResourceRequirements` is
/// KubeVirt's `k8s.io.api.core.v1.VolumeResourceRequirements`).
fn ref_name(r: &str, exact: bool) -> String {
    let name = r.rsplit('/').next().unwrap();
    if exact {
        name.to_string()
    } else {
        name.rsplit('.').next().unwrap().to_string()
    }
}

/// A property's shape, comparable between the extract and upstream.
fn shape(p: &Value, exact: bool) -> String {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        return format!("ref {}", ref_name(r, exact));
    }
    if p.get("const").is_some_and(Value::is_string) {
        return "string".into();
    }
    match p.get("type").and_then(Value::as_str) {
        Some("array") => format!("array of {}", shape(&p["items"], exact)),
        Some("object") if p["additionalProperties"].is_object() => {
            format!("map of {}", shape(&p["additionalProperties"], exact))
        }
        Some(t) => t.to_string(),
        None => format!("{p}"),
    }
}

/// How the extract's definition `name` differs from upstream's `up`: a
/// property upstream does not have or of another shape, or a required field
/// the extract does not require.
fn disagreements(name: &str, mine: &Value, up: &Value, exact: bool) -> Vec<String> {
    let mut out = Vec::new();
    let props = mine["properties"].as_object().cloned().unwrap_or_default();
    for (p, s) in &props {
        match up["properties"].get(p) {
            None => out.push(format!("{name}.{p}: not upstream")),
            Some(u) if shape(s, exact) != shape(u, exact) => out.push(format!(
                "{name}.{p}: {} here, {} upstream",
                shape(s, exact),
                shape(u, exact)
            )),
            Some(_) => {}
        }
    }
    let required = |v: &Value| -> Vec<String> {
        v["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(String::from))
            .collect()
    };
    let mine_req = required(mine);
    for r in required(up) {
        if !mine_req.contains(&r) {
            out.push(format!("{name}: upstream requires {r}"));
        }
    }
    out
}

#[test]
#[ignore = "needs the upstream schema files: see tests/fixtures/kubevirt-schema/README.md"]
fn the_extract_agrees_with_upstream_and_the_renders_pass_upstream() {
    let doc = extract();
    let mut kubevirt = load_env("KUBEVIRT_OPENAPI");
    let mut cdi = load_env("CDI_OPENAPI");
    let nad_crd = load_env("NAD_CRD");
    let mut problems = Vec::new();

    // (a) the extract, definition by definition.
    let kv_defs = kubevirt["definitions"].clone();
    let cdi_defs = cdi["definitions"].clone();
    let nad_schema = nad_crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .unwrap()["schema"]["openAPIV3Schema"]
        .clone();
    for (name, mine) in doc["$defs"].as_object().unwrap() {
        if name == "NetworkAttachmentDefinition" {
            problems.extend(disagreements(
                "NAD.spec",
                &mine["properties"]["spec"],
                &nad_schema["properties"]["spec"],
                true,
            ));
            continue;
        }
        match kv_defs.get(name) {
            Some(up) => problems.extend(disagreements(name, mine, up, true)),
            None => problems.push(format!("{name}: not a definition of KubeVirt's OpenAPI")),
        }
        if name.starts_with("v1beta1.") {
            match cdi_defs.get(name) {
                Some(up) => problems.extend(disagreements(&format!("CDI {name}"), mine, up, false)),
                None => problems.push(format!("{name}: not a definition of CDI's OpenAPI")),
            }
        }
    }

    // (b) the renders against the whole upstream schemas, unknown fields refused.
    closed(&mut kubevirt);
    closed(&mut cdi);
    let mut nad = nad_schema;
    nad["properties"]["apiVersion"] = json!({"type": "string"});
    nad["properties"]["kind"] = json!({"type": "string"});
    nad["properties"]["metadata"] =
        json!({"$ref": "#/definitions/k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
    closed(&mut nad);
    let mut with_nad = kubevirt.clone();
    with_nad["definitions"]["NetworkAttachmentDefinition"] = nad;
    let vm = validator(&kubevirt, "definitions", "v1.VirtualMachine");
    let dv = validator(&cdi, "definitions", "v1beta1.DataVolumeSpec");
    let nad = validator(&with_nad, "definitions", "NetworkAttachmentDefinition");
    for file in FIXTURES {
        for o in objects(file) {
            let found = match o.kind {
                Kind::VirtualMachine => {
                    let mut bad = violations(&vm, &o.body);
                    for t in o.body["spec"]["dataVolumeTemplates"].as_array().unwrap() {
                        bad.extend(violations(&dv, &t["spec"]));
                    }
                    bad
                }
                Kind::NetworkAttachmentDefinition => violations(&nad, &o.body),
                _ => continue,
            };
            problems.extend(
                found
                    .into_iter()
                    .map(|b| format!("{file} {}: {b}", o.reference())),
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // And the upstream check bites too.
    let mut bad = first_vm("pod.yaml");
    bad["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["bootOrdr"] = json!(1);
    assert!(!violations(&vm, &bad).is_empty());
}
