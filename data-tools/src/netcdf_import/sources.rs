//! Which variables become attributes, under which names, units and backgrounds: the
//! `--vars` choice (or the model's defaults), CM1's perturbations, wind speed from velocity
//! components, and each attribute's background rule or `--background` override.

use anyhow::{Result, anyhow, bail};
use supercell::format::GridClass;

use super::WIND_SPEED;
use super::model::{Model, ModelFile};
use super::resample::Background;

/// The background rule of a variable (CM1 or WRF name, any case): values it drops.
///
/// | variables | dropped | why |
/// | --- | --- | --- |
/// | `dbz`, `refl*` (reflectivity) | ≤ 5 dBZ | below what radars display |
/// | `q*` (mixing ratios: `qc`, `qr`, `qv`, `QRAIN`, ...) | ≤ 1e-5 kg/kg | no visible hydrometeor |
/// | `n*` (number concentrations) | ≤ 0 | none |
/// | `wind_speed` | ≤ 5 m/s | calm air |
/// | `u*`, `v*`, `w*` (velocity components) | \|v\| ≤ 1 m/s | signed: weak motion either way |
/// | `prs_pert`, `p` (pressure perturbation) | \|v\| ≤ 10 Pa | signed |
/// | `th_pert` | \|v\| ≤ 0.1 K | signed |
/// | anything else | \|v\| ≤ 0 (exact zeros) | unknown meaning |
pub fn background_for(name: &str) -> Background {
    let n = name.to_ascii_lowercase();
    if n == "dbz" || n.starts_with("refl") || n == WIND_SPEED {
        // 5 dBZ, or 5 m/s.
        Background::AtOrBelow(5.0)
    } else if n.starts_with('q') {
        Background::AtOrBelow(1e-5)
    } else if n.starts_with('n') {
        Background::AtOrBelow(0.0)
    } else if n.starts_with('u') || n.starts_with('v') || n.starts_with('w') {
        Background::MagnitudeAtOrBelow(1.0)
    } else if n == "prs_pert" || n == "p" {
        Background::MagnitudeAtOrBelow(10.0)
    } else if n == "th_pert" {
        Background::MagnitudeAtOrBelow(0.1)
    } else {
        Background::MagnitudeAtOrBelow(0.0)
    }
}

/// The grid class a variable's grids carry: fog volumes for one-sided fields, unknown for
/// signed ones.
pub(super) fn grid_class(bg: Background) -> GridClass {
    match bg {
        Background::AtOrBelow(_) => GridClass::FogVolume,
        Background::MagnitudeAtOrBelow(_) => GridClass::Unknown,
    }
}

/// One attribute of the import and where its values come from.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Source {
    /// A file variable as it is.
    Variable(String),
    /// A file variable minus the mean of each of its model levels.
    Perturbation(String),
    /// The length of the velocity components (u, v, w).
    Speed([String; 3]),
}

/// Which CM1 variables are imported as perturbations, and the attribute names they get.
const PERTURBATIONS: [(&str, &str); 2] = [("prs", "prs_pert"), ("th", "th_pert")];

/// The velocity components a wind speed is made from, in order of preference.
const VELOCITY_SETS: [[&str; 3]; 3] = [
    ["uinterp", "vinterp", "winterp"],
    ["U", "V", "W"],
    ["u", "v", "w"],
];

pub(super) fn parse_backgrounds(list: &[String]) -> Result<Vec<(String, f32)>> {
    list.iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.trim().is_empty())
        .map(|item| {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| anyhow!("--background {item}: expected NAME=VALUE, e.g. qr=1e-5"))?;
            let v: f32 = value
                .trim()
                .parse()
                .map_err(|_| anyhow!("--background {item}: '{value}' is not a number"))?;
            if !v.is_finite() {
                bail!("--background {item}: the value must be finite");
            }
            Ok((name.trim().to_string(), v))
        })
        .collect()
}

