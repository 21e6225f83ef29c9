/* Reads values and active states from a NanoVDB grid buffer with PNanoVDB, NanoVDB's portable
 * C/HLSL/GLSL reader, as bundled with warp-lang (warp/native/nanovdb/PNanoVDB.h, 32.8).
 * warp's own volume_lookup_f only serves Float grids; this decodes Fp4/Fp8/Fp16/FpN too.
 * Built by warp_read.py into a temporary shared library. */
#define PNANOVDB_C
#include "PNanoVDB.h"

/* For each of n coordinates (x, y, z triples in ijk): value into out[i], active state into
 * active[i]. Returns the grid type, or -1 for a type this shim does not decode. */
int read_values(const void *data, uint64_t size, uint32_t n, const int32_t *ijk, float *out,
                uint8_t *active)
{
    pnanovdb_buf_t buf = pnanovdb_make_buf((uint32_t *)data, size / 4u);
    pnanovdb_grid_handle_t grid = {pnanovdb_address_null()};
    pnanovdb_tree_handle_t tree = pnanovdb_grid_get_tree(buf, grid);
    pnanovdb_root_handle_t root = pnanovdb_tree_get_root(buf, tree);
    pnanovdb_grid_type_t t = pnanovdb_grid_get_grid_type(buf, grid);
    pnanovdb_readaccessor_t acc;
    pnanovdb_readaccessor_init(&acc, root);
    for (uint32_t i = 0; i < n; ++i) {
        pnanovdb_coord_t c = {ijk[3 * i], ijk[3 * i + 1], ijk[3 * i + 2]};
        pnanovdb_uint32_t level = 0;
        pnanovdb_address_t a = pnanovdb_root_get_value_address_and_level(t, buf, root, &c, &level);
        switch (t) {
        case PNANOVDB_GRID_TYPE_FLOAT: out[i] = pnanovdb_read_float(buf, a); break;
        case PNANOVDB_GRID_TYPE_FP4: out[i] = pnanovdb_root_fp4_read_float(buf, a, &c, level); break;
        case PNANOVDB_GRID_TYPE_FP8: out[i] = pnanovdb_root_fp8_read_float(buf, a, &c, level); break;
        case PNANOVDB_GRID_TYPE_FP16: out[i] = pnanovdb_root_fp16_read_float(buf, a, &c, level); break;
        case PNANOVDB_GRID_TYPE_FPN: out[i] = pnanovdb_root_fpn_read_float(buf, a, &c, level); break;
        default: return -1;
        }
        active[i] = pnanovdb_readaccessor_is_active(t, buf, &acc, &c) ? 1 : 0;
    }
    return (int)t;
}
