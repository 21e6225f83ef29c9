//! The WGSL sources: `shaders/common.wgsl` (NanoVDB traversal, sampling, transfer functions)
//! behind a block of constants generated from [`crate::format::layout`], so NanoVDB offsets
//! live in one place, followed by `shaders/march.wgsl` (the ray-marcher) or
//! `shaders/accel.wgsl` (the acceleration and sun grids).

use std::fmt::Write;

use crate::format::GridType;
use crate::format::layout::{self as l, TreeLayout};

use super::params::{
    FLAG_ACCEL, FLAG_COMPOSITE, FLAG_GROUND, FLAG_HDDA, FLAG_JITTER, FLAG_ORTHO, FLAG_REGION,
    FLAG_SHADOWS, KIND_EMISSIVE, KIND_SCATTER, MAX_ATTRIBUTES, MAX_PARTS, Mode, PARTS_LIMIT,
};
use super::transfer::TF_SIZE;

/// Root tiles the shader scans at most per lookup (a corrupt count is also capped by the
/// buffer size). 32768 root tiles span 32 × 32 × 32 regions of 4096³ voxels.
pub const MAX_ROOT_TILES: u32 = 1 << 15;

/// Cells of one channel's acceleration grid at most (16 bytes each). A grid whose bbox would
/// need more at 8³ voxels per cell gets larger cells. 2²¹ cells hold a 1024 × 1024 × 512
/// voxel bbox at 8³.
pub const ACCEL_CELLS: u32 = 1 << 21;

/// Acceleration cells larger than `2^SCAN_SHIFT_MAX` voxels a side (64³) are not scanned
/// voxel by voxel: their range is unknown (never skipped) and they cast no shadow. The CPU
/// reference uses the same bound.
pub const SCAN_SHIFT_MAX: u32 = 6;

/// Grid types the shader decodes. They share one root and internal-node layout (checked by
/// [`shader_source`]), and differ only in their leaves and in the tile value type (Half).
pub const SUPPORTED_TYPES: [GridType; 6] = [
    GridType::Float,
    GridType::Half,
    GridType::Fp4,
    GridType::Fp8,
    GridType::Fp16,
    GridType::FpN,
];

fn lay(t: GridType) -> TreeLayout {
    l::layout(t).expect("supported grid types have layouts")
}

/// Bytes of one part ([`super::MAX_PARTS`]) where nothing smaller is asked for: 2 GiB, the
/// largest power of two a 4 GiB storage binding holds.
pub const DEFAULT_PART_BYTES: u64 = 1 << 31;

/// The smallest part size (tests use it to split small frames over several parts).
pub const MIN_PART_BYTES: u64 = 1 << 16;

/// What one build of the shaders is specialised for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShaderConfig {
    /// Acceleration cells per channel at most.
    pub accel_cells: u32,
    /// Bytes of one part: a power of two from [`MIN_PART_BYTES`] to [`DEFAULT_PART_BYTES`].
    pub part_bytes: u64,
    /// Attribute channels the passes walk (1 to [`MAX_ATTRIBUTES`]; channels from here on are
    /// not read).
    pub attr_channels: u32,
    /// Parts the accessor reads (1 to [`PARTS_LIMIT`]; parts from here on are not read).
    pub parts: u32,
}

impl ShaderConfig {
    /// Parts the shaders declare: [`MAX_PARTS`] (the parts of the bind group layout every
    /// frame of up to that many shares), or `parts` where a frame needs more.
    pub fn declared_parts(&self) -> u32 {
        self.parts.max(MAX_PARTS as u32)
    }
}

/// First binding of the parts (`p0`); the three acceleration buffers follow the last
/// declared part.
pub const PART_BINDING: u32 = 4;

impl Default for ShaderConfig {
    /// Every channel and part, [`ACCEL_CELLS`] and [`DEFAULT_PART_BYTES`].
    fn default() -> Self {
        ShaderConfig {
            accel_cells: ACCEL_CELLS,
            part_bytes: DEFAULT_PART_BYTES,
            attr_channels: MAX_ATTRIBUTES as u32,
            parts: MAX_PARTS as u32,
        }
    }
}

