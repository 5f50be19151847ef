/* kvledger's optional compiled core: the self-contained loops of the simulator's arrival stretches (dynamics/fast/).

   Each function here is a line-for-line translation of the pure-Python code it replaces, which stays the reference
   and the fallback (native.py loads this module; KVLEDGER_PURE_PYTHON=1 or a failed compile leaves it out):

   - decode_until: open_stretch ``_ArrivalStretch.decode_until``: a vLLM v1 arrival stretch's pure-decode steps up to
     the next arrival, in pieces between finishes, each step priced by the roofline's plain form ``gemm + g·kv / bw``
     and the step end times summed one by one (kept as float64 bytes);
   - arrive: ``_ArrivalStretch.arrive`` and ``_mixed_step``: the visible arrivals admitted in one mixed step, priced by
     RooflineStepCost.step_time_of's plain form (roofline_price) or the model's own price;
   - settle_lives: open_settle's per-request loop: the blocks each request took, its final or running token counters,
     and who finished, is freed or waits for the next schedule (async scheduling);
   - usage_samples, fold_totals, bucket_steps: the KV usage fold (outputs/kv_usage.py, step_runs.py,
     usage_buckets.py): per-step samples from the buffered changes, the time-weighted totals and the time buckets;
   - sglang_decode_until, sglang_lives: the same two loops of SGLang's arrival stretches (sglang_stretch.py,
     sglang_settle.py), decode steps priced at the CUDA-graph padded batch;
   - sglang_arrive, sglang_run: ``_SGLangStretch.gather_arrivals`` with ``prefill_step``, and ``run_arrivals``' loop;
     open_run: open_stretch ``run_arrivals``' loop (both around the decode_until and arrive above);
   - sglang_replay, sglang_decode_grants: sglang_settle's ``_replay`` (with radix_fresh's admit_fresh, free_fresh,
     add_slots and RadixKVManager._evict) and ``_decode_grants``;
   - accept, new_spec: request_state.accept with SimRequest.__init__ for a served request, and request.plain_spec.

   Fields kept in __slots__ are read and written at their member offsets where the type has the generic getattr and
   setattr (core_getattr, core_setattr: what the member descriptor does, without the MRO lookup each time).

   Byte-identical results need the same IEEE double operations in the same order as the Python code: the build
   (hatch_build.py) compiles with -ffp-contract=off and without -ffast-math, so ``gemm + g * x / bw`` is a multiply,
   a divide and an add, each rounded, and each end time is the previous one plus the step's duration. Python ints
   are read as long long (token and step counts are far below 2^63; KV-token counts below 2^53 convert exactly). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <structmember.h>  /* PyMemberDef, T_OBJECT_EX, READONLY */

#define CORE_VERSION 10         /* native.py loads only the version it was written for */
#define CHUNK_SPARE_STEPS 3     /* stretch_times.py: steps priced beyond those the last price says fit */
#define CHUNK_MIN_STEPS 8       /* stretch_times.py: fewest steps priced in one call while a bound is ahead */
#define CHUNK_UNPRICED_STEPS 16 /* stretch_times.py: steps priced first when no step has been priced yet */
#define PLAIN_FLOAT_MAX_STEPS 96 /* decode_prices.py: longer runs are priced by prices.decode_list (numpy) */
#define MAX_ARRIVAL_STRETCH_STEPS 4096 /* open_stretch.py: steps settled at a time */
#define MAX_SGLANG_STRETCH_STEPS 4096 /* sglang_stretch.py: the same under SGLang's rule */

static PyObject *s_num_computed, *s_num_generated, *s_num_tokens, *s_num_output, *s_num_prompt;
/* The arrival stretch's fields decode_until and arrive read and write (open_stretch._ArrivalStretch's slots: the
   caller passes itself). */
static PyObject *s_n, *s_B, *s_blocks_left, *s_finishing, *s_sched_t, *s_S, *s_K, *s_groups, *s_keys, *s_ends,
    *s_durs, *s_split, *s_stored, *s_grants, *s_lives, *s_lag, *s_spec, *s_prefix_segments, *s_status, *s_run_start,
    *s_num_cached, *s_forms, *s_prices, *s_last, *s_runs, *s_D, *s_F, *s_room, *s_prefills, *s_admits,
    *s_pure_s;
static PyObject *s_request_id, *s_segment_tokens, *s_client_id, *s_output_segments;
static PyObject *s_blocks_attr, *s_keys_attr, *s_arrival_s, *s_num_preemptions, *s_num_registered;
static PyObject *s_tick, *s_seq, *s_tree_tokens, *s_evictable, *s_private, *s_held_slots, *s_capacity, *s_requests,
    *s_queries, *s_dsteps, *s_root, *s_children, *s_heap, *s_prefix_stats, *s_uid, *s_node, *s_covered, *s_junction, *s_last_access,
    *s_evict, *s_free, *s_preempted, *s_num_evictions, *s_alive, *s_lock_ref, *s_parent, *s_key, *s_ntok, *s_push,
    *s_backs_up;

/* ---- small helpers ---------------------------------------------------------------------------------------- */

/* ---- attribute access: __slots__ members read and written in place ------------------------------------------- */

/* Most objects this core reads and writes (requests, stretches, radix nodes, the cache) keep their fields in
   __slots__: each is a member descriptor on the type, and the generic getattr/setattr reach it through the type's
   MRO lookup every time. For a type with the generic getattr and setattr (no __getattr__, __getattribute__,
   __setattr__ of its own), a writable object member (T_OBJECT_EX) is read and written at its offset here, exactly
   as the descriptor does (PyMember_GetOne / PyMember_SetOne: an unset slot raises AttributeError; a write keeps
   the new value and drops the old). The (type, name) → offset map is cached per the type's version tag, which
   CPython changes when the type or one of its bases is modified; anything else goes the generic way. */
typedef struct { PyTypeObject *type; PyObject *name; unsigned int version; Py_ssize_t offset; } SlotEntry;
#define SLOT_CACHE 4096  /* entries, a power of two */
static SlotEntry slot_cache[SLOT_CACHE];

/* The offset of the writable object member ``name`` of ``tp`` (its descriptor's), or -1. */
static Py_ssize_t member_offset(PyTypeObject *tp, PyObject *name)
{
    size_t h = ((size_t)tp >> 4) * 0x9E3779B97F4A7C15u ^ ((size_t)name >> 4) * 0xC2B2AE3D27D4EB4Fu;
    SlotEntry *e = &slot_cache[(h >> 40) & (SLOT_CACHE - 1)];
    if (e->type == tp && e->name == name && e->version == tp->tp_version_tag
        && PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) return e->offset;
    PyObject *d = _PyType_Lookup(tp, name);  /* borrowed; gives the type a version tag where it can */
    Py_ssize_t off = -1;
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) off = m->offset;
    }
    if (PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) && PyUnicode_CHECK_INTERNED(name))
        *e = (SlotEntry){tp, name, tp->tp_version_tag, off};  /* the names here are interned and kept */
    return off;
}

/* member_offset where the type reads and writes its attributes the generic way, else -1 */
static Py_ssize_t slot_offset(PyTypeObject *tp, PyObject *name)
{
    if (tp->tp_getattro != PyObject_GenericGetAttr || tp->tp_setattro != PyObject_GenericSetAttr) return -1;
    return member_offset(tp, name);
}

static PyObject *core_getattr(PyObject *o, PyObject *name)
{
    Py_ssize_t off = slot_offset(Py_TYPE(o), name);
    if (off >= 0) {
        PyObject *v = *(PyObject **)((char *)o + off);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);  /* also an unset slot's AttributeError */
}

static int core_setattr(PyObject *o, PyObject *name, PyObject *v)
{
    Py_ssize_t off = v != NULL ? slot_offset(Py_TYPE(o), name) : -1;
    if (off < 0) return PyObject_SetAttr(o, name, v);
    PyObject **at = (PyObject **)((char *)o + off), *old = *at;
    *at = Py_NewRef(v);
    Py_XDECREF(old);
    return 0;
}

/* float(o): a float's value, an int converted (correctly rounded, as Python's float() and numpy do) */
static inline double as_double(PyObject *o)
{
    if (PyFloat_CheckExact(o)) return PyFloat_AS_DOUBLE(o);
    return PyLong_CheckExact(o) ? PyLong_AsDouble(o) : PyFloat_AsDouble(o);
}

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

/* (o, x): a request and a count, the pairs open_settle's and open_stretch's lists hold */
static PyObject *pair_ol(PyObject *o, long long x)
{
    PyObject *v = PyLong_FromLongLong(x);
    if (v == NULL) return NULL;
    PyObject *t = PyTuple_Pack(2, o, v);
    Py_DECREF(v);
    return t;
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
    int rc = core_setattr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

static int get_ll_attr(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = core_getattr(obj, name);
    if (v == NULL) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* ---- step times: a list of floats (the fallback's) or a bytearray of C doubles (the arrival stretch's) ----------- */

/* open_stretch keeps its step end times and durations as float64 bytes when the core runs it (no float object per
   step; settle hands the bytes to numpy as they are); sglang_stretch keeps Python lists. These read either. */
static inline Py_ssize_t times_len(PyObject *t)
{
    return PyByteArray_CheckExact(t) ? PyByteArray_GET_SIZE(t) / (Py_ssize_t)sizeof(double) : PyList_GET_SIZE(t);
}

static inline double time_at(PyObject *t, Py_ssize_t i)
{
    return PyByteArray_CheckExact(t) ? ((double *)PyByteArray_AS_STRING(t))[i] : as_double(PyList_GET_ITEM(t, i));
}

/* Resize a bytearray of step times to ``nbytes``, growing its buffer by half when it must grow. PyByteArray_Resize
   alone allocates the exact size when a resize asks for more than 1/8 above the buffer, so chunks of a few dozen
   steps each moved the whole buffer (realloc); here the buffer is first sized 1.5× the need, then trimmed to it,
   which keeps the buffer (a trim to at least half of it does not reallocate). */
static int times_resize(PyObject *t, Py_ssize_t nbytes)
{
    PyByteArrayObject *b = (PyByteArrayObject *)t;
    if (nbytes + (b->ob_start - b->ob_bytes) + 1 > b->ob_alloc
        && PyByteArray_Resize(t, nbytes + nbytes / 2) < 0) return -1;
    return PyByteArray_Resize(t, nbytes);
}

static int time_append(PyObject *t, double x)
{
    if (!PyByteArray_CheckExact(t)) return append_double(t, x);
    Py_ssize_t n = times_len(t);
    if (times_resize(t, (n + 1) * (Py_ssize_t)sizeof(double)) < 0) return -1;
    ((double *)PyByteArray_AS_STRING(t))[n] = x;
    return 0;
}

/* del t[n:] */
static int times_trim(PyObject *t, Py_ssize_t n)
{
    if (n >= times_len(t)) return 0;
    if (PyByteArray_CheckExact(t)) return PyByteArray_Resize(t, n * (Py_ssize_t)sizeof(double));
    return PyList_SetSlice(t, n, PY_SSIZE_T_MAX, NULL);
}

static int is_times(PyObject *t) { return PyList_CheckExact(t) || PyByteArray_CheckExact(t); }

/* ---- decode_until ----------------------------------------------------------------------------------------- */

/* The state of one decode_until call: the arrival stretch's lists and counts (open_stretch.py's names). */
typedef struct {
    PyObject *ends, *durs, *stored, *keys, *groups, *forms, *prices, *terms_of;
    long long K, n, S, lag, blocks_left, B, finishing;
    double bound, last;
    int priced;  /* whether a chunk was priced (``last`` then holds its last duration) */
} Stretch;

/* The plain form (gemm s, KV bytes per token, bandwidth B/s) of a decode step of ``alive`` requests, memoised in
   ``forms`` by ``terms_of`` (stretch_times.plain_decode_terms, or sglang_stretch's padded form, which adds the KV
   tokens of SGLang's CUDA-graph padding rows: a fourth term, *pad); *plain = 0 when the step cost has none. */
static int decode_terms(Stretch *st, long long alive, double t[3], long long *pad, int *plain)
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
        Py_ssize_t size = PyTuple_Check(terms) ? PyTuple_GET_SIZE(terms) : 0;
        if (size != 3 && size != 4) {
            Py_DECREF(terms);
            PyErr_SetString(PyExc_TypeError, "decode_until: a plain decode form is a (gemm, g, bw[, pad]) tuple");
            return -1;
        }
        for (int i = 0; i < 3; i++) t[i] = as_double(PyTuple_GET_ITEM(terms, i));
        *pad = size == 4 ? PyLong_AsLongLong(PyTuple_GET_ITEM(terms, 3)) : 0;
    }
    Py_DECREF(terms);
    return PyErr_Occurred() ? -1 : 0;
}

/* stretch_times.extend_decode_chunk: price ``m`` decode steps of ``alive`` requests whose first reads ``kv0`` KV
   tokens; their durations go to durs and their end times, summed one by one from the last end, to ends. */
