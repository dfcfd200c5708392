//! Self-signed certificates shaped like a Paraguayan signing certificate (RUC in the subject's
//! serialNumber, clientAuth in the extended key usage), for demo mode and tests. SIFEN does not
//! trust them; the built-in simulator and the sandbox do.

use chrono::{DateTime, Duration, Utc};
use openssl::asn1::{Asn1Integer, Asn1Time};
use openssl::bn::{BigNum, MsbOption};
use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkcs12::Pkcs12;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage};
use openssl::x509::{X509, X509NameBuilder};

/// What to put in the certificate.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// Subject CN.
    pub common_name: String,
    /// `80069563-1`, written as serialNumber `RUC80069563-1`; `None` leaves it out.
    pub ruc: Option<String>,
    /// RSA modulus size.
    pub bits: u32,
    /// Whether the extended key usage lists clientAuth.
    pub client_auth: bool,
    /// Start of validity.
    pub not_before: DateTime<Utc>,
    /// End of validity.
    pub not_after: DateTime<Utc>,
}

/// An X.509 v3 builder for a self-signed certificate: a random 64-bit serial, `name` as subject
/// and issuer, `key`'s public key, valid from `not_before` to `not_after`. The caller adds its
/// extensions and signs with `key`.
pub(crate) fn self_signed_builder(
    name: &openssl::x509::X509NameRef,
    key: &PKey<Private>,
    not_before: DateTime<Utc>,
    not_after: DateTime<Utc>,
) -> Result<openssl::x509::X509Builder, ErrorStack> {
    let mut serial = BigNum::new()?;
    serial.rand(64, MsbOption::MAYBE_ZERO, false)?;
    let mut builder = X509::builder()?;
    builder.set_version(2)?;
    let serial = Asn1Integer::from_bn(&serial)?;
    builder.set_serial_number(&serial)?;
    builder.set_subject_name(name)?;
    builder.set_issuer_name(name)?;
    builder.set_pubkey(key)?;
    let (not_before, not_after) = (
        Asn1Time::from_unix(not_before.timestamp())?,
        Asn1Time::from_unix(not_after.timestamp())?,
    );
    builder.set_not_before(&not_before)?;
    builder.set_not_after(&not_after)?;
    Ok(builder)
}

impl SelfSigned {
    /// A certificate for `ruc`, valid from yesterday for `days` days.
    pub fn for_ruc(common_name: &str, ruc: &str, days: i64) -> Self {
        let now = Utc::now();
        Self {
            common_name: common_name.to_owned(),
            ruc: Some(ruc.to_owned()),
            bits: 2048,
            client_auth: true,
            not_before: now - Duration::days(1),
            not_after: now + Duration::days(days),
        }
    }

    /// Generates the key and the certificate.
    pub fn generate(&self) -> Result<(PKey<Private>, X509), ErrorStack> {
        let key = PKey::from_rsa(Rsa::generate(self.bits)?)?;
        let mut name = X509NameBuilder::new()?;
        name.append_entry_by_nid(Nid::COMMONNAME, &self.common_name)?;
        if let Some(ruc) = &self.ruc {
            name.append_entry_by_nid(Nid::SERIALNUMBER, &format!("RUC{ruc}"))?;
        }
        name.append_entry_by_nid(Nid::COUNTRYNAME, "PY")?;
        let mut builder = self_signed_builder(&name.build(), &key, self.not_before, self.not_after)?;
        builder.append_extension(BasicConstraints::new().critical().build()?)?;
        builder.append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .non_repudiation()
                .key_encipherment()
                .build()?,
        )?;
        let mut usage = ExtendedKeyUsage::new();
        if self.client_auth {
            usage.client_auth();
        } else {
            usage.email_protection();
        }
        builder.append_extension(usage.build()?)?;
        builder.sign(&key, MessageDigest::sha256())?;
        Ok((key, builder.build()))
    }

    /// A PKCS#12 file (OpenSSL 3 defaults: PBES2 with AES-256-CBC) protected by `password`.
    pub fn pfx(&self, password: &str) -> Result<Vec<u8>, ErrorStack> {
        let (key, cert) = self.generate()?;
        to_pfx(&key, &cert, password)
    }
}

