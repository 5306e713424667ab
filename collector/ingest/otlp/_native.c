/* Native OTLP decoder: ExportTraceServiceRequest protobuf bytes -> span columns.
 *
 * Why: decoding with upb and normalising in Python costs ~20-30 us per span, which caps
 * ingestion near 27k spans/s on two cores. This reads the protobuf wire format directly and
 * applies the mapping table of collector.ingest.normalize (passed in as data, so there is one
 * source of truth; converters, redaction, pricing and events stay the Python functions, called
 * only for the values that need them) straight into Arrow buffers, one array per SpanRow
 * field, which collector.ingest.otlp.native wraps as the spans table without touching a value.
 *
 * It only takes the common case. A span it cannot handle exactly as the Python path would
 * (links, engine timings, invalid ids or times, a converter that raises) is
 * "declined": its index is returned and the Python path normalises it. Anything unusual in
 * the request's structure (a wire type that does not match the schema, a singular message
 * repeated, invalid UTF-8) raises NativeFallback and the whole request goes the Python way,
 * so the Python path stays the reference for every edge case.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

/* Attribute names longer than this go to the Python path, which cuts them (normalize.MAX_KEY_LENGTH). */

PyObject *NativeFallback;

/* ---- wire format ------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static int read_varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Next field: number and wire type; for WT_LEN also the payload as a sub-buffer. */
static int next_field(Buf *b, uint32_t *number, int *wt, Buf *sub, uint64_t *scalar) {
    uint64_t tag;
    if (read_varint(b, &tag)) return -1;
    *number = (uint32_t)(tag >> 3);
    *wt = (int)(tag & 7);
    if (*number == 0 || (tag >> 3) > 0x1fffffff) return -1;
    switch (*wt) {
    case WT_VARINT:
        return read_varint(b, scalar);
    case WT_I64:
        if (b->end - b->p < 8) return -1;
        memcpy(scalar, b->p, 8);
        b->p += 8;
        return 0;
    case WT_I32: {
        uint32_t v;
        if (b->end - b->p < 4) return -1;
        memcpy(&v, b->p, 4);
        b->p += 4;
        *scalar = v;
        return 0;
    }
    case WT_LEN: {
        uint64_t len;
        if (read_varint(b, &len)) return -1;
        if (len > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + len;
        b->p += len;
        return 0;
    }
    default:
        return -1; /* groups: not in OTLP */
    }
}

static int fallback(const char *why) {
    PyErr_SetString(NativeFallback, why);
    return -1;
}

/* Strict UTF-8 (no surrogates, no overlongs), as upb requires of proto3 strings. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        PyObject *o = PyUnicode_DecodeUTF8((const char *)s + i, n - i, "strict");
        if (o == NULL) {
            PyErr_Clear();
            return 0;
        }
        Py_DECREF(o);
        return 1;
    }
    return 1;
}

static int check_string(Buf *s) {
    if (!utf8_valid(s->p, s->end - s->p)) return fallback("invalid UTF-8 in a string field");
    return 0;
}

static PyObject *str_of(Buf *s) {
    PyObject *o = PyUnicode_DecodeUTF8((const char *)s->p, s->end - s->p, "strict");
    if (o == NULL) {
        PyErr_Clear();
        fallback("invalid UTF-8 in a string field");
    }
    return o;
}

/* ---- AnyValue ------------------------------------------------------------------------------ */

enum { AV_NONE, AV_STRING, AV_BOOL, AV_INT, AV_DOUBLE, AV_ARRAY, AV_KVLIST, AV_BYTES };

typedef struct {
    int type;
    Buf buf;       /* string, bytes, array, kvlist payload */
    uint64_t raw;  /* bool, int, double bits */
} AnyValue;

static int read_any(Buf *b, AnyValue *v) {
    v->type = AV_NONE;
    while (b->p < b->end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar = 0;
        if (next_field(b, &n, &wt, &sub, &scalar)) return fallback("malformed AnyValue");
        int type = AV_NONE, want = -1;
        switch (n) {
        case 1: type = AV_STRING; want = WT_LEN; break;
        case 2: type = AV_BOOL; want = WT_VARINT; break;
        case 3: type = AV_INT; want = WT_VARINT; break;
        case 4: type = AV_DOUBLE; want = WT_I64; break;
        case 5: type = AV_ARRAY; want = WT_LEN; break;
        case 6: type = AV_KVLIST; want = WT_LEN; break;
        case 7: type = AV_BYTES; want = WT_LEN; break;
        default: continue; /* unknown field: skipped, as upb keeps it aside */
        }
        if (wt != want) return fallback("AnyValue field with an unexpected wire type");
        if (v->type != AV_NONE) return fallback("AnyValue with more than one value");
        v->type = type;
        v->buf = sub;
        v->raw = scalar;
    }
    return 0;
}

static PyObject *any_object(AnyValue *v, int depth);

static int kv_read(Buf *b, Buf *key, AnyValue *value) {
    int have_key = 0, have_value = 0;
    key->p = key->end = b->p;
    value->type = AV_NONE;
    while (b->p < b->end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(b, &n, &wt, &sub, &scalar)) return fallback("malformed KeyValue");
        if (n == 1) {
            if (wt != WT_LEN) return fallback("KeyValue key with an unexpected wire type");
            *key = sub;
            have_key = 1;
        } else if (n == 2) {
            if (wt != WT_LEN) return fallback("KeyValue value with an unexpected wire type");
            if (have_value) return fallback("KeyValue with its value repeated");
            if (read_any(&sub, value)) return -1;
            have_value = 1;
        }
    }
    (void)have_key;
    return 0;
}

/* One KeyValue into ``dict`` as key -> Python value (later keys win, as in a dict display). */
static int kv_into(PyObject *dict, Buf kv, int depth) {
    Buf key;
    AnyValue value;
    PyObject *k = NULL, *o = NULL;
    if (kv_read(&kv, &key, &value) == 0 && (k = str_of(&key)) != NULL) o = any_object(&value, depth);
    int rc = o == NULL ? -1 : PyDict_SetItem(dict, k, o);
    Py_XDECREF(k);
    Py_XDECREF(o);
    return rc;
}

/* A KeyValueList or ArrayValue as a dict or list, like collector.ingest.otlp.decode._any_pb. */
static PyObject *any_object(AnyValue *v, int depth) {
    if (depth > 16) { /* upb's own limit counts three messages per level: let it judge deep values */
        fallback("AnyValue nested too deeply");
        return NULL;
    }
    switch (v->type) {
    case AV_NONE: Py_RETURN_NONE;
    case AV_STRING: return str_of(&v->buf);
    case AV_BOOL: return PyBool_FromLong(v->raw != 0);
    case AV_INT: return PyLong_FromLongLong((long long)v->raw);
    case AV_DOUBLE: {
        double d;
        memcpy(&d, &v->raw, 8);
        return PyFloat_FromDouble(d);
    }
    case AV_BYTES: return PyBytes_FromStringAndSize((const char *)v->buf.p, v->buf.end - v->buf.p);
    case AV_ARRAY:
    case AV_KVLIST: {
        int array = v->type == AV_ARRAY;
        PyObject *out = array ? PyList_New(0) : PyDict_New();
        if (out == NULL) return NULL;
        Buf b = v->buf;
        while (b.p < b.end) {
            uint32_t n;
            int wt, rc;
            Buf sub = {0};
            uint64_t scalar;
            if (next_field(&b, &n, &wt, &sub, &scalar) || (n == 1 && wt != WT_LEN)) {
                Py_DECREF(out);
                fallback(array ? "malformed ArrayValue" : "malformed KeyValueList");
                return NULL;
            }
            if (n != 1) continue;
            if (array) {
                AnyValue item;
                PyObject *o = read_any(&sub, &item) == 0 ? any_object(&item, depth + 1) : NULL;
                rc = o == NULL ? -1 : PyList_Append(out, o);
                Py_XDECREF(o);
            } else {
                rc = kv_into(out, sub, depth + 1);
            }
            if (rc) {
                Py_DECREF(out);
                return NULL;
            }
        }
        return out;
    }
    }
    Py_RETURN_NONE;
}

/* ---- the decoder object -------------------------------------------------------------------- */