static int extend_chunk(Stretch *st, const double t[3], long long pad, int plain, long long alive, long long kv0,
                        long long m)
{
    double end = time_at(st->ends, times_len(st->ends) - 1), d = 0.0;
    if (plain && m <= PLAIN_FLOAT_MAX_STEPS && PyByteArray_CheckExact(st->ends) && PyByteArray_CheckExact(st->durs)) {
        Py_ssize_t ne = times_len(st->ends), nd = times_len(st->durs), size = (Py_ssize_t)sizeof(double);
        if (times_resize(st->ends, (ne + m) * size) < 0 || times_resize(st->durs, (nd + m) * size) < 0)
            return -1;  /* room for the chunk's m steps, filled in place */
        double *ends = (double *)PyByteArray_AS_STRING(st->ends) + ne;
        double *durs = (double *)PyByteArray_AS_STRING(st->durs) + nd;
        for (long long i = 0; i < m; i++) {
            d = t[0] + t[1] * (double)(kv0 + pad + alive * i) / t[2];
            end = end + d;
            durs[i] = d, ends[i] = end;
        }
    } else if (plain && m <= PLAIN_FLOAT_MAX_STEPS) {  /* the same, on lists */
        for (long long x = kv0 + pad; x < kv0 + pad + alive * m; x += alive) {
            d = t[0] + t[1] * (double)x / t[2];
            end = end + d;
            if (time_append(st->durs, d) < 0 || time_append(st->ends, end) < 0) return -1;
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
            if (time_append(st->durs, d) < 0 || time_append(st->ends, end) < 0) { Py_DECREF(seq); return -1; }
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
        if (time_at(ends, mid) < bound) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One piece [a, b) with ``alive`` requests reading ``s_alive + alive·(step + 1)`` KV tokens: priced in chunks that
   reach the bound; returns the step it ran to and sets *cut when it stopped at the first step at/after the bound. */
static long long run_piece(Stretch *st, long long a, long long b, long long alive, long long s_alive, int *cut)
{
    double t[3] = {0.0, 0.0, 0.0};
    long long pad = 0;
    int plain = 0, finite = st->bound < Py_HUGE_VAL;
    if (decode_terms(st, alive, t, &pad, &plain) < 0) return -1;
    long long j = a, spare = CHUNK_SPARE_STEPS + st->lag, K = st->K, lag = st->lag;
    *cut = 0;
    while (j < b) {
        long long m = b - j;  /* a chunk never crosses the piece's end */
        if (finite) {  /* as chunk_steps: the steps likely to start before the bound at the last price, a few spare */
            long long est = CHUNK_UNPRICED_STEPS;
            if (st->last > 0) {
                double q = (st->bound - time_at(st->ends, j)) / st->last;
                est = q >= 9.0e15 ? (long long)9.0e15 : (long long)q + spare;  /* int() truncates toward zero */
            }
            if (est < CHUNK_MIN_STEPS) est = CHUNK_MIN_STEPS;
            if (est < m) m = est;
        }
        if (extend_chunk(st, t, pad, plain, alive, s_alive + alive * (j + 1), m) < 0) return -1;
        j += m;
        if (j - 1 - lag >= K && time_at(st->ends, j - 1 - lag) >= st->bound) {
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
        if (g == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "decode_until: finish group");
            return -1;
        }
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
    Py_ssize_t nd = times_len(st->durs);
    if (!k || nd > b) {
        long long cut = k ? b : K;
        if (times_trim(st->ends, cut + 1) < 0) return -1;
        if (times_trim(st->durs, cut) < 0) return -1;
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

/* Set the run's integer fields ``names`` to ``values``. */
static int set_ll_attrs(PyObject *run, PyObject **names, const long long *values, int count)
{
    for (int i = 0; i < count; i++)
        if (set_ll_attr(run, names[i], values[i]) < 0) return -1;
    return 0;
}

/* ``_ArrivalStretch.decode_until(bound)`` on the run's own fields (``terms_of``: stretch_times.plain_decode_terms). */
static PyObject *decode_until(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) return PyErr_SetString(PyExc_TypeError, "decode_until(run, terms_of, bound)"), NULL;
    PyObject *run = args[0], *objs[7], *onames[7] = {s_ends, s_durs, s_stored, s_keys, s_groups, s_forms, s_prices};
    Stretch st = {NULL};
    PyObject **slots[7] = {&st.ends, &st.durs, &st.stored, &st.keys, &st.groups, &st.forms, &st.prices};
    for (int i = 0; i < 7; i++) {
        if ((objs[i] = core_getattr(run, onames[i])) == NULL) return NULL;
        Py_DECREF(objs[i]);  /* the run keeps it alive for the call */
        *slots[i] = objs[i];
    }
    st.terms_of = args[1];
    PyObject *inames[7] = {s_K, s_n, s_S, s_lag, s_blocks_left, s_B, s_finishing};
    long long *ints[7] = {&st.K, &st.n, &st.S, &st.lag, &st.blocks_left, &st.B, &st.finishing};
    for (int i = 0; i < 7; i++)
        if (get_ll_attr(run, inames[i], ints[i]) < 0) return NULL;
    if (!is_times(st.ends) || !is_times(st.durs) || !PyList_CheckExact(st.stored) || !PyList_CheckExact(st.keys)
        || !PyDict_CheckExact(st.groups) || !PyDict_CheckExact(st.forms))
        return PyErr_SetString(PyExc_TypeError, "decode_until: the run's step times, lists or dicts"), NULL;
    PyObject *last0 = core_getattr(run, s_last);
    if (last0 == NULL) return NULL;
    st.last = as_double(last0);
    Py_DECREF(last0);
    st.bound = as_double(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (st.n <= 0 || st.B <= 0 || PyList_GET_SIZE(st.keys) == 0)
        return PyErr_SetString(PyExc_ValueError, "decode_until: no running request"), NULL;
    long long K0 = st.K, b = run_pieces(&st, MAX_ARRIVAL_STRETCH_STEPS);
    if (b < 0 || close_pieces(&st, b) < 0) return NULL;
    if (st.priced) {  /* the last price priced: it sizes the next chunks */
        PyObject *last = PyFloat_FromDouble(st.last);
        if (last == NULL || core_setattr(run, s_last, last) < 0) { Py_XDECREF(last); return NULL; }
        Py_DECREF(last);
    }
    if (b == K0) Py_RETURN_NONE;  /* no step ran */
    long long vals[5] = {st.K, st.n, st.S, st.blocks_left, st.finishing};
    PyObject *names[5] = {s_K, s_n, s_S, s_blocks_left, s_finishing};
    PyObject *sched = PyFloat_FromDouble(time_at(st.ends, st.lag ? b - 1 : b));  /* the next step's schedule time */
    if (sched == NULL || set_ll_attrs(run, names, vals, 5) < 0 || core_setattr(run, s_sched_t, sched) < 0) {
        Py_XDECREF(sched);
        return NULL;
    }
    Py_DECREF(sched);
    Py_RETURN_NONE;
}

/* ---- sglang_decode_until --------------------------------------------------------------------------------- */

/* Python's floor division, for a possibly negative numerator and a positive divisor. */
static long long floor_div(long long x, long long y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); }

/* sglang_stretch._SGLangStretch._price_piece: decode steps a .. b − 1 (decode-step numbers; step d is ends index
   d + off) of ``alive`` requests, priced in chunks; returns the end and sets *cut when it stopped at the first step
   starting at or after the bound. */
static long long sglang_piece(Stretch *st, long long a, long long b, long long alive, long long s_alive, long long off,
                              int *cut)
{
    double t[3] = {0.0, 0.0, 0.0};
    long long pad = 0;
    int plain = 0, finite = st->bound < Py_HUGE_VAL;
    if (decode_terms(st, alive, t, &pad, &plain) < 0) return -1;
    long long j = a;
    *cut = 0;
    while (j < b) {
        long long m = b - j;
        if (finite) {  /* stretch_times.chunk_steps with no lag */
            long long est = CHUNK_UNPRICED_STEPS;
            if (st->last > 0) {
                double q = (st->bound - time_at(st->ends, j + off)) / st->last;
                est = q >= 9.0e15 ? (long long)9.0e15 : (long long)q + CHUNK_SPARE_STEPS;
            }
            if (est < CHUNK_MIN_STEPS) est = CHUNK_MIN_STEPS;
            if (est < m) m = est;
        }
        if (extend_chunk(st, t, pad, plain, alive, s_alive + alive * (j + 1), m) < 0) return -1;
        j += m;
        if (time_at(st->ends, j - 1 + off) >= st->bound) {
            *cut = 1;
            return bisect_ends(st->ends, st->bound, a + off, j + off) - off;
        }
    }
    return j;
}

/* ``_SGLangStretch._advance_to``: decode steps D .. b − 1 ran: drop the priced steps past them, record their step
   numbers in dsteps and drop the requests that finished in them from the counts (n, S, F). */
static int sglang_advance(Stretch *st, long long b, long long D, long long off, PyObject *dsteps, long long *n,
                          long long *S, long long *F)
{
    long long K = b + off;
    if (times_trim(st->ends, K + 1) < 0 || times_trim(st->durs, K) < 0) return -1;
    if (b == D) return 0;
    for (long long k = D + off; k < K; k++)
        if (append_ll(dsteps, k) < 0) return -1;
    Py_ssize_t x = 0, nk = PyList_GET_SIZE(st->keys);
    for (; x < nk; x++) {
        PyObject *f = PyList_GET_ITEM(st->keys, x), *g;
        long long fv, cnt, tok;
        if (get_ll_item(st->keys, x, &fv) < 0) return -1;
        if (fv > b) break;
        g = PyDict_GetItemWithError(st->groups, f);
        if (g == NULL || get_ll_item(g, 0, &cnt) < 0 || get_ll_item(g, 1, &tok) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "sglang_decode_until: finish group");
            return -1;
        }
        *n -= cnt, *S -= tok, *F -= fv * cnt;
        if (PyDict_DelItem(st->groups, f) < 0) return -1;
    }
    return x ? PyList_SetSlice(st->keys, 0, x, NULL) : 0;
}

/* ``_SGLangStretch.decode_until``'s loop: decode steps from decode step D, in pieces between finishes, as far as the
   token slots (``room``) and the step cap go; returns (b, last), the decode step reached and the last price. */
static PyObject *sglang_decode_until(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17 || !is_times(args[0]) || !is_times(args[1]) || !PyList_CheckExact(args[2])
        || !PyList_CheckExact(args[3]) || !PyDict_CheckExact(args[4]) || !PyDict_CheckExact(args[5])
        || !PyList_CheckExact(args[16])) {
        PyErr_SetString(PyExc_TypeError, "sglang_decode_until(ends, durs, stored, keys, groups, forms, prices, "
                        "terms_of, D, K, n, S, room, last, bound, F, dsteps): lists, then dicts, dsteps a list");
        return NULL;
    }
    Stretch st = {args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7]};
    long long v[5];  /* D, K, n, S, room */
    for (int i = 0; i < 5; i++)
        if ((v[i] = PyLong_AsLongLong(args[8 + i])) == -1 && PyErr_Occurred()) return NULL;
    st.last = as_double(args[13]);
    st.bound = as_double(args[14]);
    if (PyErr_Occurred()) return NULL;
    long long D = v[0], off = v[1] - D, cap = D + MAX_SGLANG_STRETCH_STEPS - v[1], alive = v[2], s_alive = v[3];
    long long room = v[4], a = D, b = D;
    Py_ssize_t si = 0, nk = PyList_GET_SIZE(st.keys);
    while (alive > 0 && si < nk) {
        long long fits = floor_div(room - s_alive, alive), stop = cap < fits ? cap : fits, key;  /* slots left */
        if (get_ll_item(st.keys, si, &key) < 0) return NULL;
        b = key < stop ? key : stop;
        if (b <= a) { b = a; break; }
        int cut = 0;
        long long j = sglang_piece(&st, a, b, alive, s_alive, off, &cut);
        if (j < 0 && PyErr_Occurred()) return NULL;
        if (j > a && append_ll4(st.stored, a + off, j - a, s_alive + alive * (a + 1), alive, 4) < 0) return NULL;
        b = j;
        if (cut || b >= stop) break;
        PyObject *bk = PyLong_FromLongLong(b), *g;
        if (bk == NULL) return NULL;
        g = PyDict_GetItemWithError(st.groups, bk);  /* the requests whose last decode step was b − 1 leave */
        Py_DECREF(bk);
        long long cnt, tok;
        if (g == NULL || get_ll_item(g, 0, &cnt) < 0 || get_ll_item(g, 1, &tok) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "sglang_decode_until: finish group");
            return NULL;
        }
        alive -= cnt, s_alive -= tok, a = b;
        si++;
    }
    long long F = PyLong_AsLongLong(args[15]), n = v[2], S = v[3];
    if ((F == -1 && PyErr_Occurred()) || sglang_advance(&st, b, D, off, args[16], &n, &S, &F) < 0) return NULL;
    PyObject *last = st.priced ? PyFloat_FromDouble(st.last) : Py_NewRef(args[13]);
    return last ? Py_BuildValue("NLLLLL", last, b + off, b, n, S, F) : NULL;
}

/* ---- sglang_lives: sglang_settle.settle's loop over the stretch's requests ------------------------------------ */

static int append_pair(PyObject *list, long long a, long long b)
{
    PyObject *x = PyLong_FromLongLong(a), *y = PyLong_FromLongLong(b), *t = x && y ? PyTuple_Pack(2, x, y) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (t == NULL) return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

/* sglang_settle._runs: a request's token runs closed over the stretch's steps before ``stop`` (each prefill step after
   it entered breaks its run) and the start of its open run (−1: paused); ``run_start`` is the request's before the
   stretch, ``adm`` the prefill step it was admitted in (−1: running from the start). Returns the runs, *start. */
static PyObject *runs_of(long long run_start, long long adm, long long stop, PyObject *prefills, PyObject *is_prefill,
                         long long step0, long long *start)
{
    const char *flag = PyByteArray_AS_STRING(is_prefill);
    Py_ssize_t n = PyList_GET_SIZE(prefills), lo = 0, hi = n, nf = PyByteArray_GET_SIZE(is_prefill);
    long long s = adm >= 0 ? step0 + adm : run_start;  /* _start */
    if (adm < 0 && s < 0 && !(nf > 0 && flag[0])) s = step0;  /* paused by the prefill step before: emits again */
    while (lo < hi) {  /* bisect_left(prefills, adm + 1) */
        Py_ssize_t mid = (lo + hi) / 2;
        long long v;
        if (get_ll_item(prefills, mid, &v) < 0) return NULL;
        if (v < adm + 1) lo = mid + 1; else hi = mid;
    }
    PyObject *runs = PyList_New(0);
    if (runs == NULL) return NULL;
    for (Py_ssize_t j = lo; j < n; j++) {
        long long p;
        if (get_ll_item(prefills, j, &p) < 0) goto fail;
        if (p >= stop) break;
        if (s >= 0) {
            if (append_pair(runs, s, step0 + p) < 0) goto fail;
            s = -1;
        }
        if (p + 1 < stop && !(p + 1 < nf && flag[p + 1])) s = step0 + p + 1;
    }
    *start = s;
    return runs;
fail:
    Py_DECREF(runs);
    return NULL;
}

/* The gap bookkeeping of sglang_settle._gaps: runs of steps closed in order. */
typedef struct { PyObject *gap_runs, *singles; long long prev, first; } Gaps;

static int close_run(Gaps *g, long long a, long long b)
{
    if (b - a > 1 && append_ll4(g->gap_runs, a + 1, b, 0, 0, 2) < 0) return -1;
    if (g->prev >= 0) {
        if (append_ll4(g->singles, a, g->prev, 0, 0, 2) < 0) return -1;
    } else {
        g->first = a;
    }
    g->prev = b - 1;
    return 0;
}

static int close_runs(Gaps *g, PyObject *runs)
{
    PyObject *seq = PySequence_Fast(runs, "sglang_lives: runs are (first step, end step) pairs");
    if (seq == NULL) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        long long a, b;
        if (!PyArg_ParseTuple(pair, "LL", &a, &b) || close_run(g, a, b) < 0) { Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    return 0;
}

/* One request of sglang_settle.settle's loop: ``life`` = [request, d0, c0, m, adm]; ``idx`` its index in lives. */
static int sg_settle_one(PyObject *life, Py_ssize_t idx, const long long *v, PyObject *const *a, PyObject **out)
{
    long long D = v[0], K = v[1], step0 = v[2], counted = v[3], x[4], stop, s, run_start;
    PyObject *dsteps = a[0], *prefills = a[1], *is_prefill = a[2], *frees = out[0], *leaving = out[1];
    if (!PyList_Check(life) || PyList_GET_SIZE(life) != 5)
        return PyErr_SetString(PyExc_TypeError, "sglang_lives: a life is [request, d0, c0, m, adm]"), -1;
    PyObject *r = PyList_GET_ITEM(life, 0);
    for (int i = 0; i < 4; i++)
        if (get_ll_item(life, i + 1, &x[i]) < 0) return -1;
    long long d0 = x[0], c0 = x[1], m = x[2], adm = x[3];
    PyObject *rs = core_getattr(r, s_run_start);
    run_start = rs ? PyLong_AsLongLong(rs) : -1;
    Py_XDECREF(rs);
    if (PyErr_Occurred()) return -1;
    if (d0 + m <= D) {  /* finished in the stretch */
        if (d0 + m - 1 < 0 || d0 + m - 1 >= PyList_GET_SIZE(dsteps) || get_ll_item(dsteps, d0 + m - 1, &stop) < 0)
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_IndexError, "sglang_lives: decode step"), -1);
        stop += 1;  /* the step after its last */
        if (stop < K && append_ll4(frees, stop, c0 + m, 0, 0, 2) < 0) return -1;
        PyObject *gaps = Py_NewRef(Py_None), *runs = NULL;
        if (counted) {  /* _gaps: its earlier runs, the stretch's, then the last to stop */
            Gaps g = {a[3], a[4], -1, -1};
            PyObject *old = core_getattr(r, s_runs);
            runs = old ? runs_of(run_start, adm, stop, prefills, is_prefill, step0, &s) : NULL;
            int rc = runs && close_runs(&g, old) == 0 && close_runs(&g, runs) == 0
                     && close_run(&g, s, step0 + stop) == 0;
            Py_XDECREF(old);
            Py_XDECREF(runs);
            Py_DECREF(gaps);
            if (!rc || (gaps = Py_BuildValue("(LL)", g.first, step0 + stop - 1)) == NULL) return -1;
        }
        PyObject *item = Py_BuildValue("(LnN)", stop - 1, idx, gaps);
        int rc = item && PyList_Append(leaving, item) == 0 ? 0 : -1;
        Py_XDECREF(item);
        if (rc < 0 || counted) return rc;
    } else {
        stop = K;
        if (PyList_Append(out[2], r) < 0) return -1;
    }
    PyObject *runs = runs_of(run_start, adm, stop, prefills, is_prefill, step0, &s), *old, *ext, *sv;
    if (runs == NULL) return -1;
    old = core_getattr(r, s_runs);  /* r.runs += new; r.run_start = s */
    ext = old ? PySequence_InPlaceConcat(old, runs) : NULL;
    int rc = ext && core_setattr(r, s_runs, ext) == 0 && (sv = PyLong_FromLongLong(s)) != NULL ? 0 : -1;
    if (rc == 0) {
        rc = core_setattr(r, s_run_start, sv);
        Py_DECREF(sv);
    }
    Py_XDECREF(old);
    Py_XDECREF(ext);
    Py_DECREF(runs);
    return rc;
}

/* sglang_settle.settle's loop over the stretch's requests: (frees, leaving, running); finished ones' gaps queued on
   gap_runs and singles when the replica counts gaps, the others' token runs set on the request. */
static PyObject *sglang_lives(PyObject *self, PyObject *args)
{
    PyObject *lives, *a[5];  /* dsteps, prefills, is_prefill, gap_runs, singles */
    long long v[4];  /* D, K, step0, counted */
    if (!PyArg_ParseTuple(args, "O!LLO!O!O!LLO!O!", &PyList_Type, &lives, &v[0], &v[1], &PyList_Type, &a[0],
                          &PyList_Type, &a[1], &PyByteArray_Type, &a[2], &v[2], &v[3], &PyList_Type, &a[3],
                          &PyList_Type, &a[4]))
        return NULL;
    PyObject *out[3] = {PyList_New(0), PyList_New(0), PyList_New(0)};  /* frees, leaving, running */
    int rc = out[0] && out[1] && out[2] ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(lives); i++)
        rc = sg_settle_one(PyList_GET_ITEM(lives, i), i, v, a, out);
    if (rc < 0) {
        for (int i = 0; i < 3; i++) Py_XDECREF(out[i]);
        return NULL;
    }
    return Py_BuildValue("NNN", out[0], out[1], out[2]);
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
        PyObject *pair = pair_ol(r, take);
        if (pair == NULL || PyList_Append(takes, pair) < 0) { Py_XDECREF(pair); return -1; }
        Py_DECREF(pair);
    }
    if (get_ll_attr(r, s_num_output, &out_tok) < 0 || get_ll_attr(r, s_num_prompt, &prompt) < 0) return -1;
    if (d0 + m <= K) {  /* finished here, in step f */
        long long f = d0 + m - 1;
        if (set_ll_attr(r, s_num_computed, c0 + m) < 0 || set_ll_attr(r, s_num_generated, out_tok) < 0
            || set_ll_attr(r, s_num_tokens, prompt + out_tok) < 0) return -1;
        PyObject *pair = pair_ol(r, step0 + f);
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

/* ---- arrive ----------------------------------------------------------------------------------------------- */


typedef struct {
    long long n, B, left, K, S, lag, finishing;
    PyObject *groups, *keys, *ends, *durs, *split, *stored, *grants, *lives;  /* borrowed from the run */
} Run;

static int run_ll(PyObject *run, PyObject *name, long long *out) { return get_ll_attr(run, name, out); }

/* kind 0: a list, 1: a dict, 2: step times (a list or a float64 bytearray) */
static PyObject *run_list(PyObject *run, PyObject *name, int kind)
{
    PyObject *v = core_getattr(run, name);
    if (v == NULL) return NULL;
    Py_DECREF(v);  /* the run keeps it alive for the call */
    if (kind == 1 ? !PyDict_CheckExact(v) : kind == 2 ? !is_times(v) : !PyList_CheckExact(v)) {
        PyErr_Format(PyExc_TypeError, "arrive: the run's %U is not a %s", name, kind == 1 ? "dict" : "list");
        return NULL;
    }
    return v;
}

static int read_run(PyObject *run, Run *st)
{
    PyObject *ll_names[7] = {s_n, s_B, s_blocks_left, s_K, s_S, s_lag, s_finishing};
    long long *ll[7] = {&st->n, &st->B, &st->left, &st->K, &st->S, &st->lag, &st->finishing};
    for (int i = 0; i < 7; i++)
        if (run_ll(run, ll_names[i], ll[i]) < 0) return -1;
    PyObject *names[8] = {s_groups, s_keys, s_ends, s_durs, s_split, s_stored, s_grants, s_lives};
    PyObject **lists[8] = {&st->groups, &st->keys, &st->ends, &st->durs, &st->split, &st->stored, &st->grants,
                           &st->lives};
    for (int i = 0; i < 8; i++)
        if ((*lists[i] = run_list(run, names[i], i == 0 ? 1 : i == 2 || i == 3 ? 2 : 0)) == NULL) return -1;
    return st->B > 0 ? 0 : (PyErr_SetString(PyExc_ValueError, "arrive: block size must be positive"), -1);
}

/* stretch_times.join_finish_group: one request in the group finishing at ``step`` (keys kept sorted, as insort). */
static int join_group(Run *st, long long step, long long kv_offset)
{
    PyObject *key = PyLong_FromLongLong(step);
    if (key == NULL) return -1;
    PyObject *g = PyDict_GetItemWithError(st->groups, key);
    int rc = -1;
    if (g != NULL) {
        long long cnt, tok;
        if (get_ll_item(g, 0, &cnt) == 0 && get_ll_item(g, 1, &tok) == 0) {
            PyObject *c = PyLong_FromLongLong(cnt + 1), *t = PyLong_FromLongLong(tok + kv_offset);
            rc = (c && t && PyList_SetItem(g, 0, c) == 0 && PyList_SetItem(g, 1, t) == 0) ? 0 : -1;
            if (rc < 0) { Py_XDECREF(c); Py_XDECREF(t); }  /* SetItem steals; an error leaves at most one */
        }
    } else if (!PyErr_Occurred()) {
        PyObject *fresh = Py_BuildValue("[iL]", 1, kv_offset);
        Py_ssize_t lo = 0, hi = PyList_GET_SIZE(st->keys);
        while (lo < hi) {  /* bisect_right */
            Py_ssize_t mid = (lo + hi) / 2;
            long long v;
            if (get_ll_item(st->keys, mid, &v) < 0) { Py_XDECREF(fresh); Py_DECREF(key); return -1; }
            if (step < v) hi = mid; else lo = mid + 1;
        }
        rc = (fresh && PyDict_SetItem(st->groups, key, fresh) == 0 && PyList_Insert(st->keys, lo, key) == 0) ? 0 : -1;
        Py_XDECREF(fresh);
    }
    Py_DECREF(key);
    return rc;
}

/* One admitted request joins the running counts (the loop at the end of ``_mixed_step``). */
static int admit_one(Run *st, PyObject *pair, PyObject *running_status, PyObject *run_start, PyObject *zero,
                     long long K)
{
    PyObject *r = PyTuple_GET_ITEM(pair, 0);
    long long h = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1)), p, o;
    if ((h == -1 && PyErr_Occurred()) || get_ll_attr(r, s_num_prompt, &p) < 0 || get_ll_attr(r, s_num_output, &o) < 0)
        return -1;
    if (append_ll4(st->grants, K - 1, h, 0, 0, 2) < 0) return -1;
    PyObject *lv[4] = {PyLong_FromLongLong(K), PyLong_FromLongLong(p), PyLong_FromLongLong(h),
                       PyLong_FromLongLong(o - 1)};
    PyObject *life = lv[0] && lv[1] && lv[2] && lv[3] ? PyTuple_Pack(6, r, lv[0], lv[1], lv[2], lv[3], Py_True) : NULL;
    for (int i = 0; i < 4; i++) Py_XDECREF(lv[i]);
    if (life == NULL || PyList_Append(st->lives, life) < 0) { Py_XDECREF(life); return -1; }
    Py_DECREF(life);
    if (core_setattr(r, s_status, running_status) < 0 || core_setattr(r, s_run_start, run_start) < 0
        || core_setattr(r, s_num_cached, zero) < 0) return -1;
    if (join_group(st, K + o - 1, p - K) < 0) return -1;  /* its finish: after step K + o − 2 */
    st->S += p - K;
    return 0;
}

