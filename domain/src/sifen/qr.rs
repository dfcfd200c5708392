//! The QR string of a DE (`gCamFuFD/dCarQR`, Manual Técnico v150 §13.8): the consultation URL with the document's key data and `cHashQR`, the SHA-256 of that
//! data followed by the taxpayer's CSC.
//!
//! Pure: strings in, a string out. The result is the URL with plain `&` separators, as a phone
//! reads it from the printed code; writing it into XML (`&` → `&amp;`) is the XML writer's job
//! (`kuatia_infrastructure::sifen::sign::append_qr` does it). The CSC is hashed, never put in
//! the URL.
//!
//! Values are taken as the text written in the DE (`dFeEmiDE`, `dTotGralOpe`, `dTotIVA`, …),
//! not as numbers: SIFEN rebuilds the hash from the XML text (rule 2500/2501), so a number
//! formatted twice in two places is a mismatch waiting to happen. They are concatenated without
//! URL-encoding, as the reference implementations do.

use sha2::{Digest, Sha256};

use crate::channel::SifenEnvironment;

/// Consultation URL of the production environment (§13.8.2, no `www.`).
pub const PRODUCTION_BASE_URL: &str = "https://ekuatia.set.gov.py/consultas/qr?";
/// Consultation URL of the test environment.
pub const TEST_BASE_URL: &str = "https://ekuatia.set.gov.py/consultas-test/qr?";

/// Version of the format (`nVersion`).
const VERSION: &str = "150";

/// The base URL of an environment, ending in `?`.
pub fn base_url(environment: SifenEnvironment) -> &'static str {
    match environment {
        SifenEnvironment::Test => TEST_BASE_URL,
        SifenEnvironment::Production => PRODUCTION_BASE_URL,
    }
}

/// Who receives the document, as the QR names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QrReceiver<'a> {
    /// A taxpayer (`iNatRec` 1): `dRucRec`, the RUC without its check digit.
    Ruc(&'a str),
    /// Anyone else (`iNatRec` 2): `dNumIDRec`; `"0"` for an anonymous or foreign receiver.
    OtherId(&'a str),
}

/// The data the QR carries, each value exactly as written in the DE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QrData<'a> {
    /// Test or production: chooses the base URL.
    pub environment: SifenEnvironment,
    /// The CDC (`DE@Id`, 44 characters).
    pub cdc: &'a str,
    /// `dFeEmiDE` as written (`2025-01-15T10:00:00`); sent hex-encoded.
    pub emitted_at: &'a str,
    /// `dRucRec` or `dNumIDRec`.
    pub receiver: QrReceiver<'a>,
    /// `dTotGralOpe` as written; `"0"` when the DE has none (remisión).
    pub total: &'a str,
    /// `dTotIVA` as written; `"0"` when the DE has none (remisión, no IVA).
    pub total_iva: &'a str,
    /// Number of `gCamItem`.
    pub items: usize,
    /// The signature's `DigestValue` (base64, as written in the Signature); sent hex-encoded.
    pub digest_value: &'a str,
}

/// The taxpayer's code of security (CSC) and its id.
#[derive(Clone, Copy)]
pub struct Csc<'a> {
    /// `IdCSC`: 1 to 4 digits, written with 4 (`1` → `0001`).
    pub id: &'a str,
    /// The 32-character secret; only ever hashed.
    pub secret: &'a str,
}

impl std::fmt::Debug for Csc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Csc")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Why no QR could be built. These are programming or configuration errors: the values come
/// from a DE that passed validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QrError {
    /// The CDC is not 44 letters and digits.
    #[error("the CDC must be 44 letters and digits")]
    Cdc,
    /// The CSC id is not 1 to 4 digits.
    #[error("the CSC id must have 1 to 4 digits")]
    CscId,
    /// The CSC is empty.
    #[error("the CSC is empty")]
    Csc,
    /// A value is empty or holds a character that would break the URL (`&`, `#`, `=`, a space
    /// or a control character).
    #[error("the QR field {0} is empty or holds a character that breaks the URL")]
    Field(&'static str),
}