/* The decoder's own enums, each listed once (X-macros) and exported by name (PyInit__native), so
 * collector.ingest.otlp.native builds the DecoderSpec from them and mirrors none of them. */

/* The SpanRow fields the decoder fills itself: the spec gives their slots (DecoderSpec.named) in
 * this order, exported as NAMED_FIELDS. Everything else about a row is the spec's. */
#define NAMED_FIELDS(X)                                                                                               \
    X(F_PROJECT, "project") X(F_TRACE_ID, "trace_id") X(F_SPAN_ID, "span_id") X(F_PARENT, "parent_span_id")            \
    X(F_NAME, "name") X(F_KIND, "kind") X(F_START, "start_time_ns") X(F_END, "end_time_ns")                            \
    X(F_SERVICE, "service_name") X(F_STATUS_CODE, "status_code") X(F_STATUS_MESSAGE, "status_message")                \
    X(F_ERROR_TYPE, "error_type") X(F_IS_TIMEOUT, "is_timeout") X(F_MODEL, "model") X(F_PROVIDER, "provider")          \
    X(F_INPUT_TOKENS, "input_tokens") X(F_OUTPUT_TOKENS, "output_tokens") X(F_CACHED_TOKENS, "cached_tokens")          \
    X(F_COST, "cost_usd") X(F_PRICE_VERSION, "price_version") X(F_ATTRIBUTES, "attributes") X(F_RESOURCE, "resource")  \
    X(F_EVENTS, "events") X(F_AGENT_NAME, "agent_name")
/* How a mapped value is converted (DecoderSpec.attributes), exported as CONVERTERS. */
#define CONVERTERS(X) X(CONV_NSTR, "nstr") X(CONV_CALL, "call") X(CONV_CAPTURED, "captured")
/* Column types (DecoderSpec.column_types), exported as COLUMN_TYPES: string, timestamp, UInt32
 * tokens (clamped), float64, nullable float32, bool, int32, map. */
#define COLUMN_TYPES(X)                                                                                               \
    X(T_STR, "string") X(T_TIME, "timestamp") X(T_TOKENS, "tokens") X(T_F64, "float64") X(T_F32N, "float32")         \
    X(T_BOOL, "bool") X(T_I32, "int32") X(T_MAP, "map")

#define ENUM_MEMBER(member, name) member,
#define ENUM_NAME(member, name) name,
enum { NAMED_FIELDS(ENUM_MEMBER) N_NAMED };
enum { CONVERTERS(ENUM_MEMBER) N_CONVERTERS };
enum { COLUMN_TYPES(ENUM_MEMBER) N_TYPES };
static const char *const NAMED_FIELD_NAMES[N_NAMED] = {NAMED_FIELDS(ENUM_NAME)};
static const char *const CONVERTER_NAMES[N_CONVERTERS] = {CONVERTERS(ENUM_NAME)};
static const char *const COLUMN_TYPE_NAMES[N_TYPES] = {COLUMN_TYPES(ENUM_NAME)};

#define KEY_CACHE 4096 /* power of two */
#define MAX_SLOTS 64
#define MAX_RULE_SLOTS 8 /* slots per rule (collector.ingest.spec.KindRules, its dialect and decline rules) */
/* The version of the DecoderSpec contract (collector.ingest.spec): native.py imports it, so a module
 * built from an older source is not used (the Python path decodes until it is rebuilt). */
#define SPEC_ABI 3

/* Slots whose presence a rule asks about (KindRules.engine_when, llm_when, tool_when; the dialect
 * signals; the columns that send a span to the Python path). */
typedef struct {
    int n;
    int slots[MAX_RULE_SLOTS];
} SlotSet;

typedef struct {
    PyObject *key;     /* str, or NULL for an empty bucket */
    uint8_t *bytes;    /* UTF-8 copy for comparison */
    Py_ssize_t len;
    uint64_t hash;
    int slot;          /* >= 0: mapped (field or signal slot); -1: kept as an attribute */
    int rank;
    int conv;
    int content;       /* unmapped key under a captured-content prefix */
    PyObject *fn;      /* converter (CONV_CALL) */
} KeyEntry;

typedef struct {
    PyObject_HEAD
    PyObject *spec;       /* dict key -> (slot, rank, conv, fn) */
    PyObject *defaults;   /* tuple, one per field */
    PyObject *prefixes;   /* tuple of str: captured-content prefixes */
    PyObject *text_fn, *captured_fn, *redact_fn, *price_fn, *resource_fn, *events_fn;
    PyObject *s_name, *s_time_ns, *s_attributes; /* keys of an event dict */
    /* collector.ingest.spec.KindRules, in slot form: */
    PyObject *kinds;        /* frozenset: declared kinds taken as they are */
    PyObject *kind_signals; /* tuple of (signal slot, dict value -> kind), in precedence order */
    int kind_signal_slots[MAX_SLOTS]; /* their slots, read once */
    int declared_slot;      /* the declared kind's signal (KindRules.declared_signal) */
    SlotSet engine_when, llm_when, tool_when;
    SlotSet dialect;        /* spec.DIALECT_SIGNALS: the first one present is the span's dialect */
    SlotSet decline;        /* spec.PYTHON_RULE_COLUMNS: a span with one of them takes the Python path */
    PyObject *vllm_name, *k_run, *k_step, *k_llm, *k_tool, *k_other;
    PyObject *run_named_by_span; /* spec.RUN_NAMED_BY_SPAN: a run of this dialect is named by its span */
    PyObject *status_names; /* OTLP status code -> name (spec.STATUS_CODES); out of range: the first */
    PyObject *timeout;      /* spec.TIMEOUT_MARKER: an error type holding it marks a timeout */
    uint64_t max_ns;        /* collector.ingest.bounds.MAX_TIME_NS */
    Py_ssize_t max_len;
    Py_ssize_t max_key_len, max_attributes, max_events; /* collector.ingest.normalize's per-span bounds: beyond them, declined */
    int nfields, nslots; /* SpanRow's fields, then the kind signals (spec.SIGNALS): slots */
    int named[N_NAMED];
    int types[MAX_SLOTS]; /* column type of each field (T_*) */
    KeyEntry cache[KEY_CACHE];
    int cached;
} Decoder;

static uint64_t fnv1a(const uint8_t *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int fill_entry(Decoder *d, KeyEntry *e, PyObject *key) {
    e->key = key;
    e->slot = -1;
    e->rank = -1;
    e->conv = CONV_NSTR;
    e->fn = NULL;
    e->content = 0;
    PyObject *spec = PyDict_GetItemWithError(d->spec, key);
    if (spec == NULL) {
        if (PyErr_Occurred()) return -1;
        if (d->redact_fn != Py_None) {
            Py_ssize_t n = PyTuple_GET_SIZE(d->prefixes);
            for (Py_ssize_t i = 0; i < n; i++) {
                int m = (int)PyUnicode_Tailmatch(key, PyTuple_GET_ITEM(d->prefixes, i), 0, PY_SSIZE_T_MAX, -1);
                if (m < 0) return -1;
                if (m) {
                    e->content = 1;
                    break;
                }
            }
        }
        return 0;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
        PyErr_SetString(PyExc_TypeError, "spec values must be (slot, rank, conv, fn)");
        return -1;
    }
    e->slot = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    e->rank = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
    e->conv = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 2));
    e->fn = PyTuple_GET_ITEM(spec, 3);
    if (PyErr_Occurred()) return -1;
    if (e->slot < 0 || e->slot >= d->nslots) {
        PyErr_SetString(PyExc_ValueError, "spec slot out of range");
        return -1;
    }
    return 0;
}

