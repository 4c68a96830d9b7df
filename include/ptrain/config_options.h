/* config_options.h — each module's own options, filled from the config in one place
 * (src/train/config_options.c; the exporter's in export.h). The modules the trainer drives take only the keys they use, so they do
 * not depend on pt_config; the options borrow the config's strings and lists (keep the config
 * alive while they are used). */
#ifndef PTRAIN_CONFIG_OPTIONS_H
#define PTRAIN_CONFIG_OPTIONS_H

#include "ptrain/config.h"
#include "ptrain/dataset.h"
#include "ptrain/hub.h"
#include "ptrain/resume.h"

/* What dataset_prepare and dataset_load read. */
dataset_options dataset_options_from_config(const pt_config *cfg);
/* The settings a Hub model card shows (hub_card_info.settings). */
hub_card_settings hub_card_settings_from_config(const pt_config *cfg);
/* Where resume_find looks (resume_from_checkpoint, output_dir). */
resume_options resume_options_from_config(const pt_config *cfg);

#endif