/// Packs a key and certificate into a PKCS#12 file.
pub fn to_pfx(key: &PKey<Private>, cert: &X509, password: &str) -> Result<Vec<u8>, ErrorStack> {
    Pkcs12::builder()
        .name("kuatia")
        .pkey(key)
        .cert(cert)
        .build2(password)?
        .to_der()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuatia_application::vault::{PfxError, PfxReader};
    use kuatia_domain::ruc::Ruc;

    #[test]
    fn a_generated_certificate_reads_back_with_its_facts_and_passes_validation() {
        let pfx = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 365)
            .pfx("s3cret pass")
            .unwrap();
        let opened = crate::vault::P12Reader.open(&pfx, "s3cret pass").unwrap();
        let f = &opened.facts;
        assert_eq!(f.ruc.as_deref(), Some("80069563-1"));
        assert!(f.subject.contains("RUC80069563-1"), "{}", f.subject);
        assert_eq!((f.key_algorithm.as_str(), f.key_bits), ("RSA", 2048));
        assert!(f.key_matches && f.client_auth);
        assert_eq!(f.fingerprint_sha256.len(), 64);
        assert!(opened.pem.contains("BEGIN PRIVATE KEY") && opened.pem.contains("BEGIN CERTIFICATE"));
        let v = f.validate(&Ruc::parse("80069563-1").unwrap(), Utc::now());
        assert!(v.valid, "{v:?}");
        assert!(format!("{opened:?}").contains("redacted"));
        assert!(!format!("{opened:?}").contains("PRIVATE KEY"));

        assert_eq!(
            crate::vault::P12Reader.open(&pfx, "wrong").unwrap_err(),
            PfxError::WrongPassword
        );
        assert_eq!(
            crate::vault::P12Reader
                .open(b"not a pfx at all", "x")
                .unwrap_err(),
            PfxError::NotPkcs12
        );
    }

    /// A wrong password decrypts the certificate safe to noise whose padding looks right about
    /// once in 256 tries; the work check then took the noise for a malformed file ("not a
    /// PKCS#12") instead of leaving the reader to say "wrong password" (a CI run met one).
    #[test]
    fn every_wrong_password_is_a_wrong_password_not_a_malformed_file() {
        let pfx = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
            .pfx("the right one")
            .unwrap();
        // 2 000 tries meet a lucky padding with probability 1 − (255/256)^2000 > 99.9 %.
        for n in 0..2000 {
            let password = format!("wrong {n}");
            assert!(
                crate::pfx_work::check(&pfx, &password, crate::pfx_work::Limits::default()).is_ok(),
                "{password}"
            );
        }
        for n in 0..3 {
            assert_eq!(
                crate::vault::P12Reader
                    .open(&pfx, &format!("wrong {n}"))
                    .unwrap_err(),
                PfxError::WrongPassword
            );
        }
    }

    /// A root, and the holder's certificate it signs (the holder's key and certificate, the
    /// root's certificate).
    fn issued_by_a_root() -> (PKey<Private>, X509, X509) {
        let root_key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut root_name = X509NameBuilder::new().unwrap();
        root_name
            .append_entry_by_nid(Nid::COMMONNAME, "RAIZ DE PRUEBA")
            .unwrap();
        let root_name = root_name.build();
        let now = Utc::now();
        let mut root = self_signed_builder(
            &root_name,
            &root_key,
            now - Duration::days(1),
            now + Duration::days(90),
        )
        .unwrap();
        root.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
            .unwrap();
        root.sign(&root_key, MessageDigest::sha256()).unwrap();
        let root = root.build();
        let (key, own) = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
            .generate()
            .unwrap();
        let mut holder = self_signed_builder(
            own.subject_name(),
            &key,
            now - Duration::days(1),
            now + Duration::days(30),
        )
        .unwrap();
        holder.set_issuer_name(&root_name).unwrap();
        let mut usage = ExtendedKeyUsage::new();
        usage.client_auth();
        holder.append_extension(usage.build().unwrap()).unwrap();
        holder.sign(&root_key, MessageDigest::sha256()).unwrap();
        (key, holder.build(), root)
    }

    #[test]
    fn the_chain_a_file_carries_is_examined_at_upload() {
        let open = |pfx: Vec<u8>| crate::vault::P12Reader.open(&pfx, "p").unwrap().facts;
        let own = open(
            SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
                .pfx("p")
                .unwrap(),
        );
        let chain = own.chain.expect("examined");
        assert!(
            chain.self_signed && chain.reaches_root && chain.issuers.is_empty(),
            "{chain:?}"
        );

        let (key, holder, root) = issued_by_a_root();
        let mut cas = openssl::stack::Stack::new().unwrap();
        cas.push(root.clone()).unwrap();
        let with_root = Pkcs12::builder()
            .name("kuatia")
            .pkey(&key)
            .cert(&holder)
            .ca(cas)
            .build2("p")
            .unwrap()
            .to_der()
            .unwrap();
        let facts = open(with_root);
        let chain = facts.chain.clone().expect("examined");
        assert!(!chain.self_signed && chain.reaches_root, "{chain:?}");
        assert_eq!(chain.issuers, vec![facts.issuer.clone()], "{chain:?}");
        assert!(facts.issuer.contains("RAIZ DE PRUEBA"), "{}", facts.issuer);
        assert_eq!(
            (facts.chain_check().ok, facts.chain_check().finding.key),
            (true, "chain_to_root")
        );

        // Without its issuer in the file: said, not refused.
        let alone = open(to_pfx(&key, &holder, "p").unwrap());
        let chain = alone.chain.clone().expect("examined");
        assert!(
            !chain.self_signed && !chain.reaches_root && chain.broken_at.is_none(),
            "{chain:?}"
        );
        assert_eq!(
            (alone.chain_check().ok, alone.chain_check().finding.key),
            (true, "chain_partial")
        );
    }

    #[test]
    fn a_certificate_without_client_auth_or_ruc_says_so() {
        let mut spec = SelfSigned::for_ruc("X", "80069563-1", 30);
        spec.client_auth = false;
        spec.ruc = None;
        let opened = crate::vault::P12Reader
            .open(&spec.pfx("p").unwrap(), "p")
            .unwrap();
        assert!(!opened.facts.client_auth);
        assert_eq!(opened.facts.ruc, None);
    }
}