/// The WGSL constants the ray-marcher reads NanoVDB with.
pub fn prelude() -> String {
    prelude_with(&ShaderConfig::default())
}

/// Byte offsets the shader reads as whole words: it addresses grids by 32-bit word (a grid
/// of 16 GiB has 2³² words), so each of these must be a multiple of 4.
fn word_offsets() -> Vec<(&'static str, u32)> {
    let f = lay(GridType::Float);
    let h = lay(GridType::Half);
    vec![
        ("GRID_SIZE", l::GRID_SIZE),
        ("GRID_OFF_GRID_TYPE", l::GRID_OFF_GRID_TYPE),
        ("GRID_OFF_MAP", l::GRID_OFF_MAP),
        ("MAP_OFF_MATF", l::MAP_OFF_MATF),
        ("MAP_OFF_INVMATF", l::MAP_OFF_INVMATF),
        ("MAP_OFF_VECF", l::MAP_OFF_VECF),
        ("TREE_OFF_NODE_OFFSET_ROOT", l::TREE_OFF_NODE_OFFSET_ROOT),
        ("NODE_OFF_BBOX_MIN", l::NODE_OFF_BBOX_MIN),
        ("NODE_OFF_BBOX_MAX", l::NODE_OFF_BBOX_MAX),
        ("ROOT_OFF_TABLE_SIZE", l::ROOT_OFF_TABLE_SIZE),
        ("ROOT_OFF_BACKGROUND", f.root.off_background),
        ("ROOT_SIZE", f.root.size),
        ("ROOT_TILE_SIZE", f.root.tile_size),
        ("ROOT_TILE_OFF_KEY", l::ROOT_TILE_OFF_KEY),
        ("ROOT_TILE_OFF_CHILD", l::ROOT_TILE_OFF_CHILD),
        ("ROOT_TILE_OFF_VALUE", f.root.tile_off_value),
        ("UPPER_OFF_CHILD_MASK", f.upper.off_child_mask),
        ("UPPER_OFF_TABLE", f.upper.off_table),
        ("LOWER_OFF_CHILD_MASK", f.lower.off_child_mask),
        ("LOWER_OFF_TABLE", f.lower.off_table),
        ("TABLE_STRIDE", f.upper.table_stride),
        ("LEAF_FLOAT_OFF_TABLE", f.leaf.off_table),
        ("LEAF_HALF_OFF_TABLE", h.leaf.off_table),
        ("LEAF_FP_OFF_MINIMUM", l::LEAF_FP_OFF_MINIMUM),
        ("LEAF_FP_OFF_QUANTUM", l::LEAF_FP_OFF_QUANTUM),
        ("LEAF_FP_OFF_CODES", l::LEAF_FP_OFF_CODES),
    ]
}

