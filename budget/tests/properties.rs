//! Properties of HBM plans: totals add up, footprints are monotone in batch, sequence and
//! parameters, and more chips never need more bytes per chip.

use proptest::prelude::*;
use xlens_budget::{
    Attention, Budget, DType, Model, Optimizer, Plan, PlanRequest, Recipe, Remat, Sharding, StateBytes, Transformer,
    Workload, footprint, max_batch, min_chips,
};
use xlens_chips::{Bytes, ChipSpec};

fn shape() -> impl Strategy<Value = Transformer> {
    (1u64..48, 1u64..16, prop_oneof![Just(64u64), Just(128)], 0u32..4, 1u64..5, any::<bool>(), 0u64..100_000).prop_map(
        |(layers, kv, head_dim, group_log2, ffn_mult, gated, vocab)| {
            let heads = kv << group_log2;
            let hidden = heads * head_dim;
            Transformer::new(layers, hidden, heads)
                .and_then(|t| t.with_kv_heads(kv))
                .and_then(|t| t.with_ffn(hidden * ffn_mult, gated))
                .map(|t| t.with_vocab(vocab))
                .expect("valid shape")
        },
    )
}

fn workload() -> impl Strategy<Value = Workload> {
    let recipe = prop_oneof![Just(Recipe::Fp32), Just(Recipe::MixedBf16), Just(Recipe::PureBf16)];
    let optimizer =
        prop_oneof![Just(Optimizer::Adam), Just(Optimizer::Adafactor), Just(Optimizer::Lion), Just(Optimizer::Sgd)];
    let remat = prop_oneof![Just(Remat::None), Just(Remat::Full), Just(Remat::DotsSaveable)];
    let attention = prop_oneof![Just(Attention::Materialized), Just(Attention::Flash)];
    let dtype = prop_oneof![Just(DType::F32), Just(DType::Bf16), Just(DType::Int8), Just(DType::Fp8)];
    let kv = prop_oneof![Just(None), dtype.clone().prop_map(Some)];
    prop_oneof![
        (recipe, optimizer, 1u64..8192, 1u64..256, remat, attention, kv).prop_map(
            |(recipe, optimizer, seq, batch, remat, attention, kv)| {
                Workload::train(recipe, optimizer, seq, batch)
                    .with_remat(remat)
                    .with_attention(attention)
                    .with_kv_cache(kv)
            }
        ),
        (dtype.clone(), dtype, 1u64..32768, 1u64..256)
            .prop_map(|(w, kv, seq, batch)| Workload::serve(w, kv, seq, batch)),
    ]
}

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![
        shape().prop_map(|s| Model::from_shape(s).unwrap()),
        (1u64..1_000_000_000_000).prop_map(|p| Model::from_params(p).unwrap()),
    ]
}

fn sharding() -> impl Strategy<Value = Sharding> {
    (1u64..8, 1u64..16, 1u64..8, 1u64..4).prop_map(|(data, fsdp, tensor, pipeline)| Sharding {
        data,
        fsdp,
        tensor,
        pipeline,
    })
}

