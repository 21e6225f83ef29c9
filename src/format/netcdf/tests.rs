use super::*;

/// A classic file built field by field, as a writer would lay it out.
struct Build {
    version: ClassicVersion,
    numrecs: u64,
    dims: Vec<(&'static str, u64)>,
    /// name, dimids, type, values per record (or in all)
    vars: Vec<(&'static str, Vec<u64>, u32)>,
}

impl Build {
    fn size(&self, out: &mut Vec<u8>, v: u64) {
        match self.version.size_bytes() {
            8 => out.extend_from_slice(&v.to_be_bytes()),
            _ => out.extend_from_slice(&(v as u32).to_be_bytes()),
        }
    }

    fn name(&self, out: &mut Vec<u8>, n: &str) {
        self.size(out, n.len() as u64);
        out.extend_from_slice(n.as_bytes());
        out.resize(padded(out.len() as u64).unwrap() as usize, 0);
    }

    fn var_bytes(&self, dimids: &[u64], t: u32) -> (bool, u64) {
        let record = dimids
            .first()
            .is_some_and(|&d| self.dims[d as usize].1 == 0);
        let n: u64 = dimids
            .iter()
            .map(|&d| self.dims[d as usize].1)
            .filter(|&l| l > 0)
            .product();
        (record, n * type_size(self.version, t).unwrap())
    }

    /// The header with `begin` offsets laid out after it, and the whole file.
    fn file(&self) -> Vec<u8> {
        let header = |begins: &[u64]| {
            let mut h = b"CDF".to_vec();
            h.push(match self.version {
                ClassicVersion::Classic => 1,
                ClassicVersion::Offset64 => 2,
                ClassicVersion::Data64 => 5,
            });
            self.size(&mut h, self.numrecs);
            h.extend_from_slice(&TAG_DIMENSION.to_be_bytes());
            self.size(&mut h, self.dims.len() as u64);
            for (n, l) in &self.dims {
                self.name(&mut h, n);
                self.size(&mut h, *l);
            }
            // One global attribute: title = "t" (char).
            h.extend_from_slice(&TAG_ATTRIBUTE.to_be_bytes());
            self.size(&mut h, 1);
            self.name(&mut h, "title");
            h.extend_from_slice(&2u32.to_be_bytes());
            self.size(&mut h, 1);
            h.extend_from_slice(b"t\0\0\0");
            h.extend_from_slice(&TAG_VARIABLE.to_be_bytes());
            self.size(&mut h, self.vars.len() as u64);
            for ((n, dimids, t), begin) in self.vars.iter().zip(begins) {
                self.name(&mut h, n);
                self.size(&mut h, dimids.len() as u64);
                for &d in dimids {
                    self.size(&mut h, d);
                }
                h.extend_from_slice(&[0; 4]);
                self.size(&mut h, 0);
                h.extend_from_slice(&t.to_be_bytes());
                let (_, bytes) = self.var_bytes(dimids, *t);
                self.size(&mut h, padded(bytes).unwrap());
                match self.version.offset_bytes() {
                    8 => h.extend_from_slice(&begin.to_be_bytes()),
                    _ => h.extend_from_slice(&(*begin as u32).to_be_bytes()),
                }
            }
            h
        };
        let header_len = header(&vec![0; self.vars.len()]).len() as u64;
        // Non-record variables first, then the records.
        let mut begins = vec![0; self.vars.len()];
        let mut at = header_len;
        for (i, (_, d, t)) in self.vars.iter().enumerate() {
            let (record, bytes) = self.var_bytes(d, *t);
            if !record {
                begins[i] = at;
                at += padded(bytes).unwrap();
            }
        }
        let records: Vec<usize> = (0..self.vars.len())
            .filter(|&i| self.var_bytes(&self.vars[i].1, self.vars[i].2).0)
            .collect();
        let mut recsize = 0;
        for &i in &records {
            begins[i] = at + recsize;
            let bytes = self.var_bytes(&self.vars[i].1, self.vars[i].2).1;
            recsize += if records.len() == 1 {
                bytes
            } else {
                padded(bytes).unwrap()
            };
        }
        let mut file = header(&begins);
        let end = at + recsize * self.numrecs;
        file.resize(end as usize, 0x42);
        file
    }
}

fn cm1_like(version: ClassicVersion, numrecs: u64) -> Build {
    Build {
        version,
        numrecs,
        dims: vec![("time", 0), ("zh", 3), ("yh", 2), ("xh", 5)],
        vars: vec![
            ("zh", vec![1], 5),
            ("time", vec![0], 6),
            ("qc", vec![0, 1, 2, 3], 5),
            ("b", vec![0, 3], 1),
        ],
    }
}

fn parse(file: &[u8]) -> Result<ClassicHeader, NetcdfHeaderError> {
    parse_classic_header(file, file.len() as u64)
}

#[test]
fn well_formed_files_of_each_version_parse() {
    for version in [
        ClassicVersion::Classic,
        ClassicVersion::Offset64,
        ClassicVersion::Data64,
    ] {
        let file = cm1_like(version, 2).file();
        let h = parse(&file).unwrap_or_else(|e| panic!("{version:?}: {e}"));
        assert_eq!(h.version, version);
        assert_eq!(h.numrecs, 2);
        assert_eq!(h.dimensions.len(), 4);
        assert_eq!(h.global_attributes, 1);
        let names: Vec<&str> = h.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["zh", "time", "qc", "b"]);
        // time 8 + qc 120 + b 5 → 8 (padded 8) + 120 + 8.
        assert_eq!(h.recsize, 8 + 120 + 8);
        assert!(h.variables[2].is_record && !h.variables[0].is_record);
    }
}

#[test]
fn one_record_variable_is_not_padded() {
    let mut b = cm1_like(ClassicVersion::Classic, 3);
    b.vars = vec![("b", vec![0, 3], 1)];
    let file = b.file();
    let h = parse(&file).unwrap();
    assert_eq!(h.recsize, 5);
}

#[test]
fn a_file_cut_short_names_the_variable_and_the_bytes_missing() {
    let file = cm1_like(ClassicVersion::Offset64, 2).file();
    // The last record's padding (3 bytes after b's 5) is not data: cut into b itself.
    let short = &file[..file.len() - 4];
    match parse(short) {
        Err(NetcdfHeaderError::Short {
            variable,
            what,
            end,
            file_len,
            ..
        }) => {
            assert_eq!(variable, "b");
            assert_eq!(what, "record 1 of 2");
            assert_eq!(
                (end, file_len),
                (file.len() as u64 - 3, file.len() as u64 - 4)
            );
        }
        other => panic!("{other:?}"),
    }
    // Cut into the non-record data: zh (at the header's end) is missing.
    let h = parse(&file).unwrap();
    let cut = &file[..h.header_len as usize + 4];
    let e = parse(cut).unwrap_err().to_string();
    assert!(e.contains("variable zh: its data needs bytes"), "{e}");
    assert!(e.contains("truncated"), "{e}");
}

fn set_u32(file: &mut [u8], at: usize, v: u32) {
    file[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Byte offset of the `n`th occurrence of the 4-byte big-endian `v` after `from`.
fn find_u32(file: &[u8], from: usize, v: u32) -> usize {
    from + file[from..]
        .windows(4)
        .position(|w| w == v.to_be_bytes())
        .expect("field present")
}

#[test]
fn a_huge_record_count_is_a_short_file() {
    let mut file = cm1_like(ClassicVersion::Classic, 2).file();
    set_u32(&mut file, 4, 0x7fff_fff0);
    let e = parse(&file).unwrap_err();
    assert!(matches!(e, NetcdfHeaderError::Short { .. }), "{e}");
    set_u32(&mut file, 4, u32::MAX);
    let e = parse(&file).unwrap_err().to_string();
    assert!(e.contains("STREAMING"), "{e}");
}

#[test]
fn huge_counts_are_bounded_by_the_file() {
    let file = cm1_like(ClassicVersion::Classic, 1).file();
    // Dimension count (after the tag at byte 8).
    let mut f = file.clone();
    set_u32(&mut f, 12, 0x7fff_ffff);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("dimension cannot fit"), "{e}");
    // Variable count.
    let mut f = file.clone();
    let at = find_u32(&f, 8, TAG_VARIABLE) + 4;
    set_u32(&mut f, at, 0x1000_0000);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("variable cannot fit"), "{e}");
    // Global attribute value count.
    let mut f = file;
    let at = find_u32(&f, 8, TAG_ATTRIBUTE) + 4 + 4 + 4 + 8 + 4;
    set_u32(&mut f, at, 0x7fff_0000);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("global attribute title's"), "{e}");
}