fn prelude_with(cfg: &ShaderConfig) -> String {
    let (accel_cells, part_bytes) = (cfg.accel_cells, cfg.part_bytes);
    assert!(
        (1..=MAX_ATTRIBUTES as u32).contains(&cfg.attr_channels)
            && (1..=PARTS_LIMIT as u32).contains(&cfg.parts),
        "{cfg:?}: channels and parts out of range"
    );
    assert!(
        part_bytes.is_power_of_two() && (MIN_PART_BYTES..=DEFAULT_PART_BYTES).contains(&part_bytes),
        "part size {part_bytes} is not a power of two from {MIN_PART_BYTES} to {DEFAULT_PART_BYTES}"
    );
    for (name, off) in word_offsets() {
        assert_eq!(off % 4, 0, "{name} ({off}) is not a whole number of words");
    }
    let f = lay(GridType::Float);
    let h = lay(GridType::Half);
    for t in SUPPORTED_TYPES {
        let o = lay(t);
        // The shader walks every supported type with Float's node offsets; a type whose root
        // or internal nodes differ would need its own constants.
        assert_eq!(o.root.size, f.root.size, "{t:?} root size");
        assert_eq!(o.root.tile_size, f.root.tile_size, "{t:?} tile size");
        assert_eq!(
            o.root.tile_off_value, f.root.tile_off_value,
            "{t:?} tile value"
        );
        assert_eq!(
            o.root.off_background, f.root.off_background,
            "{t:?} background"
        );
        for (a, b) in [(o.upper, f.upper), (o.lower, f.lower)] {
            assert_eq!(
                (a.off_child_mask, a.off_table, a.table_stride, a.size),
                (b.off_child_mask, b.off_table, b.table_stride, b.size),
                "{t:?} internal node"
            );
        }
    }
    let fp = lay(GridType::Fp8);
    assert_eq!(fp.leaf.off_table, l::LEAF_FP_OFF_CODES);
    let mut s = String::from("// Generated from supercell::format::layout and render::params.\n");
    let mut c = |name: &str, v: u32| {
        let _ = writeln!(s, "const {name}: u32 = {v}u;");
    };
    c("MAGIC_NUMB_LO", l::MAGIC_NUMB as u32);
    c("MAGIC_NUMB_HI", (l::MAGIC_NUMB >> 32) as u32);
    c("MAGIC_GRID_LO", l::MAGIC_GRID as u32);
    c("MAGIC_GRID_HI", (l::MAGIC_GRID >> 32) as u32);
    c("GRID_TYPE_FLOAT", GridType::Float as u32);
    c("GRID_TYPE_HALF", GridType::Half as u32);
    c("GRID_TYPE_FP4", GridType::Fp4 as u32);
    c("GRID_TYPE_FP8", GridType::Fp8 as u32);
    c("GRID_TYPE_FP16", GridType::Fp16 as u32);
    c("GRID_TYPE_FPN", GridType::FpN as u32);
    c("GRID_SIZE", l::GRID_SIZE);
    c("GRID_OFF_GRID_TYPE", l::GRID_OFF_GRID_TYPE);
    c("GRID_OFF_MAP", l::GRID_OFF_MAP);
    c("MAP_OFF_MATF", l::MAP_OFF_MATF);
    c("MAP_OFF_INVMATF", l::MAP_OFF_INVMATF);
    c("MAP_OFF_VECF", l::MAP_OFF_VECF);
    c("TREE_OFF_NODE_OFFSET_ROOT", l::TREE_OFF_NODE_OFFSET_ROOT);
    c("NODE_OFF_BBOX_MIN", l::NODE_OFF_BBOX_MIN);
    c("NODE_OFF_BBOX_MAX", l::NODE_OFF_BBOX_MAX);
    c("ROOT_OFF_TABLE_SIZE", l::ROOT_OFF_TABLE_SIZE);
    c("ROOT_OFF_BACKGROUND", f.root.off_background);
    c("ROOT_SIZE", f.root.size);
    c("ROOT_TILE_SIZE", f.root.tile_size);
    c("ROOT_TILE_OFF_KEY", l::ROOT_TILE_OFF_KEY);
    c("ROOT_TILE_OFF_CHILD", l::ROOT_TILE_OFF_CHILD);
    c("ROOT_TILE_OFF_VALUE", f.root.tile_off_value);
    c("MAX_ROOT_TILES", MAX_ROOT_TILES);
    c("UPPER_OFF_CHILD_MASK", f.upper.off_child_mask);
    c("UPPER_OFF_TABLE", f.upper.off_table);
    c("UPPER_SIZE", f.upper.size);
    c("LOWER_OFF_CHILD_MASK", f.lower.off_child_mask);
    c("LOWER_OFF_TABLE", f.lower.off_table);
    c("LOWER_SIZE", f.lower.size);
    c("TABLE_STRIDE", f.upper.table_stride);
    c("LEAF_OFF_FLAGS", l::LEAF_OFF_FLAGS);
    c("LEAF_MIN_SIZE", l::LEAF_FPN_BASE_SIZE);
    c("LEAF_FLOAT_OFF_TABLE", f.leaf.off_table);
    c("LEAF_HALF_OFF_TABLE", h.leaf.off_table);
    c("LEAF_FP_OFF_MINIMUM", l::LEAF_FP_OFF_MINIMUM);
    c("LEAF_FP_OFF_QUANTUM", l::LEAF_FP_OFF_QUANTUM);
    c("LEAF_FP_OFF_CODES", l::LEAF_FP_OFF_CODES);
    c("TF_SIZE", TF_SIZE as u32);
    c("ACCEL_CELLS", accel_cells);
    c("SCAN_SHIFT_MAX", SCAN_SHIFT_MAX);
    c("DECLARED_PARTS", cfg.declared_parts());
    c("PART_SHIFT_WORDS", (part_bytes / 4).trailing_zeros());
    c("ATTR_CHANNELS", cfg.attr_channels);
    c("USED_PARTS", cfg.parts);
    for (name, value) in uniform_constants() {
        c(name, value);
    }
    s
}