/* accounting/roofline.py RooflineStepCost.step_time_of in its plain form: ``plain`` = (step_consts(), token_terms)
   as open_native.plain_price hands it (float constants, no host term); the same operations in the same order, each
   max() as Python's (the first argument unless the second is larger). Returns a new float, or NULL. */
static PyObject *roofline_price(PyObject *plain, long long pf, long long seqs_pf, long long pf_kv, double pairs,
                                long long n, long long dec_kv)
{
    PyObject *k = PyTuple_GET_ITEM(plain, 0);
    double c[12];
    for (int i = 0; i < 12; i++) c[i] = i == 10 ? 0.0 : PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(k, i));
    int overlap = PyObject_IsTrue(PyTuple_GET_ITEM(k, 10));
    long long T = pf + n, seqs = seqs_pf + n;
    if (overlap < 0) return NULL;
    if (T == 0) return PyFloat_FromDouble(0.0);
    PyObject *key = PyLong_FromLongLong(T), *terms = key ? PyObject_CallOneArg(PyTuple_GET_ITEM(plain, 1), key) : NULL;
    Py_XDECREF(key);
    if (terms == NULL) return NULL;
    double weight = as_double(PyTuple_GetItem(terms, 0)), allreduce = as_double(PyTuple_GetItem(terms, 1));
    double eff = as_double(PyTuple_GetItem(terms, 2));  /* the measured GEMM curve's efficiency; 1.0 flat */
    double kern = as_double(PyTuple_GetItem(terms, 3));  /* the measured layer kernels, s; 0.0 flat */
    Py_DECREF(terms);
    if (PyErr_Occurred()) return NULL;
    double mm2 = c[0], head = c[1], up = c[2], pre = c[3], att = c[4], grb = c[5], st2 = c[6], pk = c[7], pa = c[8];
    double b = c[9], cpu = c[11];
    double matmul = mm2 * (double)T + head * (double)seqs + up * (double)(pf_kv - pf);
    double attn = pre * pairs + att * (double)dec_kv;
    double kv_bytes = grb * (double)(dec_kv + pf_kv) + st2 * (double)seqs;
    double x = matmul / pk, y = weight / b, u = attn / pa, v = kv_bytes / b;
    if (eff != 1.0) x = x / eff;  /* as step_time_of divides by it (flat: no operation at all) */
    double gpu = y > x ? y : x;
    if (kern != 0.0) gpu = gpu + kern;  /* as step_time_of adds them after the matmuls (flat: no operation) */
    gpu = gpu + (v > u ? v : u) + allreduce;
    return PyFloat_FromDouble(overlap ? (cpu > gpu ? cpu : gpu) : gpu + cpu);
}

/* ``_ArrivalStretch._mixed_step``: the step admitting ``new`` while the running requests decode; its price from the
   Python callable ``price(pf, a, pf, pairs, n, dec_kv)``. */
static int mixed_step(PyObject *run, Run *st, PyObject *new, long long pf, double pairs, long long take,
                      PyObject *price, PyObject *plain, PyObject *running_status, long long step0)
{
    long long n = st->n, K = st->K, a = PyList_GET_SIZE(new), dec_kv = st->S + n * (K + 1);  /* Σ computed + n */
    st->left -= take;
    PyObject *v[7] = {PyLong_FromLongLong(pf), PyLong_FromLongLong(a), NULL, PyFloat_FromDouble(pairs),
                      PyLong_FromLongLong(n), PyLong_FromLongLong(dec_kv), NULL};  /* the step's shape, its price */
    v[2] = Py_XNewRef(v[0]);  /* prefill KV tokens: the prompts' own */
    for (int i = 0; i < 6; i++)
        if (v[i] == NULL) { for (int j = 0; j < 6; j++) Py_XDECREF(v[j]); return -1; }
    v[6] = plain != Py_None ? roofline_price(plain, pf, a, pf, pairs, n, dec_kv)
                            : PyObject_Vectorcall(price, v, 6, NULL);
    PyObject *mixed = v[6] != NULL ? PyTuple_New(7) : NULL;
    if (mixed != NULL)
        for (int i = 0; i < 7; i++) PyTuple_SET_ITEM(mixed, i, v[i]);  /* steals the references */
    else
        for (int i = 0; i < 7; i++) Py_XDECREF(v[i]);
    if (mixed == NULL) return -1;
    double dur = as_double(PyTuple_GET_ITEM(mixed, 6)), end = time_at(st->ends, K) + dur;
    if (PyErr_Occurred()) { Py_DECREF(mixed); return -1; }
    PyObject *ext = PySequence_InPlaceConcat(st->split, mixed);  /* the step's prefill part, priced later */
    Py_DECREF(mixed);
    if (ext == NULL) return -1;
    Py_DECREF(ext);
    if (append_ll4(st->stored, K, 1, pf + dec_kv, 0, 4) < 0 || time_append(st->ends, end) < 0
        || time_append(st->durs, dur) < 0) return -1;
    K += 1;
    PyObject *key = PyLong_FromLongLong(K), *g;
    if (key == NULL) return -1;
    g = PyDict_GetItemWithError(st->groups, key);  /* finished in this step */
    long long gone = 0, gone_tok = 0;
    if (g != NULL) {
        if (get_ll_item(g, 0, &gone) < 0 || get_ll_item(g, 1, &gone_tok) < 0 || PyDict_DelItem(st->groups, key) < 0
            || PyList_SetSlice(st->keys, 0, 1, NULL) < 0) { Py_DECREF(key); return -1; }
        n -= gone;
        st->S -= gone_tok;
    }
    Py_DECREF(key);
    if (PyErr_Occurred()) return -1;
    PyObject *run_start = PyLong_FromLongLong(step0 + K - 1), *zero = PyLong_FromLong(0);
    int rc = run_start && zero ? 0 : -1;
    for (Py_ssize_t x = 0; rc == 0 && x < a; x++)
        rc = admit_one(st, PyList_GET_ITEM(new, x), running_status, run_start, zero, K);
    Py_XDECREF(run_start);
    Py_XDECREF(zero);
    if (rc < 0) return -1;
    st->K = K, st->n = n + a;
    st->finishing = st->lag && g != NULL ? gone : 0;
    PyObject *sched = PyFloat_FromDouble(time_at(st->ends, st->lag ? K - 1 : K));
    PyObject *vals[4] = {PyLong_FromLongLong(st->S), PyLong_FromLongLong(st->K), PyLong_FromLongLong(st->n),
                         PyLong_FromLongLong(st->finishing)};
    PyObject *names[6] = {s_S, s_K, s_n, s_finishing, s_blocks_left, s_sched_t};
    PyObject *left = PyLong_FromLongLong(st->left);
    for (int i = 0; i < 6; i++) {
        PyObject *v = i < 4 ? vals[i] : i == 4 ? left : sched;
        if (rc == 0 && (v == NULL || core_setattr(run, names[i], v) < 0)) rc = -1;
    }
    for (int i = 0; i < 4; i++) Py_XDECREF(vals[i]);
    Py_XDECREF(left);
    Py_XDECREF(sched);
    return rc;
}

/* ---- new_spec: request.plain_spec ---------------------------------------------------------------------------- */

/* request.plain_spec(request_id, arrival_s, prompt, output) for ``cls`` (RequestSpec, a frozen slotted dataclass):
   object.__new__(cls), then each field set as its member descriptor's __set__ sets it (the dataclass's own
   __setattr__ not called, as plain_spec does not): no segments, 512-token segments, no client, no output segments. */
