/* What _native.c and _json_wire.c share. */
#ifndef AGENTWATCH_NATIVE_H
#define AGENTWATCH_NATIVE_H
#include <Python.h>

/* Raised when a request should take the Python path whole. */
extern PyObject *NativeFallback;

/* json_wire(doc) -> (ExportTraceServiceRequest bytes, span count), or NativeFallback. */
PyObject *json_wire(PyObject *self, PyObject *doc);
int json_wire_init(void);

#endif