/// The `dCarQR` URL (plain `&`, not XML-escaped), ending in `&cHashQR=<64 lowercase hex>`.
pub fn qr_url(data: &QrData<'_>, csc: &Csc<'_>) -> Result<String, QrError> {
    if data.cdc.len() != 44 || !data.cdc.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(QrError::Cdc);
    }
    if csc.id.is_empty() || csc.id.len() > 4 || !csc.id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(QrError::CscId);
    }
    if csc.secret.is_empty() {
        return Err(QrError::Csc);
    }
    let (receiver_key, receiver) = match data.receiver {
        QrReceiver::Ruc(ruc) => ("dRucRec", ruc),
        QrReceiver::OtherId(id) => ("dNumIDRec", id),
    };
    // dFeEmiDE and DigestValue travel hex-encoded, so only their presence matters.
    for (name, value, raw) in [
        ("dFeEmiDE", data.emitted_at, false),
        (receiver_key, receiver, true),
        ("dTotGralOpe", data.total, true),
        ("dTotIVA", data.total_iva, true),
        ("DigestValue", data.digest_value, false),
    ] {
        if value.is_empty() || (raw && !url_safe(value)) {
            return Err(QrError::Field(name));
        }
    }

    let base = base_url(data.environment);
    let mut url = String::with_capacity(
        base.len() + 200 + 2 * (data.emitted_at.len() + data.digest_value.len()) + receiver.len(),
    );
    url.push_str(base);
    let params_start = url.len();
    for (key, value) in [("nVersion=", VERSION), ("&Id=", data.cdc)] {
        url.push_str(key);
        url.push_str(value);
    }
    url.push_str("&dFeEmiDE=");
    push_hex(&mut url, data.emitted_at.as_bytes());
    url.push('&');
    url.push_str(receiver_key);
    url.push('=');
    url.push_str(receiver);
    for (key, value) in [("&dTotGralOpe=", data.total), ("&dTotIVA=", data.total_iva)] {
        url.push_str(key);
        url.push_str(value);
    }
    url.push_str("&cItems=");
    url.push_str(&data.items.to_string());
    url.push_str("&DigestValue=");
    push_hex(&mut url, data.digest_value.as_bytes());
    url.push_str("&IdCSC=");
    for _ in csc.id.len()..4 {
        url.push('0');
    }
    url.push_str(csc.id);

    // cHashQR: the parameters up to IdCSC, then the CSC with no separator (§13.8.4).
    let hash = Sha256::new()
        .chain_update(&url.as_bytes()[params_start..])
        .chain_update(csc.secret.as_bytes())
        .finalize();
    url.push_str("&cHashQR=");
    push_hex(&mut url, hash.as_slice());
    Ok(url)
}

fn url_safe(value: &str) -> bool {
    !value
        .chars()
        .any(|c| matches!(c, '&' | '#' | '=' | ' ') || c.is_control())
}

