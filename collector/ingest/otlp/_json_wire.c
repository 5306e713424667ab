/* OTLP JSON export requests (as json.loads returns them) -> protobuf wire bytes.
 *
 * Why: the Python JSON path normalises each span in Python (~30 us a span); re-encoding the
 * parsed document as an ExportTraceServiceRequest lets the native decoder (_native.c) do JSON
 * bodies too, so both encodings share one decoder and one mapping table.
 *
 * It reproduces exactly what collector.ingest.otlp.decode's JSON path reads (lowerCamelCase or
 * snake_case names, the camel name winning unless it is null; ids as hex; 64-bit integers as
 * numbers or decimal strings; status codes as numbers or names) and nothing it ignores (span
 * kind, links, scopes, dropped counts). Anything outside the common, valid forms (a wrong type,
 * an id that is not 32/16 hex digits or is all zero, a number out of range, an unknown AnyValue,
 * bytes that are not padded base64, text that is not valid Unicode) raises NativeFallback: the
 * Python JSON path then takes the whole request and says precisely what is wrong with it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int fb(const char *why) {
    PyErr_SetString(NativeFallback, why);
    return -1;
}

static int reserve(Out *o, Py_ssize_t n) {
    if (o->len + n <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n) cap *= 2;
    char *p = PyMem_Realloc(o->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static int varint(Out *o, uint64_t v) {
    if (reserve(o, 10)) return -1;
    while (v >= 0x80) {
        o->p[o->len++] = (char)(v | 0x80);
        v >>= 7;
    }
    o->p[o->len++] = (char)v;
    return 0;
}

static int tag(Out *o, int field, int wire_type) { return varint(o, ((uint64_t)field << 3) | (uint64_t)wire_type); }

static int fixed64(Out *o, int field, uint64_t v) {
    if (tag(o, field, 1) || reserve(o, 8)) return -1;
    for (int i = 0; i < 8; i++) o->p[o->len++] = (char)(v >> (8 * i));
    return 0;
}

static int bytes_field(Out *o, int field, const char *s, Py_ssize_t n) {
    if (tag(o, field, 2) || varint(o, (uint64_t)n) || reserve(o, n)) return -1;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    return 0;
}

/* A length-delimited field whose length is known only once written: room for a 5-byte length
 * now; close_len writes the minimal varint and moves the content up behind it. */
static Py_ssize_t open_len(Out *o, int field) {
    if (tag(o, field, 2) || reserve(o, 5)) return -1;
    o->len += 5;
    return o->len;
}

static int close_len(Out *o, Py_ssize_t start) {
    uint64_t n = (uint64_t)(o->len - start);
    if (n >= ((uint64_t)1 << 31)) return fb("message over 2 GiB");
    uint8_t head[5];
    int k = 0;
    for (uint64_t v = n;; v >>= 7) {
        if (v < 0x80) {
            head[k++] = (uint8_t)v;
            break;
        }
        head[k++] = (uint8_t)(v | 0x80);
    }
    char *at = o->p + start - 5;
    memcpy(at, head, k);
    if (k < 5) memmove(at + k, o->p + start, n);
    o->len -= 5 - k;
    return 0;
}

/* ---- the JSON document -------------------------------------------------------------------- */

enum {
    K_RESOURCE_SPANS, K_RESOURCE_SPANS_, K_SCOPE_SPANS, K_SCOPE_SPANS_, K_SPANS, K_RESOURCE, K_ATTRIBUTES, K_KEY, K_VALUE,
    K_TRACE_ID, K_TRACE_ID_, K_SPAN_ID, K_SPAN_ID_, K_PARENT_SPAN_ID, K_PARENT_SPAN_ID_, K_NAME, K_START, K_START_, K_END,
    K_END_, K_STATUS, K_CODE, K_MESSAGE, K_EVENTS, K_TIME, K_TIME_, K_VALUES,
    AV_STRING, AV_STRING_, AV_INT, AV_INT_, AV_DOUBLE, AV_DOUBLE_, AV_BOOL, AV_BOOL_, AV_ARRAY, AV_ARRAY_, AV_KVLIST,
    AV_KVLIST_, AV_BYTES, AV_BYTES_, ST_UNSET, ST_OK, ST_ERROR, N_KEYS
};
static const char *KEY_NAMES[N_KEYS] = {
    "resourceSpans", "resource_spans", "scopeSpans", "scope_spans", "spans", "resource", "attributes", "key", "value",
    "traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id", "name", "startTimeUnixNano",
    "start_time_unix_nano", "endTimeUnixNano", "end_time_unix_nano", "status", "code", "message", "events", "timeUnixNano",
    "time_unix_nano", "values",
    "stringValue", "string_value", "intValue", "int_value", "doubleValue", "double_value", "boolValue", "bool_value",
    "arrayValue", "array_value", "kvlistValue", "kvlist_value", "bytesValue", "bytes_value",
    "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR",
};
static PyObject *K[N_KEYS];
static PyObject *ANY_KEYS; /* AnyValue key name -> its AV_* */

