//! Hand-checked HBM plans: training state, activations, KV caches, minimum chip counts, maximum
//! batches, the plan-vs-profile check and typed errors.

use xlens_budget::{
    ActivationConfig, Attention, Budget, DType, KvShape, MemorySource, Model, Optimizer, Plan, PlanRequest,
    ProfileMemory, Recipe, Remat, Sharding, StateBytes, Transformer, Verdict, Workload, check_plan, fit_table,
    footprint, max_batch, parse,
};
use xlens_chips::{Bytes, ChipSpec};

fn chip(id: &str) -> &'static ChipSpec {
    ChipSpec::by_name(id).unwrap()
}

fn plan(model: Model, workload: Workload, chip_id: &str) -> Plan {
    Plan::new(&PlanRequest { model, workload, chip: chip(chip_id), budget: Budget::default(), sharding: None }).unwrap()
}

fn train(recipe: Recipe, remat: Remat, attention: Attention, seq: u64, batch: u64) -> Workload {
    Workload::train(recipe, Optimizer::Adam, seq, batch).with_remat(remat).with_attention(attention)
}

const GIB: u64 = 1 << 30;

#[test]
fn seven_b_adam_fp32_vs_mixed_bf16_state() {
    let model = Model::from_params(7_000_000_000).unwrap();
    let fp32 = plan(model, Workload::train(Recipe::Fp32, Optimizer::Adam, 4096, 1), "v5p");
    let mixed = plan(model, Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 1), "v5p");
    // fp32: 4 (weights) + 4 (gradients) + 8 (two f32 moments) = 16 bytes per parameter.
    assert_eq!(fp32.bytes_per_param, StateBytes { weights: 4, gradients: 4, master: 0, optimizer: 8 });
    // mixed bf16: 2 + 2 + 4 (f32 master copy) + 8 = 16 bytes: the same state (ZeRO accounting).
    assert_eq!(mixed.bytes_per_param, StateBytes { weights: 2, gradients: 2, master: 4, optimizer: 8 });
    assert_eq!(fp32.total.state, Bytes(112_000_000_000));
    assert_eq!(mixed.total.state, Bytes(112_000_000_000));
    assert!((fp32.total.state.as_gib() - 104.31).abs() < 0.005);
    // Other recipes and optimizers.
    let state = |r, o| StateBytes::training(r, o).total() * 7_000_000_000;
    assert_eq!(state(Recipe::PureBf16, Optimizer::Adam), 56_000_000_000);
    assert_eq!(state(Recipe::Fp32, Optimizer::Adafactor), 56_000_000_000);
    assert_eq!(state(Recipe::MixedBf16, Optimizer::Sgd), 56_000_000_000);
    assert_eq!(state(Recipe::Fp32, Optimizer::Lion), 84_000_000_000);
    assert_eq!(StateBytes::serving(DType::Int8).total(), 1);
}

#[test]
fn minimum_chips_for_seven_b_mixed_adam_at_80_percent() {
    let model = Model::from_params(7_000_000_000).unwrap();
    let work = Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 1);
    // v5e: 16 GiB × 0.8 = 13,743,895,347 usable bytes; 112e9 / 8 = 14.0e9 does not fit, / 9 = 12.4e9 does.
    let v5e = plan(model, work, "v5e");
    assert_eq!(v5e.usable, Bytes(13_743_895_347));
    assert_eq!((v5e.min_chips, v5e.chips, v5e.fits), (Some(9), 9, true));
    assert_eq!(v5e.per_chip.state, Bytes(12_444_444_445));
    // v5p (95 GiB): 2 chips; v6e (32 GiB): 5 chips (112e9 / 4 = 28.0e9 > 27.5e9).
    assert_eq!(plan(model, work, "v5p").min_chips, Some(2));
    assert_eq!(plan(model, work, "v6e").min_chips, Some(5));
    // A tighter budget needs more chips.
    let tight = Plan::new(&PlanRequest {
        model,
        workload: work,
        chip: chip("v5e"),
        budget: Budget::new(0.5).unwrap(),
        sharding: None,
    })
    .unwrap();
    assert_eq!(tight.min_chips, Some(14)); // 112e9 / 8,589,934,592 = 13.04
}