/// The attributes to import: `(attribute name, source)`.
pub(super) fn choose_sources(
    first: &ModelFile,
    vars: Option<&str>,
    wind_speed: bool,
) -> Result<Vec<(String, Source)>> {
    let available = first.grid_variables();
    let names: Vec<String> = match vars {
        Some(list) => {
            let chosen: Vec<String> = list
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            for v in &chosen {
                if !available.contains(v) {
                    bail!(
                        "{}: --vars names {v}, which is not a 3-D variable of this {} file \
                         (those are: {})",
                        first.path.display(),
                        first.model.name(),
                        available.join(", ")
                    );
                }
            }
            chosen
        }
        // Geopotential is the heights, not something to look at.
        None => available
            .iter()
            .filter(|v| !matches!(v.as_str(), "PH" | "PHB"))
            .cloned()
            .collect(),
    };
    let mut sources: Vec<(String, Source)> = names
        .into_iter()
        .map(|v| {
            if first.model == Model::Cm1
                && let Some((_, pert)) = PERTURBATIONS.iter().find(|(n, _)| *n == v)
            {
                return (pert.to_string(), Source::Perturbation(v));
            }
            (v.clone(), Source::Variable(v))
        })
        .collect();
    if wind_speed {
        let set = VELOCITY_SETS
            .iter()
            .find(|set| set.iter().all(|c| available.iter().any(|a| a == c)))
            .ok_or_else(|| {
                anyhow!(
                    "{}: --wind-speed needs velocity components (uinterp/vinterp/winterp, \
                     U/V/W or u/v/w); the file has none of these sets",
                    first.path.display()
                )
            })?;
        sources.push((
            WIND_SPEED.to_string(),
            Source::Speed(set.map(|s| s.to_string())),
        ));
    }
    if sources.is_empty() {
        bail!("{}: no 3-D variables to import", first.path.display());
    }
    for (i, (name, _)) in sources.iter().enumerate() {
        if sources[..i].iter().any(|(n, _)| n == name) {
            bail!("the attribute {name} would be imported twice");
        }
    }
    Ok(sources)
}

/// The unit attribute `name` gets from the first file: its variable's CF `units` as written
/// (a perturbation keeps its variable's, a wind speed takes its components' where they
/// agree). A unit that cannot be kept (not text, too long, control characters) or
/// components that disagree leave the attribute without one, with a note.
pub(super) fn source_units(first: &ModelFile, name: &str, source: &Source) -> Option<String> {
    let of = |var: &str| match first.variable_units(var) {
        Ok(u) => u,
        Err(why) => {
            println!(
                "note: {name}: variable {var} of {}: {why}; imported without a unit",
                first.path.display()
            );
            None
        }
    };
    match source {
        Source::Variable(v) | Source::Perturbation(v) => of(v),
        Source::Speed(components) => {
            let units: Vec<Option<String>> = components.iter().map(|c| of(c)).collect();
            if units.iter().all(|u| *u == units[0]) {
                return units[0].clone();
            }
            println!(
                "note: {name}: the velocity components {} have different units ({}); imported \
                 without a unit",
                components.join(", "),
                units
                    .iter()
                    .map(|u| u.as_deref().unwrap_or("none"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            None
        }
    }
}

/// The background of each attribute: its rule, or the `--background` override.
pub(super) fn choose_backgrounds(
    sources: &[(String, Source)],
    overrides: &[(String, f32)],
) -> Result<Vec<Background>> {
    for (name, _) in overrides {
        if !sources.iter().any(|(n, _)| n == name) {
            bail!(
                "--background names {name}, which is not imported (attributes: {})",
                sources
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(sources
        .iter()
        .map(|(name, _)| {
            let rule = background_for(name);
            match overrides.iter().rev().find(|(n, _)| n == name) {
                None => rule,
                Some(&(_, v)) => match rule {
                    Background::AtOrBelow(_) => Background::AtOrBelow(v),
                    Background::MagnitudeAtOrBelow(_) => Background::MagnitudeAtOrBelow(v.abs()),
                },
            }
        })
        .collect())
}
