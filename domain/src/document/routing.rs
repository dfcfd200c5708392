//! Routing (docs/configuration.md): which channel, branch and issuance point a
//! document uses when it names them or not. Defaults are resolved by [`crate::defaults::resolve`],
//! the one place that rule lives; this module applies it to channels, branches and points.
//!
//! An `autoimpresor` channel prints at the branch and point it is authorised for, so it fixes
//! both; a `sifen` channel takes the company's branch and point defaults.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::issues::Issue;
use crate::channel::{BranchWithPoints, ChannelKind, EmissionChannel};
use crate::defaults::{Unresolved, resolve};

/// Code: an omitted choice with several candidates and not exactly one default.
pub const AMBIGUOUS_DEFAULT: &str = "ambiguous_default";
/// Code: nothing configured to choose from.
pub const MISSING_CONFIGURATION: &str = "missing_configuration";
/// Code: a named record that is not the company's (or not the channel's).
pub const UNKNOWN_REFERENCE: &str = "unknown_reference";

/// What the document asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requested {
    /// `branch_id`.
    pub branch_id: Option<Uuid>,
    /// `issuance_point_id`.
    pub issuance_point_id: Option<Uuid>,
    /// `channel`.
    pub channel: Option<ChannelKind>,
}

/// Where a document goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// Company.
    pub company_id: Uuid,
    /// Branch (establecimiento).
    pub branch_id: Uuid,
    /// Issuance point.
    pub issuance_point_id: Uuid,
    /// Channel kind.
    pub channel: ChannelKind,
    /// The configured channel record.
    pub channel_id: Uuid,
}

fn describe<T>(what: &str, field: &str, err: &Unresolved<T>) -> Issue {
    match err {
        Unresolved::Unknown(_) => Issue::new(
            field,
            UNKNOWN_REFERENCE,
            format!("the {what} named is not one of the company's"),
        ),
        Unresolved::Missing => Issue::new(field, MISSING_CONFIGURATION, format!("the company has no {what}")),
        Unresolved::Ambiguous(c) => Issue::new(
            field,
            AMBIGUOUS_DEFAULT,
            format!(
                "{} candidates for the {what} and not exactly one marked is_default: name one in {field}",
                c.len()
            ),
        ),
    }
}

