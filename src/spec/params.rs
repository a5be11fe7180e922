//! `-P KEY=VALUE`: command-line overrides of the cluster file, as kcli users type
//! them (`-P workers=3 -P ctlplane.memory=24576`). They are applied to the file's
//! YAML mapping before any field is read, so a value from `-P` is checked,
//! resolved, planned and recorded exactly like one written in the file.

use yaml_serde::{Mapping, Value};

use super::diag::{Diagnostic, Diagnostics};
use super::kcli;

/// What a diagnostic's field gets when its value came from `-P`.
pub const FROM_P: &str = " (from -P)";

/// One well-formed `-P KEY=VALUE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The dotted path, one name per level: `ctlplane.memory` is `["ctlplane", "memory"]`.
    pub path: Vec<String>,
    /// VALUE read as YAML: `3` a number, `true` a boolean, `"3"` a string, `[50, 100]`
    /// a list, nothing at all null (the default, as `key:` in the file).
    pub value: Value,
}

impl Param {
    pub fn key(&self) -> String {
        self.path.join(".")
    }
}

/// Read one `-P` argument. The error is the message alone; it never repeats VALUE,
/// which may be a password.
pub fn parse(arg: &str) -> Result<Param, Diagnostic> {
    let bad = |field: &str, message: String| Diagnostic {
        field: format!("-P {field}"),
        message,
    };
    let Some((key, value)) = arg.split_once('=') else {
        return Err(bad(
            arg,
            "no `=`: write -P KEY=VALUE, e.g. -P workers=3 or -P ctlplane.memory=24576".into(),
        ));
    };
    let path: Vec<String> = key.split('.').map(str::to_string).collect();
    let name_ok = |s: &String| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if !path.iter().all(name_ok) {
        let (field, what) = if key.is_empty() {
            ("=VALUE", "the KEY before `=` is empty".to_string())
        } else {
            (key, format!("`{key}` is not a KEY"))
        };
        return Err(bad(
            field,
            format!(
                "{what}: a KEY is a dotted path of names (letters, digits, `_`, `-`) into the \
                 cluster file, e.g. workers, ctlplane.memory or a kcli key such as master_memory"
            ),
        ));
    }
    Ok(Param {
        path,
        value: yaml_value(value),
    })
}

/// VALUE as YAML reads it; text YAML cannot read (`*x`, `[a`) stays the text, as
/// kcli keeps a value it does not recognise.
fn yaml_value(text: &str) -> Value {
    yaml_serde::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The dotted paths that set the same thing as `key`: the field it names (a kcli
/// alias or flag names its shiftlab field) and every kcli spelling of that field.
fn spellings(key: &str) -> Vec<String> {
    let field = kcli::KEYS
        .iter()
        .find_map(|(k, what)| match what {
            kcli::Key::Alias(f) | kcli::Key::Flag(f, ..) if *k == key => Some(*f),
            _ => None,
        })
        .unwrap_or(key);
    let mut out = vec![field.to_string()];
    out.extend(kcli::aliases(field).map(str::to_string));
    out.extend(kcli::flags(field).map(|(k, ..)| k.to_string()));
    out
}

/// Remove the value at `path` if every level above it is a mapping.
fn remove(root: &mut Mapping, path: &[&str]) {
    let Some((last, above)) = path.split_last() else {
        return;
    };
    let mut map = root;
    for seg in above {
        match map.get_mut(*seg) {
            Some(Value::Mapping(m)) => map = m,
            _ => return,
        }
    }
    map.remove(*last);
}

/// The first level of `path` that holds a value other than a mapping (or
/// nothing), with what it holds.
fn blocked(root: &Mapping, path: &[String]) -> Option<(String, &'static str)> {
    let mut map = root;
    for (i, seg) in path.iter().enumerate() {
        match map.get(seg.as_str()) {
            None | Some(Value::Null) => return None,
            Some(Value::Mapping(m)) => map = m,
            Some(other) => return Some((path[..=i].join("."), kind(other))),
        }
    }
    None
}

/// What a value is, for a message that must not show it (it may be a secret).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(t) => kind(&t.value),
    }
}