/* The entry for a key's bytes; *owned is set when the entry is temporary (cache full). */
static KeyEntry *lookup_key(Decoder *d, Buf *k, KeyEntry *scratch, int *owned) {
    Py_ssize_t len = k->end - k->p;
    uint64_t h = fnv1a(k->p, len);
    size_t i = (size_t)h & (KEY_CACHE - 1);
    *owned = 0;
    for (int probes = 0; probes < 16; probes++, i = (i + 1) & (KEY_CACHE - 1)) {
        KeyEntry *e = &d->cache[i];
        if (e->key == NULL) {
            if (d->cached >= KEY_CACHE / 2) break;
            PyObject *key = str_of(k);
            if (key == NULL) return NULL;
            PyUnicode_InternInPlace(&key);
            e->bytes = PyMem_Malloc(len ? len : 1);
            if (e->bytes == NULL) {
                Py_DECREF(key);
                PyErr_NoMemory();
                return NULL;
            }
            memcpy(e->bytes, k->p, len);
            e->len = len;
            e->hash = h;
            if (fill_entry(d, e, key)) {
                e->key = NULL;
                PyMem_Free(e->bytes);
                Py_DECREF(key);
                return NULL;
            }
            Py_XINCREF(e->fn);
            d->cached++;
            return e;
        }
        if (e->hash == h && e->len == len && memcmp(e->bytes, k->p, len) == 0) return e;
    }
    PyObject *key = str_of(k);
    if (key == NULL) return NULL;
    if (fill_entry(d, scratch, key)) {
        Py_DECREF(key);
        return NULL;
    }
    *owned = 1;
    return scratch;
}

static void clear_cache(Decoder *d) {
    for (int i = 0; i < KEY_CACHE; i++) {
        KeyEntry *e = &d->cache[i];
        if (e->key != NULL) {
            Py_CLEAR(e->key);
            Py_CLEAR(e->fn);
            PyMem_Free(e->bytes);
            e->bytes = NULL;
        }
    }
    d->cached = 0;
}

static void Decoder_dealloc(Decoder *d) {
    clear_cache(d);
    Py_XDECREF(d->spec);
    Py_XDECREF(d->defaults);
    Py_XDECREF(d->prefixes);
    Py_XDECREF(d->text_fn);
    Py_XDECREF(d->captured_fn);
    Py_XDECREF(d->redact_fn);
    Py_XDECREF(d->price_fn);
    Py_XDECREF(d->resource_fn);
    Py_XDECREF(d->events_fn);
    Py_XDECREF(d->s_name);
    Py_XDECREF(d->s_time_ns);
    Py_XDECREF(d->s_attributes);
    Py_XDECREF(d->kinds);
    Py_XDECREF(d->kind_signals);
    Py_XDECREF(d->vllm_name);
    Py_XDECREF(d->k_run);
    Py_XDECREF(d->k_step);
    Py_XDECREF(d->k_llm);
    Py_XDECREF(d->k_tool);
    Py_XDECREF(d->k_other);
    Py_XDECREF(d->run_named_by_span);
    Py_XDECREF(d->status_names);
    Py_XDECREF(d->timeout);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

/* An attribute of the spec, as a new reference of the given type (NULL: any), or NULL with an error set. */
static PyObject *spec_attr(PyObject *spec, const char *name, PyTypeObject *type) {
    PyObject *v = PyObject_GetAttrString(spec, name);
    if (v != NULL && type != NULL && !PyObject_TypeCheck(v, type)) {
        PyErr_Format(PyExc_TypeError, "DecoderSpec.%s must be %s", name, type->tp_name);
        Py_CLEAR(v);
    }
    return v;
}

static int spec_size(PyObject *spec, const char *name, Py_ssize_t *out) {
    PyObject *v = spec_attr(spec, name, &PyLong_Type);
    if (v == NULL) return -1;
    *out = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A tuple of slots of the row (fields or signals) into a SlotSet. */
static int spec_slots(Decoder *d, PyObject *spec, const char *name, SlotSet *out) {
    PyObject *t = spec_attr(spec, name, &PyTuple_Type);
    if (t == NULL) return -1;
    out->n = (int)PyTuple_GET_SIZE(t);
    int rc = out->n > MAX_RULE_SLOTS ? -1 : 0;
    for (int i = 0; rc == 0 && i < out->n; i++) {
        out->slots[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, i));
        if (out->slots[i] < 0 || out->slots[i] >= d->nslots) rc = -1;
    }
    Py_DECREF(t);
    if (rc && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "DecoderSpec.%s: too many slots or one out of range", name);
    return rc;
}

/* kind_signals: ((signal slot, dict), ...), each slot one of the kind signals. */
static int check_kind_signals(Decoder *d) {
    Py_ssize_t n = PyTuple_GET_SIZE(d->kind_signals);
    if (n > d->nslots - d->nfields) {
        PyErr_SetString(PyExc_ValueError, "DecoderSpec.kind_signals: more rules than kind signals");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rule = PyTuple_GET_ITEM(d->kind_signals, i);
        if (!PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 2 || !PyDict_Check(PyTuple_GET_ITEM(rule, 1))) {
            PyErr_SetString(PyExc_TypeError, "DecoderSpec.kind_signals must hold (slot, dict) pairs");
            return -1;
        }
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(rule, 0));
        if (slot == -1 && PyErr_Occurred()) return -1;
        if (slot < d->nfields || slot >= d->nslots) {
            PyErr_SetString(PyExc_ValueError, "DecoderSpec.kind_signals: a slot that is not a kind signal");
            return -1;
        }
        d->kind_signal_slots[i] = (int)slot;
    }
    return 0;
}

/* The references the decoder keeps, each read from the spec by attribute. */
static int spec_objects(Decoder *d, PyObject *spec) {
    if ((d->spec = spec_attr(spec, "attributes", &PyDict_Type)) == NULL) return -1;
    if ((d->defaults = spec_attr(spec, "defaults", &PyTuple_Type)) == NULL) return -1;
    if ((d->prefixes = spec_attr(spec, "content_prefixes", &PyTuple_Type)) == NULL) return -1;
    if ((d->text_fn = spec_attr(spec, "text", NULL)) == NULL) return -1;
    if ((d->captured_fn = spec_attr(spec, "captured", NULL)) == NULL) return -1;
    if ((d->redact_fn = spec_attr(spec, "redact", NULL)) == NULL) return -1;
    if ((d->price_fn = spec_attr(spec, "price", NULL)) == NULL) return -1;
    if ((d->resource_fn = spec_attr(spec, "resource", NULL)) == NULL) return -1;
    if ((d->events_fn = spec_attr(spec, "events", NULL)) == NULL) return -1;
    if ((d->kinds = spec_attr(spec, "kinds", &PyFrozenSet_Type)) == NULL) return -1;
    if ((d->kind_signals = spec_attr(spec, "kind_signals", &PyTuple_Type)) == NULL) return -1;
    if ((d->vllm_name = spec_attr(spec, "kind_engine_name", &PyUnicode_Type)) == NULL) return -1;
    if ((d->status_names = spec_attr(spec, "status_names", &PyTuple_Type)) == NULL) return -1;
    if ((d->run_named_by_span = spec_attr(spec, "run_named_by_span", &PyUnicode_Type)) == NULL) return -1;
    if ((d->timeout = spec_attr(spec, "timeout_marker", &PyUnicode_Type)) == NULL) return -1;
    return 0;
}

/* The column type of each field and the slots of the fields the decoder fills itself. */
static int spec_layout(Decoder *d, PyObject *spec) {
    PyObject *types = spec_attr(spec, "column_types", &PyTuple_Type);
    PyObject *named = types == NULL ? NULL : spec_attr(spec, "named", &PyTuple_Type);
    int rc = named == NULL ? -1 : 0;
    if (rc == 0 && (PyTuple_GET_SIZE(named) != N_NAMED || PyTuple_GET_SIZE(types) != d->nfields)) {
        PyErr_SetString(PyExc_ValueError, "Decoder: one column type per field, and every named slot");
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < d->nfields; i++) {
        d->types[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(types, i));
        if (d->types[i] < 0 || d->types[i] >= N_TYPES) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Decoder: unknown column type");
            rc = -1;
        }
    }
    for (int i = 0; rc == 0 && i < N_NAMED; i++) {
        d->named[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(named, i));
        if (d->named[i] < 0 || d->named[i] >= d->nfields) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Decoder: named slot out of range");
            rc = -1;
        }
    }
    Py_XDECREF(types);
    Py_XDECREF(named);
    return rc;
}

