/* config_options.c — the config's keys as each module's own options (config_options.h): the one
 * place that knows both pt_config and the option structs of src/data, src/hub and resume.c (the
 * exporter's are export_options_from_config's, in src/export, since `ptrain export` reads configs
 * too). Copies of values and pointers (the card gets the scheduler's and the optimizer's names,
 * from their choices arrays); nothing is checked here. */
#include "ptrain/config_options.h"

#include "ptrain/method.h"

dataset_options dataset_options_from_config(const pt_config *cfg)
{
    return (dataset_options){.datasets = cfg->datasets, .n_datasets = cfg->n_datasets,
                             .max_seq_length = cfg->max_seq_length, .chat_template = cfg->chat_template,
                             .chat_template_kwargs = &cfg->chat_template_kwargs,
                             /* cpt: continued pretraining labels every token */
                             .assistant_only_loss = cfg->method == METHOD_CPT ? PT_FALSE : cfg->assistant_only_loss,
                             .dataset_text_field = cfg->dataset_text_field, .packing = cfg->packing,
                             .pairs = method_info_of(cfg->method)->pairs,
                             .pairs_legacy = method_info_of(cfg->method)->legacy_pairs,
                             .pairs_reward = cfg->method == METHOD_REWARD,
                             .prompts = cfg->method == METHOD_GRPO,
                             .unpaired = method_info_of(cfg->method)->unpaired,
                             .max_prompt_length = cfg->max_prompt_length,
                             .max_completion_length = cfg->max_completion_length,
                             .val_split_ratio = cfg->val_split_ratio, .seed = cfg->seed};
}

hub_card_settings hub_card_settings_from_config(const pt_config *cfg)
{
    return (hub_card_settings){
        .model_name = cfg->model_name, .datasets = cfg->datasets, .n_datasets = cfg->n_datasets,
        .learning_rate = cfg->learning_rate, .num_train_epochs = cfg->num_train_epochs,
        .lr_scheduler_type = config_sched_choices[cfg->lr_scheduler_type], .optim = config_optim_choices[cfg->optim],
        .warmup_steps = cfg->warmup_steps, .max_steps = cfg->max_steps,
        .per_device_train_batch_size = cfg->per_device_train_batch_size,
        .gradient_accumulation_steps = cfg->gradient_accumulation_steps, .max_seq_length = cfg->max_seq_length,
        .packing = cfg->packing, .load_in_4bit = cfg->load_in_4bit, .use_rslora = cfg->use_rslora,
        .lora_r = cfg->lora_r, .lora_alpha = cfg->lora_alpha, .lora_dropout = cfg->lora_dropout,
        .weight_decay = cfg->weight_decay, .lora_target_modules = cfg->lora_target_modules, .seed = cfg->seed,
        .tags = cfg->tags};
}

resume_options resume_options_from_config(const pt_config *cfg)
{
    return (resume_options){.config_path = cfg->path, .output_dir = cfg->output_dir,
                            .from = cfg->resume_from_checkpoint};
}