/// Offset of variable `name`'s type field: its name, rank, dimids and empty attribute
/// list before it (CDF-1).
fn type_field(file: &[u8], name: &str, rank: usize) -> usize {
    let mut pat = (name.len() as u32).to_be_bytes().to_vec();
    pat.extend_from_slice(name.as_bytes());
    let at = file
        .windows(pat.len())
        .rposition(|w| w == pat.as_slice())
        .unwrap();
    at + 4 + padded(name.len() as u64).unwrap() as usize + 4 + 4 * rank + 8
}

#[test]
fn unknown_types_are_refused() {
    let file = cm1_like(ClassicVersion::Classic, 1).file();
    for t in [0, 7, 99] {
        let mut f = file.clone();
        let at = type_field(&f, "qc", 4);
        set_u32(&mut f, at, t);
        let e = parse(&f).unwrap_err().to_string();
        assert!(e.contains(&format!("variable qc has type {t}")), "{e}");
    }
    // CDF-5 has types 7..11.
    let mut b = cm1_like(ClassicVersion::Data64, 1);
    b.vars[3].2 = 11;
    parse(&b.file()).unwrap();
}

#[test]
fn sizes_that_overflow_are_refused() {
    let mut b = cm1_like(ClassicVersion::Data64, 1);
    b.dims[3].1 = 1 << 62;
    b.vars.truncate(2);
    b.vars.push(("big", vec![1, 3], 6));
    // The builder cannot lay this out; patch the length into a well-formed file.
    let mut ok = cm1_like(ClassicVersion::Data64, 1);
    ok.vars = b.vars.clone();
    let mut f = ok.file();
    let len_at = f.windows(4).position(|w| w == b"xh\0\0").unwrap() + 4;
    f[len_at..len_at + 8].copy_from_slice(&(1u64 << 62).to_be_bytes());
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("overflow"), "{e}");
}