/// Apply `params` in order to the file's top-level mapping. A `-P` replaces its
/// setting under whichever spelling the file used (`-P ctlplane.memory=…` over a
/// file's `master_memory:`), so that the override never reads as a conflict.
/// Returns the paths whose values now come from `-P` (the params' own and the
/// mappings they created), for [`mark`].
pub fn apply(root: &mut Mapping, params: &[Param], d: &mut Diagnostics) -> Vec<String> {
    let mut from_p = Vec::new();
    for p in params {
        let key = p.key();
        // kcli's `sno: false` says nothing about `method`: it replaces nothing.
        let says_nothing = kcli::KEYS
            .iter()
            .any(|(k, what)| *k == key && matches!(what, kcli::Key::Flag(_, _, None)))
            && p.value == Value::Bool(false);
        if !says_nothing {
            for other in spellings(&key).iter().filter(|s| **s != key) {
                remove(root, &other.split('.').collect::<Vec<_>>());
            }
        }
        let Some((last, above)) = p.path.split_last() else {
            continue;
        };
        if let Some((here, what)) = blocked(root, above) {
            d.error(
                format!("-P {key}"),
                format!(
                    "`{here}` is {what} in the cluster file, not a mapping, so nothing can be \
                     set under it; -P {here}=VALUE replaces it whole"
                ),
            );
            continue;
        }
        let mut map = &mut *root;
        for (i, seg) in above.iter().enumerate() {
            let slot = map.entry(Value::String(seg.clone())).or_insert(Value::Null);
            if slot.is_null() {
                *slot = Value::Mapping(Mapping::new());
                from_p.push(p.path[..=i].join("."));
            }
            let Value::Mapping(m) = slot else {
                unreachable!("blocked() found every level a mapping or absent")
            };
            map = m;
        }
        map.insert(Value::String(last.clone()), p.value.clone());
        from_p.push(key);
    }
    from_p
}

