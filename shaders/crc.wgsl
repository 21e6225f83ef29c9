// CRC-32 (IEEE, reflected) of extents of a storage buffer: one invocation per 4 KiB block,
// the slicing-by-4 tables and the byte powers in workgroup memory. Each block's CRC is moved
// past the bytes after it in its extent (multiplied by x^(8·rest) mod P) and XORed into the
// extent's result, which gives the CRC of the whole extent (CRC is linear over GF(2)).
//
// `ext` layout: [n_ext, n_blocks, out_base, then per extent its word offset (from the start
// of the `data` binding), then per extent its length in bytes, then per extent the index of
// its first block, then the total block count].

const CRC_BLOCK: u32 = 4096u;
const TABLE_WORDS: u32 = 1088u; // 4 × 256 slicing tables + 64 byte powers
const WG: u32 = 64u;
const HEAD: u32 = 3u;

@group(0) @binding(0) var<storage, read> data: array<u32>;
@group(0) @binding(1) var<storage, read> ext: array<u32>;
@group(0) @binding(2) var<storage, read> tables: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<atomic<u32>>;

var<workgroup> t: array<u32, 1088>;

fn mul_mod_p(a: u32, b: u32) -> u32 {
    var prod = 0u;
    var bx = b;
    for (var i = 0u; i < 32u; i++) {
        if ((a & (0x80000000u >> i)) != 0u) {
            prod ^= bx;
        }
        bx = (bx >> 1u) ^ (0xEDB88320u & (0u - (bx & 1u)));
    }
    return prod;
}

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    for (var i = li; i < TABLE_WORDS; i += WG) {
        t[i] = tables[i];
    }
    workgroupBarrier();

    let n_ext = ext[0];
    let n_blocks = ext[1];
    let out_base = ext[2];
    let b = (wg.y * nwg.x + wg.x) * WG + li;
    if (b >= n_blocks) {
        return;
    }
    let first = HEAD + 2u * n_ext;
    // The extent holding block b: the last e with first_block[e] <= b.
    var lo = 0u;
    var hi = n_ext;
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (ext[first + mid] <= b) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let e = lo;
    let start = (b - ext[first + e]) * CRC_BLOCK;
    let total = ext[HEAD + n_ext + e];
    let len = min(total - start, CRC_BLOCK);
    let w0 = ext[HEAD + e] + start / 4u;

    var c = 0xFFFFFFFFu;
    let words = len / 4u;
    for (var i = 0u; i < words; i++) {
        c ^= data[w0 + i];
        c = t[768u + (c & 0xFFu)] ^ t[512u + ((c >> 8u) & 0xFFu)]
            ^ t[256u + ((c >> 16u) & 0xFFu)] ^ t[c >> 24u];
    }
    for (var i = words * 4u; i < len; i++) {
        let byte = (data[w0 + i / 4u] >> (8u * (i % 4u))) & 0xFFu;
        c = (c >> 8u) ^ t[(c ^ byte) & 0xFFu];
    }
    c = ~c;

    // Move the block's CRC past the rest of the extent.
    var rest = total - (start + len);
    for (var k = 0u; rest != 0u; k++) {
        if ((rest & 1u) != 0u) {
            c = mul_mod_p(t[1024u + k], c);
        }
        rest >>= 1u;
    }
    atomicXor(&out[out_base + e], c);
}
