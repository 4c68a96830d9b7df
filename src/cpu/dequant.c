/* dequant.c — rows of a stored weight as fp32, whatever its format: the block formats dequantize
 * row by row (quant.c); NF4 keeps its scales for the whole tensor, so it is addressed by row range
 * (nf4.c). Every CPU op that reads a frozen weight goes through here. */
#include <string.h>

#include "cpu.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"

pt_status cpu_dequantize_rows(const pt_tensor *w, int64_t r0, int64_t rows, float *out)
{
    int64_t k = w->shape[w->ndim - 1];
    if (w->dtype == PT_NF4) return nf4_dequantize_rows(w->data, w->shape[0], k, r0, rows, out);
    size_t row_bytes = dtype_size_bytes(w->dtype, k);
    if (row_bytes == 0)
        return ERR(PT_ERR_INTERNAL, "weight rows of %lld values are not whole %s blocks", (long long)k,
                   dtype_name(w->dtype));
    const char *base = (const char *)w->data + (size_t)r0 * row_bytes;
    for (int64_t r = 0; r < rows; r++) TRY(quant_dequantize_row(w->dtype, base + r * row_bytes, out + r * k, k));
    return PT_OK;
}
