/* peft.h — LoRA adapters as PEFT writes and reads them (a directory with adapter_config.json and
 * adapter_model.safetensors), so an adapter trained by ptrain loads with
 * PeftModel.from_pretrained, and one trained by PEFT (TRL, Unsloth, axolotl) loads into ptrain
 * for generation or as the start of training. ptrain's adapters are already in Hugging Face's row
 * order and use PEFT's tensor names, so the export is a copy. */
#ifndef PTRAIN_PEFT_H
#define PTRAIN_PEFT_H

#include <stdbool.h>

#include "ptrain/adapter.h"

/* Write dir/adapter_config.json and dir/adapter_model.safetensors (fp32), each atomically. */
pt_status peft_save(const char *dir, const pt_adapter *l, const adapter_info *info);
/* Read a PEFT LoRA adapter directory onto model m, with its selectors (layers_to_transform,
 * layers_pattern, rank_pattern, alpha_pattern: adapter_select.c). Settings ptrain cannot apply
 * (modules_to_save other than embed_tokens and lm_head, LoRA biases) and tensors that do not fit m
 * are refused, naming the key or tensor; a SEQ_CLS adapter's score (modules_to_save classifier,
 * score) is left to peft_read_score. */
pt_status peft_load(const char *dir, const pt_model *m, pt_adapter *l);
/* Whether dir holds a PEFT adapter (adapter_config.json). */
bool peft_is_adapter_dir(const char *dir);
/* A reward model's score head from dir's adapter_model.safetensors (a SEQ_CLS adapter, its
 * base_model.model.score.weight [1, dim], any float dtype): *score malloc'd (dim floats), or NULL
 * when the directory has no such file or tensor. A score of another shape is an error naming it. */
pt_status peft_read_score(const char *dir, int64_t dim, float **score);

#endif