proptest! {
    #[test]
    fn totals_add_up(m in model(), w in workload(), s in sharding()) {
        let per_param = w.state_bytes_per_param();
        let StateBytes { weights, gradients, master, optimizer } = per_param;
        prop_assert_eq!(per_param.total(), weights + gradients + master + optimizer);
        let whole = footprint(&m, &w, &Sharding::default()).unwrap();
        prop_assert_eq!(whole.state.as_u64(), m.params * per_param.total());
        prop_assert_eq!(whole.total().as_u64(), whole.state.as_u64() + whole.activations.as_u64() + whole.kv_cache.as_u64());
        // Serving holds no activations; without a KV cache type there is no KV cache.
        if !w.is_training() {
            prop_assert_eq!(whole.activations, Bytes(0));
        }
        if w.kv_cache.is_none() {
            prop_assert_eq!(whole.kv_cache, Bytes(0));
        }
        // Sharded state is the whole state split evenly, rounded up.
        let per_chip = footprint(&m, &w, &s).unwrap();
        let ways = s.fsdp * s.tensor * s.pipeline;
        prop_assert_eq!(per_chip.state.as_u64(), whole.state.as_u64().div_ceil(ways));
        prop_assert!(per_chip.total() <= whole.total());
    }

    #[test]
    fn monotone_in_batch_and_sequence(m in model(), w in workload(), s in sharding(), db in 0u64..64, ds in 0u64..1024) {
        let base = footprint(&m, &w, &s).unwrap().total();
        prop_assert!(footprint(&m, &w.with_batch(w.batch + db), &s).unwrap().total() >= base);
        prop_assert!(footprint(&m, &w.with_seq(w.seq + ds), &s).unwrap().total() >= base);
    }

    #[test]
    fn monotone_in_params(p in 1u64..1_000_000_000_000, dp in 0u64..1_000_000_000, w in workload(), s in sharding()) {
        let a = footprint(&Model::from_params(p).unwrap(), &w, &s).unwrap();
        let b = footprint(&Model::from_params(p + dp).unwrap(), &w, &s).unwrap();
        prop_assert!(b.total() >= a.total());
        // And for shapes: one more layer never needs less.
        let t = Transformer::llama2_7b();
        let deeper = Transformer { layers: t.layers + 1, ..t };
        let small = footprint(&Model::from_shape(t).unwrap(), &w, &s).unwrap();
        let big = footprint(&Model::from_shape(deeper).unwrap(), &w, &s).unwrap();
        prop_assert!(big.total() >= small.total());
    }

    #[test]
    fn more_chips_never_need_more_per_chip(m in model(), w in workload(), n in 1u64..4096, extra in 0u64..4096) {
        let a = footprint(&m, &w, &w.default_sharding(n)).unwrap();
        let b = footprint(&m, &w, &w.default_sharding(n + extra)).unwrap();
        prop_assert!(b.total() <= a.total());
        prop_assert!(b.state <= a.state && b.activations <= a.activations && b.kv_cache <= a.kv_cache);
    }

    #[test]
    fn min_chips_is_the_threshold(m in model(), w in workload(), chip in 0usize..10, budget in 0.5..1.0f64) {
        let spec = &xlens_chips::CATALOGUE[chip];
        let usable = Budget::new(budget).unwrap().usable(spec.hbm_capacity);
        if let Some(n) = min_chips(&m, &w, usable).unwrap() {
            prop_assert!(footprint(&m, &w, &w.default_sharding(n)).unwrap().total() <= usable);
            if n > 1 {
                prop_assert!(footprint(&m, &w, &w.default_sharding(n - 1)).unwrap().total() > usable);
            }
            let plan = Plan::new(&PlanRequest { model: m, workload: w, chip: spec, budget: Budget::new(budget).unwrap(), sharding: None }).unwrap();
            prop_assert!(plan.fits && plan.chips == n && plan.headroom() >= 0);
        }
    }

    #[test]
    fn max_batch_is_the_threshold(m in model(), w in workload(), s in sharding(), gib in 1u64..200) {
        let usable = Bytes(gib << 30);
        if let Some(b) = max_batch(&m, &w, &s, usable).unwrap() {
            prop_assert!(footprint(&m, &w.with_batch(b), &s).unwrap().total() <= usable);
            if b < xlens_budget::MAX_BATCH {
                let next = footprint(&m, &w.with_batch(b + 1), &s);
                prop_assert!(next.map_or(true, |f| f.total() > usable));
            }
        } else {
            prop_assert!(footprint(&m, &w.with_batch(1), &s).unwrap().total() > usable);
        }
    }
}

#[test]
fn catalogue_capacities_order_min_chips() {
    // The same model needs fewer chips on chips with more HBM.
    let model = Model::from_params(70_000_000_000).unwrap();
    let w = Workload::train(Recipe::MixedBf16, Optimizer::Adam, 2048, 1);
    let mut by_capacity: Vec<_> = xlens_chips::CATALOGUE.iter().collect();
    by_capacity.sort_by_key(|c| c.hbm_capacity);
    let mins: Vec<u64> = by_capacity
        .iter()
        .map(|c| min_chips(&model, &w, Budget::default().usable(c.hbm_capacity)).unwrap().unwrap())
        .collect();
    assert!(mins.windows(2).all(|p| p[1] <= p[0]), "{mins:?}");
    assert_eq!(ChipSpec::by_name("v7").unwrap().hbm_capacity, Bytes(192 << 30));
}
