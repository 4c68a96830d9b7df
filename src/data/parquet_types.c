/* parquet_types.c — a Parquet leaf value as JSON, by its column's physical and logical type, the
 * way datasets gives it and Python prints it: integers, numbers and booleans as such (FLOAT16
 * widened), strings as text, and the values Python holds as objects as the text str() makes of
 * them — a DATE "2024-01-02", a TIMESTAMP "2024-01-02 03:04:05.123456" (nine digits when
 * nanoseconds are not zero, none when the fraction is; "+00:00" when adjusted to UTC; legacy
 * INT96 as nanoseconds), a TIME "03:04:05.123456", a DECIMAL "-0.05" (Python's Decimal rules, up
 * to 38 digits) and a UUID in its dashed form. The types a chat row cannot use (MAP, INTERVAL,
 * other fixed-length bytes, decimals over 38 digits) are named for the reader's error. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data_internal.h"

enum { CT_DECIMAL = 5, CT_DATE = 6, CT_TIME_MILLIS = 7, CT_TIME_MICROS = 8, CT_TS_MILLIS = 9,
       CT_TS_MICROS = 10, CT_UINT_32 = 13, CT_UINT_64 = 14, CT_INTERVAL = 21 };
enum { LT_DECIMAL = 5, LT_DATE = 6, LT_TIME = 7, LT_TIMESTAMP = 8, LT_UUID = 14, LT_FLOAT16 = 15 };
enum { UNIT_MILLIS = 1, UNIT_MICROS = 2, UNIT_NANOS = 3 };

static bool is_decimal(const pq_schema *s) { return s->logical == LT_DECIMAL || s->converted == CT_DECIMAL; }
static bool is_date(const pq_schema *s) { return s->logical == LT_DATE || s->converted == CT_DATE; }

/* TIME and TIMESTAMP: the unit (from the logical type, else the converted one), 0 when neither. */
static int time_unit(const pq_schema *s, bool *timestamp, bool *utc)
{
    *timestamp = s->logical == LT_TIMESTAMP || s->converted == CT_TS_MILLIS || s->converted == CT_TS_MICROS;
    bool time = s->logical == LT_TIME || s->converted == CT_TIME_MILLIS || s->converted == CT_TIME_MICROS;
    if (!*timestamp && !time) return 0;
    *utc = s->logical ? s->utc : *timestamp; /* a converted TIMESTAMP is adjusted to UTC */
    if (s->logical == LT_TIME || s->logical == LT_TIMESTAMP) return s->unit;
    return s->converted == CT_TIME_MILLIS || s->converted == CT_TS_MILLIS ? UNIT_MILLIS : UNIT_MICROS;
}

bool pq_type_known(const pq_schema *s, char *what, size_t len)
{
    bool ts, utc;
    if (is_decimal(s) && s->precision > 38) {
        snprintf(what, len, "DECIMAL(%d, %d) (ptrain reads decimals of up to 38 digits)", s->precision, s->scale);
        return false;
    }
    if (is_decimal(s) && (s->type == PQ_INT32 || s->type == PQ_INT64 || s->type == PQ_BYTE_ARRAY ||
                          (s->type == PQ_FIXED && s->type_length <= 16)))
        return true;
    if (s->type == PQ_INT32 || s->type == PQ_INT64) {
        int unit = time_unit(s, &ts, &utc);
        bool logical = s->logical == LT_TIME || s->logical == LT_TIMESTAMP;
        if (logical && (unit < UNIT_MILLIS || unit > UNIT_NANOS)) {
            snprintf(what, len, "%s in a unit Parquet does not define", s->logical == LT_TIME ? "TIME" : "TIMESTAMP");
            return false;
        }
        return true;
    }
    if (s->type == PQ_INT96) return true;
    if (s->type == PQ_FIXED && s->logical == LT_FLOAT16 && s->type_length == 2) return true;
    if (s->type == PQ_FIXED && s->logical == LT_UUID && s->type_length == 16) return true;
    if (s->type == PQ_FIXED) {
        if (s->converted == CT_INTERVAL) snprintf(what, len, "INTERVAL");
        else snprintf(what, len, "FIXED_LEN_BYTE_ARRAY(%d) (bytes, not text)", s->type_length);
        return false;
    }
    if (s->type < PQ_BOOLEAN || s->type > PQ_FIXED) {
        snprintf(what, len, "physical type %d (not one of Parquet's)", s->type);
        return false;
    }
    return true;
}

/* ---- dates and times ---- */

