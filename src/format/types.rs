//! Small value types shared by the NanoVDB reader, writer and the dataset layer.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A signed index-space coordinate (i, j, k), as NanoVDB's `Coord`.
pub type Coord = [i32; 3];

/// NanoVDB's `GridType`: the value type stored in a grid. The numbers are NanoVDB's ABI values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u32)]
pub enum GridType {
    /// No or an unrecognised value type.
    Unknown = 0,
    /// 32-bit float values.
    Float = 1,
    /// 64-bit float values.
    Double = 2,
    /// 16-bit signed integers.
    Int16 = 3,
    /// 32-bit signed integers.
    Int32 = 4,
    /// 64-bit signed integers.
    Int64 = 5,
    /// Three 32-bit floats (e.g. velocity).
    Vec3f = 6,
    /// Three 64-bit floats.
    Vec3d = 7,
    /// Active states only, no values.
    Mask = 8,
    /// 16-bit IEEE half floats.
    Half = 9,
    /// 32-bit unsigned integers.
    UInt32 = 10,
    /// One bit per voxel.
    Boolean = 11,
    /// Four 8-bit colour channels packed in 32 bits.
    Rgba8 = 12,
    /// 4-bit quantised floats (per-leaf minimum and scale).
    Fp4 = 13,
    /// 8-bit quantised floats (per-leaf minimum and scale).
    Fp8 = 14,
    /// 16-bit quantised floats (per-leaf minimum and scale).
    Fp16 = 15,
    /// Variable-bit-width quantised floats.
    FpN = 16,
    /// Four 32-bit floats.
    Vec4f = 17,
    /// Four 64-bit floats.
    Vec4d = 18,
    /// Indices into external value arrays, every voxel.
    Index = 19,
    /// Indices into external value arrays, active voxels only.
    OnIndex = 20,
    /// `Index` with a mask.
    IndexMask = 21,
    /// `OnIndex` with a mask.
    OnIndexMask = 22,
    /// Point indices.
    PointIndex = 23,
    /// Three 8-bit unsigned integers.
    Vec3u8 = 24,
    /// Three 16-bit unsigned integers.
    Vec3u16 = 25,
    /// 8-bit unsigned integers.
    UInt8 = 26,
}

impl GridType {
    /// Every known grid type, in ABI order.
    pub const ALL: [GridType; 27] = [
        GridType::Unknown,
        GridType::Float,
        GridType::Double,
        GridType::Int16,
        GridType::Int32,
        GridType::Int64,
        GridType::Vec3f,
        GridType::Vec3d,
        GridType::Mask,
        GridType::Half,
        GridType::UInt32,
        GridType::Boolean,
        GridType::Rgba8,
        GridType::Fp4,
        GridType::Fp8,
        GridType::Fp16,
        GridType::FpN,
        GridType::Vec4f,
        GridType::Vec4d,
        GridType::Index,
        GridType::OnIndex,
        GridType::IndexMask,
        GridType::OnIndexMask,
        GridType::PointIndex,
        GridType::Vec3u8,
        GridType::Vec3u16,
        GridType::UInt8,
    ];

    /// The grid type with this ABI number, if it is one NanoVDB defines.
    pub fn from_u32(v: u32) -> Option<GridType> {
        GridType::ALL.get(v as usize).copied()
    }

    /// NanoVDB's spelling of the type name (as `nanovdb_print` shows it).
    pub fn name(self) -> &'static str {
        match self {
            GridType::Unknown => "?",
            GridType::Float => "float",
            GridType::Double => "double",
            GridType::Int16 => "int16",
            GridType::Int32 => "int32",
            GridType::Int64 => "int64",
            GridType::Vec3f => "Vec3f",
            GridType::Vec3d => "Vec3d",
            GridType::Mask => "Mask",
            GridType::Half => "Half",
            GridType::UInt32 => "uint32",
            GridType::Boolean => "bool",
            GridType::Rgba8 => "RGBA8",
            GridType::Fp4 => "Float4",
            GridType::Fp8 => "Float8",
            GridType::Fp16 => "Float16",
            GridType::FpN => "FloatN",
            GridType::Vec4f => "Vec4f",
            GridType::Vec4d => "Vec4d",
            GridType::Index => "Index",
            GridType::OnIndex => "OnIndex",
            GridType::IndexMask => "IndexMask",
            GridType::OnIndexMask => "OnIndexMask",
            GridType::PointIndex => "PointIndex",
            GridType::Vec3u8 => "Vec3u8",
            GridType::Vec3u16 => "Vec3u16",
            GridType::UInt8 => "uint8",
        }
    }
}

