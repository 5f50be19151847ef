/* kvledger's optional compiled core: the arrival stretch's two hottest loops (open_stretch.py, open_settle.py).

   Each function here is a line-for-line translation of the pure-Python code it replaces, which stays the reference
   and the fallback (native.py loads this module; KVLEDGER_PURE_PYTHON=1 or a failed compile leaves it out):

   - decode_until: ``_ArrivalStretch.decode_until``: a vLLM v1 arrival stretch's pure-decode steps up to the next
     arrival, in pieces between finishes, each step priced by the roofline's plain form ``gemm + g·kv / bw`` and the
     step end times summed one by one;
   - settle_lives: the per-request loop of ``open_settle.settle``: the blocks each request took, its final or
     running token counters, and who finished, is freed or waits for the next schedule (async scheduling).

   Byte-identical results need the same IEEE double operations in the same order as the Python code: the build
   (hatch_build.py) compiles with -ffp-contract=off and without -ffast-math, so ``gemm + g * x / bw`` is a multiply,
   a divide and an add, each rounded, and each end time is the previous one plus the step's duration. Python ints
   are read as long long (token and step counts are far below 2^63; KV-token counts below 2^53 convert exactly). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define CORE_VERSION 1          /* native.py loads only the version it was written for */
#define CHUNK_SPARE_STEPS 3     /* stretch_times.py: steps priced beyond those the last price says fit */
#define CHUNK_MIN_STEPS 8       /* stretch_times.py: fewest steps priced in one call while a bound is ahead */
#define CHUNK_UNPRICED_STEPS 16 /* stretch_times.py: steps priced first when no step has been priced yet */
#define PLAIN_FLOAT_MAX_STEPS 96 /* decode_prices.py: longer runs are priced by prices.decode_list (numpy) */
#define MAX_ARRIVAL_STRETCH_STEPS 4096 /* open_stretch.py: steps settled at a time */

static PyObject *s_num_computed, *s_num_generated, *s_num_tokens, *s_num_output, *s_num_prompt;

/* ---- small helpers ---------------------------------------------------------------------------------------- */

static inline double as_double(PyObject *o) { return PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o) : PyFloat_AsDouble(o); }

static int append_double(PyObject *list, double x)
{
    PyObject *f = PyFloat_FromDouble(x);
    if (f == NULL) return -1;
    int rc = PyList_Append(list, f);
    Py_DECREF(f);
    return rc;
}