/* The civil date of a day count from 1970-01-01 (proleptic Gregorian). */
static void civil(int64_t days, int64_t *y, int *m, int *d)
{
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* "HH:MM:SS" and the fraction of a time of day in nanoseconds; nine digits only when allowed. */
static void clock_text(char *out, size_t len, int64_t ns_of_day, bool nanos)
{
    int64_t s = ns_of_day / 1000000000, ns = ns_of_day % 1000000000;
    int n = snprintf(out, len, "%02d:%02d:%02d", (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
    if (nanos && ns % 1000) snprintf(out + n, len - (size_t)n, ".%09lld", (long long)ns);
    else if (ns / 1000) snprintf(out + n, len - (size_t)n, ".%06lld", (long long)(ns / 1000));
}

static json_t *timestamp_text(int64_t days, int64_t ns_of_day, bool nanos, bool utc)
{
    int64_t y;
    int m, d;
    civil(days, &y, &m, &d);
    char clock[32], text[96];
    clock_text(clock, sizeof clock, ns_of_day, nanos);
    snprintf(text, sizeof text, "%04lld-%02d-%02d %s%s", (long long)y, m, d, clock, utc ? "+00:00" : "");
    return json_string(text);
}

static json_t *date_text(int64_t days)
{
    int64_t y;
    int m, d;
    civil(days, &y, &m, &d);
    char text[48];
    snprintf(text, sizeof text, "%04lld-%02d-%02d", (long long)y, m, d);
    return json_string(text);
}

static json_t *time_value(int64_t v, int unit, bool timestamp, bool utc)
{
    static const int64_t per_second[] = {0, 1000, 1000000, 1000000000};
    int64_t per = per_second[unit], day = 86400 * per;
    int64_t days = floor_div(v, day), in_day = v - days * day; /* no overflow: |v| < 2^63 */
    int64_t ns = in_day / per * 1000000000 + in_day % per * (1000000000 / per);
    if (!timestamp) {
        char clock[32];
        clock_text(clock, sizeof clock, ns, false); /* Python's time holds microseconds */
        return json_string(clock);
    }
    return timestamp_text(days, ns, unit == UNIT_NANOS, utc);
}

/* ---- decimals ---- */

/* Python's str(Decimal) of the integer u (negative when neg) times 10^-scale. */
static json_t *decimal_text(unsigned __int128 u, bool neg, int scale)
{
    char digits[48];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    for (int i = 0; i < n / 2; i++) {
        char c = digits[i];
        digits[i] = digits[n - 1 - i];
        digits[n - 1 - i] = c;
    }
    int exp = -scale, left = exp + n, dot = exp <= 0 && left > -6 ? left : 1;
    char text[160];
    size_t at = 0;
    if (neg) text[at++] = '-';
    if (dot <= 0) {
        at += (size_t)snprintf(text + at, sizeof text - at, "0.%.*s%.*s", -dot, "0000000", n, digits);
    } else if (dot >= n) {
        at += (size_t)snprintf(text + at, sizeof text - at, "%.*s", n, digits);
        for (int i = n; i < dot && at < sizeof text - 1; i++) text[at++] = '0';
    } else
        at += (size_t)snprintf(text + at, sizeof text - at, "%.*s.%.*s", dot, digits, n - dot, digits + dot);
    if (left != dot && at < sizeof text) snprintf(text + at, sizeof text - at, "E%+d", left - dot);
    else text[at < sizeof text ? at : sizeof text - 1] = '\0';
    return json_string(text);
}

/* A big-endian two's complement integer of n (<= 16) bytes. */
static json_t *decimal_bytes(const unsigned char *p, size_t n, int scale)
{
    if (n > 16) return NULL;
    if (n == 0) return decimal_text(0, false, scale);
    unsigned __int128 u = p[0] & 0x80 ? ~(unsigned __int128)0 : 0;
    for (size_t i = 0; i < n; i++) u = u << 8 | p[i];
    bool neg = (p[0] & 0x80) != 0;
    return decimal_text(neg ? ~u + 1 : u, neg, scale);
}

static json_t *decimal_int(int64_t v, int scale)
{
    unsigned __int128 u = v < 0 ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    return decimal_text(u, v < 0, scale);
}

/* ---- a value ---- */

static double half(unsigned h)
{
    int e = (int)(h >> 10 & 31);
    double m = (double)(h & 1023);
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

json_t *pq_type_value(const pq_schema *s, const pq_val *v)
{
    bool ts, utc;
    int unit;
    switch (s->type) {
    case PQ_BOOLEAN: return json_boolean(v->i);
    case PQ_INT32:
        if (is_decimal(s)) return decimal_int(v->i, s->scale);
        if (is_date(s)) return date_text(v->i);
        if ((unit = time_unit(s, &ts, &utc))) return time_value(v->i, unit, ts, utc);
        return json_integer(s->converted == CT_UINT_32 ? (json_int_t)(uint32_t)v->i : (json_int_t)v->i);
    case PQ_INT64:
        if (is_decimal(s)) return decimal_int(v->i, s->scale);
        if ((unit = time_unit(s, &ts, &utc))) return time_value(v->i, unit, ts, utc);
        if (s->converted == CT_UINT_64 && v->i < 0) return json_real((double)(uint64_t)v->i);
        return json_integer((json_int_t)v->i);
    case PQ_FLOAT:
    case PQ_DOUBLE: return isfinite(v->d) ? json_real(v->d) : json_null();
    case PQ_INT96: { /* nanoseconds of the day, then the Julian day, little-endian */
        const unsigned char *p = (const unsigned char *)v->s.p;
        uint64_t ns = 0;
        uint32_t jd = 0;
        for (int i = 7; i >= 0; i--) ns = ns << 8 | p[i];
        for (int i = 11; i >= 8; i--) jd = jd << 8 | p[i];
        if (ns >= 86400ull * 1000000000ull) return NULL;
        return timestamp_text((int64_t)jd - 2440588, (int64_t)ns, true, false);
    }
    case PQ_FIXED:
        if (is_decimal(s)) return decimal_bytes((const unsigned char *)v->s.p, v->s.n, s->scale);
        if (s->logical == LT_FLOAT16) {
            double x = half((unsigned)((const unsigned char *)v->s.p)[0] | (unsigned)((const unsigned char *)v->s.p)[1] << 8);
            return isfinite(x) ? json_real(x) : json_null();
        }
        if (s->logical == LT_UUID) {
            const unsigned char *p = (const unsigned char *)v->s.p;
            char text[40];
            size_t at = 0;
            for (int i = 0; i < 16; i++)
                at += (size_t)snprintf(text + at, sizeof text - at, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", p[i]);
            return json_string(text);
        }
        return NULL;
    default:
        if (is_decimal(s)) return decimal_bytes((const unsigned char *)v->s.p, v->s.n, s->scale);
        return rows_string(v->s.p, v->s.n);
    }
}
