/* template_set.c — replacing the chat template text a tokenizer carries with one found beside
 * it (a Hugging Face model directory's chat_template.jinja, which transformers 5 writes instead of
 * tokenizer_config.json's chat_template). */
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

pt_status tokenizer_set_chat_template(pt_tokenizer *tok, const char *text)
{
    char *copy = NULL;
    if (text) {
        copy = malloc(strlen(text) + 1);
        TRY_ALLOC(copy);
        strcpy(copy, text);
    }
    free(tok->chat_template);
    tok->chat_template = copy;
    return PT_OK;
}
