//! TLS material: a shiftlab CA kept in the BMC's state directory, and a
//! server certificate issued by it whose SAN holds the BMC's address. The CA
//! certificate is exported (`ca.crt`) so install-config and Ironic can verify
//! the BMC.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData as _, SanType,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest as _, Sha256};

use crate::files::{write_atomic, write_private};

/// The CA and the server certificate issued for one BMC address.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// Where the CA certificate was exported.
    pub ca_path: PathBuf,
}

fn current_year() -> i32 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    1970 + (secs / 31_556_952) as i32
}

fn ca_params(key: &KeyPair) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new()).context("ca parameters")?;
    // The fingerprint of the key makes every lab's CA name distinct and lets
    // the same CA be rebuilt from its key alone.
    let id = hex::encode(&Sha256::digest(key.subject_public_key_info())[..8]);
    p.distinguished_name
        .push(DnType::OrganizationName, "shiftlab");
    p.distinguished_name
        .push(DnType::CommonName, format!("shiftlab BMC CA {id}"));
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = rcgen::date_time_ymd(2024, 1, 1);
    p.not_after = rcgen::date_time_ymd(2044, 1, 1);
    Ok(p)
}

/// Loads the CA from `dir` (creating it on first use) and issues a server
/// certificate for `ips` and `names`. Writes `ca.crt`, `ca.key` (0600),
/// `bmc.crt` and `bmc.key` (0600).
pub fn ensure(dir: &Path, ips: &[IpAddr], names: &[String]) -> Result<TlsMaterial> {
    let (ca, ca_pem, ca_path) = load_ca(dir)?;
    issue(dir, ips, names, &ca, ca_pem, ca_path)
}

/// The CA certificate (PEM) of the BMC whose TLS material lives in `dir`,
/// creating the CA on first use — the one [`ensure`] issues from later, so an
/// install-config rendered before the BMC first started names the CA it will use.
pub fn ca_pem(dir: &Path) -> Result<String> {
    Ok(load_ca(dir)?.1)
}

/// The CA (its key and name, to issue with) and certificate in `dir`, created on
/// first use.
fn load_ca(dir: &Path) -> Result<(Issuer<'static, KeyPair>, String, PathBuf)> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let key_path = dir.join("ca.key");
    let ca_path = dir.join("ca.crt");
    let ca_key = if key_path.exists() {
        let pem = fs::read_to_string(&key_path)
            .with_context(|| format!("reading {}", key_path.display()))?;
        KeyPair::from_pem(&pem).with_context(|| format!("parsing {}", key_path.display()))?
    } else {
        let k = KeyPair::generate().context("generating ca key")?;
        write_private(&key_path, k.serialize_pem().as_bytes())?;
        k
    };
    let params = ca_params(&ca_key)?;
    let ca = params
        .self_signed(&ca_key)
        .context("signing ca certificate")?;
    // Keep an existing CA certificate byte for byte: clients may have pinned it.
    let ca_pem = match fs::read_to_string(&ca_path) {
        Ok(existing) if !existing.is_empty() => existing,
        _ => {
            write_atomic(&ca_path, ca.pem().as_bytes())?;
            ca.pem()
        }
    };
    Ok((Issuer::new(params, ca_key), ca_pem, ca_path))
}

fn issue(
    dir: &Path,
    ips: &[IpAddr],
    names: &[String],
    ca: &Issuer<'_, KeyPair>,
    ca_pem: String,
    ca_path: PathBuf,
) -> Result<TlsMaterial> {
    let mut p = CertificateParams::new(names.to_vec()).context("server certificate parameters")?;
    p.subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    let cn = ips
        .first()
        .map(|i| i.to_string())
        .or_else(|| names.first().cloned())
        .unwrap_or_else(|| "shiftlab-bmc".into());
    p.distinguished_name
        .push(DnType::OrganizationName, "shiftlab");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    let year = current_year();
    p.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    p.not_after = rcgen::date_time_ymd(year + 2, 1, 1);
    let key = KeyPair::generate().context("generating server key")?;
    let cert = p
        .signed_by(&key, ca)
        .context("signing server certificate")?;
    let cert_pem = cert.pem();
    let key_pem = key.serialize_pem();
    write_atomic(
        &dir.join("bmc.crt"),
        format!("{cert_pem}{ca_pem}").as_bytes(),
    )?;
    write_private(&dir.join("bmc.key"), key_pem.as_bytes())?;
    Ok(TlsMaterial {
        ca_pem,
        cert_pem,
        key_pem,
        ca_path,
    })
}

/// A rustls server configuration for the material (chain: leaf, CA).
pub fn server_config(m: &TlsMaterial) -> Result<Arc<rustls::ServerConfig>> {
    let mut chain: Vec<CertificateDer<'static>> = Vec::new();
    for pem in [&m.cert_pem, &m.ca_pem] {
        for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            chain.push(c.context("parsing certificate pem")?);
        }
    }
    let key =
        PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).context("parsing server key pem")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("tls protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("tls server certificate")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn ca_is_created_once_and_keys_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let a = ensure(dir.path(), &[ip], &["localhost".into()]).unwrap();
        let b = ensure(dir.path(), &[ip], &[]).unwrap();
        assert_eq!(a.ca_pem, b.ca_pem);
        assert_ne!(a.cert_pem, b.cert_pem);
        for f in ["ca.key", "bmc.key"] {
            let mode = fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        server_config(&b).unwrap();
    }

    #[test]
    fn the_ca_exported_before_the_bmc_starts_is_the_one_it_serves() {
        let dir = tempfile::tempdir().unwrap();
        let early = ca_pem(dir.path()).unwrap();
        assert!(early.starts_with("-----BEGIN CERTIFICATE-----"));
        let served = ensure(dir.path(), &["127.0.0.1".parse().unwrap()], &[]).unwrap();
        assert_eq!(served.ca_pem, early);
        assert_eq!(ca_pem(dir.path()).unwrap(), early);
    }

    /// A lab's CA outlives shiftlab upgrades: its `ca.crt` is kept byte for byte
    /// (pinned by install-config and Ironic) and the name certificates are issued
    /// under is rebuilt from `ca.key`. The fixture is a CA made by shiftlab on
    /// rcgen 0.13; what today's code issues from it must verify against it.
    #[test]
    fn a_ca_made_by_an_earlier_shiftlab_still_issues_certificates_that_verify() {
        use rustls::client::danger::ServerCertVerifier as _;
        use rustls::pki_types::{ServerName, UnixTime};
        let dir = tempfile::tempdir().unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bmc-ca-rcgen013");
        for f in ["ca.key", "ca.crt"] {
            fs::copy(fixture.join(f), dir.path().join(f)).unwrap();
        }
        let kept = fs::read_to_string(fixture.join("ca.crt")).unwrap();
        let m = ensure(dir.path(), &["127.0.0.1".parse().unwrap()], &[]).unwrap();
        assert_eq!(m.ca_pem, kept);
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(kept.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let leaf = CertificateDer::from_pem_slice(m.cert_pem.as_bytes()).unwrap();
        verifier
            .verify_server_cert(
                &leaf,
                &[],
                &ServerName::try_from("127.0.0.1").unwrap(),
                &[],
                UnixTime::now(),
            )
            .expect("the leaf chains to the kept ca.crt");
    }
}
