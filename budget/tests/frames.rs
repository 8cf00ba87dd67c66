//! Frames of every budget table: full schema, also with zero rows.
#![cfg(feature = "frames")]

use xlens_budget::precision::{AuditSpec, Distribution, Scheme, accumulation_drift, audit_matmul};
use xlens_budget::{Budget, Model, Optimizer, Recipe, Workload, fit_table, frame};
use xlens_chips::ChipSpec;

#[test]
fn every_table_has_a_frame() {
    let chips: Vec<_> = ["v5e", "v6e"].into_iter().map(|c| ChipSpec::by_name(c).unwrap()).collect();
    let work = [("adam".to_owned(), Workload::train(Recipe::MixedBf16, Optimizer::Adam, 2048, 1))];
    let rows = fit_table(&Model::from_params(7_000_000_000).unwrap(), &work, &chips, Budget::default()).unwrap();
    let df = frame::fit_frame(&rows).unwrap();
    assert_eq!((df.height(), df.width()), (2, 15));
    let min = df.column("min_chips").unwrap().u64().unwrap();
    assert_eq!(min.get(0), Some(9));
    assert_eq!(min.get(1), Some(5));
    assert_eq!(df.column("state_bytes").unwrap().u64().unwrap().get(0), Some(112_000_000_000));
    let plans: Vec<_> = rows.iter().map(|r| r.plan).collect();
    assert_eq!(frame::plans_frame(&plans).unwrap().width(), 15);

    let audits = audit_matmul(&AuditSpec::normal(16, 64, 16, 1), &Scheme::ALL).unwrap();
    let df = frame::audit_frame(&audits).unwrap();
    assert_eq!((df.height(), df.width()), (3, 12));
    assert_eq!(df.column("estimate").unwrap().null_count(), 2);
    let drift = accumulation_drift(&[64, 1024], &Distribution::unit_uniform(), 1, 1).unwrap();
    let df = frame::drift_frame(&drift).unwrap();
    assert_eq!((df.height(), df.width()), (4, 5));
    assert_eq!(df.column("bound").unwrap().null_count(), 1); // bf16 at K = 1024

    // Zero rows keep the schema.
    assert_eq!(frame::fit_frame(&[]).unwrap().width(), 15);
    assert_eq!(frame::audit_frame(&[]).unwrap().width(), 12);
    assert_eq!(frame::drift_frame(&[]).unwrap().width(), 5);
    assert_eq!(frame::plans_frame(&[]).unwrap().height(), 0);
}