#define MAX_DEPTH 16 /* as the native decoder's AnyValue nesting limit */

/* obj.get(camel), or obj.get(snake) when that is null or absent (decode._jget); NULL when
 * neither is there. snake < 0: a name that is the same in both spellings. Keys are str and the
 * dict is json's, so a lookup cannot fail. */
static PyObject *jget(PyObject *obj, int camel, int snake) {
    PyObject *v = PyDict_GetItemWithError(obj, K[camel]);
    if ((v == NULL || v == Py_None) && snake >= 0) v = PyDict_GetItemWithError(obj, K[snake]);
    return v == Py_None ? NULL : v;
}

/* A list field (None or absent: empty); NULL with *bad set when it is something else. */
static PyObject *jlist(PyObject *obj, int camel, int snake, int *bad) {
    PyObject *v = jget(obj, camel, snake);
    *bad = v != NULL && !PyList_CheckExact(v);
    return *bad ? NULL : v;
}

/* A string (None or absent: ""), as decode._jstr. */
static int str_field(Out *o, int field, PyObject *v, int always) {
    if (v == NULL || v == Py_None) return always ? bytes_field(o, field, "", 0) : 0;
    if (!PyUnicode_CheckExact(v)) return fb("a string field holds another type");
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL) {
        PyErr_Clear();
        return fb("text that is not valid Unicode");
    }
    if (n == 0 && !always) return 0;
    return bytes_field(o, field, s, n);
}

/* A decimal string: optional minus, then ASCII digits only (what int() reads without surprises). */
static int decimal(PyObject *v, int *negative, uint64_t *magnitude) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL) {
        PyErr_Clear();
        return -1;
    }
    *negative = n > 0 && s[0] == '-';
    Py_ssize_t i = *negative;
    if (i == n) return -1;
    uint64_t x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *magnitude = x;
    return 0;
}

static int int64_of(PyObject *v, int64_t *out) {
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        *out = x;
        return 0;
    }
    int negative;
    uint64_t m;
    if (!PyUnicode_CheckExact(v) || decimal(v, &negative, &m)) return -1;
    if (negative ? m > (uint64_t)INT64_MAX + 1 : m > (uint64_t)INT64_MAX) return -1;
    *out = negative ? (int64_t)(0 - m) : (int64_t)m;
    return 0;
}

/* A time in ns: `int(value or 0)` for the forms that hold a uint64. */
static int time_field(Out *o, int field, PyObject *v) {
    uint64_t t = 0;
    if (v == NULL || (PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) == 0)) return 0;
    if (PyLong_CheckExact(v)) {
        t = PyLong_AsUnsignedLongLong(v);
        if (t == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return fb("a time out of range");
        }
    } else {
        int negative;
        if (!PyUnicode_CheckExact(v) || decimal(v, &negative, &t) || negative) return fb("a time that is not a non-negative integer");
    }
    return t ? fixed64(o, field, t) : 0;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* An id: exactly 2*size hex digits, not all zero (decode._hex_id), as bytes. */
static int id_field(Out *o, int field, PyObject *v, int size) {
    if (v == NULL || !PyUnicode_CheckExact(v) || PyUnicode_GET_LENGTH(v) != 2 * size) return fb("an id that is not hex of its length");
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL || n != 2 * size) {
        PyErr_Clear();
        return fb("an id that is not hex of its length");
    }
    char raw[16];
    int zero = 1;
    for (int i = 0; i < size; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return fb("an id that is not hex");
        raw[i] = (char)(hi << 4 | lo);
        zero &= raw[i] == 0;
    }
    if (zero) return fb("an all-zero id");
    return bytes_field(o, field, raw, size);
}

