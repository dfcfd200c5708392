//! Schema validation of what the simulator receives (every DE must be
//! valid against SIFEN's XSD), with `xmllint` (Debian's `libxml2-utils`), the tool the test suite
//! already uses: `xmllint --noout --nonet --schema DIR/siRecepDE_v150.xsd -`. The
//! schemas' includes and imports are all local, so `--nonet` never costs anything; a run takes
//! a few tens of milliseconds.
//!
//! SIFEN's answer to a document that breaks its schema: the 2024 guide shows it as
//! `0160` "XML malformado: [El valor del elemento: dDirRec es invalido…]" (GMP p.11), the code it answers today; the 2019 manual's 0100 "Fallo de schema XML del área
//! de datos" is not what SIFEN is seen to send. The message carries xmllint's first complaint.

use super::SimError;
use super::checks::Code;
use crate::sifen_soap::SIFEN_NS;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The entry point of a DE (`rDE`).
pub const DE_SCHEMA: &str = "siRecepDE_v150.xsd";
/// The entry point of an event group (`gGroupGesEve`).
pub const EVENT_SCHEMA: &str = "siRecepEvento_v150.xsd";

/// Checks at start that `dir` holds the schemas and that xmllint runs, so that a missing tool
/// is a startup error and not a rejection of every document.
pub fn check_setup(dir: &Path) -> Result<(), SimError> {
    for schema in [DE_SCHEMA, EVENT_SCHEMA, "xmldsig-core-schema.xsd"] {
        let path = dir.join(schema);
        if !path.is_file() {
            return Err(SimError::Config(format!(
                "the XSD folder {} has no {schema} (expected SIFEN's v150 schemas)",
                dir.display()
            )));
        }
    }
    match Command::new("xmllint")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(SimError::Config(format!(
            "XSD validation needs xmllint (Debian: apt-get install libxml2-utils): {e}"
        ))),
    }
}

/// Validates `xml` (one standalone document) against `dir/schema`. `Err` is SIFEN's answer:
/// 0160 with the first complaint, or 0161 when xmllint itself could not run.
pub fn validate(dir: &Path, schema: &str, xml: &str) -> Result<(), Code> {
    let schema_path: PathBuf = dir.join(schema);
    let unavailable = |e: &dyn std::fmt::Display| {
        tracing::error!(error = %e, "the SIFEN simulator could not run xmllint");
        Code::new(
            crate::sifen_soap::codes::SERVER_UNAVAILABLE,
            "Servidor de procesamiento momentáneamente sin respuesta",
        )
    };
    let mut child = Command::new("xmllint")
        .arg("--noout")
        .arg("--nonet")
        .arg("--schema")
        .arg(&schema_path)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| unavailable(&e))?;
    // Written from another thread: xmllint may fill its stderr before it reads all its input.
    let mut stdin = child.stdin.take().ok_or_else(|| unavailable(&"no stdin"))?;
    let input = xml.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let output = child.wait_with_output().map_err(|e| unavailable(&e))?;
    let _ = writer.join();
    match output.status.code() {
        Some(0) => Ok(()),
        // 1: not well-formed; 3: schema validity error.
        Some(1 | 3) => Err(Code::new(
            crate::sifen_soap::codes::MALFORMED,
            format!(
                "XML malformado: [{}]",
                first_complaint(&String::from_utf8_lossy(&output.stderr))
            ),
        )),
        // 4, 5: the schema itself did not load; anything else: xmllint failed.
        _ => Err(unavailable(&format!(
            "xmllint exited with {:?} on {}: {}",
            output.status.code(),
            schema_path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

/// xmllint's first error line, without the `-:LINE: element X: Schemas validity error :`
/// preamble and with SIFEN's namespace left out of the names.
fn first_complaint(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| stderr.lines().next())
        .unwrap_or("el documento no cumple el schema");
    let detail = line
        .split_once("validity error : ")
        .or_else(|| line.split_once("parser error : "))
        .map_or(line, |(_, d)| d);
    detail.replace(&format!("{{{SIFEN_NS}}}"), "").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> Option<PathBuf> {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        std::env::var_os("SIFEN_XSD_DIR")
            .map(PathBuf::from)
            .into_iter()
            .chain([
                here.join("../shared/sifen/xsd/v150"),
                here.join("vendor/sifen/xsd/v150"),
            ])
            .find(|d| d.join(DE_SCHEMA).is_file())
    }

    #[test]
    fn the_signed_vector_validates_and_a_missing_element_is_a_0160_naming_it() {
        let dir = dir().expect("SIFEN's XSD (shared/sifen/xsd/v150 or vendor/sifen/xsd/v150)");
        check_setup(&dir).expect("xmllint and the schemas");
        let fe = include_str!("fixtures/fe-signed-selfsigned-qr.xml");
        validate(&dir, DE_SCHEMA, fe).expect("the vector validates");
        let broken = fe.replacen("<dSisFact>1</dSisFact>", "", 1);
        let code = validate(&dir, DE_SCHEMA, &broken).unwrap_err();
        assert_eq!(code.code, "0160");
        assert!(
            code.message.starts_with("XML malformado: [Element 'gOpeDE'")
                && code.message.contains("dSisFact"),
            "{}",
            code.message
        );
        let code = validate(&dir, DE_SCHEMA, "<rDE").unwrap_err();
        assert_eq!(code.code, "0160", "{}", code.message);
    }

    #[test]
    fn a_folder_without_the_schemas_is_a_configuration_error() {
        assert!(matches!(
            check_setup(Path::new("/nonexistent")),
            Err(SimError::Config(_))
        ));
    }
}
