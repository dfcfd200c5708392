//! The autoimpresor channel's process manager (its numbering series).

use kuatia_domain::channel::AutoimpresorSettings;
use uuid::Uuid;

/// The number series of an autoimpresor range: company, timbrado, establishment, point and the
/// authorised range (never equal to a SIFEN series, which ends in the document type).
pub fn series_key(
    company_id: Uuid,
    settings: &AutoimpresorSettings,
    establishment: &str,
    point: &str,
) -> String {
    format!(
        "{company_id}:{}:{establishment}:{point}:autoimpresor:{}-{}",
        settings.timbrado, settings.range_start, settings.range_end
    )
}
