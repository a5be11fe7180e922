//! `fips: true`: the SSH keys the installer accepts then. The installer refuses any
//! key that is not RSA or ECDSA (openshift/installer
//! pkg/types/validation/installconfig.go, `validateFIPSconfig`: the key type must
//! match `^ecdsa-sha2-nistp\d{3}$|^ssh-rsa$`), in `openshift-install create
//! manifests`, after the VMs are planned; said here, in its own words, before
//! anything runs. The host's FIPS mode, which the installer also requires, is a
//! fact of the host: src/host/fips.rs.

use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::SshKey;

/// The key types a FIPS cluster accepts (the installer's regular expression).
pub fn fips_key_type(key_type: &str) -> bool {
    key_type == "ssh-rsa"
        || key_type
            .strip_prefix("ecdsa-sha2-nistp")
            .is_some_and(|n| n.len() == 3 && n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn check(raw: &RawSpec, keys: &[SshKey], d: &mut Diagnostics) {
    let Some(fips) = raw.fips.as_ref().filter(|f| f.v) else {
        return;
    };
    for k in keys {
        let key_type = k.key.split_whitespace().next().unwrap_or_default();
        if !fips_key_type(key_type) {
            d.error(
                "ssh_keys",
                format!(
                    "SSH key type {key_type} unavailable when FIPS is enabled. Please use rsa or ecdsa. (openshift-install's own check; the key from {}: make one with `ssh-keygen -t ecdsa -b 521` or `ssh-keygen -t rsa -b 4096` and list it in ssh_keys, or set `{}: false`)",
                    k.source, fips.field
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::Env;

    fn load(keys: &str, fips: bool) -> Result<crate::spec::Loaded, crate::spec::InvalidSpec> {
        crate::spec::from_str(
            &format!("cluster: lab1\ndistribution: okd\nfips: {fips}\nssh_keys: [{keys}]\n"),
            "t.yaml",
            &Env::default(),
        )
    }

    #[test]
    fn fips_refuses_ed25519_keys_in_the_installers_words() {
        let e = load("'ssh-ed25519 AAAA k'", true).unwrap_err();
        let m = e
            .errors
            .iter()
            .find(|d| d.field == "ssh_keys")
            .unwrap_or_else(|| panic!("{e:?}"));
        assert!(
            m.message
                .starts_with("SSH key type ssh-ed25519 unavailable when FIPS is enabled. Please use rsa or ecdsa."),
            "{}",
            m.message
        );
        assert!(m.message.contains("ssh-keygen -t ecdsa"), "{}", m.message);
        assert!(m.message.contains("fips: false"), "{}", m.message);
        // A security key is no RSA/ECDSA key either.
        assert!(load("'sk-ssh-ed25519@openssh.com AAAA k'", true).is_err());
    }

    #[test]
    fn fips_accepts_rsa_and_ecdsa_and_without_fips_anything_goes() {
        for k in [
            "'ssh-rsa AAAA k'",
            "'ecdsa-sha2-nistp256 AAAA k'",
            "'ecdsa-sha2-nistp521 AAAA k', 'ssh-rsa AAAA j'",
        ] {
            assert!(load(k, true).is_ok(), "{k}");
        }
        assert!(load("'ssh-ed25519 AAAA k'", false).is_ok());
        assert!(!super::fips_key_type("ecdsa-sha2-nistp25"));
        assert!(!super::fips_key_type("ssh-dss"));
    }
}