static int b64_digit(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard padded base64 (what base64.b64decode(validate=True) reads the same way); any other
 * spelling falls back. */
static int base64_field(Out *o, int field, PyObject *v) {
    Py_ssize_t n;
    const char *s = PyUnicode_CheckExact(v) ? PyUnicode_AsUTF8AndSize(v, &n) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        return fb("a bytesValue that is not a string");
    }
    Py_ssize_t pad = (n > 0 && s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
    if (n % 4 || (n && pad == 2 && s[n - 1] != '=')) return fb("a bytesValue that is not padded base64");
    Py_ssize_t size = n / 4 * 3 - pad;
    if (tag(o, field, 2) || varint(o, (uint64_t)size) || reserve(o, size + 3)) return -1;
    char *w = o->p + o->len;
    for (Py_ssize_t i = 0; i < n; i += 4) {
        uint32_t group = 0;
        for (int j = 0; j < 4; j++) {
            int d = i + j >= n - pad ? 0 : b64_digit(s[i + j]);
            if (d < 0) return fb("a bytesValue with a character outside base64");
            group = group << 6 | (uint32_t)d;
        }
        *w++ = (char)(group >> 16);
        *w++ = (char)(group >> 8);
        *w++ = (char)group;
    }
    o->len += size;
    return 0;
}

static int any_value(Out *o, PyObject *value, int depth);

/* KeyValue {1 key, 2 value}; an unset value (decode._any_json of a falsy value) is left out. */
static int key_value(Out *o, int field, PyObject *kv, int depth) {
    if (!PyDict_CheckExact(kv)) return fb("a KeyValue that is not an object");
    PyObject *key = PyDict_GetItemWithError(kv, K[K_KEY]); /* absent: "" (proto3 JSON leaves defaults out) */
    PyObject *value = PyDict_GetItemWithError(kv, K[K_VALUE]);
    Py_ssize_t start = open_len(o, field);
    if (start < 0 || str_field(o, 1, key, 0)) return -1;
    if (value != NULL && PyObject_IsTrue(value)) {
        Py_ssize_t vstart = open_len(o, 2);
        if (vstart < 0 || any_value(o, value, depth + 1) || close_len(o, vstart)) return -1;
    }
    return close_len(o, start);
}

/* `obj.get("attributes") or ()`, as repeated KeyValue `field`. */
static int attributes(Out *o, int field, PyObject *obj, int depth) {
    PyObject *list = PyDict_GetItemWithError(obj, K[K_ATTRIBUTES]);
    if (list == NULL || list == Py_None) return 0;
    if (!PyList_CheckExact(list)) return fb("attributes that are not a list");
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (key_value(o, field, PyList_GET_ITEM(list, i), depth)) return -1;
    return 0;
}

/* ArrayValue / KeyValueList: `(item or {}).get("values") or ()`. */
static int values_of(Out *o, PyObject *item, int kvlist, int depth) {
    if (item == Py_None || (PyDict_CheckExact(item) && PyDict_GET_SIZE(item) == 0)) return 0;
    if (!PyDict_CheckExact(item)) return fb("an array or kvlist value that is not an object");
    PyObject *values = PyDict_GetItemWithError(item, K[K_VALUES]);
    if (values == NULL || values == Py_None) return 0;
    if (!PyList_CheckExact(values)) return fb("array or kvlist values that are not a list");
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (kvlist) {
            if (key_value(o, 1, v, depth)) return -1;
            continue;
        }
        Py_ssize_t start = open_len(o, 1);
        if (start < 0) return -1;
        if (v != Py_None && PyObject_IsTrue(v) && any_value(o, v, depth + 1)) return -1;
        if (close_len(o, start)) return -1;
    }
    return 0;
}

/* The content of an AnyValue (already known truthy): its first recognised key decides, as in
 * decode._any_json. */