#[test]
fn llama_kv_caches() {
    // 2 · layers · kv_heads · head_dim · seq · batch · bytes.
    let l7 = Transformer::llama2_7b();
    assert_eq!(l7.kv_cache_bytes(4096, 1, DType::Bf16).unwrap(), 2 * GIB); // 2·32·32·128·4096·2
    let l70 = Transformer::llama2_70b(); // GQA: 8 KV heads for 64 query heads
    assert_eq!(l70.kv_cache_bytes(4096, 1, DType::Bf16).unwrap(), 1_342_177_280); // 1.25 GiB
    assert_eq!(l70.kv_cache_bytes(4096, 8, DType::Bf16).unwrap(), 10 * GIB);
    assert_eq!(l70.kv_cache_bytes(4096, 8, DType::Int8).unwrap(), 5 * GIB);
    assert_eq!(Transformer::llama3_8b().kv_cache_bytes(8192, 1, DType::Bf16).unwrap(), GIB);
    // MQA: one KV head is 1/32 of multi-head.
    let mqa = l7.with_kv_heads(1).unwrap();
    assert_eq!(mqa.kv_cache_bytes(4096, 1, DType::Bf16).unwrap(), 64 << 20);
}

#[test]
fn serving_llama2_70b_on_v5e() {
    let model = Model::from_shape(Transformer::llama2_70b()).unwrap();
    let p = plan(model, Workload::serve(DType::Bf16, DType::Bf16, 4096, 8), "v5e");
    assert_eq!(p.total.state, Bytes(137_953_296_384)); // 68,976,648,192 bf16 weights
    assert_eq!(p.total.kv_cache, Bytes(10 * GIB));
    assert_eq!(p.total.activations, Bytes(0));
    // Tensor parallel over n: weights / n + ceil(8 / n) of 8 KV heads; 11 chips hold 13.88e9 > 13.74e9.
    assert_eq!(p.min_chips, Some(12));
    assert_eq!(p.sharding, Sharding::tensor(12));
    assert_eq!(p.per_chip.kv_cache, Bytes(1_342_177_280));
}

#[test]
fn kv_cache_from_params_and_kv_dims_alone() {
    // `hbm_plan --params 7e9 --optimizer adam --layers 32 --kv-heads 32 --head-dim 128 --seq 4096
    // --batch 1 --kv-dtype bf16`: training state plus a KV cache (sampling during RL training);
    // no activations without the full shape.
    let model = Model::from_params(7_000_000_000).unwrap().with_kv(KvShape::new(32, 32, 128).unwrap());
    let work = Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 1).with_kv_cache(Some(DType::Bf16));
    let p = plan(model, work, "v5e");
    assert_eq!(
        (p.total.state, p.total.activations, p.total.kv_cache),
        (Bytes(112_000_000_000), Bytes(0), Bytes(2 * GIB))
    );
    // FSDP does not split one sequence's cache: 112e9 / n + 2 GiB <= 13.74e9 from n = 10.
    assert_eq!(p.min_chips, Some(10));
    assert_eq!(p.per_chip.kv_cache, Bytes(2 * GIB));
}

#[test]
fn activations_per_remat_policy() {
    let l7 = Transformer::llama2_7b();
    let cfg = |remat, attention| ActivationConfig { seq: 4096, batch: 1, dtype: DType::Bf16, remat, attention };
    // Per layer and token: 4h + 2·(a·d) + 2·(kv·d) + 3·ffn = 65,792 elements; plus a·s² softmax
    // values per sequence; plus f32 logits (vocab × tokens × 4).
    let none = l7.activation_bytes(&cfg(Remat::None, Attention::Materialized), 32).unwrap();
    assert_eq!(none, 32 * (65_792 * 2 * 4096 + 32 * 4096 * 4096 * 2) + 32_000 * 4096 * 4);
    assert_eq!(none, 52_131_004_416);
    // Full remat: each layer's input, plus one layer live during its recomputation.
    let full = l7.activation_bytes(&cfg(Remat::Full, Attention::Materialized), 32).unwrap();
    assert_eq!(full, 4096 * 4096 * 2 * 32 + (65_792 * 2 * 4096 + 32 * 4096 * 4096 * 2) + 32_000 * 4096 * 4);
    assert_eq!(full, 3_210_739_712);
    // dots_saveable with flash attention: 3h + 2·(a·d) + 2·(kv·d) + 2·ffn = 50,688 elements, f32 lse.
    let dots = l7.activation_bytes(&cfg(Remat::DotsSaveable, Attention::Flash), 32).unwrap();
    assert_eq!(dots, 32 * (50_688 * 2 * 4096 + 32 * 4096 * 4) + 32_000 * 4096 * 4);
    assert_eq!(dots, 13_828_620_288);
    // Korthikanti et al.'s 34·s·b·h + 5·a·s²·b bytes minus dropout (2·s·b·h + 3·a·s²·b).
    let gpt = Transformer::new(1, 12288, 96).unwrap();
    let one = gpt
        .activation_bytes(&ActivationConfig { seq: 2048, batch: 1, ..cfg(Remat::None, Attention::Materialized) }, 1)
        .unwrap();
    let (s, b, h, a) = (2048u64, 1u64, 12288u64, 96u64);
    assert_eq!(one, 34 * s * b * h + 5 * a * s * s * b - (2 * s * b * h + 3 * a * s * s * b));
    // f32 activations are twice the bf16 ones (logits are f32 either way).
    let f32_none = l7
        .activation_bytes(&ActivationConfig { dtype: DType::F32, ..cfg(Remat::None, Attention::Materialized) }, 32)
        .unwrap();
    assert_eq!(f32_none - 32_000 * 4096 * 4, 2 * (none - 32_000 * 4096 * 4));
}