/* Decoder(spec): spec is a collector.ingest.spec.DecoderSpec, read by attribute, once. */
static int Decoder_init(Decoder *d, PyObject *args, PyObject *kw) {
    PyObject *spec, *kind_names = NULL;
    (void)kw; /* one positional argument */
    if (d->spec != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Decoder: already initialised");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O", &spec) || spec_objects(d, spec)) return -1;
    Py_ssize_t nsignals, declared, max_ns;
    if (spec_size(spec, "signal_count", &nsignals)) return -1;
    d->nfields = (int)PyTuple_GET_SIZE(d->defaults);
    if (nsignals < 0 || d->nfields + nsignals > MAX_SLOTS || PyTuple_GET_SIZE(d->status_names) < 1) {
        PyErr_SetString(PyExc_ValueError, "Decoder: wrong number of fields, kind signals or status names");
        return -1;
    }
    d->nslots = d->nfields + (int)nsignals;
    if (spec_layout(d, spec) || check_kind_signals(d) || spec_slots(d, spec, "kind_engine_slots", &d->engine_when) ||
        spec_slots(d, spec, "kind_llm_slots", &d->llm_when) || spec_slots(d, spec, "kind_tool_slots", &d->tool_when) ||
        spec_slots(d, spec, "dialect_slots", &d->dialect) || spec_slots(d, spec, "decline_slots", &d->decline))
        return -1;
    if (spec_size(spec, "max_len", &d->max_len) || spec_size(spec, "max_key_len", &d->max_key_len) ||
        spec_size(spec, "max_attributes", &d->max_attributes) || spec_size(spec, "max_events", &d->max_events) ||
        spec_size(spec, "kind_declared_slot", &declared) || spec_size(spec, "max_time_ns", &max_ns))
        return -1;
    if (declared < d->nfields || declared >= d->nslots || max_ns < 0) {
        PyErr_SetString(PyExc_ValueError, "Decoder: kind_declared_slot is not a kind signal, or max_time_ns < 0");
        return -1;
    }
    d->declared_slot = (int)declared;
    d->max_ns = (uint64_t)max_ns;
    if ((kind_names = spec_attr(spec, "kind_names", &PyTuple_Type)) == NULL) return -1;
    if (PyTuple_GET_SIZE(kind_names) != 5) {
        Py_DECREF(kind_names);
        PyErr_SetString(PyExc_ValueError, "Decoder: kind_names are run, step, llm, tool, other");
        return -1;
    }
    d->k_run = Py_NewRef(PyTuple_GET_ITEM(kind_names, 0));
    d->k_step = Py_NewRef(PyTuple_GET_ITEM(kind_names, 1));
    d->k_llm = Py_NewRef(PyTuple_GET_ITEM(kind_names, 2));
    d->k_tool = Py_NewRef(PyTuple_GET_ITEM(kind_names, 3));
    d->k_other = Py_NewRef(PyTuple_GET_ITEM(kind_names, 4));
    Py_DECREF(kind_names);
    d->s_name = PyUnicode_InternFromString("name");
    d->s_time_ns = PyUnicode_InternFromString("time_ns");
    d->s_attributes = PyUnicode_InternFromString("attributes");
    return d->s_name && d->s_time_ns && d->s_attributes ? 0 : -1;
}

/* ---- Arrow column builders ------------------------------------------------------------------ */

/* One Arrow array being built: data (fixed-width values, string bytes or a bool bitmap),
 * int32 offsets for strings and maps, a validity bitmap for nullable floats. */
typedef struct {
    int type;
    Py_ssize_t n, nulls;
    char *data;
    Py_ssize_t len, cap;
    int32_t *off;
    Py_ssize_t offcap;
    uint8_t *valid;
    Py_ssize_t validcap;
} Col;

typedef struct {
    Py_ssize_t n, nulls, len;
} ColMark;

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need) {
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) cap2 *= 2;
    void *grown = PyMem_Realloc(*buf, cap2);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = grown;
    *cap = cap2;
    return 0;
}

static int col_offset(Col *c) { /* records the end of item n-1 as offset n */
    if (grow((void **)&c->off, &c->offcap, (c->n + 2) * (Py_ssize_t)sizeof(int32_t))) return -1;
    if (c->n == 0) c->off[0] = 0;
    if (c->len > INT32_MAX) return fallback("more than 2 GiB of text in one request");
    c->off[c->n + 1] = (int32_t)c->len;
    return 0;
}

static int col_bytes(Col *c, const char *p, Py_ssize_t len) {
    if (len > 0) {
        if (grow((void **)&c->data, &c->cap, c->len + len)) return -1;
        memcpy(c->data + c->len, p, len);
        c->len += len;
    }
    if (col_offset(c)) return -1;
    c->n++;
    return 0;
}

static int col_str(Col *c, PyObject *o) {
    Py_ssize_t len;
    const char *p;
    if (!PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "text column value is not a str");
        return -1;
    }
    if ((p = PyUnicode_AsUTF8AndSize(o, &len)) == NULL) return -1; /* a lone surrogate: the Python path rejects it */
    return col_bytes(c, p, len);
}

static int col_fixed(Col *c, const void *v, Py_ssize_t size) {
    if (grow((void **)&c->data, &c->cap, c->len + size)) return -1;
    memcpy(c->data + c->len, v, size);
    c->len += size;
    c->n++;
    return 0;
}

static int set_bit(uint8_t **bits, Py_ssize_t *cap, Py_ssize_t i, int on) {
    if (grow((void **)bits, cap, i / 8 + 1)) return -1;
    if (on)
        (*bits)[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        (*bits)[i / 8] &= (uint8_t)~(1u << (i % 8));
    return 0;
}

/* A row's value into its column, converted as pyarrow converts the Python path's lists. */
static int col_value(Col *c, PyObject *o) {
    switch (c->type) {
    case T_STR: return col_str(c, o);
    case T_TIME: {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        int64_t x = v;
        return col_fixed(c, &x, 8);
    }
    case T_TOKENS: { /* clamped to UInt32 through a double, as columns._tokens_column */
        double v = PyFloat_Check(o) ? PyFloat_AS_DOUBLE(o) : PyLong_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        uint32_t x = v != v ? 0 : v <= 0 ? 0 : v >= 4294967295.0 ? 4294967295u : (uint32_t)v;
        return col_fixed(c, &x, 4);
    }
    case T_F64: {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        return col_fixed(c, &v, 8);
    }
    case T_F32N: {
        float x = 0;
        int present = o != Py_None;
        if (present) {
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) return -1;
            x = (float)v;
        } else {
            c->nulls++;
        }
        if (set_bit(&c->valid, &c->validcap, c->n, present)) return -1;
        return col_fixed(c, &x, 4);
    }
    case T_BOOL: {
        if (!PyBool_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "bool column value is not a bool");
            return -1;
        }
        Py_ssize_t size = c->cap;
        if (set_bit((uint8_t **)&c->data, &size, c->n, o == Py_True)) return -1;
        c->cap = size;
        c->len = c->n / 8 + 1;
        c->n++;
        return 0;
    }
    case T_I32: {
        long v = PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "Int32 column value out of range");
            return -1;
        }
        int32_t x = (int32_t)v;
        return col_fixed(c, &x, 4);
    }
    }
    PyErr_SetString(PyExc_TypeError, "unknown column type");
    return -1;
}

