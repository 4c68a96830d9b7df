/* train.h — `ptrain train`: the whole fine-tune, from the config to the final adapter. */
#ifndef PTRAIN_TRAIN_H
#define PTRAIN_TRAIN_H

#include "ptrain/backend.h"
#include "ptrain/config.h"
#include "ptrain/dist.h"

pt_status train_run(const pt_config *cfg, const pt_dist *d, pt_backend *be, int threads);

#endif
