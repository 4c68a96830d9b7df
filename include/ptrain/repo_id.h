/* repo_id.h — the Hugging Face Hub's rule for repository ids, which the config applies to
 * hub_model_id and hf_model_name and the Hub module to what it pushes (`ptrain push --repo`, staged
 * jobs). Apart from config.h so that src/hub need not include the whole configuration. Defined in
 * config_check.c. */
#ifndef PTRAIN_REPO_ID_H
#define PTRAIN_REPO_ID_H

/* NULL when id is a Hub repository id ptrain can push to, "namespace/name" by huggingface_hub's
 * rule (validate_repo_id): each part 1 to 96 of [A-Za-z0-9_.-], starting and ending with a letter,
 * digit or '_', no "--" or "..", not ending in ".git"; else what is wrong (a constant string). */
const char *config_repo_id_problem(const char *id);

#endif