static PyObject *new_spec(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[0]))
        return PyErr_SetString(PyExc_TypeError, "new_spec(cls, request_id, arrival_s, prompt, output)"), NULL;
    PyTypeObject *tp = (PyTypeObject *)args[0];
    PyObject *spec = tp->tp_alloc(tp, 0), *empty = PyTuple_New(0), *seg = PyLong_FromLong(512);
    PyObject *names[8] = {s_request_id, s_arrival_s, s_num_prompt, s_num_output, s_prefix_segments, s_segment_tokens,
                          s_client_id, s_output_segments};
    PyObject *values[8] = {args[1], args[2], args[3], args[4], empty, seg, Py_None, empty};
    int rc = spec && empty && seg ? 0 : -1;
    for (int i = 0; rc == 0 && i < 8; i++) {
        Py_ssize_t off = member_offset(tp, names[i]);
        if (off < 0) {
            rc = PyObject_GenericSetAttr(spec, names[i], values[i]);  /* object.__setattr__ */
            continue;
        }
        PyObject **at = (PyObject **)((char *)spec + off), *old = *at;
        *at = Py_NewRef(values[i]);
        Py_XDECREF(old);
    }
    Py_XDECREF(empty);
    Py_XDECREF(seg);
    if (rc < 0) Py_CLEAR(spec);
    return spec;
}

/* ---- accept_request: request_state.accept and SimRequest.__init__ for a request served ------------------------ */

static PyObject *waiting_status = NULL;  /* request_state.WAITING, looked up at first use */

/* SimRequest(uid, spec, cap).__init__ on a fresh instance of ``req_type`` (object.__new__: its slots allocated),
   each field set in __init__'s order to the same objects: the spec's own, new lists, small ints, None. */
static PyObject *new_request(PyObject *req_type, PyObject *uid, PyObject *spec, PyObject *p, PyObject *o,
                             PyObject *arrival, long long cap, int capped)
{
    if (waiting_status == NULL) {
        PyObject *mod = PyImport_ImportModule("kvledger.dynamics.engine.request_state");
        waiting_status = mod ? PyObject_GetAttrString(mod, "WAITING") : NULL;
        Py_XDECREF(mod);
        if (waiting_status == NULL) return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)req_type;
    PyObject *r = tp->tp_alloc(tp, 0);
    if (r == NULL) return NULL;
    long long pv = PyLong_AsLongLong(p), ov = PyLong_AsLongLong(o);
    PyObject *out = NULL;
    if (!PyErr_Occurred())
        out = capped && pv + ov > cap ? PyLong_FromLongLong(cap - pv) : Py_NewRef(o);  /* served with its output capped */
    PyObject *zero = PyLong_FromLong(0), *minus1 = PyLong_FromLong(-1), *runs = PyList_New(0), *blocks = PyList_New(0);
    PyObject *names[21] = {s_uid, s_spec, s_arrival_s, s_num_prompt, s_num_output, s_num_computed, s_num_generated,
                           s_num_tokens, s_status, s_num_preemptions, s_num_cached, s_runs, s_run_start, s_blocks_attr,
                           s_num_registered, s_keys_attr, s_node, s_private, s_tree_tokens, s_covered, s_junction};
    PyObject *values[21] = {uid, spec, arrival, p, out, zero, zero, p, waiting_status, zero, Py_None, runs, minus1,
                            blocks, zero, Py_None, Py_None, zero, zero, zero, zero};
    int rc = out && zero && minus1 && runs && blocks ? 0 : -1;
    for (int i = 0; rc == 0 && i < 21; i++) rc = core_setattr(r, names[i], values[i]);
    Py_XDECREF(out); Py_XDECREF(zero); Py_XDECREF(minus1); Py_XDECREF(runs); Py_XDECREF(blocks);
    if (rc < 0) Py_CLEAR(r);
    return r;
}

/* request_state.accept(uid, spec, max_model_len, cap_output, max_req_len), ``limits`` = (…, those three): a request
   it serves is built here (new_request); one it refuses is left to the Python ``accept`` (its record). */
static PyObject *accept_request(PyObject *accept, PyObject *req_type, PyObject *uid, PyObject *spec, PyObject *limits)
{
    PyObject *max_len = PyTuple_GET_ITEM(limits, 2), *caps = PyTuple_GET_ITEM(limits, 3);
    PyObject *max_req = PyTuple_GET_ITEM(limits, 4);
    PyObject *p = core_getattr(spec, s_num_prompt), *o = p ? core_getattr(spec, s_num_output) : NULL;
    PyObject *arrival = o ? core_getattr(spec, s_arrival_s) : NULL, *res = NULL;
    long long pv = p ? PyLong_AsLongLong(p) : 0, ov = o ? PyLong_AsLongLong(o) : 0, ml = PyLong_AsLongLong(max_len);
    int cap_output = PyObject_IsTrue(caps), refused = 0, capped = 1;
    long long cap = ml;
    if (arrival == NULL || PyErr_Occurred() || cap_output < 0 || !PyLong_CheckExact(p) || !PyLong_CheckExact(o)) {
        PyErr_Clear();  /* anything unusual (not plain ints, …): the Python accept decides */
        refused = 1;
    } else {
        refused = cap_output ? pv >= ml : pv + ov > ml;
        if (!refused && max_req != Py_None) {
            long long mr = PyLong_AsLongLong(max_req);
            if (mr == -1 && PyErr_Occurred()) { PyErr_Clear(); refused = 1; }
            else refused = pv >= mr - 5, cap = mr - 1;  /* SGLang: abort at max_req_len − 5, cap at max_req_len − 1 */
        } else if (!cap_output) {
            capped = 0;  /* V0's rule: nothing capped */
        }
    }
    if (refused)
        res = PyObject_CallFunctionObjArgs(accept, uid, spec, max_len, caps, max_req, NULL);
    else
        res = new_request(req_type, uid, spec, p, o, arrival, cap, capped);
    Py_XDECREF(p); Py_XDECREF(o); Py_XDECREF(arrival);
    return res;
}

/* accept_request as a module function (tests compare it with the Python accept). */
static PyObject *accept_py(PyObject *self, PyObject *args)
{
    PyObject *accept, *req_type, *uid, *spec, *limits;
    if (!PyArg_ParseTuple(args, "OOOOO!", &accept, &req_type, &uid, &spec, &PyTuple_Type, &limits)) return NULL;
    if (!PyType_Check(req_type) || PyTuple_GET_SIZE(limits) != 5)
        return PyErr_SetString(PyExc_TypeError, "accept(accept, request_type, uid, spec, limits: a 5-tuple)"), NULL;
    return accept_request(accept, req_type, uid, spec, limits);
}

/* Whether the accepted request ``req`` fits the step (``arrive``'s test): 1, 0, or -1 on an error; its prompt tokens
   and blocks in *p and *need. */
/* The arrival at index ``i`` if it came by ``t``: 1 with ``*idx`` (the index as an int) and ``*req`` (what the
   accept path made of it), both new references; 0 when it arrives after ``t``; -1 on an error. The first lines of
   gather's loop and of SGLang's gathering, which read the arrivals alike. */
static int arrival_by(PyObject *arrivals, long long i, double t, PyObject *spec_at, PyObject *accept,
                      PyObject *req_type, PyObject *limits, PyObject **idx, PyObject **req)
{
    PyObject *at = PySequence_GetItem(arrivals, i), *spec;
    double a = at ? as_double(at) : 0.0;
    Py_XDECREF(at);
    if (PyErr_Occurred()) return -1;
    if (!(a <= t)) return 0;
    *idx = PyLong_FromLongLong(i);
    spec = *idx ? PyObject_CallOneArg(spec_at, *idx) : NULL;
    *req = spec != NULL ? accept_request(accept, req_type, *idx, spec, limits) : NULL;
    Py_XDECREF(spec);
    if (*req == NULL) { Py_XDECREF(*idx); return -1; }
    return 1;
}

static int fits(PyObject *req, long long room, Py_ssize_t admitted, long long seats, long long take, long long left,
                long long B, long long *p, long long *need)
{
    long long o;
    if (get_ll_attr(req, s_num_prompt, p) < 0 || get_ll_attr(req, s_num_output, &o) < 0) return -1;
    *need = (*p + B - 1) / B;  /* -(-p // B), p ≥ 0 */
    if (*p > room || admitted >= seats || o < 2 || take + *need > left) return 0;
    PyObject *spec = core_getattr(req, s_spec), *segs;
    if (spec == NULL) return -1;
    segs = core_getattr(spec, s_prefix_segments);
    Py_DECREF(spec);
    if (segs == NULL) return -1;
    int shared = PyObject_IsTrue(segs);
    Py_DECREF(segs);
    return shared < 0 ? -1 : !shared;
}

/* The arrivals from ``i`` visible at ``t``: accepted ones that fit go to ``new`` as (request, blocks), refused ones to
   ``rejected`` as (index, record); returns the next index, -2 when one does not fit, -1 on an error. */
static long long gather(PyObject *const *args, Run *st, double t, long long i, PyObject *new, PyObject *rejected,
                        long long *pf, double *pairs, long long *take)
{
    PyObject *spec_at = args[1], *arrivals = args[2], *accept = args[6], *req_type = args[7], *limits = args[10];
    long long total = PyLong_AsLongLong(args[4]), lim[2];
    for (int x = 0; x < 2; x++)
        if ((lim[x] = PyLong_AsLongLong(PyTuple_GET_ITEM(limits, x))) == -1 && PyErr_Occurred()) return -1;
    long long room = lim[0] - st->n, seats = lim[1] - (st->finishing + st->n);
    if (room <= 0 || st->left < st->n) return -2;
    *take = st->n;
    for (; i < total; i++) {
        PyObject *idx, *req;
        int got = arrival_by(arrivals, i, t, spec_at, accept, req_type, limits, &idx, &req);
        if (got < 0) return -1;
        if (got == 0) break;
        int rc = 0;
        if (Py_TYPE(req) == (PyTypeObject *)req_type) {
            long long p, need;
            rc = fits(req, room, PyList_GET_SIZE(new), seats, *take, st->left, st->B, &p, &need);
            if (rc == 1) {
                room -= p, *take += need, *pf += p;
                *pairs += (double)(p * (p + 1) / 2);  /* Replica.apply_plan's n(n+1)/2, nothing computed; exact */
                PyObject *pair = pair_ol(req, need);
                rc = pair && PyList_Append(new, pair) == 0 ? 1 : -1;
                Py_XDECREF(pair);
            }
        } else {
            PyObject *pair = PyTuple_Pack(2, idx, req);
            rc = pair && PyList_Append(rejected, pair) == 0 ? 1 : -1;
            Py_XDECREF(pair);
        }
        Py_DECREF(idx);
        Py_DECREF(req);
        if (rc <= 0) return rc < 0 ? -1 : -2;
    }
    return i;
}

/* Whether ``plain`` is None or what roofline_price reads: (12 constants, floats but the overlap flag, a callable). */
static int plain_form(PyObject *plain)
{
    if (plain == Py_None) return 1;
    if (!PyTuple_Check(plain) || PyTuple_GET_SIZE(plain) != 2 || !PyCallable_Check(PyTuple_GET_ITEM(plain, 1)))
        return 0;
    PyObject *k = PyTuple_GET_ITEM(plain, 0);
    if (!PyTuple_Check(k) || PyTuple_GET_SIZE(k) != 12) return 0;
    for (int i = 0; i < 12; i++)
        if (i != 10 && !PyFloat_CheckExact(PyTuple_GET_ITEM(k, i))) return 0;
    return 1;
}

/* ``_ArrivalStretch.arrive``: the arrivals visible when the next step is scheduled and their mixed step; returns
   (next index, requests admitted, their prompt tokens), or None (nothing done) when the step cannot take them all. */
static PyObject *arrive(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13 || !PyTuple_Check(args[10]) || PyTuple_GET_SIZE(args[10]) != 5 || !plain_form(args[12])) {
        PyErr_SetString(PyExc_TypeError, "arrive(run, spec_at, arrivals, i, total, out, accept, request_type, price, "
                        "running_status, limits, step0, plain): 13 arguments, limits a 5-tuple, plain None or "
                        "(12 constants, floats but the 11th, token_terms)");
        return NULL;
    }
    Run st;
    long long i = PyLong_AsLongLong(args[3]), step0 = PyLong_AsLongLong(args[11]), pf = 0, take = 0;
    double pairs = 0.0;
    PyObject *t = core_getattr(args[0], s_sched_t);
    double sched = t ? as_double(t) : 0.0;
    Py_XDECREF(t);
    if (PyErr_Occurred() || read_run(args[0], &st) < 0) return NULL;
    PyObject *new = PyList_New(0), *rejected = PyList_New(0), *res = NULL;
    if (new == NULL || rejected == NULL) goto done;
    i = gather(args, &st, sched, i, new, rejected, &pf, &pairs, &take);
    if (i == -1) goto done;
    if (i == -2) { res = Py_NewRef(Py_None); goto done; }
    if (PyList_GET_SIZE(rejected)) {  /* out.extend(rejected): a list, or the replica's record sink */
        PyObject *r = PyObject_CallMethod(args[5], "extend", "O", rejected);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    if (PyList_GET_SIZE(new) && mixed_step(args[0], &st, new, pf, pairs, take, args[8], args[12], args[9], step0) < 0)
        goto done;
    res = Py_BuildValue("LnL", i, PyList_GET_SIZE(new), pf);
done:
    Py_XDECREF(new);
    Py_XDECREF(rejected);
    return res;
}

/* open_stretch.run_arrivals' loop with the core's decode_until and arrive (open_native.py): decode steps up to the
   next arrival, then the arrivals visible and their mixed step, until a condition fails. Arguments: terms_of, then
   arrive's 13; returns (next index, requests admitted, their prompt tokens), the prefix-cache counts open_native adds
   after each arrive (the caller adds their sums: integers, the same totals). */
static PyObject *open_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) return PyErr_SetString(PyExc_TypeError, "open_run(terms_of, arrive's 13 arguments)"), NULL;
    PyObject *run = args[1], *arr[13], *dec[3] = {run, args[0], NULL};
    memcpy(arr, args + 1, sizeof arr);
    long long i = PyLong_AsLongLong(args[4]), total = PyLong_AsLongLong(args[5]), n, K, lag, admitted = 0, prompt = 0;
    if (PyErr_Occurred() || run_ll(run, s_lag, &lag) < 0) return NULL;
    for (;;) {
        if (run_ll(run, s_n, &n) < 0 || run_ll(run, s_K, &K) < 0) return NULL;
        if (!(n && K < MAX_ARRIVAL_STRETCH_STEPS)) break;
        PyObject *bound = i < total ? PySequence_GetItem(args[3], i) : PyFloat_FromDouble(Py_HUGE_VAL), *t = NULL;
        double b = bound ? as_double(bound) : 0.0, sched = 0.0;
        if (bound != NULL && !PyErr_Occurred() && (t = core_getattr(run, s_sched_t)) != NULL) sched = as_double(t);
        Py_XDECREF(t);
        if (bound == NULL || PyErr_Occurred()) { Py_XDECREF(bound); return NULL; }
        if (!(lag && sched >= b)) {  /* decode_until(bound) */
            dec[2] = bound;
            PyObject *res = decode_until(NULL, dec, 3);
            Py_DECREF(bound);
            if (res == NULL) return NULL;
            Py_DECREF(res);
            if (run_ll(run, s_n, &n) < 0 || run_ll(run, s_K, &K) < 0 || (t = core_getattr(run, s_sched_t)) == NULL)
                return NULL;
            sched = as_double(t);
            Py_DECREF(t);
            if (PyErr_Occurred()) return NULL;
            if (!n || sched < b || K >= MAX_ARRIVAL_STRETCH_STEPS) break;
        } else {
            Py_DECREF(bound);
        }
        PyObject *idx = PyLong_FromLongLong(i), *res;
        arr[3] = idx;
        res = idx ? arrive(NULL, arr, 13) : NULL;  /* open_native.arrive: the core's arrive, then its counts */
        Py_XDECREF(idx);
        if (res == NULL) return NULL;
        if (res == Py_None) { Py_DECREF(res); break; }
        long long v[3];
        for (int x = 0; x < 3; x++)
            if ((v[x] = PyLong_AsLongLong(PyTuple_GET_ITEM(res, x))) == -1 && PyErr_Occurred()) { Py_DECREF(res); return NULL; }
        Py_DECREF(res);
        i = v[0], admitted += v[1], prompt += v[2];
    }
    return Py_BuildValue("(LLL)", i, admitted, prompt);
}

