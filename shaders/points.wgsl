// supercell shaders, point sampling: every bound grid's value at given world positions,
// read with common.wgsl's accessor and trilinear `sample`, exactly as the march reads a
// sample (probes, slices and line plots in the player). Group 0 is the march's; group 1
// holds the points and the results.
//
// pts[i]: world position (metres) in xyz, w unused. res[2 · (i · ATTR_SLOTS + a)]: the
// value at point i of slot a's grid in x, and in y 1 where there is one (0: no usable grid
// in the slot, or the position's index lies beyond ±INDEX_REACH); res[.. + 1]: the
// position's continuous index coordinate in that grid (xyz).

@group(1) @binding(0) var<storage, read> pts: array<vec4<f32>>;
@group(1) @binding(1) var<storage, read_write> res: array<vec4<f32>>;

// Index coordinates a read may reach: far inside i32, so `floor` converts exactly.
const INDEX_REACH: f32 = 1.0e9;

@compute @workgroup_size(64)
fn sample_points(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= arrayLength(&pts) { return; }
    let w = pts[i].xyz;
    for (var a = 0u; a < ATTR_SLOTS; a++) {
        // Each grid's reads get the whole work budget, as a ray's would.
        work = 0u;
        init_grid(a);
        var value = vec4<f32>(0.0);
        var index = vec4<f32>(0.0);
        if g_ok[a] {
            let p = to_index(a, w);
            index = vec4<f32>(p, 0.0);
            if all(abs(p) < vec3<f32>(INDEX_REACH)) {
                value = vec4<f32>(sample(a, p).value, 1.0, 0.0, 0.0);
            }
        }
        let o = 2u * (i * ATTR_SLOTS + a);
        res[o] = value;
        res[o + 1u] = index;
    }
}
