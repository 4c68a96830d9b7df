/* watch_internal.h — the pieces src/watch shares inside itself: CRC-32C (the checksum of TFRecord
 * framing) and a small protocol-buffer writer (the Event and Summary messages of TensorBoard event
 * files). Internal to src/watch (and its unit test). */
#ifndef PTRAIN_WATCH_INTERNAL_H
#define PTRAIN_WATCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ptrain/heartbeat.h"
#include "ptrain/hub.h"
#include "ptrain/runlog.h"
#include "ptrain/watch.h"

/* ---- crc32c.c ---- */

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord files use it. */
uint32_t crc32c(const void *data, size_t n);
/* TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of data holding
 * CRCs is not itself easy to mistake for one. */
uint32_t crc32c_masked(const void *data, size_t n);

/* ---- protobuf.c: a message's bytes, field after field ---- */

/* The wire types of the fields written here. */
enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };

typedef struct {
    unsigned char *data;
    size_t len, cap;
    bool failed; /* an allocation failed: the bytes are incomplete */
} pb_buf;

void pb_varint(pb_buf *b, uint64_t v);
/* A field's key: its number and wire type. */
void pb_key(pb_buf *b, int field, int wire);
void pb_int64(pb_buf *b, int field, int64_t v);
void pb_double(pb_buf *b, int field, double v);
void pb_float(pb_buf *b, int field, float v);
/* A string, bytes, or a message's bytes (inner). */
void pb_bytes(pb_buf *b, int field, const void *data, size_t n);
void pb_message(pb_buf *b, int field, const pb_buf *inner);
/* Raw bytes, no key (the framing around a message). */
void pb_raw(pb_buf *b, const void *data, size_t n);
void pb_free(pb_buf *b);

/* ---- status.c, status_print.c: what `ptrain status` finds and shows ---- */

typedef struct {
    const char *dir;
    bool has_hb, has_log;
    heartbeat_info hb;
    const char *state; /* starting, running, finished, stopped, failed, not_running, or unknown */
    char why[512];     /* not_running, unknown: what tells */
    double now;        /* Unix seconds, when read */
    runlog log;
    watch_ckpts ck;
    hub_waiting *jobs;
    int n_jobs;
    int64_t step, total; /* steps done, of total (0: not known) */
} run_status;

/* What makes a stopped or killed run continue: heartbeat_continue_text for its config, or, with no
 * complete checkpoint yet, that the same command starts it again. */
void status_continue_text(const run_status *s, char *out, size_t len);
/* Print st as a few lines of text, or as one JSON object. */
void status_print_text(const run_status *st, FILE *out);
pt_status status_print_json(const run_status *st, FILE *out);

#endif
