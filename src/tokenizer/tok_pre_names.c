/* tok_pre_names.c — the byte-level pre-tokenizers that GGUF files name (tokenizer.ggml.pre), in one
 * table: each name llama.cpp's vocabulary code defines for a decoder model, with the split regexes
 * of that model's tokenizer.json (each splits every piece the one before made, matches and the
 * text between them kept apart: Split "Isolated" in a Sequence, then ByteLevel without its regex),
 * and whether BPE first looks the whole word up (ignore_merges). The regexes are Oniguruma's, as
 * tokenizer.json writes them (tok_regex.c compiles them for PCRE2); where llama.cpp rewrites one
 * for std::regex, the original is used here. Names that need code of their own rather than
 * regexes (kimi-k2, afmoe, superbpe), that are not byte-level (gemma4, sarvam-moe, whitespace) or
 * that belong to encoder models are refused by name, saying why. "default" (llama.cpp's guess for
 * a file without the key) is no model's own pre-tokenizer: such a file is refused as unknown. */
#include <string.h>

#include "tok_impl.h"

#define RE_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define RE_DIGITS "\\p{N}"
#define RE_GPT2_LLAMACPP "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CJK_DEEPSEEK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+" /* [一-龥ࠀ-一가-퟿]+ */
#define RE_CJK_DEEPSEEK3 "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+" /* [一-龥぀-ゟ゠-ヿ]+ */
static const char *const re_none[] = {NULL};
static const char *const re_digits[] = {RE_DIGITS, NULL};
static const char *const re_llama3[] = {RE_LLAMA3, NULL};
static const char *const re_qwen2[] = {RE_QWEN2, NULL};
static const char *const re_jais2[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                    "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
                    "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-"
    "\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1"
    "\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f"
    "\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-"
    "\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1"
    "\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe"
    "\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-"
    "\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2"
    "\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84"
    "\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89"
    "\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2"
    "\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e"
    "\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-"
    "\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93"
    "\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3"
    "\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
    "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
    "\\s+$",
    RE_CJK_DEEPSEEK,
    "\\p{N}+",
    NULL};
static const char *const re_deepseek3[] = {
    "\\p{N}{1,3}", RE_CJK_DEEPSEEK3,
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
    "\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_spark[] = {
    "\\p{N}{1,3}", RE_CJK_DEEPSEEK3,
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|"
    "\\s+(?!\\S)|\\s+",
    "\\p{N}", NULL};
