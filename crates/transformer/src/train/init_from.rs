//! `training.init_from`: a new run starts from a checkpoint's weights and tokenizers (ours, or
//! a Hugging Face MarianMT directory's) and its `[model]`, whose keys the config may state
//! only as they are (dropout rates aside); without `[decode]` the config takes the
//! checkpoint's decoding settings. The training data's tokens that vocabulary lacks are
//! counted.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use candle_core::Tensor;

use super::TrainingData;
use crate::checkpoint;
use crate::config::Config;

/// Says how much of the training data the vocabulary inherited through `training.init_from`
/// does not cover: those tokens train as `<unk>`.
pub fn warn_of_unknown_tokens(data: &TrainingData, config: &Config) {
    let unk = data.tokenizers.specials().unk;
    let ids = data.pairs.all_ids();
    let (unknown, total) = ids.fold((0usize, 0usize), |(unknown, total), id| {
        (unknown + usize::from(id == unk), total + 1)
    });
    if unknown > 0 {
        let from = config
            .training
            .init_from
            .as_deref()
            .unwrap_or(Path::new(""));
        log::warn!(
            "{unknown} of the training data's {total} tokens are not in the vocabulary \
             of training.init_from ({}) and train as <unk>; fine-tune on text that vocabulary \
             covers, or train a new model",
            from.display()
        );
    }
}

/// `training.init_from`: the checkpoint's tokenizers and weights, once its model is the
/// config's (dropout aside, which fine-tuning may change); `config.data` takes its tokenizer
/// settings, so that the run's checkpoints read back the files they carry.
pub fn initial_weights(
    config: &mut Config,
    path: &Path,
    device: &candle_core::Device,
) -> anyhow::Result<(crate::tokenize::Tokenizers, HashMap<String, Tensor>)> {
    let named = || format!("training.init_from = {:?}", path.display().to_string());
    if path.as_os_str().is_empty() || !path.exists() {
        bail!(
            "{} does not exist; name a checkpoint or run directory that training wrote (relative paths start from the directory you run in)",
            named()
        );
    }
    let initial =
        checkpoint::load_initial_weights(path, device, "cannot be trained (training.init_from)")
            .with_context(named)?;
    // A config takes the checkpoint's [model], and its [decode] when it leaves that out: a
    // pretrained model's sizes and the way it is decoded need not be copied out by hand. A
    // [model] key the config states must agree with the checkpoint (dropout rates aside,
    // which fine-tuning may change).
    let stated = config.stated.clone();
    let saved_model = toml::Table::try_from(&initial.config.model)?;
    let mut model = saved_model.clone();
    let mut differences = Vec::new();
    if let Some(Some(ours)) = stated
        .as_ref()
        .map(|t| t.get("model").and_then(|m| m.as_table()))
    {
        for (key, value) in ours {
            let adjustable = matches!(
                key.as_str(),
                "dropout" | "attention_dropout" | "activation_dropout"
            );
            // `arch = "marian"` is a preset, which a checkpoint saves resolved: the model's
            // own keys still have to agree.
            let marian_preset = key == "arch" && value.as_str() == Some("marian");
            match saved_model.get(key) {
                _ if adjustable => {
                    model.insert(key.clone(), value.clone());
                }
                Some(theirs) if theirs == value => {}
                Some(theirs) if marian_preset && theirs.as_str() == Some("encoder-decoder") => {}
                theirs => differences.push((
                    key.clone(),
                    value.to_string(),
                    theirs.map_or("nothing".into(), ToString::to_string),
                )),
            }
        }
    } else if stated.is_none() {
        // The built-in config: its [model] is stated whole.
        differences = model_differences(&config.model, &initial.config.model)?;
    }
    if !differences.is_empty() {
        let each: Vec<String> = differences
            .iter()
            .map(|(key, ours, theirs)| format!("model.{key} = {ours} but it has {theirs}"))
            .collect();
        bail!(
            "training.init_from = {}: the config says {}; leave {} out of [model] (the \
             checkpoint's is used) or make {} match",
            initial.dir.display(),
            each.join(", "),
            if each.len() == 1 {
                "the key"
            } else {
                "these keys"
            },
            if each.len() == 1 { "it" } else { "them" },
        );
    }
    config.model = model.try_into()?;
    if stated.as_ref().is_some_and(|t| !t.contains_key("decode")) {
        config.decode = initial.config.decode.clone();
    }
    let saved = &initial.config.data;
    // The tokenizer is the checkpoint's: its ids are the rows of the embeddings. Settings the
    // config states for a tokenizer of its own are said to be unused, not silently dropped.
    let stated_data = stated
        .as_ref()
        .and_then(|t| t.get("data")?.as_table().cloned());
    let unused: Vec<&str> = ["tokenizer", "vocab_size", "joint_vocab", "min_freq"]
        .into_iter()
        .filter(|key| stated_data.as_ref().is_some_and(|d| d.contains_key(*key)))
        .collect();
    if !unused.is_empty() {
        log::warn!(
            "data.{} not used: the run keeps the tokenizer of training.init_from ({}, \
             data.tokenizer = \"{}\")",
            unused.join(", data."),
            initial.dir.display(),
            saved.tokenizer
        );
    }
    config.data.tokenizer = saved.tokenizer;
    config.data.joint_vocab = saved.joint_vocab;
    config.data.vocab_size = saved.vocab_size;
    config.data.min_freq = saved.min_freq;
    if config.data.source_lang.is_none() && config.data.target_lang.is_none() {
        config.data.source_lang = saved.source_lang.clone();
        config.data.target_lang = saved.target_lang.clone();
    }
    // The checkpoint's model may not suit the config's data (a language model's, for
    // translation pairs): the config it makes is checked as a written one would be.
    if let Some((key, rule)) = config.broken_rule() {
        bail!(
            "training.init_from = {}: with that checkpoint's model, the config breaks a rule: \
             {key}: {rule}; start from a checkpoint that suits the data",
            initial.dir.display()
        );
    }
    let mut tokenizers = initial.tokenizers;
    name_languages(&mut tokenizers, config, &initial.dir)?;
    Ok((tokenizers, initial.weights))
}