/* ---- sglang_arrive: sglang_stretch._SGLangStretch.gather_arrivals and prefill_step -------------------------- */

/* The SGLang arrival stretch's counts and lists (sglang_stretch._SGLangStretch's slots: the caller passes itself). */
typedef struct {
    long long n, D, K, S, F, room;
    PyObject *groups, *keys, *ends, *durs, *stored, *grants, *prefills, *admits, *lives;  /* borrowed from the run */
} SgRun;

static int read_sg_run(PyObject *run, SgRun *st)
{
    PyObject *ll_names[6] = {s_n, s_D, s_K, s_S, s_F, s_room};
    long long *ll[6] = {&st->n, &st->D, &st->K, &st->S, &st->F, &st->room};
    for (int i = 0; i < 6; i++)
        if (run_ll(run, ll_names[i], ll[i]) < 0) return -1;
    PyObject *names[9] = {s_groups, s_keys, s_ends, s_durs, s_stored, s_grants, s_prefills, s_admits, s_lives};
    PyObject **lists[9] = {&st->groups, &st->keys, &st->ends, &st->durs, &st->stored, &st->grants, &st->prefills,
                           &st->admits, &st->lives};
    for (int i = 0; i < 9; i++)  /* the step times: float64 bytes (or lists) */
        if ((*lists[i] = run_list(run, names[i], i == 0 ? 1 : i == 2 || i == 3 ? 2 : 0)) == NULL) return -1;
    return 0;
}

/* ``gather_arrivals``' reservation offset: Σ min(tokens left, CLIP_MAX_NEW_TOKENS) over the running requests, as the
   integer F − n·D while every request has at most ``clip`` tokens left, else summed per finish group. */
static int sg_offset(SgRun *st, long long clip, long long *offset)
{
    Py_ssize_t nk = PyList_GET_SIZE(st->keys), pos = 0;
    long long last, f, c;
    if (nk == 0) return PyErr_SetString(PyExc_IndexError, "list index out of range"), -1;  /* keys[-1], as Python */
    if (get_ll_item(st->keys, nk - 1, &last) < 0) return -1;
    if (last - st->D <= clip) {
        *offset = st->F - st->n * st->D;
        return 0;
    }
    PyObject *key, *g;
    *offset = 0;
    while (PyDict_Next(st->groups, &pos, &key, &g)) {  /* sum(c * min(f − D, clip) for f, (c, _) in groups.items()) */
        f = PyLong_AsLongLong(key);
        if ((f == -1 && PyErr_Occurred()) || !PyList_Check(g) || get_ll_item(g, 0, &c) < 0) return -1;
        *offset += c * (f - st->D < clip ? f - st->D : clip);
    }
    return 0;
}

/* Whether the accepted request ``req`` can join the prefill step (``gather_arrivals``' test): 1, 0, or -1 on an
   error; its prompt and (clipped) output tokens in *p and *clipped. */
static int sg_fits(PyObject *req, long long budget, long long held, long long seats, long long offset,
                   long long avail, long long clip, long long *p, long long *clipped)
{
    long long o;
    if (get_ll_attr(req, s_num_prompt, p) < 0 || get_ll_attr(req, s_num_output, &o) < 0) return -1;
    *clipped = o < clip ? o : clip;
    if (budget <= 0 || held >= seats || !(*p + *clipped + 1 + offset < avail) || *p > budget || o < 2) return 0;
    PyObject *spec = core_getattr(req, s_spec), *segs;
    if (spec == NULL) return -1;
    segs = core_getattr(spec, s_prefix_segments);
    Py_DECREF(spec);
    if (segs == NULL) return -1;
    int shared = PyObject_IsTrue(segs);
    Py_DECREF(segs);
    return shared < 0 ? -1 : !shared;
}

/* ``gather_arrivals``: the arrivals from ``i`` visible at the next step's start go to ``new`` (requests) and
   ``rejected`` ((index, record)); returns the next index, -2 where Python returns None (one prefill step cannot
   admit them all), -1 on an error. */
static long long sg_gather(PyObject *const *args, SgRun *st, long long i, PyObject *new, PyObject *rejected)
{
    PyObject *spec_at = args[1], *arrivals = args[2], *accept = args[6], *req_type = args[7], *limits = args[11];
    long long total = PyLong_AsLongLong(args[4]), clip = PyLong_AsLongLong(args[12]), lim[2], offset;
    for (int x = 0; x < 2; x++)
        if ((lim[x] = PyLong_AsLongLong(PyTuple_GET_ITEM(limits, x))) == -1 && PyErr_Occurred()) return -1;
    if (PyErr_Occurred() || sg_offset(st, clip, &offset) < 0) return -1;
    double t = time_at(st->ends, st->K);
    if (PyErr_Occurred()) return -1;
    long long avail = st->room - (st->S + st->n * st->D), budget = lim[0], seats = lim[1], held = st->n;
    for (; i < total; i++) {
        PyObject *idx, *req;
        int got = arrival_by(arrivals, i, t, spec_at, accept, req_type, limits, &idx, &req);
        if (got < 0) return -1;
        if (got == 0) break;
        int rc;
        if (Py_TYPE(req) == (PyTypeObject *)req_type) {
            long long p, clipped;
            rc = sg_fits(req, budget, held, seats, offset, avail, clip, &p, &clipped);
            if (rc == 1) {
                budget -= p, held += 1, offset += p + 1 + clipped;
                rc = PyList_Append(new, req) == 0 ? 1 : -1;
            }
        } else {
            PyObject *pair = PyTuple_Pack(2, idx, req);
            rc = pair && PyList_Append(rejected, pair) == 0 ? 1 : -1;
            Py_XDECREF(pair);
        }
        Py_DECREF(idx);
        Py_DECREF(req);
        if (rc <= 0) return rc < 0 ? -1 : -2;
    }
    /* the decode step after could not take everyone; or no room is left (the general step marks batch_is_full) */
    return held > lim[0] || (PyList_GET_SIZE(new) > 0 && !(offset < avail)) ? -2 : i;
}

/* One admitted request's life [request, D, prompt, output − 1, K] and its finish group (``prefill_step``'s loop). */
static int sg_admit_one(SgRun *st, PyObject *r, long long *S, long long *F)
{
    long long p, o, D = st->D;
    if (get_ll_attr(r, s_num_prompt, &p) < 0 || get_ll_attr(r, s_num_output, &o) < 0) return -1;
    PyObject *life = Py_BuildValue("[OLLLL]", r, D, p, o - 1, st->K);
    if (life == NULL || PyList_Append(st->lives, life) < 0) { Py_XDECREF(life); return -1; }
    Py_DECREF(life);
    Run g = {0};
    g.groups = st->groups, g.keys = st->keys;
    if (join_group(&g, D + o - 1, p - D) < 0) return -1;  /* its last decode step: D + o − 2 */
    *S += p - D;
    *F += D + o - 1;
    return 0;
}

/* ``prefill_step``: one prefill step admitting ``new`` with their whole prompts (the running requests left out),
   priced by roofline_price on ``plain`` or by ``price(pf, seqs, pf, pairs, 0, 0)``; its duration added to the
   replica's ``PrefillTime`` as ``add`` adds a step without decodes (``_pure_s += dur``). */
static int sg_prefill(PyObject *run, SgRun *st, PyObject *new, PyObject *price, PyObject *plain, PyObject *ptime)
{
    long long pf = 0, p, K = st->K, seqs = PyList_GET_SIZE(new);
    double pairs = 0.0;
    for (Py_ssize_t x = 0; x < seqs; x++) {
        if (get_ll_attr(PyList_GET_ITEM(new, x), s_num_prompt, &p) < 0) return -1;
        pf += p;
        pairs += (double)(p * (p + 1) / 2);  /* Replica.apply_plan's n(n+1)/2, nothing computed; exact */
    }
    PyObject *dur;
    if (plain != Py_None)
        dur = roofline_price(plain, pf, seqs, pf, pairs, 0, 0);
    else
        dur = PyObject_CallFunction(price, "LLLdii", pf, seqs, pf, pairs, 0, 0);
    if (dur == NULL) return -1;
    PyObject *pure = core_getattr(ptime, s_pure_s), *sum = pure ? PyNumber_InPlaceAdd(pure, dur) : NULL;
    Py_XDECREF(pure);
    int rc = sum && core_setattr(ptime, s_pure_s, sum) == 0 ? 0 : -1;
    Py_XDECREF(sum);
    double d = as_double(dur), end = time_at(st->ends, K) + d;  /* ends[K] + dur */
    if (rc < 0 || PyErr_Occurred() || append_ll4(st->stored, K, 1, pf + st->S + st->n * st->D, 0, 4) < 0
        || append_ll4(st->grants, K, pf, 0, 0, 2) < 0 || time_append(st->ends, end) < 0
        || time_append(st->durs, d) < 0 || append_ll(st->prefills, K) < 0) rc = -1;
    Py_DECREF(dur);
    PyObject *adm = rc == 0 ? Py_BuildValue("(LO)", K, new) : NULL;
    if (adm == NULL || PyList_Append(st->admits, adm) < 0) rc = -1;
    Py_XDECREF(adm);
    long long S = st->S, F = st->F;
    for (Py_ssize_t x = 0; rc == 0 && x < seqs; x++)
        rc = sg_admit_one(st, PyList_GET_ITEM(new, x), &S, &F);
    PyObject *names[4] = {s_S, s_F, s_n, s_K};
    long long vals[4] = {S, F, st->n + seqs, K + 1};
    for (int i = 0; rc == 0 && i < 4; i++) rc = set_ll_attr(run, names[i], vals[i]);
    return rc;
}

/* ``_SGLangStretch.arrive`` (its pure-Python branch: gather_arrivals, then prefill_step for any admitted): the next
   arrival index, or None (nothing changed) where the arrivals' step is a general step. */
static PyObject *sglang_arrive(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13 || !PyTuple_Check(args[11]) || PyTuple_GET_SIZE(args[11]) != 5 || !plain_form(args[9])) {
        PyErr_SetString(PyExc_TypeError, "sglang_arrive(run, spec_at, arrivals, i, total, out, accept, request_type, "
                        "price, plain, prefill_time, limits, clip): 13 arguments, limits a 5-tuple, plain None or "
                        "(12 constants, floats but the 11th, token_terms)");
        return NULL;
    }
    SgRun st;
    long long i = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred() || read_sg_run(args[0], &st) < 0) return NULL;
    PyObject *new = PyList_New(0), *rejected = PyList_New(0), *res = NULL;
    if (new == NULL || rejected == NULL) goto done;
    i = sg_gather(args, &st, i, new, rejected);
    if (i == -1) goto done;
    if (i == -2) { res = Py_NewRef(Py_None); goto done; }
    PyObject *r = PyObject_CallMethod(args[5], "extend", "O", rejected);  /* out.extend(rejected) */
    if (r == NULL) goto done;
    Py_DECREF(r);
    if (PyList_GET_SIZE(new) && sg_prefill(args[0], &st, new, args[8], args[9], args[10]) < 0) goto done;
    res = PyLong_FromLongLong(i);
done:
    Py_XDECREF(new);
    Py_XDECREF(rejected);
    return res;
}

/* sglang_stretch.run_arrivals' loop: ``decode_until`` (sglang_decode_until, its six results set on the run as the
   method sets them) and ``arrive`` (sglang_arrive) until a condition fails. Arguments: sglang_arrive's 13, then
   the run's terms_of; returns (next index, whether the arrivals' step is a general step: Python sets
   ``rep.steady = False``). The run's lists are the same objects throughout (no method rebinds them). */
static PyObject *sglang_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "sglang_run(sglang_arrive's 13 arguments, terms_of)");
        return NULL;
    }
    PyObject *run = args[0], *dec[17] = {NULL}, *arr[13];
    PyObject *list_names[6] = {s_ends, s_durs, s_stored, s_keys, s_groups, s_forms};
    long long i = PyLong_AsLongLong(args[3]), total = PyLong_AsLongLong(args[4]), n, K;
    int general = 0, ok = !PyErr_Occurred();
    for (int x = 0; ok && x < 6; x++)  /* borrowed: the run keeps them */
        ok = (dec[x] = run_list(run, list_names[x], x == 4 || x == 5 ? 1 : x < 2 ? 2 : 0)) != NULL;
    PyObject *prices = ok ? core_getattr(run, s_prices) : NULL, *dsteps = ok ? core_getattr(run, s_dsteps) : NULL;
    ok = prices && dsteps;
    dec[6] = prices, dec[7] = args[13], dec[16] = dsteps;
    memcpy(arr, args, sizeof arr);
    while (ok) {
        if (run_ll(run, s_n, &n) < 0 || run_ll(run, s_K, &K) < 0) { ok = 0; break; }
        if (!(n && K < MAX_SGLANG_STRETCH_STEPS)) break;
        PyObject *bound = i < total ? PySequence_GetItem(args[2], i) : PyFloat_FromDouble(Py_HUGE_VAL);
        double b = bound ? as_double(bound) : 0.0;
        if (bound == NULL || PyErr_Occurred()) { Py_XDECREF(bound); ok = 0; break; }
        if (time_at(dec[0], K) < b) {  /* run.decode_until(bound) */
            PyObject *names[6] = {s_D, s_K, s_n, s_S, s_room, s_last}, *res = NULL;
            for (int x = 0; x < 6; x++) dec[8 + x] = NULL;
            int got = 1;
            for (int x = 0; got && x < 6; x++) got = (dec[x < 5 ? 8 + x : 13] = core_getattr(run, names[x])) != NULL;
            dec[14] = bound;
            PyObject *F = got ? core_getattr(run, s_F) : NULL;
            dec[15] = F;
            if (F != NULL) res = sglang_decode_until(NULL, dec, 17);
            for (int x = 8; x < 14; x++) Py_XDECREF(dec[x]);
            Py_XDECREF(F);
            PyObject *set[6] = {s_last, s_K, s_D, s_n, s_S, s_F};  /* self.last, self.K, … = the core's six */
            for (int x = 0; res != NULL && x < 6; x++)
                if (core_setattr(run, set[x], PyTuple_GET_ITEM(res, x)) < 0) Py_CLEAR(res);
            Py_XDECREF(res);
            if (res == NULL || run_ll(run, s_n, &n) < 0 || run_ll(run, s_K, &K) < 0) { Py_DECREF(bound); ok = 0; break; }
            if (!n || time_at(dec[0], K) < b || K >= MAX_SGLANG_STRETCH_STEPS) { Py_DECREF(bound); break; }
        }
        Py_DECREF(bound);
        PyObject *idx = PyLong_FromLongLong(i), *next;
        arr[3] = idx;
        next = idx ? sglang_arrive(NULL, arr, 13) : NULL;  /* run.arrive(…) */
        Py_XDECREF(idx);
        if (next == NULL) { ok = 0; break; }
        if (next == Py_None) { Py_DECREF(next); general = 1; break; }
        i = PyLong_AsLongLong(next);
        Py_DECREF(next);
        if (i == -1 && PyErr_Occurred()) { ok = 0; break; }
    }
    Py_XDECREF(prices);
    Py_XDECREF(dsteps);
    return ok ? Py_BuildValue("(Li)", i, general) : NULL;
}

/* ---- sglang_replay: sglang_settle._replay with radix_fresh.RadixFresh's admit_fresh, free_fresh, add_slots ---- */

/* The radix cache's counters, kept here between calls into its Python (``_evict``, ``free``), which see them
   written back first (radix_store) and are read again after (radix_load). */
