/* train_load.c — the model of a training run, read and quantized once per node (or once per job):
 * the first rank of each node loads it into a weight image in the node's shared memory (an MPI
 * shared window, dist.c; model_share.h), the node's ranks bind to that image (the CPU backend in
 * place: one copy of the weights per node, however many ranks; a GPU uploads from it), and every
 * rank loads the tokenizer itself. With model_read: broadcast, rank 0 alone loads and the image goes
 * to the other nodes' first ranks over MPI. The image's CRC-32 is compared across ranks like the
 * config hash. With one rank, or when the node's shared memory is too small (said once), each
 * rank loads its own copy as before. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ptrain/log.h"
#include "ptrain/model_io.h"
#include "ptrain/model_share.h"
#include "ptrain/progress.h"
#include "trainer.h"

static pt_status load_alone(trainer *t)
{
    t->read_model = true;
    pt_load_options lo = {.load_in_4bit = t->cfg->load_in_4bit, .quantize_s = &t->start.s[START_QUANTIZE]};
    return model_load(t->cfg->model_name, t->cfg->revision, &lo, t->be, &t->m, &t->tok, t->model_path,
                      sizeof t->model_path);
}

/* Whether this rank fills the image: every node's first rank, or rank 0 alone with broadcast. */
static bool fills_image(const trainer *t)
{
    if (t->d->local_rank != 0) return false;
    return t->cfg->model_read == MODEL_READ_PER_NODE || t->d->rank == 0 || t->d->nodes < 2;
}

/* The loading rank: the model onto the image, its description into *desc. */
static pt_status fill(trainer *t, void *base, size_t cap, void **desc, size_t *n, size_t *used)
{
    t->read_model = true;
    weight_image im;
    weight_image_open(&im, base, cap);
    pt_load_options lo = {.load_in_4bit = t->cfg->load_in_4bit, .quantize_s = &t->start.s[START_QUANTIZE]};
    pt_model m;
    TRY(model_load(t->cfg->model_name, t->cfg->revision, &lo, &im.be, &m, NULL, NULL, 0));
    pt_status st = model_describe(&m, base, desc, n);
    *used = im.used;
    model_free(&m);
    return st;
}

/* The image's size and description travel from the loading rank(s): rank 0 to the other nodes'
 * first ranks (broadcast: the image's bytes too), then each node's first rank to its node. */
static pt_status share_description(trainer *t, void *base, void **desc, size_t *n, uint64_t *used)
{
    const pt_dist *d = t->d;
    uint64_t sizes[2] = {*n, *used};
    bool sent = t->cfg->model_read == MODEL_READ_BROADCAST;
    if (sent) TRY(dist_leaders_bcast(d, sizes, sizeof sizes));
    TRY(dist_node_bcast(d, sizes, sizeof sizes));
    *n = sizes[0], *used = sizes[1];
    if (!*desc && !(*desc = malloc(*n ? *n : 1))) return ERR(PT_ERR_NOMEM, "out of memory");
    if (sent) {
        TRY(dist_leaders_bcast(d, *desc, *n));
        TRY(dist_leaders_bcast(d, base, *used));
    }
    return dist_node_bcast(d, *desc, *n);
}

/* Every rank's image must hold the same bytes (per node read from the shared filesystem, or sent). */
static pt_status check_image(trainer *t, const void *base, uint64_t used)
{
    uint32_t crc = 0;
    if (t->d->local_rank == 0) crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), base, (uInt)0);
    for (uint64_t off = 0; t->d->local_rank == 0 && off < used; off += 1u << 30) {
        uint64_t len = used - off < (1u << 30) ? used - off : (1u << 30);
        crc = (uint32_t)crc32(crc, (const Bytef *)base + off, (uInt)len);
    }
    TRY(dist_node_bcast(t->d, &crc, sizeof crc));
    return dist_check_same(t->d, crc, "model image (the weights as loaded)",
                           "the model file differs between nodes: put it on a filesystem every node sees the same, "
                           "or set model_read: broadcast");
}

/* The shared path: a window on every node, filled once, bound by every rank. */
static pt_status load_shared(trainer *t, void *base, size_t cap)
{
    void *desc = NULL;
    size_t n = 0, used = 0;
    pt_status st = fills_image(t) ? fill(t, base, cap, &desc, &n, &used) : PT_OK;
    TRY(dist_node_wait(t->d)); /* the node's other ranks sleep meanwhile: the loading rank has the cores */
    TRY(dist_agree(t->d, st));
    uint64_t used64 = used;
    st = share_description(t, base, &desc, &n, &used64);
    if (st == PT_OK) st = check_image(t, base, used64);
    if (st == PT_OK) st = model_bind(desc, n, base, t->be, t->be->device < 0, &t->m);
    free(desc);
    return st;
}

static pt_status load_model(trainer *t)
{
    const pt_dist *d = t->d;
    if (d->world == 1 || (d->local_world == 1 && t->cfg->model_read == MODEL_READ_PER_NODE))
        return dist_agree(d, load_alone(t)); /* nothing to share: one rank per node, each reads */
    pt_model_format fmt;
    TRY(dist_agree(d, model_load_tokenizer(t->cfg->model_name, t->cfg->revision, &t->tok, t->model_path,
                                           sizeof t->model_path, &fmt)));
    size_t bound = 0, cap = 0;
    void *base = NULL;
    TRY(dist_agree(d, d->local_rank == 0 ? model_image_bound(t->model_path, fmt, &bound) : PT_OK));
    pt_status st = dist_node_window((pt_dist *)d, bound, &base, &cap);
    int failed = st != PT_OK;
    TRY(dist_any(d, &failed));
    if (failed) { /* the node's shared memory is too small: every rank loads its own copy */
        if (st != PT_OK) log_warn("%s; each rank loads its own copy of the model", err_message());
        err_clear();
        dist_node_window_free((pt_dist *)d);
        tokenizer_free(t->tok), t->tok = NULL;
        return dist_agree(d, load_alone(t));
    }
    st = load_shared(t, base, cap);
    if (st == PT_OK) st = model_check_vocab(&t->m, t->tok, t->model_path);
    return dist_agree(d, st);
}

/* How the job read the model: the ranks that read the file themselves (summed over the ranks: the
 * `nodes` line says it, and the two-node tests check it) and the ranks per node. */
static pt_status count_readers(trainer *t)
{
    double readers = t->read_model ? 1 : 0, most, fewest;
    int rank;
    TRY(dist_sum_f64(t->d, &readers, 1));
    TRY(dist_max_loc(t->d, t->d->local_world, &most, &rank));
    TRY(dist_max_loc(t->d, -t->d->local_world, &fewest, &rank));
    t->model_readers = (int)readers;
    t->node_ranks_max = (int)most, t->node_ranks_min = (int)-fewest;
    return PT_OK;
}

pt_status trainer_load_model(trainer *t)
{
    TRY(load_model(t));
    return dist_agree(t->d, count_readers(t));
}