/// Say `(from -P)` after the field of each diagnostic about a value `-P` set.
pub fn mark(diags: &mut [Diagnostic], from_p: &[String]) {
    for diag in diags {
        let f = &diag.field;
        let hit = from_p.iter().any(|p| {
            f == p
                || f.strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        });
        if hit {
            diag.field.push_str(FROM_P);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(yaml: &str) -> Mapping {
        match yaml_serde::from_str::<Value>(yaml).unwrap() {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            other => panic!("{other:?}"),
        }
    }

    fn applied(yaml: &str, args: &[&str]) -> (Mapping, Vec<String>, Diagnostics) {
        let mut root = map(yaml);
        let params: Vec<Param> = args.iter().map(|a| parse(a).unwrap()).collect();
        let mut d = Diagnostics::default();
        let from_p = apply(&mut root, &params, &mut d);
        (root, from_p, d)
    }

    #[test]
    fn values_are_typed_as_yaml_reads_them() {
        let v = |arg: &str| parse(arg).unwrap().value;
        assert_eq!(v("workers=3"), Value::from(3u64));
        assert_eq!(v("fips=true"), Value::Bool(true));
        assert_eq!(v("cluster=\"3\""), Value::String("3".into()));
        assert_eq!(v("cluster='lab 1'"), Value::String("lab 1".into()));
        assert_eq!(v("domain=lab.test"), Value::String("lab.test".into()));
        assert_eq!(
            v("extra_disks=[50, 100]"),
            Value::Sequence(vec![Value::from(50u64), Value::from(100u64)])
        );
        // `=` after the first belongs to VALUE; text YAML cannot read stays text.
        assert_eq!(v("proxy.no_proxy=a=b"), Value::String("a=b".into()));
        assert_eq!(v("domain=*.x"), Value::String("*.x".into()));
        assert_eq!(v("workers="), Value::Null);
        assert_eq!(
            parse("ctlplane.memory=24576").unwrap().path,
            ["ctlplane", "memory"]
        );
    }

    #[test]
    fn malformed_arguments_name_the_argument_and_what_is_valid() {
        let e = parse("workers").unwrap_err();
        assert_eq!(e.field, "-P workers");
        assert!(e.message.contains("no `=`: write -P KEY=VALUE"), "{e}");
        let e = parse("=3").unwrap_err();
        assert_eq!(e.field, "-P =VALUE");
        assert!(e.message.starts_with("the KEY before `=` is empty"), "{e}");
        for key in [
            "ctlplane..memory",
            ".workers",
            "workers.",
            "a b",
            "nodes[0]",
        ] {
            let e = parse(&format!("{key}=s3cret")).unwrap_err();
            assert_eq!(e.field, format!("-P {key}"));
            assert!(e.message.contains("a dotted path of names"), "{e}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn paths_are_created_and_values_replaced() {
        let (root, from_p, d) = applied(
            "workers: 2\nctlplane:\n  numcpus: 4\n",
            &[
                "workers=3",
                "ctlplane.memory=24576",
                "kubevirt.namespace=labs",
            ],
        );
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert_eq!(
            root,
            map("workers: 3\nctlplane:\n  numcpus: 4\n  memory: 24576\nkubevirt:\n  namespace: labs\n")
        );
        assert_eq!(
            from_p,
            [
                "workers",
                "ctlplane.memory",
                "kubevirt",
                "kubevirt.namespace"
            ]
        );
        // Later wins, as on kcli's command line.
        let (root, ..) = applied("", &["workers=1", "workers=4"]);
        assert_eq!(root, map("workers: 4\n"));
    }

    #[test]
    fn an_override_replaces_every_spelling_of_its_setting() {
        let (root, ..) = applied(
            "ctlplane_memory: 20480\nmasters: 3\nokd: false\n",
            &["ctlplane.memory=24576", "ctlplanes=1", "distribution=okd"],
        );
        assert_eq!(
            root,
            map("ctlplane:\n  memory: 24576\nctlplanes: 1\ndistribution: okd\n")
        );
        let (root, ..) = applied(
            "ctlplane:\n  memory: 16384\n  numcpus: 4\n",
            &["master_memory=24576"],
        );
        assert_eq!(root, map("ctlplane:\n  numcpus: 4\nmaster_memory: 24576\n"));
        // `sno: false` chooses nothing, so the file's method stays.
        let (root, ..) = applied("method: ipi\n", &["sno=false"]);
        assert_eq!(root, map("method: ipi\nsno: false\n"));
    }

    #[test]
    fn a_path_through_a_value_that_is_no_mapping_is_refused() {
        let (root, from_p, d) = applied(
            "network: kcli-lab\nbmc:\n  password: hunter22\n",
            &["network.cidr=192.168.1.0/24", "bmc.password.x=1"],
        );
        assert_eq!(root, map("network: kcli-lab\nbmc:\n  password: hunter22\n"));
        assert!(from_p.is_empty());
        assert_eq!(d.errors.len(), 2, "{:?}", d.errors);
        assert_eq!(d.errors[0].field, "-P network.cidr");
        assert_eq!(
            d.errors[0].message,
            "`network` is a string in the cluster file, not a mapping, so nothing can be set \
             under it; -P network=VALUE replaces it whole"
        );
        assert!(!d.errors[1].message.contains("hunter22"));
    }

    #[test]
    fn diagnostics_about_values_from_p_say_so() {
        let mut diags: Vec<Diagnostic> = [
            "workers",
            "workersx",
            "kubevirt",
            "ctlplane.memory",
            "ctlplane",
        ]
        .iter()
        .map(|f| Diagnostic {
            field: f.to_string(),
            message: "m".into(),
        })
        .collect();
        mark(
            &mut diags,
            &[
                "workers".into(),
                "ctlplane.memory".into(),
                "kubevirt".into(),
            ],
        );
        let fields: Vec<_> = diags.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "workers (from -P)",
                "workersx",
                "kubevirt (from -P)",
                "ctlplane.memory (from -P)",
                "ctlplane"
            ]
        );
    }

    /// Through the loader: applied before validation, so a value from `-P` is read
    /// and checked as the file's own, and its diagnostics say where it came from.
    #[test]
    fn the_loader_validates_overridden_values_as_the_files_own() {
        let file = "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n\
                    master_memory: 16384\nworkers: 2\n";
        let load = |params: &[&str]| {
            crate::spec::from_str_with(
                file,
                "t.yaml",
                &crate::spec::Env::default(),
                crate::spec::Overrides {
                    force: false,
                    params: params.iter().map(|p| p.to_string()).collect(),
                },
            )
        };
        let spec = load(&["workers=3", "ctlplane.memory=24576", "rehearsal=yes"])
            .unwrap_or_else(|e| panic!("{e}"))
            .spec;
        assert_eq!(spec.workers, 3);
        assert_eq!(spec.size(crate::spec::Role::Ctlplane).memory, 24576);
        assert!(spec.rehearsal);
        let e = load(&[
            "ctlplane.memory=6144",
            "wrokers=1",
            "workers",
            "network.cidr=10.0.0.1/24",
        ])
        .unwrap_err()
        .to_string();
        for want in [
            "- -P workers: no `=`",
            "- ctlplane.memory (from -P): 6144 MiB is below the 8192 MiB",
            "- wrokers (from -P): unknown key; did you mean `workers`?",
            "- network.cidr (from -P): \"10.0.0.1/24\" has host bits set",
        ] {
            assert!(e.contains(want), "{want:?} not in:\n{e}");
        }
        assert!(e.contains("has 4 errors"), "{e}");
    }
}