/* (n, null_count, validity or None, offsets or None, data): what pa.Array.from_buffers takes. */
static PyObject *col_export(Col *c) {
    PyObject *valid = c->valid != NULL && c->nulls ? PyBytes_FromStringAndSize((char *)c->valid, (c->n + 7) / 8) : Py_NewRef(Py_None);
    PyObject *off;
    if (c->type == T_STR || c->type == T_MAP) {
        if (c->off == NULL && grow((void **)&c->off, &c->offcap, sizeof(int32_t)) == 0) c->off[0] = 0;
        off = c->off == NULL ? NULL : PyBytes_FromStringAndSize((char *)c->off, (c->n + 1) * (Py_ssize_t)sizeof(int32_t));
    } else {
        off = Py_NewRef(Py_None);
    }
    Py_ssize_t size = c->type == T_BOOL ? (c->n + 7) / 8 : c->type == T_MAP ? 0 : c->len;
    PyObject *data = c->data == NULL && size == 0 ? PyBytes_FromStringAndSize("", 0) : PyBytes_FromStringAndSize(c->data, size);
    if (valid == NULL || off == NULL || data == NULL) {
        Py_XDECREF(valid);
        Py_XDECREF(off);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", c->n, c->nulls, valid, off, data);
}

static void col_free(Col *c) {
    PyMem_Free(c->data);
    PyMem_Free(c->off);
    PyMem_Free(c->valid);
    memset(c, 0, sizeof(*c));
}

/* ---- one request --------------------------------------------------------------------------- */

typedef struct {
    Decoder *d;
    PyObject *project;
    uint64_t not_before, not_after; /* the start times kept */
    Py_ssize_t max_resource_bytes;  /* resource keys and values stored (once per span) in all */
    Col cols[MAX_SLOTS];    /* one per field; the two map fields keep only their offsets */
    Col attr_keys, attr_values, res_keys, res_values;
    PyObject *declined;
    Py_ssize_t index;       /* span index in the request */
    Py_ssize_t accepted;
    /* the current resource */
    PyObject *service;
    PyObject *res_k, *res_v; /* tuples of the resource's attribute keys and values */
} Request;

typedef struct {
    Buf trace_id, span_id, parent, name, status;
    uint64_t start, end;
    int has_status, has_links;
    Buf *attrs, *events;
    Py_ssize_t nattrs, cap, nevents, ecap;
} SpanFields;

static const char HEX[] = "0123456789abcdef";

static PyObject *hex_of(Buf *b) {
    Py_ssize_t n = b->end - b->p;
    PyObject *s = PyUnicode_New(2 * n, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[2 * i] = HEX[b->p[i] >> 4];
        out[2 * i + 1] = HEX[b->p[i] & 15];
    }
    return s;
}

static int all_zero(Buf *b) {
    for (const uint8_t *p = b->p; p < b->end; p++)
        if (*p) return 0;
    return 1;
}

/* Ids and times the Python path takes as they are; anything else (an end before the start
   included, which it corrects with a warning) is declined to it. */
static int span_valid(Request *r, SpanFields *f) {
    Py_ssize_t t = f->trace_id.end - f->trace_id.p, s = f->span_id.end - f->span_id.p, p = f->parent.end - f->parent.p;
    return t == 16 && s == 8 && (p == 0 || p == 8) && !all_zero(&f->trace_id) && !all_zero(&f->span_id) &&
           r->not_before <= f->start && f->start <= r->not_after && f->start <= f->end && f->end <= r->d->max_ns;
}

static int decline(Request *r) {
    PyObject *i = PyLong_FromSsize_t(r->index);
    if (i == NULL) return -1;
    int rc = PyList_Append(r->declined, i);
    Py_DECREF(i);
    return rc;
}

static inline void set_value(PyObject **values, int *set, int slot, PyObject *v) {
    Py_SETREF(values[slot], v);
    set[slot] = 1;
}

/* 1: declined (a converter raised); 0: done; -1: error. */
static int map_attributes(Request *r, SpanFields *f, PyObject **values, int *set, PyObject *extra) {
    Decoder *d = r->d;
    int best[MAX_SLOTS];
    for (int i = 0; i < d->nslots; i++) best[i] = 99;
    for (Py_ssize_t a = 0; a < f->nattrs; a++) {
        Buf kvb = f->attrs[a], key;
        AnyValue v;
        if (kv_read(&kvb, &key, &v)) return -1;
        if (key.end - key.p > d->max_key_len) return 1; /* an overlong name (bytes >= characters): the Python path cuts it */
        KeyEntry scratch, *e;
        int owned;
        if ((e = lookup_key(d, &key, &scratch, &owned)) == NULL) return -1;
        PyObject *result = NULL;
        int rc = 0;
        Py_ssize_t vlen = v.buf.end - v.buf.p;
        if (e->slot >= 0) {
            if (e->rank >= 0 && best[e->slot] <= e->rank) {
                /* not used, but upb would still refuse the request over a bad value: check it */
                if (v.type == AV_STRING) {
                    if (check_string(&v.buf)) rc = -1;
                } else if (v.type == AV_ARRAY || v.type == AV_KVLIST) {
                    PyObject *o = any_object(&v, 0);
                    if (o == NULL) rc = -1;
                    Py_XDECREF(o);
                }
                goto next;
            }
            if (v.type == AV_STRING && e->conv == CONV_NSTR) {
                if (vlen == 0) goto next; /* _nstr("") is None */
                result = str_of(&v.buf);
            } else if (v.type == AV_STRING && e->conv == CONV_CAPTURED && vlen <= d->max_len && d->redact_fn == Py_None) {
                result = str_of(&v.buf);
            } else {
                PyObject *o = any_object(&v, 0);
                if (o == NULL) {
                    rc = -1;
                    goto next;
                }
                result = PyObject_CallOneArg(e->conv == CONV_CAPTURED ? d->captured_fn : e->fn, o);
                Py_DECREF(o);
                if (result == NULL) {
                    if (PyErr_ExceptionMatches(NativeFallback)) {
                        rc = -1;
                        goto next;
                    }
                    PyErr_Clear();
                    rc = 1; /* the Python path reports it */
                    goto next;
                }
            }
            if (result == NULL) {
                rc = -1;
                goto next;
            }
            if (result == Py_None) {
                Py_DECREF(result);
                goto next;
            }
            set_value(values, set, e->slot, result);
            if (e->rank >= 0) best[e->slot] = e->rank;
        } else {
            if (v.type == AV_STRING && vlen <= d->max_len) {
                result = str_of(&v.buf);
            } else {
                PyObject *o = any_object(&v, 0);
                result = o == NULL ? NULL : PyObject_CallOneArg(d->text_fn, o);
                Py_XDECREF(o);
            }
            if (result != NULL && e->content) Py_SETREF(result, PyObject_CallOneArg(d->redact_fn, result));
            if (result == NULL || PyDict_SetItem(extra, e->key, result)) rc = -1;
            Py_XDECREF(result);
        }
    next:
        if (owned) Py_DECREF(scratch.key);
        if (rc) return rc;
    }
    return 0;
}

/* An Event as collector.ingest.otlp.decode._event_pb makes it: {"name", "time_ns", "attributes"}. */
static PyObject *event_object(Decoder *d, Buf b) {
    PyObject *name = NULL, *attrs = PyDict_New(), *event = NULL;
    uint64_t time = 0;
    if (attrs == NULL) return NULL;
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar = 0;
        if (next_field(&b, &n, &wt, &sub, &scalar)) {
            fallback("malformed Event");
            goto out;
        }
        if (n == 1) {
            if (wt != WT_I64) goto wrong;
            time = scalar;
        } else if (n == 2) {
            if (wt != WT_LEN) goto wrong;
            PyObject *s = str_of(&sub);
            if (s == NULL) goto out;
            Py_XSETREF(name, s);
        } else if (n == 3) {
            if (wt != WT_LEN) goto wrong;
            if (kv_into(attrs, sub, 0)) goto out;
        } else if (n == 4 && wt != WT_VARINT) {
            goto wrong;
        }
    }
    if (name == NULL && (name = PyUnicode_FromString("")) == NULL) goto out;
    event = PyDict_New();
    PyObject *t = PyLong_FromUnsignedLongLong(time);
    if (event == NULL || t == NULL || PyDict_SetItem(event, d->s_name, name) || PyDict_SetItem(event, d->s_time_ns, t) ||
        PyDict_SetItem(event, d->s_attributes, attrs))
        Py_CLEAR(event);
    Py_XDECREF(t);
    goto out;
wrong:
    fallback("Event field with an unexpected wire type");
out:
    Py_XDECREF(name);
    Py_DECREF(attrs);
    return event;
}

static int any_set(const SlotSet *slots, const int *set) {
    for (int i = 0; i < slots->n; i++)
        if (set[slots->slots[i]]) return 1;
    return 0;
}

/* The value of the first slot of ``slots`` that is set (borrowed), or NULL. */
static PyObject *first_set(const SlotSet *slots, PyObject **values, const int *set) {
    for (int i = 0; i < slots->n; i++)
        if (set[slots->slots[i]]) return values[slots->slots[i]];
    return NULL;
}

/* The span's kind by collector.ingest.spec.KindRules (its classify is the reference), read from
 * the rule data the spec handed over: declared kinds, the engine's span, the signal tables in
 * precedence order, the LLM and tool columns, a root step as the run. */
