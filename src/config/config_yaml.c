/* config_yaml.c — config text to a libyaml document, within bounds: at most CONFIG_MAX_BYTES of
 * text, collections nested at most CONFIG_MAX_DEPTH deep, one YAML document. libyaml's scanner
 * takes time quadratic in the nesting depth (each token looks at every open level: 100 KB of nested
 * mappings took 2 s, 400 KB 41 s), so a first pass over its events, which stops at the first level
 * past the limit, keeps any input fast, and sees the whole stream (the loader stops after the first
 * document and would miss what follows); the loader then only reads text within the bounds. Each
 * refusal is one error naming the file, the line:col, the bound and the fix. */
#include <string.h>

#include "config_internal.h"

/* The 1-based line and column (in characters, as libyaml counts them) of byte offset at. */
static void text_position(const char *text, size_t len, size_t at, size_t *line, size_t *col)
{
    *line = *col = 1;
    for (size_t i = 0; i < at && i < len; i++)
        if (text[i] == '\n') ++*line, *col = 1;
        else if (((unsigned char)text[i] & 0xC0) != 0x80) ++*col;
}

/* The byte at a 0-based line and column (in characters) of text, or 0 past its end. */
static unsigned char char_at(const char *text, size_t len, size_t line, size_t col)
{
    size_t i = 0;
    for (; i < len && line > 0; i++)
        if (text[i] == '\n') line--;
    for (; i < len && text[i] != '\n'; i++) {
        if (((unsigned char)text[i] & 0xC0) == 0x80) continue;
        if (col-- == 0) return (unsigned char)text[i];
    }
    return 0;
}

/* The error for text libyaml cannot read: where it stops, what it expected, where an unclosed
 * construct began, and the usual culprit, a tab. */
static pt_status syntax_error(const char *name, const char *text, size_t len, const yaml_parser_t *parser)
{
    if (parser->error == YAML_MEMORY_ERROR) return ERR(PT_ERR_NOMEM, "out of memory reading %s", shown_text(name).s);
    size_t line = parser->problem_mark.line + 1, col = parser->problem_mark.column + 1;
    if (parser->error == YAML_READER_ERROR) /* the reader gives a byte offset, not a mark */
        text_position(text, len, parser->problem_offset, &line, &col);
    char started[64] = "";
    if (parser->context && parser->error != YAML_READER_ERROR &&
        parser->context_mark.line != parser->problem_mark.line)
        snprintf(started, sizeof started, " started at line %zu", parser->context_mark.line + 1);
    bool tab = parser->error == YAML_SCANNER_ERROR && parser->problem && !strstr(parser->problem, "tab") &&
               char_at(text, len, parser->problem_mark.line, parser->problem_mark.column) == '\t';
    return ERR(PT_ERR_USER, "%s:%zu:%zu: not valid YAML: %s%s%s%s%s", shown_text(name).s, line, col,
               parser->problem ? parser->problem : "parse error", parser->context ? " " : "",
               parser->context ? parser->context : "", started, tab ? " (a tab: YAML indents with spaces)" : "");
}

/* The error for one event past a bound, or PT_OK; *depth and *documents follow the events. */
static pt_status check_event(const char *name, const yaml_event_t *ev, int *depth, int *documents)
{
    size_t line = ev->start_mark.line + 1, col = ev->start_mark.column + 1;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++*documents > 1)
            return ERR(PT_ERR_USER, "%s:%zu:%zu: a second YAML document starts here; a config file is one document: "
                       "remove the \"---\" or \"...\" line that separates them (the two become one) or delete the "
                       "second", shown_text(name).s, line, col);
        return PT_OK;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (++*depth > CONFIG_MAX_DEPTH)
            return ERR(PT_ERR_USER, "%s:%zu:%zu: nested deeper than %d levels (mappings and lists inside one "
                       "another), the most ptrain reads; no key needs more than 4: flatten it",
                       shown_text(name).s, line, col, CONFIG_MAX_DEPTH);
        return PT_OK;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: --*depth; return PT_OK;
    default: return PT_OK;
    }
}

/* One pass over the events: to the end of the stream, the first bound crossed or the first
 * syntax error. */
static pt_status scan_events(const char *name, const char *text, size_t len)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return ERR(PT_ERR_NOMEM, "out of memory starting libyaml");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    pt_status st = PT_OK;
    int depth = 0, documents = 0;
    for (bool more = true; more && st == PT_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = syntax_error(name, text, len, &parser);
            break;
        }
        more = ev.type != YAML_STREAM_END_EVENT;
        st = check_event(name, &ev, &depth, &documents);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return st;
}

pt_status config_yaml_load(const char *name, const char *text, size_t len, yaml_document_t *doc)
{
    if (len > CONFIG_MAX_BYTES) {
        size_t line, col;
        text_position(text, len, CONFIG_MAX_BYTES, &line, &col);
        return ERR(PT_ERR_USER, "%s:%zu:%zu: the file goes on past %u KiB (%u bytes), the most ptrain reads of a "
                   "config file; is this really a config file?", shown_text(name).s, line, col, CONFIG_MAX_BYTES >> 10,
                   CONFIG_MAX_BYTES);
    }
    TRY(scan_events(name, text, len));
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return ERR(PT_ERR_NOMEM, "out of memory starting libyaml");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    pt_status st = yaml_parser_load(&parser, doc) ? PT_OK : syntax_error(name, text, len, &parser);
    yaml_parser_delete(&parser);
    return st;
}