static const char *const re_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK_DEEPSEEK, "\\p{N}", NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2_LLAMACPP, "[0-9][0-9][0-9]", NULL};
static const char *const re_qwen35[] = {RE_QWEN35, NULL};
static const char *const re_bloom[] = {
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+", NULL};
static const char *const re_viking[] = {
    " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+", "\\p{N}", NULL};
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_chameleon[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2_LLAMACPP, NULL};
static const char *const re_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RE_CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_tiny_aya[] = {
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RE_CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_bailing[] = {
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_seed_coder[] = {
    RE_CONTRACTIONS "|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const re_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const re_laguna[] = {"[^\\n]+|[\\n]+", RE_QWEN2, NULL};
static const char *const re_exaone_moe[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
                    "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_minicpm5[] = {
    "\\p{N}{1,3}",
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_youtu[] = {
    "[\xea\xb0\x80-\xed\x9e\xa3\xe3\x84\xb1-\xe3\x86\x8e]+|[\xef\xbc\x81\xe2\x80\xa6\xe2\x80\x9c\xe2\x80\x9d\xe2\x80\x98"
    "\xe2\x80\x99\xe2\x80\x94\xef\xbc\x9a\xef\xbc\x9b\xef\xbc\x8c\xe3\x80\x81-\xe3\x80\xbf\xef\xb8\xb0-\xef\xb9\x8f]+|"
    "[\xe3\x84\x85-\xe3\x84\xaf]+|[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RE_CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RE_CONTRACTIONS "?|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

/* name, split regexes, ignore_merges, ByteLevel splitting with GPT-2's regex itself (after the
 * regexes: GPT-2's own form); refused names with the reason */
#define PRE(name, res, ign, blre) {name, res, ign, blre, NULL}
#define NO(name, why) {name, NULL, false, false, why}

static const tok_pre_rule rules[] = {
    PRE("gpt2", re_none, false, true),
    PRE("gpt-2", re_none, false, true),
    PRE("phi-2", re_none, false, true),
    PRE("gigachat", re_none, false, true),
    PRE("a.x-4.0", re_none, false, true),
    PRE("mellum", re_none, false, true),
    PRE("mpt", re_none, false, true),
    PRE("olmo", re_none, false, true),
    PRE("jais", re_none, false, true),
    PRE("trillion", re_none, false, true),
    PRE("granite-docling", re_none, false, true),
    PRE("exaone4", re_none, false, true),
    PRE("starcoder", re_digits, false, true),
    PRE("refact", re_digits, false, true),
    PRE("command-r", re_digits, false, true),
    PRE("smollm", re_digits, false, true),
    PRE("codeshell", re_digits, false, true),
    PRE("exaone", re_digits, false, true),
    PRE("minerva-7b", re_digits, false, true),
    PRE("mellum2", re_digits, false, true),
    PRE("llama3", re_llama3, true, false),
    PRE("llama-v3", re_llama3, true, false),
    PRE("llama-bpe", re_llama3, true, false),
    PRE("falcon3", re_llama3, true, false),
    PRE("falcon-h1", re_llama3, true, false),
    PRE("pixtral", re_llama3, true, false),
    PRE("midm-2.0", re_llama3, true, false),
    PRE("lfm2", re_llama3, true, false),
    PRE("glm4", re_llama3, true, false),
    PRE("glm5", re_llama3, true, false),
    PRE("dbrx", re_llama3, false, false),
    PRE("smaug-bpe", re_llama3, false, false),
    PRE("chatglm-bpe", re_llama3, false, false),
    PRE("jais-2", re_jais2, false, false),
    PRE("qwen2", re_qwen2, false, false),
    PRE("deepseek-r1-qwen", re_qwen2, false, false),
    PRE("kormo", re_qwen2, false, false),
    PRE("f2llmv2", re_qwen2, false, false),
    PRE("stablelm2", re_qwen2, false, false),
    PRE("megrez", re_qwen2, false, false),
    PRE("hunyuan", re_qwen2, false, false),
    PRE("solar-open", re_qwen2, false, false),
    PRE("grok-2", re_qwen2, false, false),
    PRE("qwen35", re_qwen35, false, false),
    PRE("deepseek-llm", re_deepseek_llm, false, false),
    PRE("deepseek-coder", re_deepseek_coder, false, false),
    PRE("deepseek-v3", re_deepseek3, false, false),
    PRE("hunyuan-dense", re_deepseek3, false, false),
    PRE("joyai-llm", re_deepseek3, false, false),
    PRE("hy_v4", re_deepseek3, false, false),
    PRE("spark2_5", re_spark, false, false),
    PRE("youtu", re_youtu, true, false),
    PRE("falcon", re_falcon, false, false),
    PRE("poro-chat", re_bloom, false, false),
    PRE("bloom", re_bloom, false, false),
    PRE("gpt3-finnish", re_bloom, false, false),
    PRE("viking", re_viking, false, false),
    PRE("tekken", re_tekken, true, false),
    PRE("chameleon", re_chameleon, false, false),
    PRE("gpt-4o", re_gpt4o, false, false),
    PRE("llama4", re_gpt4o, false, false),
    PRE("kanana2", re_gpt4o, false, false),
    PRE("talkie", re_gpt4o, false, false),
    PRE("minimax-m2", re_gpt4o, false, false),
    PRE("tiny_aya", re_tiny_aya, false, false),
    PRE("cohere2moe", re_tiny_aya, false, false),
    PRE("bailingmoe", re_bailing, false, false),
    PRE("bailingmoe2", re_bailing, false, false),
    PRE("llada-moe", re_bailing, false, false),
    PRE("seed-coder", re_seed_coder, false, false),
    PRE("ufakzeka", re_ufakzeka, false, false),
    PRE("laguna", re_laguna, false, false),
    PRE("exaone-moe", re_exaone_moe, false, false),
    PRE("minicpm5", re_minicpm5, true, false),
    /* refused, each with why */
    NO("kimi-k2", "its split of Han characters is code of llama.cpp's own, not a regex"),
    NO("afmoe", "its digit grouping is code of llama.cpp's own, not a regex"),
    NO("superbpe", "its split between digit triples matches empty text"),
    NO("gemma4", "a SentencePiece-style vocabulary in a byte-level file"),
    NO("sarvam-moe", "a SentencePiece-style vocabulary in a byte-level file"),
    NO("granite-embed-multi-311m", "an embedding model's"),
    NO("granite-embed-multi-97m", "an embedding model's"),
    NO("whitespace", "an embedding model's"),
    NO("jina-es", "an embedding model's"),
    NO("jina-de", "an embedding model's"),
    NO("jina-v2-es", "an embedding model's"),
    NO("jina-v2-de", "an embedding model's"),
    NO("jina-v1-en", "an embedding model's"),
    NO("jina-v2-code", "an embedding model's"),
    NO("jina-v5-nano", "an embedding model's"),
    NO("roberta-bpe", "an encoder model's"),
    NO("modern-bert", "an encoder model's"),
};

const tok_pre_rule *tok_pre_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strlen(rules[i].name) == len && memcmp(rules[i].name, name, len) == 0) return &rules[i];
    return NULL;
}

const tok_pre_rule *tok_pre_rule_at(size_t i)
{
    return i < sizeof rules / sizeof rules[0] ? &rules[i] : NULL;
}

bool tokenizer_gguf_pre(const char *name, size_t len, const char *const **regexes, bool *ignore_merges,
                        bool *bytelevel_regex)
{
    const tok_pre_rule *r = tok_pre_find(name, len);
    if (!r || r->refused) return false;
    *regexes = r->regexes;
    *ignore_merges = r->ignore_merges;
    *bytelevel_regex = r->bytelevel_regex;
    return true;
}