enum { R_TICK, R_SEQ, R_TREE, R_EVICTABLE, R_PRIVATE, R_HELD, R_CAPACITY, R_EVICTIONS, R_REQUESTS, R_QUERIES, R_COUNT };

typedef struct {
    PyObject *kv, *stats, *root, *children, *heap, *heappush, *heappop, *running;  /* borrowed */
    int backs_up;  /* kv.backs_up_on_evict: then its own _evict runs */
    long long c[R_COUNT];
} Radix;



static PyObject *radix_owner(Radix *x, int i) { return i >= R_REQUESTS ? x->stats : x->kv; }

static PyObject *radix_name(int i)
{
    PyObject *names[R_COUNT] = {s_tick, s_seq, s_tree_tokens, s_evictable, s_private, s_held_slots, s_capacity,
                                s_num_evictions, s_requests, s_queries};
    return names[i];
}

static int radix_load(Radix *x)
{
    for (int i = 0; i < R_COUNT; i++)
        if (get_ll_attr(radix_owner(x, i), radix_name(i), &x->c[i]) < 0) return -1;
    return 0;
}

static int radix_store(Radix *x)
{
    for (int i = 0; i < R_COUNT; i++)
        if (i != R_CAPACITY && set_ll_attr(radix_owner(x, i), radix_name(i), x->c[i]) < 0) return -1;
    return 0;
}

/* num_free_tokens: capacity − tree − private */
static inline long long radix_free(const Radix *x) { return x->c[R_CAPACITY] - x->c[R_TREE] - x->c[R_PRIVATE]; }

/* kv.<name>(arg) with the counters written back first and read again after */
static int radix_call(Radix *x, PyObject *name, PyObject *arg)
{
    if (radix_store(x) < 0) return -1;
    PyObject *r = PyObject_CallMethodOneArg(x->kv, name, arg);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return radix_load(x);
}

/* One heap entry (t, seq, node) popped by _evict: 1 when the node was evicted (its counters taken off), 0 when it
   was stale, -1 on an error; *parent_push set when its parent must go on the heap (``_push``). */
static int radix_evict_one(Radix *x, PyObject *item, PyObject **parent_push)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3)
        return PyErr_SetString(PyExc_TypeError, "_evict: a heap entry is not a triple"), -1;
    PyObject *node = PyTuple_GET_ITEM(item, 2), *children = core_getattr(node, s_children), *alive;
    if (children == NULL) return -1;
    Py_ssize_t nch = PyDict_Check(children) ? PyDict_GET_SIZE(children) : PyObject_Length(children);
    Py_DECREF(children);
    long long lock, last, ntok;
    if (nch < 0 || (alive = core_getattr(node, s_alive)) == NULL) return -1;
    int is_alive = PyObject_IsTrue(alive);
    Py_DECREF(alive);
    if (is_alive < 0 || get_ll_attr(node, s_lock_ref, &lock) < 0 || get_ll_attr(node, s_last_access, &last) < 0)
        return -1;
    long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
    if (t == -1 && PyErr_Occurred()) return -1;
    if (!is_alive || nch || lock || last != t) return 0;
    if (core_setattr(node, s_alive, Py_False) < 0) return -1;
    PyObject *parent = core_getattr(node, s_parent), *key = parent ? core_getattr(node, s_key) : NULL;
    PyObject *pch = key ? core_getattr(parent, s_children) : NULL;
    int rc = pch && PyObject_DelItem(pch, key) == 0 && get_ll_attr(node, s_ntok, &ntok) == 0 ? 0 : -1;
    Py_XDECREF(key);
    if (rc == 0) {
        x->c[R_TREE] -= ntok, x->c[R_EVICTABLE] -= ntok, x->c[R_EVICTIONS] += 1;
        long long plock = 0;
        Py_ssize_t left = PyDict_Check(pch) ? PyDict_GET_SIZE(pch) : PyObject_Length(pch);
        if (left < 0 || (parent != x->root && !left && get_ll_attr(parent, s_lock_ref, &plock) < 0)) rc = -1;
        else if (parent != x->root && !left && plock == 0) *parent_push = Py_NewRef(parent);
    }
    Py_XDECREF(pch);
    Py_XDECREF(parent);
    return rc < 0 ? -1 : 1;
}

/* RadixKVManager._evict(need) on the counters here: pop the heap while the free slots fall short, evicting each
   entry still current (alive, a leaf, unlocked, not touched since pushed); a parent left an unlocked leaf goes on
   the heap by the cache's own ``_push``. A cache that backs up what it evicts runs its own ``_evict``. */
static int radix_evict(Radix *x, long long need)
{
    if (!x->backs_up) {
        while (radix_free(x) < need && PyList_GET_SIZE(x->heap)) {
            PyObject *item = PyObject_CallOneArg(x->heappop, x->heap), *parent = NULL;
            if (item == NULL) return -1;
            int rc = radix_evict_one(x, item, &parent);
            Py_DECREF(item);
            if (rc < 0 || (parent != NULL && radix_call(x, s_push, parent) < 0)) { Py_XDECREF(parent); return -1; }
            Py_XDECREF(parent);
        }
        return 0;
    }
    if (radix_store(x) < 0) return -1;
    PyObject *k = PyLong_FromLongLong(need), *r = k ? PyObject_CallMethodOneArg(x->kv, s_evict, k) : NULL;
    Py_XDECREF(k);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return radix_load(x);
}

/* Set ``count`` integer attributes of a request. */
static int set_req_lls(PyObject *r, PyObject **names, const long long *values, int count)
{
    for (int i = 0; i < count; i++)
        if (set_ll_attr(r, names[i], values[i]) < 0) return -1;
    return 0;
}

/* RadixFresh.admit_fresh for one request: whole prompt, no hit, at the root. */
static int radix_admit_one(Radix *x, PyObject *r)
{
    long long p;
    if (get_ll_attr(r, s_num_prompt, &p) < 0) return -1;
    x->c[R_TICK] += 1;  /* _lock_path(root) */
    if (p > radix_free(x) + x->c[R_EVICTABLE]) {
        if (radix_store(x) < 0) return -1;
        PyErr_SetString(PyExc_RuntimeError, "radix cache: an admission checked on counts did not fit");
        return -1;
    }
    x->c[R_REQUESTS] += 1;
    x->c[R_QUERIES] += p;
    PyObject *names[5] = {s_num_cached, s_num_computed, s_tree_tokens, s_private, s_covered};
    long long values[5] = {0, p, 0, p, p};
    if (set_req_lls(r, names, values, 2) < 0 || core_setattr(r, s_node, x->root) < 0
        || set_req_lls(r, names + 2, values + 2, 3) < 0) return -1;
    x->c[R_HELD] += p;
    if (p > radix_free(x) && radix_evict(x, p) < 0) return -1;
    x->c[R_PRIVATE] += p;
    return 0;
}

/* sglang_settle._admit: one prefill step's admissions (admit_fresh), then each request's counters. */
static int radix_admit(Radix *x, PyObject *reqs)
{
    if (!PyList_Check(reqs)) return PyErr_SetString(PyExc_TypeError, "sglang_replay: admissions not a list"), -1;
    Py_ssize_t n = PyList_GET_SIZE(reqs);
    for (Py_ssize_t i = 0; i < n; i++)
        if (radix_admit_one(x, PyList_GET_ITEM(reqs, i)) < 0) return -1;
    PyObject *names[2] = {s_num_generated, s_num_tokens};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        long long p, v[2];
        if (core_setattr(r, s_status, x->running) < 0 || get_ll_attr(r, s_num_prompt, &p) < 0) return -1;
        v[0] = 1, v[1] = p + 1;
        if (set_req_lls(r, names, v, 2) < 0) return -1;
    }
    return 0;
}

/* RadixFresh.add_slots */
static int radix_add_slots(Radix *x, PyObject *r, long long k)
{
    long long priv, cov;
    if (get_ll_attr(r, s_private, &priv) < 0 || get_ll_attr(r, s_covered, &cov) < 0) return -1;
    PyObject *names[2] = {s_private, s_covered};
    long long v[2] = {priv + k, cov + k};
    if (set_req_lls(r, names, v, 2) < 0) return -1;
    x->c[R_PRIVATE] += k;
    x->c[R_HELD] += k;
    return 0;
}

/* kv.free(r, preempted=False): the general free, counters written back first */
static int radix_free_general(Radix *x, PyObject *r)
{
    if (radix_store(x) < 0) return -1;
    PyObject *meth = core_getattr(x->kv, s_free), *args = PyTuple_Pack(1, r), *kw = Py_BuildValue("{OO}",
                                                                                                   s_preempted, Py_False);
    PyObject *res = meth && args && kw ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(meth);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (res == NULL) return -1;
    Py_DECREF(res);
    return radix_load(x);
}

/* RadixFresh.free_fresh: the request's computed tokens become an unlocked leaf under the root, on the heap. */
static int radix_free_fresh(Radix *x, PyObject *r)
{
    long long tail, tree, priv, cov;
    PyObject *uid = core_getattr(r, s_uid), *key = uid ? Py_BuildValue("(iO)", -1, uid) : NULL, *node;
    Py_XDECREF(uid);
    if (key == NULL) return -1;
    if (get_ll_attr(r, s_num_computed, &tail) < 0 || (node = core_getattr(r, s_node)) == NULL) {
        Py_DECREF(key);
        return -1;
    }
    Py_DECREF(node);  /* only compared with the root, which the tree keeps alive */
    int has = tail <= 0 ? 0 : PyDict_Contains(x->children, key);
    if (has < 0 || get_ll_attr(r, s_tree_tokens, &tree) < 0) { Py_DECREF(key); return -1; }
    if (tail <= 0 || has || node != x->root || tree) {
        Py_DECREF(key);
        return radix_free_general(x, r);
    }
    PyObject *ntok = PyLong_FromLongLong(tail);
    PyObject *leaf = ntok ? PyObject_CallFunctionObjArgs((PyObject *)Py_TYPE(x->root), key, ntok, x->root, NULL) : NULL;
    Py_XDECREF(ntok);
    int rc = leaf && PyDict_SetItem(x->children, key, leaf) == 0 ? 0 : -1;
    Py_DECREF(key);
    if (rc == 0) {
        x->c[R_TICK] += 3;
        rc = set_ll_attr(leaf, s_last_access, x->c[R_TICK]);
    }
    if (rc == 0 && get_ll_attr(r, s_private, &priv) == 0 && get_ll_attr(r, s_covered, &cov) == 0) {
        x->c[R_TREE] += tail, x->c[R_EVICTABLE] += tail, x->c[R_PRIVATE] -= priv, x->c[R_SEQ] += 1;
        PyObject *item = Py_BuildValue("(LLO)", x->c[R_TICK], x->c[R_SEQ], leaf);
        PyObject *res = item ? PyObject_CallFunctionObjArgs(x->heappush, x->heap, item, NULL) : NULL;
        Py_XDECREF(item);
        rc = res ? 0 : -1;
        Py_XDECREF(res);
        x->c[R_HELD] -= cov;
    } else {
        rc = -1;
    }
    Py_XDECREF(leaf);
    PyObject *names[3] = {s_tree_tokens, s_private, s_covered};
    long long zeros[3] = {0, 0, 0};
    if (rc == 0 && (core_setattr(r, s_node, Py_None) < 0 || set_req_lls(r, names, zeros, 3) < 0)) rc = -1;
    return rc;
}

/* A life [request, d0, c0, m, adm] (sglang_stretch.py), its first four fields. */
static int life_fields(PyObject *life, PyObject **r, long long v[3])
{
    if (!PyList_Check(life) || PyList_GET_SIZE(life) != 5)
        return PyErr_SetString(PyExc_TypeError, "sglang_replay: a life is not a 5-list"), -1;
    *r = PyList_GET_ITEM(life, 0);
    for (int i = 0; i < 3; i++)
        if (get_ll_item(life, i + 1, &v[i]) < 0) return -1;
    return 0;
}

/* Set computed tokens, generated tokens and known tokens of a request. */
static int set_counters(PyObject *r, long long computed, long long generated, long long prompt)
{
    PyObject *names[3] = {s_num_computed, s_num_generated, s_num_tokens};
    long long v[3] = {computed, generated, prompt + generated};
    return set_req_lls(r, names, v, 3);
}

/* The admissions of ``admits`` from *ai while their step is before ``f`` (``f`` < 0: all). */
static int radix_admits_before(Radix *x, PyObject *admits, Py_ssize_t *ai, long long f)
{
    Py_ssize_t na = PyList_GET_SIZE(admits);
    for (; *ai < na; (*ai)++) {
        PyObject *a = PyList_GET_ITEM(admits, *ai);
        long long k;
        if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2)
            return PyErr_SetString(PyExc_TypeError, "sglang_replay: an admission is not a pair"), -1;
        if ((k = PyLong_AsLongLong(PyTuple_GET_ITEM(a, 0))) == -1 && PyErr_Occurred()) return -1;
        if (f >= 0 && !(k < f)) break;
        if (radix_admit(x, PyTuple_GET_ITEM(a, 1)) < 0) return -1;
    }
    return 0;
}

/* _replay's loops, on the counters in ``x`` (written back by the caller). */
static int replay_loops(Radix *x, PyObject *lives, PyObject *admits, PyObject *leaving, long long D)
{
    Py_ssize_t ai = 0, nl = PyList_GET_SIZE(leaving);
    PyObject *r;
    long long v[3], o, p;
    for (Py_ssize_t j = 0; j < nl; j++) {
        PyObject *lv = PyList_GET_ITEM(leaving, j);
        long long f, idx;
        if (!PyTuple_Check(lv) || PyTuple_GET_SIZE(lv) != 3)
            return PyErr_SetString(PyExc_TypeError, "sglang_replay: a leaving entry is not a triple"), -1;
        if (((f = PyLong_AsLongLong(PyTuple_GET_ITEM(lv, 0))) == -1 && PyErr_Occurred())
            || ((idx = PyLong_AsLongLong(PyTuple_GET_ITEM(lv, 1))) == -1 && PyErr_Occurred())) return -1;
        if (radix_admits_before(x, admits, &ai, f < 0 ? 0 : f) < 0) return -1;
        if (idx < 0 || idx >= PyList_GET_SIZE(lives))
            return PyErr_SetString(PyExc_IndexError, "sglang_replay: life index out of range"), -1;
        if (life_fields(PyList_GET_ITEM(lives, idx), &r, v) < 0 || radix_add_slots(x, r, v[2]) < 0
            || get_ll_attr(r, s_num_output, &o) < 0 || get_ll_attr(r, s_num_prompt, &p) < 0
            || set_counters(r, v[1] + v[2], o, p) < 0 || radix_free_fresh(x, r) < 0) return -1;
    }
    if (radix_admits_before(x, admits, &ai, -1) < 0) return -1;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(lives); j++) {
        if (life_fields(PyList_GET_ITEM(lives, j), &r, v) < 0) return -1;
        if (v[0] + v[2] <= D) continue;
        long long t = D - v[0];
        if ((t && radix_add_slots(x, r, t) < 0) || get_ll_attr(r, s_num_output, &o) < 0
            || get_ll_attr(r, s_num_prompt, &p) < 0 || set_counters(r, v[1] + t, o - (v[2] - t), p) < 0) return -1;
    }
    return 0;
}

/* sglang_settle._replay up to its last line (``kv.settle_overdraft()``, left to the caller): the radix cache's
   admissions and frees in step order, decode slots added before each free and at the end; the requests' counters. */
