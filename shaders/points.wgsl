// supercell shaders, point sampling: every bound grid's value at given world positions,
// read with common.wgsl's accessor and trilinear `sample`, exactly as the march reads a
// sample (probes, slices and line plots in the player). Group 0 is the march's; group 1
// holds the points and the results.
//
// One buffer holds the points and the results (one storage binding beside the march's, as
// many as the acceleration passes' dispatch arguments take: a frame of the most parts the
// device binds leaves room for no more). io[0].x: the number of points n (u32 bits);
// io[1 + i]: point i's world position (metres) in xyz, w unused; then from io[1 + n], per
// point i and channel a, at io[1 + n + 2 · (i · ATTR_CHANNELS + a)]: the value in x, and in y 1
// where there is one (0: no usable grid in the channel, or the position's index lies beyond
// ±INDEX_REACH); at the next one the position's continuous index coordinate in that grid.

@group(1) @binding(0) var<storage, read_write> io: array<vec4<f32>>;

// Index coordinates a read may reach: far inside i32, so `floor` converts exactly.
const INDEX_REACH: f32 = 1.0e9;

@compute @workgroup_size(64)
fn sample_points(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let n = bitcast<u32>(io[0].x);
    if i >= n || 1u + n + 2u * (i + 1u) * ATTR_CHANNELS > arrayLength(&io) { return; }
    let w = io[1u + i].xyz;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
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
        let o = 1u + n + 2u * (i * ATTR_CHANNELS + a);
        io[o] = value;
        io[o + 1u] = index;
    }
}
