/* crc32c.c — CRC-32C, the checksum TFRecord files (TensorBoard's event files) frame each record
 * with: a table of 256 entries, one byte at a time. Records are a few dozen bytes, so speed does
 * not matter; the table is built once, on first use. */
#include <pthread.h>

#include "watch_internal.h"

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

uint32_t crc32c(const void *data, size_t n)
{
    pthread_once(&table_once, table_build);
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t crc32c_masked(const void *data, size_t n)
{
    uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