/// The constants of the uniform block's encoding ([`super::GpuParams`]): attribute channels,
/// mode numbers, flag bits and medium kinds, under their WGSL names.
fn uniform_constants() -> [(&'static str, u32); 14] {
    [
        ("MAX_ATTRS", MAX_ATTRIBUTES as u32),
        ("MODE_SHADED", Mode::Shaded as u32),
        ("MODE_MIP", Mode::Mip as u32),
        ("MODE_ISO", Mode::Isosurface as u32),
        ("FLAG_HDDA", FLAG_HDDA),
        ("FLAG_ORTHO", FLAG_ORTHO),
        ("FLAG_SHADOWS", FLAG_SHADOWS),
        ("FLAG_GROUND", FLAG_GROUND),
        ("FLAG_JITTER", FLAG_JITTER),
        ("FLAG_ACCEL", FLAG_ACCEL),
        ("FLAG_REGION", FLAG_REGION),
        ("FLAG_COMPOSITE", FLAG_COMPOSITE),
        ("KIND_SCATTER", KIND_SCATTER),
        ("KIND_EMISSIVE", KIND_EMISSIVE),
    ]
}

/// Which WGSL module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaderPart {
    /// The ray-marcher (entry point `main`); reads the acceleration grids.
    March,
    /// The acceleration and sun grid passes (`accel_info`, `accel_cells`, `accel_dilate`,
    /// `accel_sun`); writes them.
    Accel,
    /// The path tracer (entry point `path_main`, `shaders/path.wgsl`); reads the
    /// acceleration grids.
    Path,
    /// Point sampling (entry point `sample_points`, `shaders/points.wgsl`): grid values at
    /// world positions, read as the march reads them.
    Points,
}

/// The complete WGSL module of `part`, built for `cfg`.
pub fn shader_source_of(part: ShaderPart, cfg: &ShaderConfig) -> String {
    let mut s = prelude_with(cfg);
    s.push('\n');
    let access = match part {
        ShaderPart::March | ShaderPart::Path | ShaderPart::Points => "read",
        ShaderPart::Accel => "read_write",
    };
    s.push_str(&part_bindings(
        &include_str!("../../shaders/common.wgsl").replace("ACCEL_ACCESS", access),
        cfg.declared_parts(),
    ));
    s.push('\n');
    s.push_str(match part {
        ShaderPart::March => include_str!("../../shaders/march.wgsl"),
        ShaderPart::Accel => include_str!("../../shaders/accel.wgsl"),
        ShaderPart::Path => include_str!("../../shaders/path.wgsl"),
        ShaderPart::Points => include_str!("../../shaders/points.wgsl"),
    });
    if matches!(part, ShaderPart::March | ShaderPart::Path) {
        s.push('\n');
        s.push_str(TONE_MAP);
    }
    s
}

/// The tone map of every pass that writes the 8-bit image (`shaders/tonemap.wgsl`):
/// appended to the march's, the path tracer's and the denoiser's modules.
const TONE_MAP: &str = include_str!("../../shaders/tonemap.wgsl");

/// The denoiser's complete WGSL module (`shaders/denoise.wgsl` and the tone map).
pub(super) fn denoise_source() -> String {
    format!("{}\n{TONE_MAP}", include_str!("../../shaders/denoise.wgsl"))
}

