//! Step anatomy: every step's partition sums to its step time exactly, and agrees with the op
//! profile's self times class by class.

mod common;

use common::tpu_fixture_dirs;
use xlens_roofline::{OpProfile, Steps, TimeClass, class_of, tpu_anatomy};
use xlens_xplane::Picos;

#[test]
fn tpu_anatomy_sums_to_step_time_and_matches_op_self_times() {
    for dir in tpu_fixture_dirs() {
        let session = xlens_testkit::open_session(&dir).unwrap();
        let space = session.hosts()[0].space();
        let steps = Steps::from_space(space).unwrap();
        let anatomy = tpu_anatomy(space, &steps).unwrap();
        assert_eq!(anatomy.len(), steps.steps.len());
        for (a, s) in anatomy.iter().zip(&steps.steps) {
            assert_eq!(a.sum(), s.duration, "{} step {}", dir.display(), s.name);
            assert_eq!(a.step_time, s.duration);
        }
        // Class totals over every core and step equal the op profile's self times per class
        // (every op of these fixtures runs inside a step). The per-step mean over cores rounds
        // down, so allow one picosecond per core and step.
        let profile = OpProfile::from_tpu(space).unwrap();
        let cores = steps.steps[0].cores.len() as i64;
        let slack = Picos(cores * steps.steps.len() as i64);
        for class in [TimeClass::Matmul, TimeClass::Vector, TimeClass::DataFormatting, TimeClass::InfeedOutfeed] {
            let from_ops: Picos = profile
                .ops
                .iter()
                .filter(|o| o.category != "while" && class_of(&o.category) == class)
                .map(|o| o.self_time)
                .sum();
            // `while` overhead is vector work in the anatomy.
            let overhead: Picos = if class == TimeClass::Vector {
                profile.ops.iter().filter(|o| o.category == "while").map(|o| o.self_time).sum()
            } else {
                Picos::ZERO
            };
            let from_anatomy = Picos(anatomy.iter().map(|a| a.get(class).0 * cores).sum());
            let diff = (from_ops + overhead - from_anatomy).0.abs();
            assert!(diff <= slack.0, "{} {class:?}: ops {from_ops:?} anatomy {from_anatomy:?}", dir.display());
        }
        // The async all-gather overlaps one fusion: hidden time is that fusion's time.
        let overlapped = profile.ops.iter().find(|o| o.name == "fusion.6").unwrap().self_time;
        let hidden = Picos(anatomy.iter().map(|a| a.collective_hidden.0 * cores).sum());
        assert!((overlapped - hidden).0.abs() <= slack.0, "{}: hidden {hidden:?} vs {overlapped:?}", dir.display());
        let exposed_ops: Picos = profile
            .ops
            .iter()
            .filter(|o| class_of(&o.category) == TimeClass::CollectiveExposed)
            .map(|o| o.self_time)
            .sum();
        let exposed = Picos(anatomy.iter().map(|a| a.collective_exposed.0 * cores).sum());
        assert!(
            (exposed_ops - exposed).0.abs() <= slack.0,
            "{}: exposed {exposed:?} vs {exposed_ops:?}",
            dir.display()
        );
    }
}