/// Resolves the routing of a document of `company_id`, or says every reason it cannot.
pub fn route(
    company_id: Uuid,
    requested: Requested,
    channels: &[EmissionChannel],
    branches: &[BranchWithPoints],
) -> Result<Routing, Vec<Issue>> {
    let candidates: Vec<(Uuid, bool)> = channels
        .iter()
        .filter(|c| requested.channel.is_none_or(|kind| c.kind == kind))
        .map(|c| (c.channel_id, c.is_default))
        .collect();
    let channel_what = match requested.channel {
        Some(kind) => format!("{} channel", kind.as_str()),
        None => "emission channel".to_owned(),
    };
    let channel = resolve(None, &candidates)
        .map_err(|e| vec![describe(&channel_what, "channel", &e)])
        .and_then(|id| {
            channels.iter().find(|c| c.channel_id == id).ok_or_else(|| {
                vec![Issue::new(
                    "channel",
                    MISSING_CONFIGURATION,
                    "the channel vanished",
                )]
            })
        })?;

    let (branch_id, issuance_point_id) = match &channel.autoimpresor {
        Some(a) => {
            let mut issues = Vec::new();
            if requested.branch_id.is_some_and(|b| b != a.branch_id) {
                issues.push(Issue::new(
                    "branch_id",
                    UNKNOWN_REFERENCE,
                    "the autoimpresor channel prints only at the branch it is authorised for",
                ));
            }
            if requested
                .issuance_point_id
                .is_some_and(|p| p != a.issuance_point_id)
            {
                issues.push(Issue::new(
                    "issuance_point_id",
                    UNKNOWN_REFERENCE,
                    "the autoimpresor channel prints only at the issuance point it is authorised for",
                ));
            }
            if !issues.is_empty() {
                return Err(issues);
            }
            (a.branch_id, a.issuance_point_id)
        }
        None => {
            let branch_candidates: Vec<(Uuid, bool)> = branches.iter().map(|(id, d, _)| (*id, *d)).collect();
            let branch = resolve(requested.branch_id, &branch_candidates)
                .map_err(|e| vec![describe("branch", "branch_id", &e)])?;
            let points = branches
                .iter()
                .find(|(id, _, _)| *id == branch)
                .map(|(_, _, p)| p.as_slice())
                .unwrap_or_default();
            let point = resolve(requested.issuance_point_id, points)
                .map_err(|e| vec![describe("issuance point", "issuance_point_id", &e)])?;
            (branch, point)
        }
    };
    Ok(Routing {
        company_id,
        branch_id,
        issuance_point_id,
        channel: channel.kind,
        channel_id: channel.channel_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{AutoimpresorSettings, SifenEnvironment, SifenSettings};
    use chrono::NaiveDate;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn sifen(n: u128, default: bool) -> EmissionChannel {
        EmissionChannel {
            channel_id: id(n),
            kind: ChannelKind::Sifen,
            is_default: default,
            endpoint: "http://127.0.0.1:8082".into(),
            client_id: None,
            credentials_secret_id: None,
            sifen: Some(SifenSettings {
                environment: SifenEnvironment::Test,
                timbrado: "12345678".into(),
                timbrado_valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).unwrap_or_default(),
                csc_id: "1".into(),
                certificate_id: id(90),
                csc_secret_id: id(91),
                remision_notice: None,
            }),
            autoimpresor: None,
        }
    }

    fn printer(n: u128, branch: u128, point: u128) -> EmissionChannel {
        EmissionChannel {
            channel_id: id(n),
            kind: ChannelKind::Autoimpresor,
            is_default: false,
            endpoint: "http://127.0.0.1:8082/autoimpresor".into(),
            client_id: None,
            credentials_secret_id: None,
            sifen: None,
            autoimpresor: Some(AutoimpresorSettings {
                authorization: "A".into(),
                declared_software: None,
                timbrado: "87654321".into(),
                valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).unwrap_or_default(),
                valid_to: NaiveDate::from_ymd_opt(2026, 12, 31).unwrap_or_default(),
                branch_id: id(branch),
                issuance_point_id: id(point),
                range_start: 1,
                range_end: 10,
                next_number: 1,
            }),
        }
    }

    fn codes(result: Result<Routing, Vec<Issue>>) -> Vec<(String, String)> {
        result
            .expect_err("refused")
            .into_iter()
            .map(|i| (i.field, i.code))
            .collect()
    }

    #[test]
    fn a_single_channel_branch_and_point_need_no_defaults() {
        let branches = vec![(id(10), false, vec![(id(20), false)])];
        let routing = route(id(1), Requested::default(), &[sifen(5, false)], &branches).expect("routed");
        assert_eq!(
            (routing.channel_id, routing.branch_id, routing.issuance_point_id),
            (id(5), id(10), id(20))
        );
    }

    #[test]
    fn several_channels_need_a_default_or_a_named_kind() {
        let branches = vec![(id(10), false, vec![(id(20), false)])];
        let both = [sifen(5, false), printer(6, 10, 20)];
        assert_eq!(
            codes(route(id(1), Requested::default(), &both, &branches)),
            vec![("channel".to_owned(), AMBIGUOUS_DEFAULT.to_owned())]
        );
        let asked = Requested {
            channel: Some(ChannelKind::Autoimpresor),
            ..Requested::default()
        };
        assert_eq!(
            route(id(1), asked, &both, &branches).expect("routed").channel_id,
            id(6)
        );
        let with_default = [sifen(5, true), printer(6, 10, 20)];
        assert_eq!(
            route(id(1), Requested::default(), &with_default, &branches)
                .expect("routed")
                .channel,
            ChannelKind::Sifen
        );
        assert_eq!(
            codes(route(id(1), Requested::default(), &[], &branches)),
            vec![("channel".to_owned(), MISSING_CONFIGURATION.to_owned())]
        );
    }

    #[test]
    fn branches_and_points_resolve_by_default_and_refuse_strangers() {
        let branches = vec![
            (id(10), false, vec![(id(20), false), (id(21), true)]),
            (id(11), false, vec![(id(22), false)]),
        ];
        assert_eq!(
            codes(route(id(1), Requested::default(), &[sifen(5, false)], &branches)),
            vec![("branch_id".to_owned(), AMBIGUOUS_DEFAULT.to_owned())]
        );
        let named = Requested {
            branch_id: Some(id(10)),
            ..Requested::default()
        };
        assert_eq!(
            route(id(1), named, &[sifen(5, false)], &branches)
                .expect("routed")
                .issuance_point_id,
            id(21),
            "the branch's default point"
        );
        let stranger = Requested {
            branch_id: Some(id(10)),
            issuance_point_id: Some(id(22)),
            ..Requested::default()
        };
        assert_eq!(
            codes(route(id(1), stranger, &[sifen(5, false)], &branches)),
            vec![("issuance_point_id".to_owned(), UNKNOWN_REFERENCE.to_owned())]
        );
    }

    #[test]
    fn an_autoimpresor_channel_fixes_its_branch_and_point() {
        let branches = vec![
            (id(10), false, vec![(id(20), false)]),
            (id(11), false, vec![(id(22), false)]),
        ];
        let routing = route(id(1), Requested::default(), &[printer(6, 11, 22)], &branches).expect("routed");
        assert_eq!((routing.branch_id, routing.issuance_point_id), (id(11), id(22)));
        let elsewhere = Requested {
            branch_id: Some(id(10)),
            ..Requested::default()
        };
        assert_eq!(
            codes(route(id(1), elsewhere, &[printer(6, 11, 22)], &branches)),
            vec![("branch_id".to_owned(), UNKNOWN_REFERENCE.to_owned())]
        );
    }
}