static int any_value(Out *o, PyObject *value, int depth) {
    if (depth > MAX_DEPTH) return fb("AnyValue nested too deep");
    if (!PyDict_CheckExact(value)) return fb("an AnyValue that is not an object");
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &pos, &key, &item)) {
        PyObject *known = PyDict_GetItemWithError(ANY_KEYS, key);
        if (known == NULL && PyErr_Occurred()) return -1;
        int which = known == NULL ? -1 : (int)PyLong_AsLong(known);
        switch (which) {
        case AV_STRING:
        case AV_STRING_:
            return str_field(o, 1, item, 1);
        case AV_BOOL:
        case AV_BOOL_:
            if (item != Py_True && item != Py_False) return fb("a boolValue that is not a boolean");
            return tag(o, 2, 0) || varint(o, item == Py_True);
        case AV_INT:
        case AV_INT_: {
            int64_t x;
            if (int64_of(item, &x)) return fb("an intValue outside the common int64 forms");
            return tag(o, 3, 0) || varint(o, (uint64_t)x);
        }
        case AV_DOUBLE:
        case AV_DOUBLE_: {
            double x;
            if (PyFloat_CheckExact(item)) {
                x = PyFloat_AS_DOUBLE(item);
            } else if (PyLong_CheckExact(item)) {
                x = PyLong_AsDouble(item);
                if (x == -1.0 && PyErr_Occurred()) {
                    PyErr_Clear();
                    return fb("a doubleValue too large for a double");
                }
            } else {
                return fb("a doubleValue that is not a number");
            }
            uint64_t bits;
            memcpy(&bits, &x, 8);
            return fixed64(o, 4, bits);
        }
        case AV_ARRAY:
        case AV_ARRAY_:
        case AV_KVLIST:
        case AV_KVLIST_: {
            int kvlist = which >= AV_KVLIST;
            Py_ssize_t start = open_len(o, kvlist ? 6 : 5);
            if (start < 0 || values_of(o, item, kvlist, depth) || close_len(o, start)) return -1;
            return 0;
        }
        case AV_BYTES:
        case AV_BYTES_:
            return base64_field(o, 7, item);
        default:
            continue;
        }
    }
    return fb("an AnyValue with no known key");
}

static int status_of(Out *o, PyObject *span) {
    PyObject *status = jget(span, K_STATUS, -1);
    if (status == NULL) return 0;
    if (!PyDict_CheckExact(status)) return fb("a status that is not an object");
    if (PyDict_GET_SIZE(status) == 0) return 0;
    PyObject *code = PyDict_GetItemWithError(status, K[K_CODE]);
    long c = 0;
    if (code != NULL) {
        int known = 1;
        if (PyLong_CheckExact(code)) {
            int overflow;
            c = PyLong_AsLongAndOverflow(code, &overflow);
            known = !overflow && c >= INT32_MIN && c <= INT32_MAX;
        } else if (PyUnicode_CheckExact(code)) {
            known = 0;
            for (int k = ST_UNSET; k <= ST_ERROR; k++)
                if (PyUnicode_Compare(code, K[k]) == 0) {
                    c = k - ST_UNSET;
                    known = 1;
                }
        } else {
            known = 0;
        }
        if (!known) return fb("a status code that is not an int32 or a StatusCode name");
    }
    Py_ssize_t start = open_len(o, 15);
    if (start < 0 || str_field(o, 2, PyDict_GetItemWithError(status, K[K_MESSAGE]), 0)) return -1;
    if (c && (tag(o, 3, 0) || varint(o, (uint64_t)(int64_t)c))) return -1; /* a negative enum is sign-extended */
    return close_len(o, start);
}

static int event_of(Out *o, PyObject *event) {
    if (!PyDict_CheckExact(event)) return fb("an event that is not an object");
    Py_ssize_t start = open_len(o, 11);
    if (start < 0 || time_field(o, 1, jget(event, K_TIME, K_TIME_)) || str_field(o, 2, PyDict_GetItemWithError(event, K[K_NAME]), 0) ||
        attributes(o, 3, event, 0))
        return -1;
    return close_len(o, start);
}

