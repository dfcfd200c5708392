//! Every projection of the service, in one list that the composition root, the runtime and the
//! `kuatia projections` commands share.

use kuatia_application::event_store::ProjectionKind;
use kuatia_application::projection::Projection;
use std::sync::Arc;

use crate::access::Access;
use crate::configuration::Configuration;
use crate::documents::Documents;
use crate::event_type_counts::EventTypeCounts;
use crate::number_series::NumberSeries;
use crate::sifen_answers::SifenAnswers;
use crate::stream_index::StreamIndex;
use crate::webhook_fanout::WebhookFanout;
use crate::webhooks::Webhooks;

/// All projections.
pub fn all() -> Vec<Arc<dyn Projection>> {
    vec![
        Arc::new(StreamIndex),
        Arc::new(Access),
        Arc::new(Configuration),
        Arc::new(Documents),
        Arc::new(NumberSeries),
        Arc::new(EventTypeCounts),
        Arc::new(SifenAnswers),
        Arc::new(Webhooks),
        Arc::new(WebhookFanout),
    ]
}

/// The inline ones (handed to the store, which runs them in the append transaction).
pub fn inline() -> Vec<Arc<dyn Projection>> {
    all()
        .into_iter()
        .filter(|p| p.kind() == ProjectionKind::Inline)
        .collect()
}

/// The catch-up ones, pure and with side effects (run by the subscription runtime).
pub fn subscriptions() -> Vec<Arc<dyn Projection>> {
    all()
        .into_iter()
        .filter(|p| p.kind() != ProjectionKind::Inline)
        .collect()
}

/// Finds one by name.
pub fn by_name(name: &str) -> Option<Arc<dyn Projection>> {
    all().into_iter().find(|p| p.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_names_are_unique_and_tables_are_not_shared() {
        let all = all();
        let names: std::collections::BTreeSet<_> = all.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), all.len());
        let tables: Vec<_> = all.iter().flat_map(|p| p.tables().iter().copied()).collect();
        let distinct: std::collections::BTreeSet<_> = tables.iter().collect();
        assert_eq!(
            distinct.len(),
            tables.len(),
            "a rebuild of one projection must not empty another's table"
        );
    }
}