/// `common` with its part bindings written out: `declared` parts `p0`.. from binding
/// [`PART_BINDING`], the acceleration buffers after them, and a case of `ld`'s switch per
/// part (part 0 is always read; part k only where `k < USED_PARTS`, so a pipeline built
/// for fewer parts compiles the rest to nothing).
fn part_bindings(common: &str, declared: u32) -> String {
    let mut decls = String::new();
    let mut cases = String::new();
    for k in 0..declared {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read> p{k}: array<u32>;",
            PART_BINDING + k
        );
        let used = if k == 0 {
            String::new()
        } else {
            format!("{k}u < USED_PARTS && ")
        };
        let _ = writeln!(
            cases,
            "        case {k}u: {{ if {used}o < arrayLength(&p{k}) {{ return p{k}[o]; }} }}"
        );
    }
    let accel = PART_BINDING + declared;
    common
        .replace("PART_DECLARATIONS\n", &decls)
        .replace("PART_CASES\n", &cases)
        .replace("ACCEL_BINDING_CELLS", &accel.to_string())
        .replace("ACCEL_BINDING_SUN", &(accel + 1).to_string())
        .replace("ACCEL_BINDING_INFO", &(accel + 2).to_string())
}

/// The ray-marcher's complete WGSL module.
pub fn shader_source() -> String {
    shader_source_of(ShaderPart::March, &ShaderConfig::default())
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn prelude_has_every_constant_the_shader_uses() {
        let p = prelude();
        assert!(p.contains("const UPPER_OFF_TABLE: u32 = 8256u;"));
        assert!(p.contains("const LOWER_SIZE: u32 = 33856u;"));
        assert!(p.contains("const MAGIC_NUMB_LO: u32 = 1869504846u;"));
        let src = shader_source() + &shader_source_of(ShaderPart::Accel, &ShaderConfig::default());
        for line in p.lines().filter(|l| l.starts_with("const ")) {
            let name = line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .trim_end_matches(':');
            assert!(
                src.matches(name).count() >= 3,
                "{name} is generated but never used"
            );
        }
    }

    /// The shader files as written, before the prelude.
    const FILES: [(&str, &str); 4] = [
        ("common.wgsl", include_str!("../../shaders/common.wgsl")),
        ("march.wgsl", include_str!("../../shaders/march.wgsl")),
        ("accel.wgsl", include_str!("../../shaders/accel.wgsl")),
        ("crc.wgsl", include_str!("../../shaders/crc.wgsl")),
    ];

    #[test]
    fn uniform_encoding_constants_are_generated_from_rust() {
        let p = prelude();
        for (name, value) in [
            ("MAX_ATTRS", MAX_ATTRIBUTES as u32),
            ("MODE_SHADED", Mode::Shaded as u32),
            ("MODE_MIP", Mode::Mip as u32),
            ("MODE_ISO", Mode::Isosurface as u32),
            ("FLAG_HDDA", FLAG_HDDA),
            ("FLAG_ORTHO", FLAG_ORTHO),
            ("FLAG_SHADOWS", FLAG_SHADOWS),
            ("FLAG_GROUND", FLAG_GROUND),
            ("FLAG_JITTER", FLAG_JITTER),
            ("FLAG_ACCEL", FLAG_ACCEL),
            ("KIND_SCATTER", KIND_SCATTER),
            ("KIND_EMISSIVE", KIND_EMISSIVE),
        ] {
            let line = format!("const {name}: u32 = {value}u;");
            assert_eq!(p.matches(&line).count(), 1, "prelude lacks {line:?}");
        }
        // No shader file declares a constant the prelude generates (a second declaration
        // could drift from the Rust value; WGSL would reject the duplicate anyway, but only
        // on a device).
        let generated: Vec<&str> = p
            .lines()
            .filter_map(|l| l.strip_prefix("const ")?.split(':').next())
            .collect();
        for (file, text) in FILES {
            for line in text.lines() {
                if let Some(rest) = line.trim_start().strip_prefix("const ") {
                    let name = rest.split(':').next().unwrap_or_default().trim();
                    assert!(
                        !generated.contains(&name),
                        "{file} declares {name}, which the prelude generates"
                    );
                }
            }
        }
    }

    #[test]
    fn the_tone_map_is_written_once_and_every_pass_that_writes_the_image_has_it() {
        let files = [
            ("common.wgsl", include_str!("../../shaders/common.wgsl")),
            ("march.wgsl", include_str!("../../shaders/march.wgsl")),
            ("accel.wgsl", include_str!("../../shaders/accel.wgsl")),
            ("path.wgsl", include_str!("../../shaders/path.wgsl")),
            ("points.wgsl", include_str!("../../shaders/points.wgsl")),
            ("denoise.wgsl", include_str!("../../shaders/denoise.wgsl")),
        ];
        // ACES's and sRGB's constants appear in tonemap.wgsl only.
        for (file, text) in files {
            for constant in ["2.51", "0.0031308", "12.92"] {
                assert!(!text.contains(constant), "{file} has a tone map of its own");
            }
        }
        let cfg = ShaderConfig::default();
        for (what, src) in [
            ("march", shader_source_of(ShaderPart::March, &cfg)),
            ("path", shader_source_of(ShaderPart::Path, &cfg)),
            ("denoise", denoise_source()),
        ] {
            assert_eq!(src.matches("fn tone_map(").count(), 1, "{what}");
        }
    }

    #[test]
    fn common_declares_and_reads_every_part() {
        for parts in [1, 8, 9, 16, 64] {
            let cfg = ShaderConfig {
                parts,
                ..Default::default()
            };
            let declared = cfg.declared_parts();
            assert_eq!(declared, parts.max(MAX_PARTS as u32));
            let src = shader_source_of(ShaderPart::March, &cfg);
            for k in 0..declared {
                let decl = format!(
                    "@binding({}) var<storage, read> p{k}: array<u32>;",
                    PART_BINDING + k
                );
                assert_eq!(src.matches(&decl).count(), 1, "no {decl:?}");
                let read = if k == 0 {
                    "case 0u: { if o < arrayLength(&p0) { return p0[o]; } }".to_string()
                } else {
                    format!(
                        "case {k}u: {{ if {k}u < USED_PARTS && o < arrayLength(&p{k}) {{ return p{k}[o]; }} }}"
                    )
                };
                assert_eq!(src.matches(&read).count(), 1, "ld lacks {read:?}");
            }
            let extra = format!("var<storage, read> p{declared}:");
            assert!(!src.contains(&extra), "more parts than declared");
            let accel = format!(
                "@binding({}) var<storage, read> accel:",
                PART_BINDING + declared
            );
            assert!(src.contains(&accel), "no {accel:?}");
            for placeholder in ["PART_DECLARATIONS", "PART_CASES", "ACCEL_BINDING"] {
                assert!(!src.contains(placeholder), "{placeholder} left in");
            }
        }
    }

    #[test]
    fn every_shader_parses_and_validates() {
        let modules = [
            ("march", shader_source()),
            (
                "accel",
                shader_source_of(ShaderPart::Accel, &ShaderConfig::default()),
            ),
            (
                "march, small parts",
                shader_source_of(
                    ShaderPart::March,
                    &ShaderConfig {
                        part_bytes: MIN_PART_BYTES,
                        attr_channels: 4,
                        parts: 1,
                        ..Default::default()
                    },
                ),
            ),
            (
                "accel, most parts",
                shader_source_of(
                    ShaderPart::Accel,
                    &ShaderConfig {
                        parts: PARTS_LIMIT as u32,
                        ..Default::default()
                    },
                ),
            ),
            ("crc", FILES[3].1.to_string()),
            (
                "points",
                shader_source_of(ShaderPart::Points, &ShaderConfig::default()),
            ),
        ];
        // What every Vulkan device wgpu opens grants (`unpack2x16float` of Half grids needs
        // the f16-in-f32 downlevel capability).
        let caps = naga::valid::Capabilities::default()
            | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        for (name, src) in modules {
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&src)));
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&src)));
        }
    }
}