static int span_of(Out *o, PyObject *span) {
    if (!PyDict_CheckExact(span)) return fb("a span that is not an object");
    Py_ssize_t start = open_len(o, 2);
    if (start < 0 || id_field(o, 1, jget(span, K_TRACE_ID, K_TRACE_ID_), 16) || id_field(o, 2, jget(span, K_SPAN_ID, K_SPAN_ID_), 8))
        return -1;
    PyObject *parent = jget(span, K_PARENT_SPAN_ID, K_PARENT_SPAN_ID_);
    if (parent != NULL && PyObject_IsTrue(parent) && id_field(o, 4, parent, 8)) return -1;
    if (str_field(o, 5, jget(span, K_NAME, -1), 0) || time_field(o, 7, jget(span, K_START, K_START_)) ||
        time_field(o, 8, jget(span, K_END, K_END_)) || attributes(o, 9, span, 0))
        return -1;
    int bad;
    PyObject *events = jlist(span, K_EVENTS, -1, &bad);
    if (bad) return fb("events that are not a list");
    for (Py_ssize_t i = 0; events != NULL && i < PyList_GET_SIZE(events); i++)
        if (event_of(o, PyList_GET_ITEM(events, i))) return -1;
    if (status_of(o, span)) return -1;
    return close_len(o, start);
}

/* ResourceSpans {1 resource {1 attributes}, 2 scope_spans {2 spans}}. */
static int resource_spans_of(Out *o, PyObject *rs, Py_ssize_t *count) {
    if (!PyDict_CheckExact(rs)) return fb("resourceSpans[] that is not an object");
    Py_ssize_t start = open_len(o, 1);
    if (start < 0) return -1;
    PyObject *resource = jget(rs, K_RESOURCE, -1);
    if (resource != NULL) {
        if (!PyDict_CheckExact(resource)) return fb("a resource that is not an object");
        Py_ssize_t rstart = open_len(o, 1);
        if (rstart < 0 || attributes(o, 1, resource, 0) || close_len(o, rstart)) return -1;
    }
    int bad;
    PyObject *scopes = jlist(rs, K_SCOPE_SPANS, K_SCOPE_SPANS_, &bad);
    if (bad) return fb("scopeSpans that are not a list");
    for (Py_ssize_t i = 0; scopes != NULL && i < PyList_GET_SIZE(scopes); i++) {
        PyObject *ss = PyList_GET_ITEM(scopes, i);
        if (!PyDict_CheckExact(ss)) return fb("scopeSpans[] that is not an object");
        PyObject *spans = jlist(ss, K_SPANS, -1, &bad);
        if (bad) return fb("spans that are not a list");
        Py_ssize_t sstart = open_len(o, 2);
        if (sstart < 0) return -1;
        for (Py_ssize_t j = 0; spans != NULL && j < PyList_GET_SIZE(spans); j++) {
            if (span_of(o, PyList_GET_ITEM(spans, j))) return -1;
            ++*count;
        }
        if (close_len(o, sstart)) return -1;
    }
    return close_len(o, start);
}

PyObject *json_wire(PyObject *self, PyObject *doc) {
    (void)self;
    if (!PyDict_CheckExact(doc)) {
        fb("the document is not an object");
        return NULL;
    }
    int bad;
    PyObject *list = jlist(doc, K_RESOURCE_SPANS, K_RESOURCE_SPANS_, &bad);
    if (bad) {
        fb("resourceSpans is not a list");
        return NULL;
    }
    Out o = {0};
    Py_ssize_t count = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; list != NULL && i < PyList_GET_SIZE(list); i++)
        if (resource_spans_of(&o, PyList_GET_ITEM(list, i), &count)) goto out;
    if (!PyErr_Occurred()) result = Py_BuildValue("(y#n)", o.p ? o.p : "", o.len, count);
out:
    PyMem_Free(o.p);
    return result;
}

int json_wire_init(void) {
    for (int k = 0; k < N_KEYS; k++)
        if ((K[k] = PyUnicode_InternFromString(KEY_NAMES[k])) == NULL) return -1;
    if ((ANY_KEYS = PyDict_New()) == NULL) return -1;
    for (int k = AV_STRING; k <= AV_BYTES_; k++) {
        PyObject *which = PyLong_FromLong(k);
        if (which == NULL || PyDict_SetItem(ANY_KEYS, K[k], which) < 0) return -1;
        Py_DECREF(which);
    }
    return 0;
}