#[test]
fn inconsistent_structure_is_refused() {
    let file = cm1_like(ClassicVersion::Classic, 1).file();
    // vsize of qc changed.
    let mut f = file.clone();
    let at = type_field(&f, "qc", 4) + 4;
    set_u32(&mut f, at, 64);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("vsize is 64"), "{e}");
    // A dimension id out of range.
    let mut f = file.clone();
    let at = type_field(&f, "qc", 4) - 8 - 4;
    set_u32(&mut f, at, 9);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("dimension id 9"), "{e}");
    // The record dimension second.
    let mut f = file.clone();
    set_u32(&mut f, at, 0);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("not its first"), "{e}");
    // A second record dimension.
    let mut f = file.clone();
    let len_at = f.windows(4).position(|w| w == b"xh\0\0").unwrap() + 4;
    set_u32(&mut f, len_at, 0);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("both record dimensions"), "{e}");
    // Data inside the header.
    let mut f = file.clone();
    let at = type_field(&f, "zh", 1) + 8;
    set_u32(&mut f, at, 16);
    let e = parse(&f).unwrap_err().to_string();
    assert!(e.contains("inside the"), "{e}");
    // A bad magic.
    let e = parse(b"CDF\x03\0\0\0\0").unwrap_err().to_string();
    assert!(e.contains("magic"), "{e}");
}

#[test]
fn a_partial_head_asks_for_more() {
    let file = cm1_like(ClassicVersion::Offset64, 1).file();
    let h = parse(&file).unwrap();
    for cut in [0usize, 3, 20, h.header_len as usize - 1] {
        match parse_classic_header(&file[..cut], file.len() as u64) {
            Err(NetcdfHeaderError::NeedMore { have, need }) => {
                assert_eq!(have, cut as u64);
                assert!(need > have && need <= file.len() as u64, "{need}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    assert_eq!(
        parse_classic_header(&file[..h.header_len as usize], file.len() as u64).unwrap(),
        h
    );
}

#[test]
fn every_prefix_and_every_byte_flip_is_handled() {
    // No panic, whatever is cut or changed.
    let file = cm1_like(ClassicVersion::Data64, 2).file();
    for cut in 0..file.len() {
        let _ = parse(&file[..cut]);
    }
    for i in 0..file.len().min(400) {
        for x in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut f = file.clone();
            f[i] = x;
            let _ = parse(&f);
        }
    }
}

#[test]
fn hdf5_superblock_end_of_file() {
    let mut sb = b"\x89HDF\r\n\x1a\n".to_vec();
    // Version 0: versions, sizes (8, 8), K values, flags, then base, free-space, eof.
    sb.extend_from_slice(&[0, 0, 0, 0, 0, 8, 8, 0, 4, 0, 16, 0, 0, 0, 0, 0]);
    sb.extend_from_slice(&0u64.to_le_bytes());
    sb.extend_from_slice(&u64::MAX.to_le_bytes());
    sb.extend_from_slice(&12_345u64.to_le_bytes());
    assert_eq!(hdf5_stored_eof(&sb), Some(12_345));
    // Version 2: sizes, flags, base, extension, eof.
    let mut v2 = b"\x89HDF\r\n\x1a\n".to_vec();
    v2.extend_from_slice(&[2, 8, 8, 0]);
    v2.extend_from_slice(&512u64.to_le_bytes());
    v2.extend_from_slice(&u64::MAX.to_le_bytes());
    v2.extend_from_slice(&1000u64.to_le_bytes());
    assert_eq!(hdf5_stored_eof(&v2), Some(1512));
    assert_eq!(hdf5_stored_eof(&v2[..30]), None);
    assert_eq!(hdf5_stored_eof(b"CDF\x01"), None);
}
