# cython: language_level=3, wraparound=False, annotation_typing=False
"""Compiled twin of gateway.routing.conditions: evaluates compiled condition queries in typed code.

Compiling a query is done once per config, so it is not duplicated here: ``compile_query`` and
``QueryError`` are the pure module's own. Evaluation, which runs per request, is native: it reads the
same tuple tree with C-typed codes. Trees must come from ``compile_query``; the top-level shape is checked.
"""

from gateway.routing import conditions as _pure
from gateway.routing.conditions import MAX_DEPTH, CompiledQuery, QueryError, compile_query

__all__ = ["MAX_DEPTH", "CompiledQuery", "QueryError", "compile_query", "evaluate", "first_match"]

cdef enum:
    AND = 0
    OR = 1
    FIELD = 2
    PARAMS = 1
    EQ = 0
    NE = 1
    GT = 2
    GTE = 3
    LT = 4
    LTE = 5
    IN = 6
    NIN = 7
    REGEX = 8
    K_MISSING = 0
    K_NUMBER = 1
    K_STRING = 2
    K_BOOL = 3
    K_NULL = 4
    K_ARRAY = 5
    K_OBJECT = 6
    K_OTHER = 7

# The tree comes from the pure compiler: its codes must be the ones declared above.
_CODES = {
    "_AND": AND, "_OR": OR, "_FIELD": FIELD, "_PARAMS": PARAMS,
    "_EQ": EQ, "_NE": NE, "_GT": GT, "_GTE": GTE, "_LT": LT, "_LTE": LTE, "_IN": IN, "_NIN": NIN,
    "_REGEX": REGEX,
    "_K_MISSING": K_MISSING, "_K_NUMBER": K_NUMBER, "_K_STRING": K_STRING, "_K_BOOL": K_BOOL,
    "_K_NULL": K_NULL, "_K_ARRAY": K_ARRAY, "_K_OBJECT": K_OBJECT, "_K_OTHER": K_OTHER,
}
for _name, _code in _CODES.items():
    if getattr(_pure, _name) != _code:
        raise ImportError(f"gateway._speedups.conditions is stale: {_name} differs from the pure module")
del _name, _code, _CODES

cdef object _MISSING = _pure._MISSING


cdef int _kind(object value):
    cdef type cls = type(value)
    if cls is str:
        return K_STRING
    if cls is int or cls is float:
        return K_NUMBER
    if cls is bool:
        return K_BOOL
    if value is None:
        return K_NULL
    if cls is list or cls is tuple:
        return K_ARRAY
    if cls is dict:
        return K_OBJECT
    # Subclasses, in the pure twin's order.
    if isinstance(value, (int, float)):
        return K_NUMBER
    if isinstance(value, str):
        return K_STRING
    if isinstance(value, (list, tuple)):
        return K_ARRAY
    if isinstance(value, dict):
        return K_OBJECT
    if value is _MISSING:
        return K_MISSING
    return K_OTHER


cdef bint _same(object a, int kind, object b) except -1:
    """Whether ``a`` equals ``b``, both known to be of ``kind``."""
    cdef Py_ssize_t i, n
    cdef object key, x, y
    if kind == K_STRING:
        if type(a) is str and type(b) is str:
            return (<str>a) == (<str>b)
        return a == b
    if kind == K_NUMBER:
        if type(a) is float and type(b) is float:
            return (<double>a) == (<double>b)
        return a == b
    if kind == K_BOOL or kind == K_NULL:
        return a is b
    if kind == K_ARRAY:
        n = len(a)
        if n != len(b):
            return False
        for i in range(n):
            x = a[i]
            y = b[i]
            if not _equal(x, y):
                return False
        return True
    if kind == K_OBJECT:
        if len(<dict?>a) != len(<dict?>b):
            return False
        for key, x in (<dict>a).items():
            y = (<dict>b).get(key, _MISSING)
            if y is _MISSING or not _equal(x, y):
                return False
        return True
    return a == b


cdef inline bint _equal(object a, object b) except -1:
    cdef int kind = _kind(a)
    if kind != _kind(b):
        return False
    return _same(a, kind, b)


cdef object _resolve(object value, tuple segments):
    cdef tuple segment
    cdef Py_ssize_t index
    for segment in segments:
        if isinstance(value, dict):
            value = (<dict>value).get(segment[0], _MISSING)
            if value is _MISSING:
                return value
        elif isinstance(value, list):
            index = segment[1]
            if index < 0 or index >= len(<list>value):
                return _MISSING
            value = (<list>value)[index]
        elif isinstance(value, tuple):
            index = segment[1]
            if index < 0 or index >= len(<tuple>value):
                return _MISSING
            value = (<tuple>value)[index]
        else:
            return _MISSING
    return value


cdef bint _member(tuple operand, object value) except -1:
    cdef int kind
    cdef object item
    if isinstance(value, str):
        return value in <frozenset?>operand[0]
    if value is _MISSING:
        return False
    kind = _kind(value)
    for item in <tuple?>operand[1]:
        if _kind(item) == kind and _same(value, kind, item):
            return True
    return False


cdef bint _passes(tuple test, object value) except -1:
    cdef int op = test[0]
    cdef object operand = test[1]
    cdef int kind = test[2]
    cdef double x, y
    if op == EQ:
        return value is not _MISSING and _kind(value) == kind and _same(value, kind, operand)
    if op == NE:
        return value is _MISSING or _kind(value) != kind or not _same(value, kind, operand)
    if op == IN:
        return _member(<tuple?>operand, value)
    if op == NIN:
        return not _member(<tuple?>operand, value)
    if op == REGEX:
        return isinstance(value, str) and operand(value) is not None
    if (kind != K_NUMBER and kind != K_STRING) or _kind(value) != kind:
        return False
    if type(value) is float and type(operand) is float:
        x = value
        y = operand
        if op == GT:
            return x > y
        if op == GTE:
            return x >= y
        if op == LT:
            return x < y
        return x <= y
    if op == GT:
        return value > operand
    if op == GTE:
        return value >= operand
    if op == LT:
        return value < operand
    return value <= operand


cdef bint _eval(tuple node, object metadata, object params) except -1:
    cdef int code = node[0]
    cdef int source
    cdef tuple child, test
    cdef object value
    if code == FIELD:
        source = node[1]
        value = _resolve(params if source == PARAMS else metadata, <tuple?>node[2])
        for test in <tuple?>node[3]:
            if not _passes(test, value):
                return False
        return True
    if code == AND:
        for child in <tuple?>node[1]:
            if not _eval(child, metadata, params):
                return False
        return True
    for child in <tuple?>node[1]:
        if _eval(child, metadata, params):
            return True
    return False


def evaluate(tuple compiled not None, metadata: dict, params: dict) -> bool:
    """Whether the request (``metadata`` from the x-gateway-metadata header, ``params`` the body) matches."""
    return _eval(compiled, metadata, params)


def first_match(compiled_list: list, metadata: dict, params: dict) -> int:
    """The index of the first query in ``compiled_list`` the request matches, or -1 when none does."""
    cdef Py_ssize_t index = 0
    cdef object compiled
    for compiled in compiled_list:
        if not isinstance(compiled, tuple):
            raise TypeError(f"a compiled query is a tuple, got {type(compiled).__name__}")
        if _eval(<tuple>compiled, metadata, params):
            return index
        index += 1
    return -1