#[test]
fn explicit_sharding_and_max_batch() {
    let model = Model::from_shape(Transformer::llama2_7b()).unwrap();
    let work = train(Recipe::MixedBf16, Remat::Full, Attention::Flash, 4096, 16);
    let sharding = Sharding { data: 2, fsdp: 4, tensor: 2, pipeline: 1 };
    assert_eq!(sharding.chips().unwrap(), 16);
    let fp = footprint(&model, &work, &sharding).unwrap();
    // State over fsdp × tensor = 8; local batch 16 / (2 × 4) = 2 sequences; activations / tensor.
    assert_eq!(fp.state, Bytes(107_814_649_856 / 8));
    assert_eq!(fp.activations, Bytes(4_275_044_352 / 2));
    assert_eq!(fp.total(), Bytes(15_614_353_408));
    let req = |c: &str| PlanRequest {
        model,
        workload: work,
        chip: chip(c),
        budget: Budget::default(),
        sharding: Some(sharding),
    };
    let v5e = Plan::new(&req("v5e")).unwrap();
    assert!(!v5e.fits && v5e.headroom() < 0);
    assert_eq!(v5e.chips, 16);
    let v5p = Plan::new(&req("v5p")).unwrap();
    assert!(v5p.fits);
    // 13,476,831,232 + 1,068,761,088 × local batch <= 81,604,378,624 → local batch 63, global 504.
    assert_eq!(v5p.max_batch().unwrap(), Some(504));
    let at = |b: u64| footprint(&model, &work.with_batch(b), &sharding).unwrap().total();
    assert!(at(504) <= v5p.usable && at(505) > v5p.usable);
    // Nothing fits a chip whose state alone is too large.
    assert_eq!(max_batch(&model, &work, &Sharding::default(), v5p.usable).unwrap(), None);
    // Pipeline stages split layers: 32 layers over 4 stages hold 8 each.
    let pp = footprint(&model, &work, &Sharding { pipeline: 4, ..Sharding::default() }).unwrap();
    let one_stage = footprint(&model, &work, &Sharding::default()).unwrap();
    assert!(pp.activations < one_stage.activations);
    assert_eq!(pp.state, Bytes(107_814_649_856 / 4));
}

#[test]
fn fit_table_across_generations() {
    let model = Model::from_shape(Transformer::llama2_70b()).unwrap();
    let work = [
        ("fp32 adam".to_owned(), Workload::train(Recipe::Fp32, Optimizer::Adam, 4096, 1)),
        ("mixed-bf16 adam".to_owned(), Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 1)),
    ];
    let chips: Vec<_> = ["v5e", "v5p", "v6e"].into_iter().map(chip).collect();
    let rows = fit_table(&Model::from_params(model.params).unwrap(), &work, &chips, Budget::default()).unwrap();
    let min: Vec<_> = rows.iter().map(|r| (r.label.as_str(), r.chip, r.plan.min_chips.unwrap())).collect();
    // 68,976,648,192 × 16 = 1,103,626,371,072 bytes over 13.74e9 / 81.60e9 / 27.49e9 usable.
    assert_eq!(
        min,
        [
            ("fp32 adam", "v5e", 81),
            ("fp32 adam", "v5p", 14),
            ("fp32 adam", "v6e", 41),
            ("mixed-bf16 adam", "v5e", 81),
            ("mixed-bf16 adam", "v5p", 14),
            ("mixed-bf16 adam", "v6e", 41),
        ]
    );
}