static int append_ll(PyObject *list, long long x)
{
    PyObject *v = PyLong_FromLongLong(x);
    if (v == NULL) return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* list += (a, b, c, d): the flat records open_stretch.py keeps (stored pieces, frees, block runs) */
static int append_ll4(PyObject *list, long long a, long long b, long long c, long long d, int count)
{
    long long v[4] = {a, b, c, d};
    for (int i = 0; i < count; i++)
        if (append_ll(list, v[i]) < 0) return -1;
    return 0;
}

static int get_ll_item(PyObject *list, Py_ssize_t i, long long *out)
{
    *out = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_ll_attr(PyObject *obj, PyObject *name, long long x)
{
    PyObject *v = PyLong_FromLongLong(x);
    if (v == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

static int get_ll_attr(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* ---- decode_until ----------------------------------------------------------------------------------------- */

/* The state of one decode_until call: the arrival stretch's lists and counts (open_stretch.py's names). */
typedef struct {
    PyObject *ends, *durs, *stored, *keys, *groups, *forms, *prices, *terms_of;
    long long K, n, S, lag, blocks_left, B, finishing;
    double bound, last;
    int priced;  /* whether a chunk was priced (``last`` then holds its last duration) */
} Stretch;

/* The plain form (gemm s, KV bytes per token, bandwidth B/s) of a decode step of ``alive`` requests, memoised in
   ``forms`` by stretch_times.plain_decode_terms; 0 and *plain = 0 when the step cost has none. */
static int decode_terms(Stretch *st, long long alive, double t[3], int *plain)
{
    PyObject *key = PyLong_FromLongLong(alive);
    if (key == NULL) return -1;
    PyObject *terms = PyDict_GetItemWithError(st->forms, key);  /* borrowed */
    if (terms != NULL) Py_INCREF(terms);
    else if (!PyErr_Occurred()) terms = PyObject_CallFunctionObjArgs(st->terms_of, st->forms, st->prices, key, NULL);
    Py_DECREF(key);
    if (terms == NULL) return -1;
    *plain = terms != Py_None;
    if (*plain) {
        if (!PyTuple_Check(terms) || PyTuple_GET_SIZE(terms) != 3) {
            Py_DECREF(terms);
            PyErr_SetString(PyExc_TypeError, "decode_until: a plain decode form is a (gemm, g, bw) tuple");
            return -1;
        }
        for (int i = 0; i < 3; i++) t[i] = as_double(PyTuple_GET_ITEM(terms, i));
    }
    Py_DECREF(terms);
    return PyErr_Occurred() ? -1 : 0;
}

/* stretch_times.extend_decode_chunk: price ``m`` decode steps of ``alive`` requests whose first reads ``kv0`` KV
   tokens; their durations go to durs and their end times, summed one by one from the last end, to ends. */
static int extend_chunk(Stretch *st, const double t[3], int plain, long long alive, long long kv0, long long m)
{
    double end = as_double(PyList_GET_ITEM(st->ends, PyList_GET_SIZE(st->ends) - 1)), d = 0.0;
    if (plain && m <= PLAIN_FLOAT_MAX_STEPS) {
        for (long long x = kv0; x < kv0 + alive * m; x += alive) {
            d = t[0] + t[1] * (double)x / t[2];
            end = end + d;
            if (append_double(st->durs, d) < 0 || append_double(st->ends, end) < 0) return -1;
        }
    } else {  /* prices.decode_list(alive, kv0, m): a list of floats */
        PyObject *ds = PyObject_CallMethod(st->prices, "decode_list", "LLL", alive, kv0, m);
        if (ds == NULL) return -1;
        PyObject *seq = PySequence_Fast(ds, "decode_list returns a list");
        Py_DECREF(ds);
        if (seq == NULL) return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            d = as_double(PySequence_Fast_GET_ITEM(seq, i));
            end = end + d;
            if (append_double(st->durs, d) < 0 || append_double(st->ends, end) < 0) { Py_DECREF(seq); return -1; }
        }
        Py_DECREF(seq);
    }
    st->last = d;
    st->priced = 1;
    return 0;
}

/* bisect.bisect_left(ends, bound, lo, hi) */
static long long bisect_ends(PyObject *ends, double bound, long long lo, long long hi)
{
    while (lo < hi) {
        long long mid = (lo + hi) / 2;
        if (as_double(PyList_GET_ITEM(ends, mid)) < bound) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One piece [a, b) with ``alive`` requests reading ``s_alive + alive·(step + 1)`` KV tokens: priced in chunks that
   reach the bound; returns the step it ran to and sets *cut when it stopped at the first step at/after the bound. */
static long long run_piece(Stretch *st, long long a, long long b, long long alive, long long s_alive, int *cut)
{
    double t[3] = {0.0, 0.0, 0.0};
    int plain = 0, finite = st->bound < Py_HUGE_VAL;
    if (decode_terms(st, alive, t, &plain) < 0) return -1;
    long long j = a, spare = CHUNK_SPARE_STEPS + st->lag, K = st->K, lag = st->lag;
    *cut = 0;
    while (j < b) {
        long long m = b - j;  /* a chunk never crosses the piece's end */
        if (finite) {  /* as chunk_steps: the steps likely to start before the bound at the last price, a few spare */
            long long est = CHUNK_UNPRICED_STEPS;
            if (st->last > 0) {
                double q = (st->bound - as_double(PyList_GET_ITEM(st->ends, j))) / st->last;
                est = q >= 9.0e15 ? (long long)9.0e15 : (long long)q + spare;  /* int() truncates toward zero */
            }
            if (est < CHUNK_MIN_STEPS) est = CHUNK_MIN_STEPS;
            if (est < m) m = est;
        }
        if (extend_chunk(st, t, plain, alive, s_alive + alive * (j + 1), m) < 0) return -1;
        j += m;
        if (j - 1 - lag >= K && as_double(PyList_GET_ITEM(st->ends, j - 1 - lag)) >= st->bound) {
            long long lo = a - lag > K ? a - lag : K;
            j = bisect_ends(st->ends, st->bound, lo, j - lag) + lag;
            *cut = 1;
            break;
        }
    }
    return j;
}

/* The pieces between finishes from step K, as far as the blocks' lower bound and the step cap go (the loop of
   ``decode_until``); returns the step reached, b. */
static long long run_pieces(Stretch *st, long long max_steps)
{
    long long K = st->K, n = st->n, q = st->blocks_left / n;  /* blocks each running request may take */
    long long stop = q > 0 ? K + q * st->B - 1 : K, alive = n, s_alive = st->S, a = K, b = K;
    Py_ssize_t si = 0, nk = PyList_GET_SIZE(st->keys);
    if (stop > max_steps) stop = max_steps;
    for (;;) {
        int cut = 0;
        if (get_ll_item(st->keys, si, &b) < 0) return -1;
        if (b > stop) b = stop;
        long long j = run_piece(st, a, b, alive, s_alive, &cut);
        if (j < 0) return -1;
        if (j < b) b = j;
        if (b > a && append_ll4(st->stored, a, b - a, s_alive + alive * (a + 1), alive, 4) < 0) return -1;
        if (cut || b >= stop || n == 1) break;
        PyObject *bk = PyLong_FromLongLong(b), *g;
        if (bk == NULL) return -1;
        g = PyDict_GetItemWithError(st->groups, bk);  /* [requests, Σ (c0 − d0)] finishing in step b − 1 */
        Py_DECREF(bk);
        if (g == NULL) { if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "decode_until: finish group"); return -1; }
        long long cnt, tok;
        if (get_ll_item(g, 0, &cnt) < 0 || get_ll_item(g, 1, &tok) < 0) return -1;
        alive -= cnt, s_alive -= tok, a = b;
        if (++si == nk) break;  /* everyone finished */
    }
    return b;
}

/* After the pieces: drop the priced steps past b, count the blocks at their most, pop the finished groups. */
static int close_pieces(Stretch *st, long long b)
{
    long long K = st->K, k = b - K;
    Py_ssize_t nd = PyList_GET_SIZE(st->durs);
    if (!k || nd > b) {
        long long cut = k ? b : K;
        if (PyList_SetSlice(st->ends, cut + 1, PY_SSIZE_T_MAX, NULL) < 0) return -1;
        if (PyList_SetSlice(st->durs, cut, PY_SSIZE_T_MAX, NULL) < 0) return -1;
    }
    if (!k) return 0;
    st->blocks_left -= st->n * (k / st->B + 1);
    PyObject *bk = PyLong_FromLongLong(b);
    if (bk == NULL) return -1;
    if (st->lag) {  /* async: finished in the segment's last step */
        PyObject *g = PyDict_GetItemWithError(st->groups, bk);
        if (g == NULL && PyErr_Occurred()) { Py_DECREF(bk); return -1; }
        st->finishing = 0;
        if (g != NULL && get_ll_item(g, 0, &st->finishing) < 0) { Py_DECREF(bk); return -1; }
    }
    Py_DECREF(bk);
    st->K = b;
    Py_ssize_t x = 0, nk = PyList_GET_SIZE(st->keys);
    for (; x < nk; x++) {
        PyObject *f = PyList_GET_ITEM(st->keys, x);
        long long fv, cnt, tok;
        if (get_ll_item(st->keys, x, &fv) < 0) return -1;
        if (fv > b) break;
        PyObject *g = PyDict_GetItemWithError(st->groups, f);
        if (g == NULL || get_ll_item(g, 0, &cnt) < 0 || get_ll_item(g, 1, &tok) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "decode_until: finish group");
            return -1;
        }
        st->n -= cnt, st->S -= tok;
        if (PyDict_DelItem(st->groups, f) < 0) return -1;
    }
    return x ? PyList_SetSlice(st->keys, 0, x, NULL) : 0;
}

static PyObject *decode_until(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17) {
        PyErr_SetString(PyExc_TypeError, "decode_until(ends, durs, stored, keys, groups, forms, prices, terms_of, K, "
                        "n, S, lag, blocks_left, B, finishing, last, bound) takes 17 arguments");
        return NULL;
    }
    Stretch st = {args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7]};
    long long *ints[7] = {&st.K, &st.n, &st.S, &st.lag, &st.blocks_left, &st.B, &st.finishing};
    for (int i = 0; i < 7; i++) {
        *ints[i] = PyLong_AsLongLong(args[8 + i]);
        if (*ints[i] == -1 && PyErr_Occurred()) return NULL;
    }
    for (int i = 0; i < 4; i++)
        if (!PyList_CheckExact(args[i])) {
            PyErr_SetString(PyExc_TypeError, "decode_until: ends, durs, stored and keys are lists");
            return NULL;
        }
    if (!PyDict_CheckExact(args[4]) || !PyDict_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "decode_until: groups and forms are dicts");
        return NULL;
    }
    st.last = as_double(args[15]);
    st.bound = as_double(args[16]);
    if (PyErr_Occurred()) return NULL;
    if (st.n <= 0 || st.B <= 0 || PyList_GET_SIZE(st.keys) == 0) {
        PyErr_SetString(PyExc_ValueError, "decode_until: no running request");
        return NULL;
    }
    long long K0 = st.K, b = run_pieces(&st, MAX_ARRIVAL_STRETCH_STEPS);
    if (b < 0 || close_pieces(&st, b) < 0) return NULL;
    PyObject *last = st.priced ? PyFloat_FromDouble(st.last) : Py_NewRef(args[15]);
    if (last == NULL) return NULL;
    /* when the next step is scheduled: the end of step b (async: of step b − 1); None when no step ran */
    PyObject *sched = b > K0 ? PyList_GET_ITEM(st.ends, st.lag ? b - 1 : b) : Py_None;
    return Py_BuildValue("LLLLLNO", st.K, st.n, st.S, st.blocks_left, st.finishing, last, sched);
}

/* ---- settle_lives ----------------------------------------------------------------------------------------- */

/* One request's part of open_settle.settle: ``life`` = (request, d0, c0, held, m, admitted). */
static int settle_one(PyObject *life, long long K, long long B, long long lag, long long step0, PyObject **out)
{
    PyObject *takes = out[0], *runs = out[1], *frees = out[2], *running = out[3], *finished = out[4],
             *freed = out[5], *deferred = out[6];
    if (!PyTuple_Check(life) || PyTuple_GET_SIZE(life) != 6) {
        PyErr_SetString(PyExc_TypeError, "settle_lives: a life is (request, d0, c0, held, m, admitted)");
        return -1;
    }
    PyObject *r = PyTuple_GET_ITEM(life, 0);
    long long v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(life, i + 1));
        if (v[i] == -1 && PyErr_Occurred()) return -1;
    }
    long long d0 = v[0], c0 = v[1], held = v[2], m = v[3], out_tok, prompt, cnt = 0;
    int admitted = PyObject_IsTrue(PyTuple_GET_ITEM(life, 5));
    if (admitted < 0) return -1;
    long long end = d0 + m <= K ? m : K - d0;  /* decode steps it ran here */
    long long j = held * B - c0;  /* its first block-filling step, from d0 */
    if (j < end) {
        cnt = (end - j - 1) / B + 1;  /* end − j − 1 ≥ 0: C's division is Python's floor division here */
        if (append_ll4(runs, d0 + j, cnt, 0, 0, 2) < 0) return -1;
    }
    long long take = admitted ? held + cnt : cnt;  /* an admitted request also takes its prompt's blocks */
    if (take) {
        PyObject *pair = Py_BuildValue("OL", r, take);
        if (pair == NULL || PyList_Append(takes, pair) < 0) { Py_XDECREF(pair); return -1; }
        Py_DECREF(pair);
    }
    if (get_ll_attr(r, s_num_output, &out_tok) < 0 || get_ll_attr(r, s_num_prompt, &prompt) < 0) return -1;
    if (d0 + m <= K) {  /* finished here, in step f */
        long long f = d0 + m - 1;
        if (set_ll_attr(r, s_num_computed, c0 + m) < 0 || set_ll_attr(r, s_num_generated, out_tok) < 0
            || set_ll_attr(r, s_num_tokens, prompt + out_tok) < 0) return -1;
        PyObject *pair = Py_BuildValue("OL", r, step0 + f);
        if (pair == NULL || PyList_Append(finished, pair) < 0) { Py_XDECREF(pair); return -1; }
        Py_DECREF(pair);
        if (f + 1 + lag <= K) {  /* missing from the samples from step f + 1 on (at K: past the stretch) */
            if (f + 1 < K && append_ll4(frees, f + 1, held + cnt, 0, 0, 2) < 0) return -1;
            return PyList_Append(freed, r);
        }
        return PyList_Append(deferred, r);  /* async, finished in the last step: freed after the next schedule */
    }
    long long g = out_tok - (d0 + m - K);
    if (set_ll_attr(r, s_num_computed, c0 + K - d0) < 0 || set_ll_attr(r, s_num_generated, g) < 0
        || set_ll_attr(r, s_num_tokens, prompt + g) < 0) return -1;
    return PyList_Append(running, r);
}