impl fmt::Display for GridType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// NanoVDB's `GridClass`: what the values mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u32)]
pub enum GridClass {
    /// Nothing said about the values.
    Unknown = 0,
    /// Signed distances to a surface.
    LevelSet = 1,
    /// Densities in [0, 1], zero outside.
    FogVolume = 2,
    /// A MAC (face-centred) vector grid.
    Staggered = 3,
    /// Indices of points.
    PointIndex = 4,
    /// Point attributes.
    PointData = 5,
    /// Active states only.
    Topology = 6,
    /// Voxels drawn as boxes.
    VoxelVolume = 7,
    /// An index grid into external values.
    IndexGrid = 8,
    /// Tensor values.
    TensorGrid = 9,
}

impl GridClass {
    /// The grid class with this ABI number, if NanoVDB defines it.
    pub fn from_u32(v: u32) -> Option<GridClass> {
        use GridClass::*;
        [
            Unknown,
            LevelSet,
            FogVolume,
            Staggered,
            PointIndex,
            PointData,
            Topology,
            VoxelVolume,
            IndexGrid,
            TensorGrid,
        ]
        .get(v as usize)
        .copied()
    }

    /// NanoVDB's spelling of the class name.
    pub fn name(self) -> &'static str {
        match self {
            GridClass::Unknown => "?",
            GridClass::LevelSet => "SDF",
            GridClass::FogVolume => "FOG",
            GridClass::Staggered => "MAC",
            GridClass::PointIndex => "PNTIDX",
            GridClass::PointData => "PNTDAT",
            GridClass::Topology => "TOPO",
            GridClass::VoxelVolume => "VOX",
            GridClass::IndexGrid => "INDEX",
            GridClass::TensorGrid => "TENSOR",
        }
    }
}

impl fmt::Display for GridClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Compression codec of a grid inside a segmented `.nvdb` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u16)]
pub enum Codec {
    /// Stored uncompressed.
    None = 0,
    /// zlib (deflate) compressed.
    Zip = 1,
    /// Blosc compressed (LZ4 inside, as NanoVDB writes it).
    Blosc = 2,
}

impl Codec {
    /// The codec with this ABI number.
    pub fn from_u16(v: u16) -> Option<Codec> {
        match v {
            0 => Some(Codec::None),
            1 => Some(Codec::Zip),
            2 => Some(Codec::Blosc),
            _ => None,
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Codec::None => "none",
            Codec::Zip => "zip",
            Codec::Blosc => "blosc",
        })
    }
}

/// A NanoVDB version: major.minor.patch packed as `major << 21 | minor << 10 | patch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Version(pub u32);

impl Version {
    /// Builds a version from its parts.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version(major << 21 | minor << 10 | patch)
    }
    /// Major version (the ABI: 32 for every version this crate reads).
    pub const fn major(self) -> u32 {
        self.0 >> 21
    }
    /// Minor version.
    pub const fn minor(self) -> u32 {
        (self.0 >> 10) & 0x7ff
    }
    /// Patch version.
    pub const fn patch(self) -> u32 {
        self.0 & 0x3ff
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major(), self.minor(), self.patch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_packs_like_nanovdb() {
        let v = Version::new(32, 9, 2);
        assert_eq!(v.0, 32 << 21 | 9 << 10 | 2);
        assert_eq!((v.major(), v.minor(), v.patch()), (32, 9, 2));
        assert_eq!(v.to_string(), "32.9.2");
    }

    #[test]
    fn grid_type_numbers_match_abi() {
        for (i, t) in GridType::ALL.iter().enumerate() {
            assert_eq!(*t as u32, i as u32);
            assert_eq!(GridType::from_u32(i as u32), Some(*t));
        }
        assert_eq!(GridType::from_u32(27), None);
        assert_eq!(GridClass::from_u32(2), Some(GridClass::FogVolume));
        assert_eq!(GridClass::from_u32(10), None);
    }
}