static PyObject *sglang_replay(PyObject *self, PyObject *args)
{
    Radix x;
    PyObject *lives, *admits, *leaving;
    long long D;
    if (!PyArg_ParseTuple(args, "OO!O!O!LOOO", &x.kv, &PyList_Type, &lives, &PyList_Type, &admits, &PyList_Type,
                          &leaving, &D, &x.running, &x.heappush, &x.heappop)) return NULL;
    PyObject *flag = core_getattr(x.kv, s_backs_up);
    x.backs_up = flag ? PyObject_IsTrue(flag) : -1;
    Py_XDECREF(flag);
    if (x.backs_up < 0) return NULL;
    PyObject *refs[4] = {core_getattr(x.kv, s_prefix_stats), core_getattr(x.kv, s_root), NULL,
                         core_getattr(x.kv, s_heap)};
    if (refs[1] != NULL) refs[2] = core_getattr(refs[1], s_children);
    x.stats = refs[0], x.root = refs[1], x.children = refs[2], x.heap = refs[3];
    int rc = -1;
    if (x.stats && x.root && x.children && x.heap) {
        if (!PyDict_CheckExact(x.children))
            PyErr_SetString(PyExc_TypeError, "sglang_replay: the root's children are not a dict");
        else if (radix_load(&x) == 0 && replay_loops(&x, lives, admits, leaving, D) == 0)
            rc = radix_store(&x);
    }
    for (int i = 0; i < 4; i++) Py_XDECREF(refs[i]);
    return rc == 0 ? Py_NewRef(Py_None) : NULL;
}

/* ---- sglang_decode_grants: sglang_settle._decode_grants ------------------------------------------------------ */

/* The decode steps' slot grants [step, slots, …]: for each token-state quadruple (first step, steps, tokens,
   requests) of ``stored`` with requests > 0, one pair (step, requests) per step of it, in order. */
static PyObject *sglang_decode_grants(PyObject *self, PyObject *stored)
{
    if (!PyList_Check(stored) || PyList_GET_SIZE(stored) % 4) {
        PyErr_SetString(PyExc_TypeError, "sglang_decode_grants(stored): a list of quadruples, flat");
        return NULL;
    }
    Py_ssize_t nq = PyList_GET_SIZE(stored) / 4, total = 0, at = 0;
    long long q[4];
    for (Py_ssize_t j = 0; j < nq; j++) {
        if (get_ll_item(stored, 4 * j + 1, &q[1]) < 0 || get_ll_item(stored, 4 * j + 3, &q[3]) < 0) return NULL;
        if (q[3] > 0 && q[1] > 0) total += q[1];
    }
    PyObject *out = PyList_New(2 * total);
    if (out == NULL) return NULL;
    for (Py_ssize_t j = 0; j < nq; j++) {
        for (int x = 0; x < 4; x++)
            if (get_ll_item(stored, 4 * j + x, &q[x]) < 0) { Py_DECREF(out); return NULL; }
        if (q[3] <= 0) continue;
        for (long long k = 0; k < q[1]; k++) {
            PyObject *step = PyLong_FromLongLong(q[0] + k), *req = PyLong_FromLongLong(q[3]);
            if (step == NULL || req == NULL) { Py_XDECREF(step); Py_XDECREF(req); Py_DECREF(out); return NULL; }
            PyList_SET_ITEM(out, at++, step);
            PyList_SET_ITEM(out, at++, req);
        }
    }
    return out;
}

/* ---- usage_samples: the KV usage buffer expanded per step (outputs/kv_usage.py's _flush) ----------------------- */

/* A list item as an integer (a float truncated, as numpy's astype(int64) does). */
static int item_ll(PyObject *list, Py_ssize_t i, long long *out)
{
    PyObject *o = PyList_GET_ITEM(list, i);
    if (PyFloat_Check(o)) {
        *out = (long long)PyFloat_AS_DOUBLE(o);
        return 0;
    }
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* numpy's index rules for add.at on an array of ``len``: −len ≤ i < len, a negative one counted from the end. */
static int at_index(long long i, long long len, long long *out)
{
    if (i < -len || i >= len) {
        PyErr_SetString(PyExc_IndexError, "usage_samples: a step outside the buffer");
        return -1;
    }
    *out = i < 0 ? i + len : i;
    return 0;
}

/* step[k] += sign·blocks, slot[k] += sign·slots for (step, blocks[, slots]) records shifted by their stretch's start:
   grants and frees ([step, blocks, …] with ``at`` the stretch starts, slots = blocks·B) and drops ([step, blocks,
   slots, …]). */
static int add_changes(long long *step, long long *slot, long long len, PyObject *flat, PyObject *at, int width,
                       long long B, long long sign)
{
    Py_ssize_t m = PyList_GET_SIZE(flat) / width;
    for (Py_ssize_t r = 0; r < m; r++) {
        long long s0, blocks, slots = 0, shift = 0, k;
        if (item_ll(flat, width * r, &s0) < 0 || item_ll(flat, width * r + 1, &blocks) < 0) return -1;
        if (width == 3 && item_ll(flat, 3 * r + 2, &slots) < 0) return -1;
        if (at != NULL && item_ll(at, r, &shift) < 0) return -1;
        if (at_index(s0 + shift, len, &k) < 0) return -1;
        step[k] += sign * blocks;
        slot[k] += sign * (width == 3 ? slots : blocks * B);
    }
    return 0;
}

/* The steps where blocks were allocated one at a time (allocs, shifted by alloc_at) and in runs ([first step, blocks,
   …], one block every B steps, shifted by run_at): +1 block, +B slots each (np.bincount's counts). */
static int add_allocs(long long *step, long long *slot, long long len, PyObject **lists, long long B)
{
    PyObject *allocs = lists[0], *alloc_at = lists[1], *runs = lists[2], *run_at = lists[3];
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(allocs); i++) {
        long long a, at;
        if (item_ll(allocs, i, &a) < 0 || item_ll(alloc_at, i, &at) < 0) return -1;
        if (a + at < 0 || a + at >= len) return PyErr_SetString(PyExc_ValueError, "usage_samples: allocation step"), -1;
        step[a + at] += 1, slot[a + at] += B;
    }
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(runs) / 2; r++) {
        long long first, count, at;
        if (item_ll(runs, 2 * r, &first) < 0 || item_ll(runs, 2 * r + 1, &count) < 0 || item_ll(run_at, r, &at) < 0)
            return -1;
        for (long long c = 0; c < count; c++) {
            long long k = first + at + B * c;
            if (k < 0 || k >= len) return PyErr_SetString(PyExc_ValueError, "usage_samples: allocation step"), -1;
            step[k] += 1, slot[k] += B;
        }
    }
    return 0;
}

/* since_set (step_runs.py) for both counts: per step, the value last set at or before it plus the whole changes
   since that set step; the sets are (step, used blocks, held slots) triples. */
static int since_sets(PyObject *sets, const long long *step, const long long *slot, long long n, double *used,
                      double *held)
{
    Py_ssize_t m = PyList_GET_SIZE(sets) / 3;
    long long *last = PyMem_Calloc(n ? n : 1, sizeof(long long)), *at = PyMem_Calloc(m ? m : 1, sizeof(long long));
    long long *run_u = PyMem_Calloc(n ? n : 1, sizeof(long long)), *run_h = PyMem_Calloc(n ? n : 1, sizeof(long long));
    int rc = -1;
    if (!last || !at || !run_u || !run_h) { PyErr_NoMemory(); goto done; }
    if (m == 0 && n > 0) { PyErr_SetString(PyExc_ValueError, "usage_samples: no value set at step 0"); goto done; }
    for (Py_ssize_t j = 0; j < m; j++) {  /* last[at] = arange(m), then its running maximum */
        if (item_ll(sets, 3 * j, &at[j]) < 0 || at_index(at[j], n, &at[j]) < 0) goto done;
        last[at[j]] = j;
    }
    for (long long k = 0, u = 0, h = 0; k < n; k++) {
        if (k && last[k - 1] > last[k]) last[k] = last[k - 1];
        run_u[k] = u += step[k], run_h[k] = h += slot[k];  /* change.cumsum() */
    }
    double u0 = 0.0, h0 = 0.0;
    for (long long k = 0, j = -1; k < n; k++) {
        if (last[k] != j) {  /* the set values as floats, read once per set */
            j = last[k];
            u0 = as_double(PyList_GET_ITEM(sets, 3 * j + 1)), h0 = as_double(PyList_GET_ITEM(sets, 3 * j + 2));
        }
        long long a = at[j];
        used[k] = u0 + (double)(run_u[k] - (run_u[a] - step[a]));
        held[k] = h0 + (double)(run_h[k] - (run_h[a] - slot[a]));
    }
    rc = PyErr_Occurred() ? -1 : 0;
done:
    PyMem_Free(last), PyMem_Free(at), PyMem_Free(run_u), PyMem_Free(run_h);
    return rc;
}

/* The stored tokens per step from the (first step, steps, tokens, Δ per step) quadruples, in step order; the
   quadruples [r0, r1) have ``shift`` added to their first steps (stored_shift's triples). */
static int stored_steps(PyObject *quads, PyObject *shifts, long long n, double *stored)
{
    Py_ssize_t m = PyList_GET_SIZE(quads) / 4, ns = PyList_GET_SIZE(shifts) / 3;
    long long k = 0;
    for (Py_ssize_t q = 0; q < m; q++) {
        double first = as_double(PyList_GET_ITEM(quads, 4 * q)), tokens = as_double(PyList_GET_ITEM(quads, 4 * q + 2));
        double slope = as_double(PyList_GET_ITEM(quads, 4 * q + 3));
        long long count;
        if (item_ll(quads, 4 * q + 1, &count) < 0) return -1;
        for (Py_ssize_t x = 0; x < ns; x++) {  /* s[r0:r1, 0] += shift, in turn */
            long long r0, r1, sh;
            if (item_ll(shifts, 3 * x, &r0) < 0 || item_ll(shifts, 3 * x + 1, &r1) < 0
                || item_ll(shifts, 3 * x + 2, &sh) < 0) return -1;
            if (r0 <= q && q < r1) first = first + (double)sh;
        }
        if (count < 0 || k + count > n) break;  /* numpy's shapes would not match: reported below */
        for (long long c = 0; c < count; c++, k++) stored[k] = tokens + slope * ((double)k - first);
    }
    if (PyErr_Occurred()) return -1;
    if (k != n) return PyErr_SetString(PyExc_ValueError, "usage_samples: quadruples do not cover the steps"), -1;
    return 0;
}

/* KvUsageTracker._flush's expansion: (used blocks, stored tokens, held slots) per buffered step, float64 bytes. */
static PyObject *usage_samples(PyObject *self, PyObject *args)
{
    long long n, B;
    PyObject *l[12];  /* allocs, alloc_at, runs, run_at, grants, grant_at, frees, free_at, drops, sets, stored, shift */
    if (!PyArg_ParseTuple(args, "LLO!O!O!O!O!O!O!O!O!O!O!O!", &n, &B, &PyList_Type, &l[0], &PyList_Type, &l[1],
                          &PyList_Type, &l[2], &PyList_Type, &l[3], &PyList_Type, &l[4], &PyList_Type, &l[5],
                          &PyList_Type, &l[6], &PyList_Type, &l[7], &PyList_Type, &l[8], &PyList_Type, &l[9],
                          &PyList_Type, &l[10], &PyList_Type, &l[11]))
        return NULL;
    if (n < 0) return PyErr_SetString(PyExc_ValueError, "usage_samples: n ≥ 0"), NULL;
    PyObject *out[3] = {NULL, NULL, NULL};
    long long *step = PyMem_Calloc(n + 1, sizeof(long long)), *slot = PyMem_Calloc(n + 1, sizeof(long long));
    if (!step || !slot) { PyErr_NoMemory(); goto fail; }
    for (int i = 0; i < 3; i++)
        if ((out[i] = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double))) == NULL) goto fail;
    double *used = (double *)PyByteArray_AS_STRING(out[0]), *stored = (double *)PyByteArray_AS_STRING(out[1]);
    double *held = (double *)PyByteArray_AS_STRING(out[2]);
    if (add_allocs(step, slot, n + 1, l, B) < 0 || add_changes(step, slot, n + 1, l[4], l[5], 2, B, 1) < 0
        || add_changes(step, slot, n + 1, l[6], l[7], 2, B, -1) < 0
        || add_changes(step, slot, n + 1, l[8], NULL, 3, B, -1) < 0 || since_sets(l[9], step, slot, n, used, held) < 0
        || stored_steps(l[10], l[11], n, stored) < 0)
        goto fail;
    PyMem_Free(step), PyMem_Free(slot);
    return Py_BuildValue("NNN", out[0], out[1], out[2]);
fail:
    PyMem_Free(step), PyMem_Free(slot);
    for (int i = 0; i < 3; i++) Py_XDECREF(out[i]);
    return NULL;
}

/* ---- fold_totals, bucket_steps: the KV usage fold (outputs/kv_usage.py, outputs/usage_buckets.py) ----------- */

#define MAX_USAGE_BUCKETS 256  /* usage_buckets.py */

/* A float64 array's data (a C-contiguous buffer of doubles: numpy's float64 arrays), its length in *n. */
static int get_doubles(PyObject *obj, Py_buffer *view, Py_ssize_t *n)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != sizeof(double) || view->format == NULL || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "a contiguous float64 array is needed");
        return -1;
    }
    *n = view->len / (Py_ssize_t)sizeof(double);
    return 0;
}

static void release_all(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++) PyBuffer_Release(&views[i]);
}

/* KvUsageTracker._fold's totals: busy s, ∫ usage dt, ∫ stored tokens dt, ∫ held slots dt, each added step by step
   left to right from its value so far (what np.cumsum along each row computes): durs, ud, stored·durs, held·durs. */
static PyObject *fold_totals(PyObject *self, PyObject *args)
{
    PyObject *arr[4];
    double t[4];
    if (!PyArg_ParseTuple(args, "OOOO(dddd)", &arr[0], &arr[1], &arr[2], &arr[3], &t[0], &t[1], &t[2], &t[3]))
        return NULL;
    Py_buffer v[4];
    Py_ssize_t n[4];
    for (int i = 0; i < 4; i++)
        if (get_doubles(arr[i], &v[i], &n[i]) < 0) { release_all(v, i); return NULL; }
    if (n[1] != n[0] || n[2] != n[0] || n[3] != n[0]) {
        release_all(v, 4);
        PyErr_SetString(PyExc_ValueError, "fold_totals: arrays of one length");
        return NULL;
    }
    const double *durs = v[0].buf, *ud = v[1].buf, *stored = v[2].buf, *held = v[3].buf;
    for (Py_ssize_t k = 0; k < n[0]; k++) {
        t[0] = t[0] + durs[k];
        t[1] = t[1] + ud[k];
        t[2] = t[2] + stored[k] * durs[k];
        t[3] = t[3] + held[k] * durs[k];
    }
    release_all(v, 4);
    return Py_BuildValue("dddd", t[0], t[1], t[2], t[3]);
}

/* UsageBuckets' buckets as C triples [∫ usage dt, busy s, max usage] and back. */
static int read_buckets(PyObject *list, double *b, Py_ssize_t *nb)
{
    *nb = PyList_GET_SIZE(list);
    if (*nb > MAX_USAGE_BUCKETS) {
        PyErr_SetString(PyExc_ValueError, "bucket_steps: more buckets than MAX_USAGE_BUCKETS");
        return -1;
    }
    for (Py_ssize_t i = 0; i < *nb; i++) {
        PyObject *x = PyList_GET_ITEM(list, i);
        if (!PyList_Check(x) || PyList_GET_SIZE(x) != 3) {
            PyErr_SetString(PyExc_TypeError, "bucket_steps: a bucket is a list of three floats");
            return -1;
        }
        for (int j = 0; j < 3; j++) b[3 * i + j] = as_double(PyList_GET_ITEM(x, j));
    }
    return PyErr_Occurred() ? -1 : 0;
}