static PyObject *kind_of(Decoder *d, PyObject **values, int *set, SpanFields *f, int *engine) {
    PyObject *aw = set[d->declared_slot] ? values[d->declared_slot] : NULL;
    if (aw != NULL) {
        int in = PySet_Contains(d->kinds, aw);
        if (in < 0) return NULL;
        if (in) return Py_NewRef(aw);
    }
    int parent = f->parent.end > f->parent.p;
    if (any_set(&d->engine_when, set)) {
        Py_ssize_t n = f->name.end - f->name.p;
        const char *vllm = PyUnicode_AsUTF8(d->vllm_name);
        if (vllm != NULL && (Py_ssize_t)strlen(vllm) == n && memcmp(vllm, f->name.p, n) == 0) {
            *engine = 1; /* an engine span: the Python path makes it kind "engine" */
            return Py_NewRef(d->k_other);
        }
    }
    PyObject *kind = NULL;
    Py_ssize_t nsignals = PyTuple_GET_SIZE(d->kind_signals);
    for (Py_ssize_t i = 0; i < nsignals && kind == NULL; i++) {
        int slot = d->kind_signal_slots[i];
        if (!set[slot]) continue;
        kind = PyDict_GetItemWithError(PyTuple_GET_ITEM(PyTuple_GET_ITEM(d->kind_signals, i), 1), values[slot]);
        if (kind == NULL && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
            PyErr_Clear(); /* an unhashable signal value is simply no signal */
        }
        if (kind != NULL && !PyObject_IsTrue(kind)) kind = NULL;
    }
    if (kind == NULL) {
        if (any_set(&d->llm_when, set))
            kind = d->k_llm;
        else if (any_set(&d->tool_when, set))
            kind = d->k_tool;
        else
            return Py_NewRef(d->k_other);
    }
    if (kind == d->k_step || PyUnicode_Compare(kind, d->k_step) == 0) {
        if (PyErr_Occurred()) return NULL;
        if (!parent) return Py_NewRef(d->k_run);
    }
    return Py_NewRef(kind);
}

static int append_map(Col *map, Col *keys, Col *values, PyObject *k, PyObject *v) {
    (void)map;
    return col_str(keys, k) || col_str(values, v) ? -1 : 0;
}

static int append_row_cols(Request *r, PyObject **values, PyObject *extra) {
    Decoder *d = r->d;
    int attributes = d->named[F_ATTRIBUTES], resource = d->named[F_RESOURCE];
    for (int i = 0; i < d->nfields; i++) {
        if (i == attributes || i == resource) continue;
        if (col_value(&r->cols[i], values[i])) return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(extra, &pos, &key, &value))
        if (append_map(&r->cols[attributes], &r->attr_keys, &r->attr_values, key, value)) return -1;
    Col *m = &r->cols[attributes];
    m->len = r->attr_keys.n;
    if (col_offset(m)) return -1;
    m->n++;
    Py_ssize_t nres = PyTuple_GET_SIZE(r->res_k);
    for (Py_ssize_t i = 0; i < nres; i++)
        if (append_map(&r->cols[resource], &r->res_keys, &r->res_values, PyTuple_GET_ITEM(r->res_k, i), PyTuple_GET_ITEM(r->res_v, i)))
            return -1;
    m = &r->cols[resource];
    m->len = r->res_keys.n;
    if (col_offset(m)) return -1;
    m->n++;
    if (r->res_keys.len + r->res_values.len > r->max_resource_bytes) {
        PyErr_SetString(NativeFallback, "resource attributes over the request's limit: the Python path refuses it with its message");
        return -1;
    }
    return 0;
}

/* Appends the row to every column, or to none (a value that cannot be stored declines the span). */
static int append_row(Request *r, PyObject **values, PyObject *extra) {
    Decoder *d = r->d;
    ColMark marks[MAX_SLOTS + 4];
    Col *all[MAX_SLOTS + 4];
    int ncols = 0;
    for (int i = 0; i < d->nfields; i++) all[ncols++] = &r->cols[i];
    all[ncols++] = &r->attr_keys;
    all[ncols++] = &r->attr_values;
    all[ncols++] = &r->res_keys;
    all[ncols++] = &r->res_values;
    for (int i = 0; i < ncols; i++) marks[i] = (ColMark){all[i]->n, all[i]->nulls, all[i]->len};
    if (append_row_cols(r, values, extra)) {
        for (int i = 0; i < ncols; i++) {
            all[i]->n = marks[i].n;
            all[i]->nulls = marks[i].nulls;
            all[i]->len = marks[i].len;
        }
        return -1;
    }
    r->accepted++;
    return 0;
}

static int read_status(Buf b, PyObject **message, long long *code) {
    *code = 0;
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) return fallback("malformed Status");
        if (n == 2) {
            if (wt != WT_LEN) return fallback("Status message with an unexpected wire type");
            PyObject *m = str_of(&sub);
            if (m == NULL) return -1;
            Py_SETREF(*message, m);
        } else if (n == 3) {
            if (wt != WT_VARINT) return fallback("Status code with an unexpected wire type");
            *code = (long long)(int32_t)scalar;
        } else if (n == 1 && wt != WT_VARINT) {
            return fallback("Status field 1 with an unexpected wire type");
        }
    }
    return 0;
}

