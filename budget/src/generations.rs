//! The seed table of the README: the fewest chips of each catalogue chip for Llama-2 training
//! and serving, across recipes.

use xlens_chips::{CATALOGUE, ChipSpec};

use crate::dtype::{DType, Optimizer, Recipe};
use crate::error::Result;
use crate::model::{Attention, Remat, Transformer};
use crate::plan::{Budget, FitRow, Model, Workload};

/// The seed table across generations: Llama-2-7B and Llama-2-70B, training state in f32, mixed
/// bf16 and pure bf16 with Adam (state only), mixed bf16 with activations (seq 4096, global batch 16,
/// full remat, flash attention), and bf16 serving with a bf16 KV cache of 8 × 4096 tokens; the
/// fewest chips of each catalogue chip at the budget. Printed by `hbm_plan --generations`; the README's table.
pub fn generations_table(budget: Budget) -> Result<Vec<FitRow>> {
    let chips: Vec<&'static ChipSpec> = CATALOGUE.iter().collect();
    let mut rows = Vec::new();
    for (name, shape) in [("llama2-7b", Transformer::llama2_7b()), ("llama2-70b", Transformer::llama2_70b())] {
        let shaped = Model::from_shape(shape)?;
        let state_only = Model::from_params(shaped.params)?;
        let train = |recipe| Workload::train(recipe, Optimizer::Adam, 4096, 16);
        let with_act = train(Recipe::MixedBf16).with_remat(Remat::Full).with_attention(Attention::Flash);
        let cases = [
            (state_only, format!("{name} fp32 adam state"), train(Recipe::Fp32)),
            (state_only, format!("{name} mixed-bf16 adam state"), train(Recipe::MixedBf16)),
            (state_only, format!("{name} pure-bf16 adam state"), train(Recipe::PureBf16)),
            (shaped, format!("{name} mixed-bf16 +act 16x4096"), with_act),
            (shaped, format!("{name} serve bf16 kv 8x4096"), Workload::serve(DType::Bf16, DType::Bf16, 4096, 8)),
        ];
        for (model, label, workload) in cases {
            rows.extend(crate::fit_table(&model, &[(label, workload)], &chips, budget)?);
        }
    }
    Ok(rows)
}