static int write_buckets(PyObject *list, const double *b, Py_ssize_t nb)
{
    PyObject *fresh = PyList_New(nb);
    if (fresh == NULL) return -1;
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *x = Py_BuildValue("[ddd]", b[3 * i], b[3 * i + 1], b[3 * i + 2]);
        if (x == NULL) { Py_DECREF(fresh); return -1; }
        PyList_SET_ITEM(fresh, i, x);
    }
    int rc = PyList_SetSlice(list, 0, PY_SSIZE_T_MAX, fresh);
    Py_DECREF(fresh);
    return rc;
}

/* UsageBuckets._bucket's merge: pairs of buckets merged (sums added, maxima kept), the width doubled, while the step
   starting at ``start`` is past the last bucket. */
static void merge_buckets(double *b, Py_ssize_t *nb, double *width, double start)
{
    while (start / *width >= MAX_USAGE_BUCKETS) {  /* int(start / width) ≥ 256, compared as a double (no overflow) */
        Py_ssize_t m = 0;
        for (Py_ssize_t j = 0; j < *nb; j += 2, m++) {
            double a0 = b[3 * j], a1 = b[3 * j + 1], a2 = b[3 * j + 2], c0 = 0.0, c1 = 0.0, c2 = 0.0;
            if (j + 1 < *nb) c0 = b[3 * j + 3], c1 = b[3 * j + 4], c2 = b[3 * j + 5];
            b[3 * m] = a0 + c0, b[3 * m + 1] = a1 + c1, b[3 * m + 2] = c2 > a2 ? c2 : a2;  /* Python's max(a, c) */
        }
        *nb = m;
        *width = *width * 2;
    }
}

/* UsageBuckets.add: each step counted in the bucket where it starts, its sums added left to right in step order. */
static PyObject *bucket_steps(PyObject *self, PyObject *args)
{
    PyObject *list, *arr[4];
    double width, b[3 * MAX_USAGE_BUCKETS];
    if (!PyArg_ParseTuple(args, "O!dOOOO", &PyList_Type, &list, &width, &arr[0], &arr[1], &arr[2], &arr[3]))
        return NULL;
    Py_ssize_t nb, n[4];
    Py_buffer v[4];
    if (read_buckets(list, b, &nb) < 0) return NULL;
    for (int i = 0; i < 4; i++)
        if (get_doubles(arr[i], &v[i], &n[i]) < 0) { release_all(v, i); return NULL; }
    const double *starts = v[0].buf, *durs = v[1].buf, *u = v[2].buf, *ud = v[3].buf;
    Py_ssize_t steps = n[0] < n[1] ? n[0] : n[1];
    for (Py_ssize_t k = 0; k < steps && k < n[2] && k < n[3]; k++) {
        double pos = starts[k] / width;  /* bucket i holds the steps with i ≤ pos < i + 1 */
        if (pos >= MAX_USAGE_BUCKETS) {
            merge_buckets(b, &nb, &width, starts[k]);
            pos = starts[k] / width;
        }
        if (!(pos >= 0)) {  /* a negative or NaN start has no bucket here (the simulator's clock starts at 0) */
            release_all(v, 4);
            PyErr_SetString(PyExc_ValueError, "bucket_steps: a step starts before 0 s");
            return NULL;
        }
        Py_ssize_t i = (Py_ssize_t)(long long)pos;
        for (; nb <= i; nb++) b[3 * nb] = b[3 * nb + 1] = b[3 * nb + 2] = 0.0;
        b[3 * i] = b[3 * i] + ud[k];
        b[3 * i + 1] = b[3 * i + 1] + durs[k];
        if (u[k] > b[3 * i + 2]) b[3 * i + 2] = u[k];
    }
    release_all(v, 4);
    if (write_buckets(list, b, nb) < 0) return NULL;
    return PyFloat_FromDouble(width);
}

/* ---- exact_total: exact_mean._exact_total ----------------------------------------------------------------- */

#ifdef __SIZEOF_INT128__  /* gcc and clang on 64-bit targets; elsewhere exact_mean sums in Python */
#define ACC_DIGITS 80  /* 32-bit digits of the accumulator: bit positions 0 .. 2559 hold the total */

/* acc += val·2^shift, |val| < 2^95 (val·2^31 stays within __int128): val's 32-bit chunks added to the digits. */
static int acc_add(long long *acc, __int128 val, int shift)
{
    val *= (__int128)1 << (shift % 32);
    int k = shift / 32;
    while (val != 0 && val != -1) {  /* val = Σ low 32-bit chunks·2^(32j) + (what is left)·2^(32j) */
        if (k >= ACC_DIGITS) return -1;
        acc[k++] += (long long)(val & 0xFFFFFFFF);
        val >>= 32;  /* floor division by 2^32 (gcc and clang shift signed integers arithmetically) */
    }
    if (val == -1) {  /* a negative value: −2^(32k) left */
        if (k >= ACC_DIGITS) return -1;
        acc[k] -= 1;
    }
    return 0;
}

/* Σ values·counts × 2^1127 as a Python integer, exactly: exact_mean._exact_total's integer (the exact sum is one
   number, however it is grouped). A finite double with biased exponent E and mantissa field F is ±m·2^(E−1075)
   with m = F + 2^52 (normal) or ±F·2^−1074 (subnormal, E = 0), so value·2^1127 = ±m·2^(E+52) (E ≥ 1) or ±F·2^53:
   the products m·count (below 2^84) are summed per exponent in 128-bit integers (2^30 values at most: below 2^114),
   then each exponent's sum is added at its bit position into 32-bit digits held in int64 and carried once.
   ``values``: float64, finite; ``counts``: None (1 each) or int32/int64, each in [0, 2^31), as many. */
static PyObject *exact_total(PyObject *self, PyObject *args)
{
    PyObject *vobj, *cobj;
    if (!PyArg_ParseTuple(args, "OO", &vobj, &cobj)) return NULL;
    Py_buffer v, c;
    if (PyObject_GetBuffer(vobj, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    int has_c = cobj != Py_None, c64 = 0;
    if (has_c && PyObject_GetBuffer(cobj, &c, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    Py_ssize_t n = v.len / (Py_ssize_t)sizeof(double);  /* below 2^30: no sum can overflow */
    const char *cf = has_c ? (c.format ? c.format : "B") : "";
    if (has_c) c64 = c.itemsize == 8;
    int ok = n < (1 << 30) && v.itemsize == 8 && v.format && strcmp(v.format, "d") == 0
             && (!has_c || ((c.itemsize == 4 || c.itemsize == 8) && strchr("ilq", cf[0]) && c.len / c.itemsize == n));
    __int128 *by_exp = ok ? PyMem_Calloc(2048, sizeof(__int128)) : NULL;  /* Σ ±m·count per biased exponent */
    if (ok && by_exp == NULL) ok = 0;
    const unsigned long long *bits = (const unsigned long long *)v.buf;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        unsigned long long b = bits[i], E = (b >> 52) & 0x7FF, m = b & 0xFFFFFFFFFFFFFULL;
        long long k = !has_c ? 1 : c64 ? ((const long long *)c.buf)[i] : ((const int *)c.buf)[i];
        if (E == 0x7FF || k < 0 || k >= (1LL << 31)) { ok = 0; break; }  /* inf or NaN; a count out of range */
        if (E) m |= 1ULL << 52;
        __int128 p = (__int128)(long long)m * k;
        by_exp[E] += b >> 63 ? -p : p;
    }
    PyBuffer_Release(&v);
    if (has_c) PyBuffer_Release(&c);
    long long acc[ACC_DIGITS] = {0};
    for (int E = 0; ok && E < 2047; E++) {  /* each sum split in two, each within acc_add's bound */
        __int128 t = by_exp[E];
        int shift = (E ? E : 1) + 52;
        if (t != 0 && (acc_add(acc, t & (((__int128)1 << 62) - 1), shift) < 0 || acc_add(acc, t >> 62, shift + 62) < 0))
            ok = 0;
    }
    PyMem_Free(by_exp);
    if (!ok) return PyErr_SetString(PyExc_ValueError, "exact_total(values, counts): finite float64 values, counts "
                                    "None or int32/int64 in [0, 2^31), as many"), NULL;
    for (int k = 0; k + 1 < ACC_DIGITS; k++) {  /* carry: each digit to [0, 2^32), the sign in the top one */
        long long carry = acc[k] >> 32;  /* arithmetic shift: floor division by 2^32 */
        acc[k] -= carry * 4294967296LL;
        acc[k + 1] += carry;
    }
    PyObject *total = PyLong_FromLongLong(acc[ACC_DIGITS - 1]), *shift = PyLong_FromLong(32);
    for (int k = ACC_DIGITS - 2; total && shift && k >= 0; k--) {
        PyObject *t = PyNumber_Lshift(total, shift), *d = t ? PyLong_FromLongLong(acc[k]) : NULL;
        Py_DECREF(total);
        total = d ? PyNumber_Or(t, d) : NULL;
        Py_XDECREF(t);
        Py_XDECREF(d);
    }
    Py_XDECREF(shift);
    return total;
}

#endif

/* ---- module ----------------------------------------------------------------------------------------------- */

static PyMethodDef core_methods[] = {
    {"decode_until", (PyCFunction)(void (*)(void))decode_until, METH_FASTCALL,
     "decode_until(run, terms_of, bound): open_stretch._ArrivalStretch.decode_until on the run's fields."},
    {"arrive", (PyCFunction)(void (*)(void))arrive, METH_FASTCALL,
     "arrive(run, spec_at, arrivals, i, total, out, accept, request_type, price, running_status, limits, step0, "
     "plain) -> (next index, admitted, their prompt tokens) or None: open_stretch._ArrivalStretch.arrive and _mixed_step."},
#ifdef __SIZEOF_INT128__
    {"exact_total", exact_total, METH_VARARGS,
     "exact_total(values, counts) -> Σ values·counts × 2^1127, an exact int: exact_mean._exact_total."},
#endif
    {"new_spec", (PyCFunction)(void (*)(void))new_spec, METH_FASTCALL,
     "new_spec(cls, request_id, arrival_s, prompt, output) -> request.plain_spec's RequestSpec."},
    {"accept", accept_py, METH_VARARGS,
     "accept(accept, request_type, uid, spec, limits) -> request_state.accept(uid, spec, *limits[2:]) (a served "
     "request built in C)."},
    {"open_run", (PyCFunction)(void (*)(void))open_run, METH_FASTCALL,
     "open_run(terms_of, run, spec_at, arrivals, i, total, out, accept, request_type, price, running_status, limits, "
     "step0, plain) -> (next index, admitted, their prompt tokens): open_stretch.run_arrivals' loop."},
    {"sglang_arrive", (PyCFunction)(void (*)(void))sglang_arrive, METH_FASTCALL,
     "sglang_arrive(run, spec_at, arrivals, i, total, out, accept, request_type, price, plain, prefill_time, limits, "
     "clip) -> next index or None: sglang_stretch._SGLangStretch.gather_arrivals and prefill_step."},
    {"sglang_run", (PyCFunction)(void (*)(void))sglang_run, METH_FASTCALL,
     "sglang_run(run, spec_at, arrivals, i, total, out, accept, request_type, price, plain, prefill_time, limits, "
     "clip, terms_of) -> (next index, general): sglang_stretch.run_arrivals' loop."},
    {"sglang_decode_grants", sglang_decode_grants, METH_O,
     "sglang_decode_grants(stored) -> [step, slots, …]: sglang_settle._decode_grants."},
    {"sglang_replay", sglang_replay, METH_VARARGS,
     "sglang_replay(kv, lives, admits, leaving, D, running_status, heappush, heappop): sglang_settle._replay but "
     "its settle_overdraft, with RadixFresh's admit_fresh, free_fresh, add_slots and RadixKVManager._evict."},
    {"sglang_decode_until", (PyCFunction)(void (*)(void))sglang_decode_until, METH_FASTCALL,
     "sglang_decode_until(ends, durs, stored, keys, groups, forms, prices, terms_of, D, K, n, S, room, last, bound, F, "
     "dsteps) -> (last, K, D, n, S, F): sglang_stretch._SGLangStretch.decode_until with _advance_to."},
    {"usage_samples", usage_samples, METH_VARARGS,
     "usage_samples(n, B, allocs, alloc_at, runs, run_at, grants, grant_at, frees, free_at, drops, sets, stored, "
     "stored_shift) -> (used, stored, held) float64 bytes per step: KvUsageTracker._flush's expansion."},
    {"fold_totals", fold_totals, METH_VARARGS,
     "fold_totals(durs, ud, stored, held, (busy, usage, stored_s, held_s)) -> the four totals: KvUsageTracker._fold."},
    {"bucket_steps", bucket_steps, METH_VARARGS,
     "bucket_steps(buckets, width, starts, durs, u, ud) -> width: UsageBuckets.add (buckets changed in place)."},
    {"sglang_lives", sglang_lives, METH_VARARGS,
     "sglang_lives(lives, D, K, dsteps, prefills, is_prefill, step0, counted, gap_runs, singles) -> (frees, leaving, "
     "running): sglang_settle.settle's loop over the stretch's requests."},
    {"settle_lives", settle_lives, METH_VARARGS,
     "settle_lives(lives, K, B, lag, step0) -> (takes, runs, frees, running, finished, freed, deferred): "
     "open_settle.settle's per-request loop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "stretch_core", "kvledger's optional compiled core.",
                                         -1,
                                         core_methods};

PyMODINIT_FUNC PyInit_stretch_core(void)
{
    PyObject **names[] = {&s_num_computed, &s_num_generated, &s_num_tokens, &s_num_output, &s_num_prompt, &s_n, &s_B,
                          &s_blocks_left, &s_finishing, &s_sched_t, &s_S, &s_K, &s_groups, &s_keys,
                          &s_ends, &s_durs, &s_split, &s_stored, &s_grants, &s_lives, &s_lag, &s_spec,
                          &s_prefix_segments, &s_status, &s_run_start, &s_num_cached, &s_forms, &s_prices, &s_last,
                          &s_runs, &s_D, &s_F, &s_room, &s_prefills, &s_admits, &s_pure_s, &s_tick, &s_seq,
                          &s_tree_tokens, &s_evictable, &s_private, &s_held_slots, &s_capacity, &s_requests,
                          &s_queries, &s_dsteps, &s_root, &s_children, &s_heap, &s_prefix_stats, &s_uid, &s_node, &s_covered, &s_junction,
                          &s_last_access, &s_evict, &s_free, &s_preempted, &s_num_evictions, &s_alive, &s_lock_ref,
                          &s_parent, &s_key, &s_ntok, &s_push, &s_backs_up, &s_arrival_s, &s_num_preemptions,
                          &s_num_registered, &s_blocks_attr, &s_keys_attr, &s_request_id, &s_segment_tokens,
                          &s_client_id, &s_output_segments};
    const char *text[] = {"num_computed_tokens", "num_generated", "num_tokens", "num_output_tokens",
                          "num_prompt_tokens", "n", "B", "blocks_left", "finishing", "sched_t", "S", "K",
                          "groups", "keys", "ends", "durs", "split", "stored", "grants", "lives", "lag", "spec",
                          "prefix_segments", "status", "run_start", "num_cached_tokens", "forms", "prices", "last",
                          "runs", "D", "F", "room", "prefills", "admits", "_pure_s", "_tick", "_seq", "tree_tokens",
                          "evictable_tokens", "private_tokens", "held_slots", "capacity_tokens", "requests",
                          "queries", "dsteps", "root", "children", "_heap", "prefix_stats", "uid", "node", "covered_tokens",
                          "shared_prefix_boundary",
                          "last_access", "_evict", "free", "preempted", "num_evictions", "alive", "lock_ref",
                          "parent", "key", "ntok", "_push", "backs_up_on_evict", "arrival_s", "num_preemptions",
                          "num_registered", "blocks", "keys", "request_id", "segment_tokens", "client_id",
                          "output_segments"};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
        if ((*names[i] = PyUnicode_InternFromString(text[i])) == NULL) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", CORE_VERSION) < 0) Py_CLEAR(m);
    return m;
}