/* Normalise one span already split into fields; appends it or declines it. */
static int finish_span(Request *r, SpanFields *f) {
    Decoder *d = r->d;
    /* links, and more attributes or events than the bounds: the Python path (which cuts them, with a warning) */
    if (f->has_links || f->nattrs > d->max_attributes || f->nevents > d->max_events || !span_valid(r, f)) return decline(r);
    int nslots = d->nslots;
    PyObject *values[MAX_SLOTS];
    int set[MAX_SLOTS];
    for (int i = 0; i < nslots; i++) {
        values[i] = i < d->nfields ? Py_NewRef(PyTuple_GET_ITEM(d->defaults, i)) : Py_NewRef(Py_None);
        set[i] = 0;
    }
    PyObject *extra = PyDict_New();
    int rc = extra == NULL ? -1 : map_attributes(r, f, values, set, extra);
    const int *nm = d->named;
    if (rc == 0 && any_set(&d->decline, set)) rc = 1; /* a rule of the Python path only (engine timings) */
    if (rc == 0 && f->nevents) {
        PyObject *events = PyList_New(f->nevents), *out = NULL;
        for (Py_ssize_t i = 0; events != NULL && i < f->nevents; i++) {
            PyObject *event = event_object(d, f->events[i]);
            if (event == NULL) Py_CLEAR(events);
            else PyList_SET_ITEM(events, i, event);
        }
        if (events != NULL) out = PyObject_CallFunctionObjArgs(d->events_fn, events, values[nm[F_ERROR_TYPE]], NULL);
        Py_XDECREF(events);
        if (out == NULL || !PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 2) {
            if (out != NULL) PyErr_SetString(PyExc_TypeError, "events_fn must return (events_json, error_type)");
            Py_XDECREF(out);
            rc = -1;
            goto done;
        }
        set_value(values, set, nm[F_EVENTS], Py_NewRef(PyTuple_GET_ITEM(out, 0)));
        set_value(values, set, nm[F_ERROR_TYPE], Py_NewRef(PyTuple_GET_ITEM(out, 1)));
        Py_DECREF(out);
    }
    if (rc == 0) {
        PyObject *name = str_of(&f->name), *message = PyUnicode_FromString("");
        long long code = 0;
        if (name == NULL || message == NULL || (f->has_status && read_status(f->status, &message, &code))) {
            Py_XDECREF(name);
            Py_XDECREF(message);
            rc = -1;
            goto done;
        }
        if (PyUnicode_GET_LENGTH(name) > d->max_len || PyUnicode_GET_LENGTH(message) > d->max_len) {
            Py_SETREF(name, PyObject_CallOneArg(d->text_fn, name));
            Py_SETREF(message, message == NULL ? NULL : PyObject_CallOneArg(d->text_fn, message));
            if (name == NULL || message == NULL) {
                Py_XDECREF(name);
                Py_XDECREF(message);
                rc = -1;
                goto done;
            }
        }
        int engine = 0;
        PyObject *kind = kind_of(d, values, set, f, &engine);
        if (kind == NULL || engine) {
            Py_XDECREF(kind);
            Py_DECREF(name);
            Py_DECREF(message);
            rc = kind == NULL ? -1 : 1;
            goto done;
        }
        set_value(values, set, nm[F_NAME], name);
        set_value(values, set, nm[F_STATUS_MESSAGE], message);
        set_value(values, set, nm[F_KIND], kind);
        /* collector.ingest.normalize._names: a run of the dialect spec.RUN_NAMED_BY_SPAN without an agent name
         * is named by its span */
        PyObject *dialect = first_set(&d->dialect, values, set);
        if (dialect != NULL && !set[nm[F_AGENT_NAME]] && PyUnicode_Check(dialect) &&
            PyUnicode_Compare(dialect, d->run_named_by_span) == 0 && PyUnicode_Compare(kind, d->k_run) == 0)
            set_value(values, set, nm[F_AGENT_NAME], Py_NewRef(values[nm[F_NAME]]));
        if (PyErr_Occurred()) {
            rc = -1;
            goto done;
        }
        Py_ssize_t nstatus = PyTuple_GET_SIZE(d->status_names);
        set_value(values, set, nm[F_STATUS_CODE], Py_NewRef(PyTuple_GET_ITEM(d->status_names, code >= 0 && code < nstatus ? code : 0)));
        set_value(values, set, nm[F_PROJECT], Py_NewRef(r->project));
        set_value(values, set, nm[F_SERVICE], Py_NewRef(r->service));
        PyObject *tid = hex_of(&f->trace_id), *sid = hex_of(&f->span_id), *pid = hex_of(&f->parent);
        PyObject *start = PyLong_FromUnsignedLongLong(f->start), *end = PyLong_FromUnsignedLongLong(f->end);
        if (!tid || !sid || !pid || !start || !end) {
            Py_XDECREF(tid);
            Py_XDECREF(sid);
            Py_XDECREF(pid);
            Py_XDECREF(start);
            Py_XDECREF(end);
            rc = -1;
            goto done;
        }
        set_value(values, set, nm[F_TRACE_ID], tid);
        set_value(values, set, nm[F_SPAN_ID], sid);
        set_value(values, set, nm[F_PARENT], pid);
        set_value(values, set, nm[F_START], start);
        set_value(values, set, nm[F_END], end);
        /* an error type that says "timeout" marks a timeout (no events here) */
        PyObject *error_type = values[nm[F_ERROR_TYPE]];
        if (PyUnicode_Check(error_type) && PyUnicode_GET_LENGTH(error_type) > 0 && !PyObject_IsTrue(values[nm[F_IS_TIMEOUT]])) {
            PyObject *lower = PyObject_CallMethod(error_type, "lower", NULL);
            int hit = lower == NULL ? -1 : PySequence_Contains(lower, d->timeout);
            Py_XDECREF(lower);
            if (hit < 0) {
                rc = -1;
                goto done;
            }
            if (hit) set_value(values, set, nm[F_IS_TIMEOUT], Py_NewRef(Py_True));
        }
        /* LLM spans are priced with the collector's table */
        PyObject *model = values[nm[F_MODEL]];
        if (d->price_fn != Py_None && PyUnicode_Compare(kind, d->k_llm) == 0 && PyObject_IsTrue(model)) {
            PyObject *priced = PyObject_CallFunctionObjArgs(d->price_fn, model, values[nm[F_PROVIDER]], values[nm[F_INPUT_TOKENS]],
                                                            values[nm[F_OUTPUT_TOKENS]], values[nm[F_CACHED_TOKENS]], NULL);
            if (priced == NULL) {
                PyErr_Clear();
                rc = 1;
                goto done;
            }
            if (PyTuple_Check(priced) && PyTuple_GET_SIZE(priced) == 2) {
                set_value(values, set, nm[F_COST], Py_NewRef(PyTuple_GET_ITEM(priced, 0)));
                set_value(values, set, nm[F_PRICE_VERSION], Py_NewRef(PyTuple_GET_ITEM(priced, 1)));
            }
            Py_DECREF(priced);
        }
        rc = append_row(r, values, extra);
    }
done:
    if (rc == -1 && !PyErr_ExceptionMatches(NativeFallback) && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear(); /* a converter or hook raised: the Python path reports it for this span */
        rc = 1;
    }
    for (int i = 0; i < nslots; i++) Py_DECREF(values[i]);
    Py_XDECREF(extra);
    if (rc == 1) return decline(r);
    return rc;
}

static int push_buf(Buf **items, Py_ssize_t *n, Py_ssize_t *cap, Buf item) {
    if (*n == *cap) {
        Py_ssize_t grown_cap = *cap ? 2 * *cap : 32;
        Buf *grown = PyMem_Realloc(*items, grown_cap * sizeof(Buf));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *items = grown;
        *cap = grown_cap;
    }
    (*items)[(*n)++] = item;
    return 0;
}

static int read_span(Request *r, Buf b, SpanFields *f) {
    (void)r;  /* the same signature as the other readers of a request */
    memset(f, 0, offsetof(SpanFields, attrs));
    f->nevents = 0;
    f->trace_id.p = f->trace_id.end = f->span_id.p = f->span_id.end = f->parent.p = f->parent.end = f->name.p = f->name.end = b.p;
    f->nattrs = 0;
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar = 0;
        if (next_field(&b, &n, &wt, &sub, &scalar)) return fallback("malformed Span");
        int want;
        switch (n) {
        case 1: case 2: case 3: case 4: case 5: case 9: case 11: case 13: case 15: want = WT_LEN; break;
        case 6: case 10: case 12: case 14: want = WT_VARINT; break;
        case 7: case 8: want = WT_I64; break;
        case 16: want = WT_I32; break;
        default: continue;
        }
        if (wt != want) return fallback("Span field with an unexpected wire type");
        switch (n) {
        case 1: f->trace_id = sub; break;
        case 2: f->span_id = sub; break;
        case 3: if (check_string(&sub)) return -1; break;
        case 4: f->parent = sub; break;
        case 5: f->name = sub; break;
        case 7: f->start = scalar; break;
        case 8: f->end = scalar; break;
        case 9:
            if (push_buf(&f->attrs, &f->nattrs, &f->cap, sub)) return -1;
            break;
        case 11:
            if (push_buf(&f->events, &f->nevents, &f->ecap, sub)) return -1;
            break;
        case 13: f->has_links = 1; break;
        case 15:
            if (f->has_status) return fallback("Span status repeated");
            f->status = sub;
            f->has_status = 1;
            break;
        }
    }
    return 0;
}

static int read_scope(Buf b) {
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) return fallback("malformed InstrumentationScope");
        if (n == 1 || n == 2) {
            if (wt != WT_LEN) return fallback("InstrumentationScope field with an unexpected wire type");
            if (check_string(&sub)) return -1;
        } else if (n == 3) {
            if (wt != WT_LEN) return fallback("InstrumentationScope attribute with an unexpected wire type");
            Buf key;
            AnyValue v;
            if (kv_read(&sub, &key, &v) || check_string(&key)) return -1;
            PyObject *o = any_object(&v, 0);
            if (o == NULL) return -1;
            Py_DECREF(o);
        } else if (n == 4 && wt != WT_VARINT) {
            return fallback("InstrumentationScope field with an unexpected wire type");
        }
    }
    return 0;
}

static int read_scope_spans(Request *r, Buf b, SpanFields *f) {
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) return fallback("malformed ScopeSpans");
        if (n > 3) continue;
        if (wt != WT_LEN) return fallback("ScopeSpans field with an unexpected wire type");
        if (n == 1) {
            if (read_scope(sub)) return -1;
        } else if (n == 3) {
            if (check_string(&sub)) return -1;
        } else {
            if (read_span(r, sub, f) || finish_span(r, f)) return -1;
            r->index++;
        }
    }
    return 0;
}

