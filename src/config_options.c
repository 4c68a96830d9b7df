/* config_options.c — the config's keys as each module's own options (config_options.h): the one
 * place that knows both pt_config and the option structs of src/data, src/hub, src/export and
 * resume.c. Plain copies of values and pointers; nothing is checked or converted here. */
#include "ptrain/config_options.h"

dataset_options dataset_options_from_config(const pt_config *cfg)
{
    return (dataset_options){.datasets = cfg->datasets, .n_datasets = cfg->n_datasets,
                             .max_seq_length = cfg->max_seq_length, .chat_template = cfg->chat_template,
                             .assistant_only_loss = cfg->assistant_only_loss,
                             .dataset_text_field = cfg->dataset_text_field, .packing = cfg->packing,
                             .val_split_ratio = cfg->val_split_ratio, .seed = cfg->seed};
}