/// A multilingual model fine-tunes in the pair `data.source_lang` -> `data.target_lang`,
/// which must be two of its codes: its sources and targets are framed with their tokens.
fn name_languages(
    tokenizers: &mut crate::tokenize::Tokenizers,
    config: &Config,
    dir: &Path,
) -> anyhow::Result<()> {
    let Some(tokenizer) = tokenizers.multilingual_tokenizer() else {
        return Ok(());
    };
    let data = &config.data;
    let (Some(source), Some(target)) = (&data.source_lang, &data.target_lang) else {
        bail!(
            "training.init_from = {} is a multilingual model (M2M100 / NLLB-200): set \
             data.source_lang and data.target_lang to two of its {} language codes ({}), the \
             languages of data.train's two sides",
            dir.display(),
            tokenizer.languages().count(),
            tokenizer.codes_like("")
        );
    };
    for (key, code) in [("data.source_lang", source), ("data.target_lang", target)] {
        if let Err(error) = tokenizer.pair(code, code) {
            bail!(
                "{key} = {code:?}: {error} (training.init_from = {})",
                dir.display()
            );
        }
    }
    tokenizers.name_languages(source, target)
}

/// The `[model]` keys whose values differ between `ours` and `theirs` (dropout rates aside),
/// with both values as TOML writes them.
fn model_differences(
    ours: &crate::config::ModelConfig,
    theirs: &crate::config::ModelConfig,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let table = |model| -> anyhow::Result<toml::Table> { Ok(toml::Table::try_from(model)?) };
    let (ours, theirs) = (table(ours)?, table(theirs)?);
    Ok(ours
        .iter()
        .filter(|(key, _)| {
            !matches!(
                key.as_str(),
                "dropout" | "attention_dropout" | "activation_dropout"
            )
        })
        .filter(|(key, value)| theirs.get(*key) != Some(*value))
        .map(|(key, value)| {
            let other = theirs
                .get(key)
                .map_or("nothing".into(), ToString::to_string);
            (key.clone(), value.to_string(), other)
        })
        .collect())
}