static int set_resource(Request *r, Buf *resource) {
    Decoder *d = r->d;
    PyObject *attrs = PyDict_New();
    if (attrs == NULL) return -1;
    Buf b = resource ? *resource : (Buf){0};
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) goto malformed;
        if (n == 1) {
            if (wt != WT_LEN) goto malformed;
            if (kv_into(attrs, sub, 0)) {
                Py_DECREF(attrs);
                return -1;
            }
        } else if (n == 2 && wt != WT_VARINT) {
            goto malformed;
        }
    }
    PyObject *res = PyObject_CallOneArg(d->resource_fn, attrs);
    Py_DECREF(attrs);
    if (res == NULL) return -1;
    PyObject *service = PyObject_GetAttrString(res, "service_name");
    PyObject *rattrs = PyObject_GetAttrString(res, "attributes");
    Py_DECREF(res);
    if (service == NULL || rattrs == NULL || !PyDict_Check(rattrs)) {
        Py_XDECREF(service);
        Py_XDECREF(rattrs);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "resource_fn must return a Resource");
        return -1;
    }
    Py_ssize_t size = PyDict_GET_SIZE(rattrs), pos = 0, i = 0;
    PyObject *keys = PyTuple_New(size), *values = PyTuple_New(size), *k, *v;
    if (keys == NULL || values == NULL) {
        Py_XDECREF(keys);
        Py_XDECREF(values);
        Py_DECREF(service);
        Py_DECREF(rattrs);
        return -1;
    }
    while (PyDict_Next(rattrs, &pos, &k, &v)) {
        PyTuple_SET_ITEM(keys, i, Py_NewRef(k));
        PyTuple_SET_ITEM(values, i, Py_NewRef(v));
        i++;
    }
    Py_DECREF(rattrs);
    Py_XSETREF(r->service, service);
    Py_XSETREF(r->res_k, keys);
    Py_XSETREF(r->res_v, values);
    return 0;
malformed:
    Py_DECREF(attrs);
    return fallback("malformed Resource");
}

static int read_resource_spans(Request *r, Buf b, SpanFields *f) {
    /* the resource may follow its spans on the wire: find it first */
    Buf scan = b, resource = {0};
    int has_resource = 0;
    while (scan.p < scan.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&scan, &n, &wt, &sub, &scalar)) return fallback("malformed ResourceSpans");
        if (n > 3) continue;
        if (wt != WT_LEN) return fallback("ResourceSpans field with an unexpected wire type");
        if (n == 1) {
            if (has_resource) return fallback("ResourceSpans resource repeated");
            resource = sub;
            has_resource = 1;
        } else if (n == 3 && check_string(&sub)) {
            return -1;
        }
    }
    if (set_resource(r, has_resource ? &resource : NULL)) return -1;
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) return -1;
        if (n == 2 && read_scope_spans(r, sub, f)) return -1;
    }
    return 0;
}

static PyObject *Decoder_decode(Decoder *d, PyObject *args) {
    Py_buffer payload;
    PyObject *project;
    unsigned long long not_before, not_after = d->max_ns, max_resource_bytes = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, "y*UK|KK", &payload, &project, &not_before, &not_after, &max_resource_bytes)) return NULL;
    Request r = {0};
    r.d = d;
    r.project = project;
    r.not_before = not_before;
    r.not_after = not_after;
    r.max_resource_bytes = max_resource_bytes > (unsigned long long)PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)max_resource_bytes;
    PyObject *result = NULL;
    SpanFields f = {0};
    for (int i = 0; i < d->nfields; i++) r.cols[i].type = d->types[i];
    r.attr_keys.type = r.attr_values.type = r.res_keys.type = r.res_values.type = T_STR;
    if (!(r.declined = PyList_New(0))) goto out;
    Buf b = {(const uint8_t *)payload.buf, (const uint8_t *)payload.buf + payload.len};
    while (b.p < b.end) {
        uint32_t n;
        int wt;
        Buf sub = {0};
        uint64_t scalar;
        if (next_field(&b, &n, &wt, &sub, &scalar)) {
            fallback("malformed ExportTraceServiceRequest");
            goto out;
        }
        if (n != 1) continue;
        if (wt != WT_LEN) {
            fallback("ExportTraceServiceRequest field with an unexpected wire type");
            goto out;
        }
        if (read_resource_spans(&r, sub, &f)) goto out;
    }
    PyObject *columns = PyList_New(d->nfields);
    if (columns == NULL) goto out;
    for (int i = 0; i < d->nfields; i++) {
        PyObject *c = col_export(&r.cols[i]);
        if (c == NULL) {
            Py_DECREF(columns);
            goto out;
        }
        PyList_SET_ITEM(columns, i, c);
    }
    result = Py_BuildValue("(NNNNNOn)", columns, col_export(&r.attr_keys), col_export(&r.attr_values), col_export(&r.res_keys),
                           col_export(&r.res_values), r.declined, r.index);
out:
    PyBuffer_Release(&payload);
    PyMem_Free(f.attrs);
    PyMem_Free(f.events);
    for (int i = 0; i < d->nfields; i++) col_free(&r.cols[i]);
    col_free(&r.attr_keys);
    col_free(&r.attr_values);
    col_free(&r.res_keys);
    col_free(&r.res_values);
    Py_XDECREF(r.declined);
    Py_XDECREF(r.service);
    Py_XDECREF(r.res_k);
    Py_XDECREF(r.res_v);
    return result;
}

static PyMethodDef Decoder_methods[] = {
    {"decode", (PyCFunction)Decoder_decode, METH_VARARGS,
     "decode(payload, project, not_before_ns, not_after_ns=max_time_ns, max_resource_bytes=MAX) -> (columns, attribute keys, attribute values, resource keys, resource values, "
     "declined, span_count); each column is (n, null_count, validity, offsets, data) for pa.Array.from_buffers"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agentwatch_platform.collector.ingest.otlp._native.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
    .tp_doc = "OTLP protobuf -> span columns, configured by collector.ingest.otlp.native",
};

static PyMethodDef module_methods[] = {
    {"json_wire", json_wire, METH_O,
     "json_wire(doc) -> (ExportTraceServiceRequest bytes, span count) for a json.loads'ed OTLP JSON request; "
     "NativeFallback when the Python JSON path must read it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "Native OTLP span decoder.", -1, module_methods,
                                     NULL, NULL, NULL, NULL};

/* The names of an enum, in its order: a tuple (``as_dict`` 0) or a dict name -> value. */
static PyObject *enum_names(const char *const *names, int n, int as_dict) {
    PyObject *out = as_dict ? PyDict_New() : PyTuple_New(n);
    for (int i = 0; out != NULL && i < n; i++) {
        PyObject *name = PyUnicode_FromString(names[i]), *value = as_dict ? PyLong_FromLong(i) : NULL;
        int rc = name == NULL || (as_dict && (value == NULL || PyDict_SetItem(out, name, value)));
        if (!as_dict && name != NULL) PyTuple_SET_ITEM(out, i, Py_NewRef(name));
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (rc) Py_CLEAR(out);
    }
    return out;
}

/* NAMED_FIELDS, CONVERTERS and COLUMN_TYPES: the decoder's enums, for the DecoderSpec built over them. */
static int add_enums(PyObject *m) {
    PyObject *named = enum_names(NAMED_FIELD_NAMES, N_NAMED, 0), *conv = enum_names(CONVERTER_NAMES, N_CONVERTERS, 1);
    PyObject *types = enum_names(COLUMN_TYPE_NAMES, N_TYPES, 1);
    int rc = named == NULL || conv == NULL || types == NULL || PyModule_AddObjectRef(m, "NAMED_FIELDS", named) < 0 ||
             PyModule_AddObjectRef(m, "CONVERTERS", conv) < 0 || PyModule_AddObjectRef(m, "COLUMN_TYPES", types) < 0;
    Py_XDECREF(named);
    Py_XDECREF(conv);
    Py_XDECREF(types);
    return rc ? -1 : 0;
}

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&DecoderType) < 0 || json_wire_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    NativeFallback = PyErr_NewException("agentwatch_platform.collector.ingest.otlp._native.NativeFallback", NULL, NULL);
    if (NativeFallback == NULL || PyModule_AddObjectRef(m, "NativeFallback", NativeFallback) < 0 ||
        PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddIntConstant(m, "SPEC_ABI", SPEC_ABI) < 0 || add_enums(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
