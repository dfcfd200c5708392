//! kuatia's integration tests: one binary (link time on 2 cores), one module per area.
//! Every test gets a fresh database; set `KUATIA_TEST_POSTGRES_URL` to run them on PostgreSQL.

mod access;
mod api;
mod architecture;
mod artifacts;
mod audit;
mod autoimpresor;
mod autoimpresor_scenarios;
mod certificates;
mod companies;
mod delivery_scenarios;
mod documents;
mod examples;
mod executor;
mod first_hour;
mod hand_delivery;
mod identity;
mod jobs;
mod lookup;
mod observability;
mod ordering;
mod printables;
mod projections;
mod rate_limits;
mod sandbox;
mod scenario_support;
mod sifen_answers;
mod sifen_lots;
mod sifen_pipeline;
mod sifen_rules;
mod sifen_scenarios;
mod sifen_soap;
mod sifen_xml;
mod store;
mod webhooks;