#[test]
fn plan_against_profile_peak() {
    let p = plan(
        Model::from_params(7_000_000_000).unwrap(),
        Workload::train(Recipe::MixedBf16, Optimizer::Adam, 4096, 1),
        "v5e",
    );
    let mem =
        |peak: u64| ProfileMemory { peak_bytes: Bytes(peak), capacity: None, source: MemorySource::BufferAssignment };
    let ok = check_plan(&p, &mem(13_000_000_000));
    assert_eq!((ok.verdict, ok.over_budget), (Verdict::Matches, false));
    assert_eq!(ok.gap_bytes, 13_000_000_000 - 12_444_444_445);
    let low = check_plan(&p, &mem(15_000_000_000));
    assert_eq!((low.verdict, low.over_budget), (Verdict::Underestimated, true));
    assert!((low.gap_fraction - (15e9 / 12_444_444_445.0 - 1.0)).abs() < 1e-12);
    let high = check_plan(&p, &mem(6_000_000_000));
    assert_eq!(high.verdict, Verdict::Overestimated);
    assert!(high.gap_bytes < 0);
    // A profile that reports a smaller capacity puts the same peak over budget.
    let small = ProfileMemory { capacity: Some(Bytes(15 * GIB)), ..mem(12_900_000_000) };
    assert!(check_plan(&p, &small).over_budget);
    assert!(!check_plan(&p, &mem(12_900_000_000)).over_budget);
}

#[test]
fn bad_sizes_are_typed_errors() {
    assert!(Model::from_params(0).unwrap_err().is_non_positive());
    assert!(Transformer::new(32, 4096, 0).unwrap_err().is_non_positive());
    assert!(Transformer::new(0, 4096, 32).unwrap_err().is_non_positive());
    assert!(Transformer::new(32, 4095, 32).is_err());
    assert!(Transformer::llama2_7b().with_kv_heads(5).is_err());
    assert!(Transformer::llama2_7b().with_kv_heads(0).unwrap_err().is_non_positive());
    assert!(Transformer::llama2_7b().kv_cache_bytes(0, 1, DType::Bf16).unwrap_err().is_non_positive());
    let model = Model::from_params(1_000_000).unwrap();
    let zero_seq = Workload::train(Recipe::Fp32, Optimizer::Adam, 0, 1);
    let req = PlanRequest { model, workload: zero_seq, chip: chip("v5e"), budget: Budget::default(), sharding: None };
    assert!(Plan::new(&req).unwrap_err().is_non_positive());
    let bad_axis = PlanRequest {
        sharding: Some(Sharding { tensor: 0, ..Sharding::default() }),
        workload: Workload::serve(DType::Bf16, DType::Bf16, 1, 1),
        ..req
    };
    assert!(Plan::new(&bad_axis).unwrap_err().is_non_positive());
    for f in [0.0, -0.5, 1.01, f64::NAN] {
        assert!(Budget::new(f).is_err(), "{f}");
    }
    assert!(parse::count("params", "-7B").unwrap_err().is_non_positive());
}

#[test]
fn huge_models_overflow_into_errors() {
    // 2^61 parameters × 16 bytes does not fit in 64 bits.
    let model = Model::from_params(1 << 61).unwrap();
    let req = PlanRequest {
        model,
        workload: Workload::train(Recipe::Fp32, Optimizer::Adam, 1, 1),
        chip: chip("v7"),
        budget: Budget::default(),
        sharding: None,
    };
    let err = Plan::new(&req).unwrap_err();
    assert!(err.is_overflow(), "{err}");
    assert!(err.to_string().contains("overflows 64 bits"));
    let wide = Transformer::new(1 << 20, 1 << 22, 1 << 10).unwrap().with_vocab(1 << 40);
    assert!(wide.params().unwrap_err().is_overflow());
    assert!(Model::from_shape(wide).unwrap_err().is_overflow());
    let long = Transformer::llama2_7b();
    assert!(long.kv_cache_bytes(1 << 40, 1 << 20, DType::F32).unwrap_err().is_overflow());
    let cfg = ActivationConfig {
        seq: 1 << 31,
        batch: 1 << 10,
        dtype: DType::F32,
        remat: Remat::None,
        attention: Attention::Materialized,
    };
    assert!(long.activation_bytes(&cfg, 32).unwrap_err().is_overflow());
    // Serving a model whose weights fit but with an unplannable KV cache.
    let serve = Workload::serve(DType::Bf16, DType::Bf16, 1 << 40, 1 << 20);
    assert!(footprint(&Model::from_shape(long).unwrap(), &serve, &Sharding::default()).unwrap_err().is_overflow());
}