static PyObject *settle_lives(PyObject *self, PyObject *args)
{
    PyObject *lives;
    long long K, B, lag, step0;
    if (!PyArg_ParseTuple(args, "O!LLLL", &PyList_Type, &lives, &K, &B, &lag, &step0)) return NULL;
    if (B <= 0) {
        PyErr_SetString(PyExc_ValueError, "settle_lives: block size must be positive");
        return NULL;
    }
    PyObject *out[7] = {NULL};
    for (int i = 0; i < 7; i++)
        if ((out[i] = PyList_New(0)) == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lives); i++)
        if (settle_one(PyList_GET_ITEM(lives, i), K, B, lag, step0, out) < 0) goto fail;
    return Py_BuildValue("NNNNNNN", out[0], out[1], out[2], out[3], out[4], out[5], out[6]);
fail:
    for (int i = 0; i < 7; i++) Py_XDECREF(out[i]);
    return NULL;
}

/* ---- module ----------------------------------------------------------------------------------------------- */

static PyMethodDef core_methods[] = {
    {"decode_until", (PyCFunction)(void (*)(void))decode_until, METH_FASTCALL,
     "decode_until(ends, durs, stored, keys, groups, forms, prices, terms_of, K, n, S, lag, blocks_left, B, "
     "finishing, last, bound) -> (K, n, S, blocks_left, finishing, last, sched_t or None): "
     "open_stretch._ArrivalStretch.decode_until's loop."},
    {"settle_lives", settle_lives, METH_VARARGS,
     "settle_lives(lives, K, B, lag, step0) -> (takes, runs, frees, running, finished, freed, deferred): "
     "open_settle.settle's per-request loop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "_core", "kvledger's optional compiled core.", -1,
                                         core_methods};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject **names[5] = {&s_num_computed, &s_num_generated, &s_num_tokens, &s_num_output, &s_num_prompt};
    const char *text[5] = {"num_computed_tokens", "num_generated", "num_tokens", "num_output_tokens",
                           "num_prompt_tokens"};
    for (int i = 0; i < 5; i++)
        if ((*names[i] = PyUnicode_InternFromString(text[i])) == NULL) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", CORE_VERSION) < 0) Py_CLEAR(m);
    return m;
}