/// Appends the lowercase hex of `bytes`.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_CSC: Csc<'static> = Csc {
        id: "0001",
        secret: "ABCD0000000000000000000000000000",
    };

    fn hash_of(url: &str) -> &str {
        url.rsplit_once("&cHashQR=").unwrap().1
    }

    #[test]
    fn the_manuals_example_gives_the_manuals_hash() {
        // Manual Técnico v150 §13.8: the manual prints only the hash and the
        // parameters; its URL is the production one.
        let url = qr_url(
            &QrData {
                environment: SifenEnvironment::Production,
                cdc: "01444444017001001001452822017012515873260988",
                emitted_at: "2017-01-25T09:35:17",
                receiver: QrReceiver::Ruc("88899990"),
                total: "300000",
                total_iva: "27272",
                items: 2,
                digest_value: "yzGYhUx1/XYYzksWB+fPR3Qc50c=",
            },
            &TEST_CSC,
        )
        .unwrap();
        assert_eq!(
            url,
            "https://ekuatia.set.gov.py/consultas/qr?nVersion=150\
             &Id=01444444017001001001452822017012515873260988\
             &dFeEmiDE=323031372d30312d32355430393a33353a3137&dRucRec=88899990\
             &dTotGralOpe=300000&dTotIVA=27272&cItems=2\
             &DigestValue=797a4759685578312f5859597a6b7357422b6650523351633530633d&IdCSC=0001\
             &cHashQR=97ddbb3c1e7d65af03a70ffe21f2b34846ab1c89e0566c35222086766b7374ed"
        );
    }

    #[test]
    fn the_generated_invoice_vector_gives_its_dcarqr() {
        // shared/sifen/vectors/generated/fe-signed-selfsigned-qr.xml (its dCarQR, unescaped).
        let url = qr_url(
            &QrData {
                environment: SifenEnvironment::Test,
                cdc: "01800695631001001000000122025011511234567899",
                emitted_at: "2025-01-15T10:00:00",
                receiver: QrReceiver::Ruc("80013884"),
                total: "165000",
                total_iva: "12619",
                items: 2,
                digest_value: "uoG1E/r8YgIS2nXO9e0N72x7ZEu2v5qbHfQAWM/N1Xw=",
            },
            &TEST_CSC,
        )
        .unwrap();
        assert_eq!(
            hash_of(&url),
            "0fedfee513c7d8ba9ffca53e046978064fd20a7ef907fef1fbb6a2a959833f68"
        );
        assert_eq!(
            url,
            "https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150\
             &Id=01800695631001001000000122025011511234567899\
             &dFeEmiDE=323032352d30312d31355431303a30303a3030&dRucRec=80013884\
             &dTotGralOpe=165000&dTotIVA=12619&cItems=2\
             &DigestValue=756f4731452f723859674953326e584f3965304e373278375a4575327635716248665141574d2f4e3158773d\
             &IdCSC=0001&cHashQR=0fedfee513c7d8ba9ffca53e046978064fd20a7ef907fef1fbb6a2a959833f68"
        );
    }

    #[test]
    fn an_anonymous_receiver_goes_as_dnumidrec_and_a_short_csc_id_is_padded() {
        // shared/sifen/vectors/generated/nc-signed-selfsigned-qr.xml.
        let url = qr_url(
            &QrData {
                environment: SifenEnvironment::Test,
                cdc: "05800695631001001000000222025011619876543217",
                emitted_at: "2025-01-16T09:00:00",
                receiver: QrReceiver::OtherId("0"),
                total: "110000",
                total_iva: "10000",
                items: 1,
                digest_value: "14Frz3CBipZIzXO+KG+o3KdNwC88cpfjhdRu6t8LCTQ=",
            },
            &Csc { id: "1", ..TEST_CSC },
        )
        .unwrap();
        assert!(url.contains("&dNumIDRec=0&dTotGralOpe=110000&"), "{url}");
        assert!(url.contains("&IdCSC=0001&"), "{url}");
        assert_eq!(
            hash_of(&url),
            "e48dfb07cbb1f43695b25c1e1277e0052b0ffb902f32339c883e9266cbe7ac55"
        );
    }

    #[test]
    fn the_csc_changes_the_hash_but_never_appears_in_the_url() {
        let data = QrData {
            environment: SifenEnvironment::Test,
            cdc: "01800695631001001000000122025011511234567899",
            emitted_at: "2025-01-15T10:00:00",
            receiver: QrReceiver::Ruc("80013884"),
            total: "165000",
            total_iva: "12619",
            items: 2,
            digest_value: "uoG1E/r8YgIS2nXO9e0N72x7ZEu2v5qbHfQAWM/N1Xw=",
        };
        let other = Csc {
            id: "0002",
            secret: "EFGH0000000000000000000000000000",
        };
        let a = qr_url(&data, &TEST_CSC).unwrap();
        let b = qr_url(&data, &other).unwrap();
        assert_ne!(hash_of(&a), hash_of(&b));
        assert!(!a.contains("ABCD") && !b.contains("EFGH"));
        assert!(!format!("{other:?}").contains("EFGH"));
        assert!((100..=600).contains(&a.len()), "dCarQR length {}", a.len());
    }

    #[test]
    fn malformed_inputs_are_refused() {
        let good = QrData {
            environment: SifenEnvironment::Test,
            cdc: "01800695631001001000000122025011511234567899",
            emitted_at: "2025-01-15T10:00:00",
            receiver: QrReceiver::OtherId("X 1"),
            total: "1",
            total_iva: "0",
            items: 1,
            digest_value: "uoG1E=",
        };
        assert_eq!(qr_url(&good, &TEST_CSC), Err(QrError::Field("dNumIDRec")));
        let good = QrData {
            receiver: QrReceiver::OtherId("0"),
            ..good
        };
        assert!(qr_url(&good, &TEST_CSC).is_ok());
        assert_eq!(
            qr_url(&QrData { cdc: "0180", ..good }, &TEST_CSC),
            Err(QrError::Cdc)
        );
        assert_eq!(
            qr_url(&QrData { total: "", ..good }, &TEST_CSC),
            Err(QrError::Field("dTotGralOpe"))
        );
        assert_eq!(
            qr_url(
                &good,
                &Csc {
                    id: "00001",
                    ..TEST_CSC
                }
            ),
            Err(QrError::CscId)
        );
        assert_eq!(
            qr_url(
                &good,
                &Csc {
                    secret: "",
                    ..TEST_CSC
                }
            ),
            Err(QrError::Csc)
        );
    }
}
