/* protobuf.c — writing protocol-buffer messages by hand: varints, fixed-width numbers and
 * length-delimited fields, enough for the few fields of TensorBoard's Event, Summary and SessionLog
 * (tfevents.c). The bytes grow in a pb_buf; an allocation that fails marks it failed, and the
 * caller checks once at the end. */
#include <stdlib.h>
#include <string.h>

#include "watch_internal.h"

void pb_raw(pb_buf *b, const void *data, size_t n)
{
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n) cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown, b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
}

void pb_varint(pb_buf *b, uint64_t v)
{
    unsigned char out[10];
    size_t n = 0;
    do {
        out[n] = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v) out[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, out, n);
}

void pb_key(pb_buf *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

void pb_int64(pb_buf *b, int field, int64_t v)
{
    pb_key(b, field, PB_VARINT);
    pb_varint(b, (uint64_t)v); /* negative int64s take ten bytes, as protobuf writes them */
}

/* Little-endian, whatever the host's order. */
static void put_le(pb_buf *b, uint64_t bits, int bytes)
{
    unsigned char out[8];
    for (int i = 0; i < bytes; i++) out[i] = (unsigned char)(bits >> (8 * i));
    pb_raw(b, out, (size_t)bytes);
}

void pb_double(pb_buf *b, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(b, field, PB_FIXED64);
    put_le(b, bits, 8);
}

void pb_float(pb_buf *b, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(b, field, PB_FIXED32);
    put_le(b, bits, 4);
}

void pb_bytes(pb_buf *b, int field, const void *data, size_t n)
{
    pb_key(b, field, PB_LEN);
    pb_varint(b, n);
    pb_raw(b, data, n);
}

void pb_message(pb_buf *b, int field, const pb_buf *inner)
{
    if (inner->failed) b->failed = true;
    pb_bytes(b, field, inner->data, inner->len);
}

void pb_free(pb_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}
