"""How ascjax compiles its own programs: so that they round where the device rounds, and quickly where they run
once and compute integers only."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

# The trace a call runs under (JAX's eager evaluation at the bottom, vmaps above it), from the public
# ``jax.extend.core.take_current_trace``. JAX exports no classes that say what a trace is (``jax.core`` has only
# ``Trace``, ``jax.interpreters.batching`` no ``BatchTrace``), so the trace is known by its class's name: eager
# evaluation (``EvalTrace``) or a ``vmap`` (``BatchTrace``, whose ``parent_trace`` is the one below it), checked
# against JAX 0.10.2. ``unsafe_am_i_under_a_jit/vmap_DO_NOT_USE`` cannot tell a ``grad`` (which stages a jit into a
# bigger program, refusing compiler options) from eager evaluation, nor can a fresh array. Where the names are gone,
# every program keeps JAX's options.
try:
    from jax.extend.core import take_current_trace as _take_current_trace
except ImportError:  # pragma: no cover - a JAX without it: every program keeps JAX's options
    _take_current_trace = None


def compiled_on_its_own() -> bool:
    """Whether a ``jax.jit`` called here becomes a program of its own, which can take compiler options: outside every
    transformation, or under ``vmap``s alone (JAX compiles the batched program by itself). Inside a trace that stages
    it into a bigger program (a ``jit``, ``grad`` or ``eval_shape``) JAX refuses them."""
    if _take_current_trace is None:  # pragma: no cover
        return False
    with _take_current_trace() as trace:
        while type(trace).__name__ == "BatchTrace":
            trace = trace.parent_trace
        return type(trace).__name__ == "EvalTrace"


#: XLA may keep f16 and bf16 intermediates in float32 ("excess precision", on by default). On a GPU it then drops a
#: float32 -> f16 -> float32 round trip, and it may compute low-precision chains without rounding between their
#: operations: the bits of the directed-rounding casts change (measured on an H200: 10 bit-exactness tests fail with
#: it on, none with it off), and those of f16/bf16 vector chains can. The programs ascjax compiles itself switch it
#: off.
EXACT_COMPILE = {"xla_allow_excess_precision": False}


#: XLA:CPU's element-wise emitters instead of its MLIR fusion emitters, which spend most of a compile on a few hundred
#: small fusions: a 2,062-instance control plane compiles in 1.0 s instead of 2.1 s and runs as fast or faster (0.22
#: s instead of 0.28 s without LLVM optimisation, 0.049 s either way with it). Other backends ignore the option. For
#: programs that compute integers only, where how they are compiled cannot change a bit: control planes. (A data
#: plane's compile and run did not move with it: flash attention's, with the same bits.)
INTEGER_COMPILE = {"xla_cpu_use_fusion_emitters": False}

#: ``INTEGER_COMPILE`` and LLVM without optimisation: compiled in a half to two thirds of the time and run up to a few
#: times slower. For an integer program that runs once: a control plane. (Not for floating point: compiled without
#: optimisation, one bit of flash attention's output moved, in its data plane with the schedule chosen at run time.)
QUICK_COMPILE = INTEGER_COMPILE | {"xla_backend_optimization_level": 0}


#: Compiler options every XLA JAX supports knows; any other is probed before its first use (``accepted``).
_LONG_KNOWN = frozenset({"xla_allow_excess_precision", "xla_backend_optimization_level"})


@functools.cache
def _accepts(name: str, value) -> bool:
    """Whether the installed XLA takes compiler option ``name`` (it refuses to compile with one it does not know)."""
    try:
        jax.jit(lambda x: x).lower(np.int32(0)).compile({name: value})
    except Exception:  # noqa: BLE001 - XLA's error for an unknown option has no type of its own
        return False
    return True


def accepted(options: dict) -> dict:
    """``options`` without those the installed XLA does not know (an option newer than its jaxlib): a program
    compiles with what it can have rather than not at all."""
    return {name: value for name, value in options.items() if name in _LONG_KNOWN or _accepts(name, value)}


def jit_outside(fun, compiler_options: dict):
    """``eqx.filter_jit(fun)``, compiled with ``compiler_options`` (those the installed XLA knows) where it is a program
    of its own: outside JAX's transformations or under a ``vmap`` (``compiled_on_its_own``).

    JAX refuses compiler options on a program nested in another's trace: inside a ``jax.jit`` or ``grad`` of the
    user's, the enclosing program's options apply.
    """
    plain, own = eqx.filter_jit(fun), []  # ``own`` made at its first call: the probe needs JAX's backend

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if not compiled_on_its_own():
            return plain(*args, **kwargs)
        if not own:
            own.append(eqx.filter_jit(fun, compiler_options=accepted(compiler_options)))
        return own[0](*args, **kwargs)

    return call


def exact_jit(fun):
    """``fun`` compiled with ``EXACT_COMPILE`` where it is a program of its own (``jit_outside``); inside a user's own
    ``jit`` or ``grad``, ``XLA_FLAGS=--xla_allow_excess_precision=false`` gives the device's bits too."""
    return jit_outside(fun, EXACT_COMPILE)


def fold_sum(x, axis: int):
    """The sum of ``x`` along ``axis`` (kept, of length 1) in one fixed order: the upper half of the axis added to the
    lower half element by element, then again, until one element is left (a length short of a power of two padded
    with -0.0, the sum's identity, which keeps a sum of -0.0s negative).

    XLA chooses the order of a ``jnp.sum`` by the program around it: the same float32 rows summed in a ``vmap`` and
    on their own differ in most of their last bits. Each fold is an element-wise add, which XLA does not reorder, so
    a kernel's sums have the same bits alone, in a sweep, a launch's blocks or a user's ``jit``. The device's order
    within a reduction is not in the sources; a SIMD unit reduces by such folds.
    """
    n = x.shape[axis]
    width = 1 << max(n - 1, 0).bit_length()
    if width != n:
        pad = list(x.shape)
        pad[axis] = width - n
        x = jax.lax.concatenate([x, jnp.full(pad, -0.0, x.dtype)], axis)
    while x.shape[axis] > 1:
        half = x.shape[axis] // 2
        x = jax.lax.slice_in_dim(x, 0, half, axis=axis) + jax.lax.slice_in_dim(x, half, 2 * half, axis=axis)
    return x


def same_bits_dot_general(a, b, dimension_numbers, preferred_element_type):
    """``lax.dot_general(a, b, dimension_numbers)`` at ``Precision.HIGHEST``, with the same bits under a ``vmap`` as
    alone.

    JAX batches a product whose ``vmap`` batches one operand only by folding the batch into that operand's free
    dimension: a (6 x 32) @ (32 x 32) batch becomes one 192 x 32 x 32 product. XLA:CPU picks its kernel by the
    shape, and on a CPU with AVX-512 a 192-row product sums in another order than a 32-row one (most last bits of a
    float32 K chain differ), so a scenario of a sweep, a block of a launch or a lowered loop's iteration could
    disagree with the same product run alone. Here a one-sided batch of a matrix product is folded into one wide
    product only where a probe on this backend finds the wide product has the bits of each matrix alone
    (``folds_alike``; a wide product also runs on every core, a batched one on one), and is broadcast otherwise,
    so the ``vmap`` computes a batched product, whose every matrix XLA computes as it computes one alone.
    Differentiable (the tangents are plain products: only the primal's bits are kept).
    """
    return _same_bits_dot(a, b, _dims(dimension_numbers), jnp.dtype(preferred_element_type))


def _dims(dimension_numbers) -> tuple:
    (ca, cb), (ba, bb) = dimension_numbers
    return (tuple(ca), tuple(cb)), (tuple(ba), tuple(bb))


def _plain_dot(a, b, dims, out_dtype):
    return jax.lax.dot_general(a, b, dims, precision=jax.lax.Precision.HIGHEST, preferred_element_type=out_dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _same_bits_dot(a, b, dims, out_dtype):
    return _batched_alike(dims, out_dtype)(a, b)


@_same_bits_dot.defjvp
def _same_bits_dot_jvp(dims, out_dtype, primals, tangents):
    (a, b), (da, db) = primals, tangents
    tangent = _plain_dot(da, b, dims, out_dtype) + _plain_dot(a, db, dims, out_dtype)
    return _same_bits_dot(a, b, dims, out_dtype), tangent


@functools.cache
def _batched_alike(dims, out_dtype):
    """The product of ``dims`` whose ``vmap`` broadcasts an unbatched operand: a batched product, never a wider one."""

    @jax.custom_batching.custom_vmap
    def product(a, b):
        return _plain_dot(a, b, dims, out_dtype)

    @product.def_vmap
    def _batched(axis_size, in_batched, a, b):
        if not any(in_batched):
            return product(a, b), False
        if dims == MATRIX_PRODUCT and in_batched[0] != in_batched[1]:
            side = 0 if in_batched[0] else 1
            shapes = (a.shape[-2], a.shape[-1], b.shape[-1])
            if folds_alike(side, axis_size, *shapes, a.dtype, b.dtype, out_dtype):
                return _folded(side, product, a, b), True
        a, b = (x if batched else jnp.broadcast_to(x, (axis_size, *x.shape)) for x, batched in zip((a, b), in_batched))
        (ca, cb), (ba, bb) = dims
        shift = lambda axes: tuple(axis + 1 for axis in axes)  # noqa: E731 - the operands' axes behind the batch
        return _batched_alike(((shift(ca), shift(cb)), ((0, *shift(ba)), (0, *shift(bb)))), out_dtype)(a, b), True

    return product


#: The dimension numbers of a plain matrix product (m x k) @ (k x n): the one a one-sided batch may fold into.
MATRIX_PRODUCT = (((1,), (0,)), ((), ()))
#: The seed of the random operands ``folds_alike`` compares the products on.
_PROBE_SEED = 0


def _folded(side: int, product, a, b):
    """A batch of products with one operand batched (``side`` 0: ``a`` [B, m, k]; 1: ``b`` [B, k, n]) as one wide
    product ``product`` (so a further ``vmap`` folds again, or broadcasts), its result [B, m, n]. The wide operand
    and result are computed on their own (optimization barriers), as the product's operands are."""
    if side == 0:
        batch, m, k = a.shape
        wide = jax.lax.optimization_barrier(a.reshape(batch * m, k))
        return jax.lax.optimization_barrier(product(wide, b)).reshape(batch, m, b.shape[-1])
    batch, k, n = b.shape
    wide = jax.lax.optimization_barrier(b.transpose(1, 0, 2).reshape(k, batch * n))
    return jax.lax.optimization_barrier(product(a, wide)).reshape(a.shape[0], batch, n).transpose(1, 0, 2)


@functools.cache
def folds_alike(side: int, batch: int, m: int, k: int, n: int, a_dtype, b_dtype, out_dtype) -> bool:
    """Whether ``batch`` (m x k) @ (k x n) products with operand ``side`` batched, folded into one wide product
    (``_folded``), have the bits of each product alone on the default backend.

    An integer product is exact in any order. A float one is probed once per shape in a process: random operands
    in [-1, 1), the wide product and each product alone, compared bit for bit. XLA picks a product's kernel by its
    shape alone, and a kernel that summed in another order would change some of the last bits of most of the
    outputs, so the probe tells the kernels apart (on this project's AVX-512 CPU, 128-row tiles folded into 1,024
    rows keep their bits, 32-row tiles folded into 192 do not)."""
    if jnp.issubdtype(out_dtype, jnp.integer):
        return True
    rng = np.random.default_rng(_PROBE_SEED)
    shapes = [(m, k), (k, n)]
    shapes[side] = (batch, *shapes[side])
    a, b = (rng.uniform(-1, 1, shape).astype(dtype) for shape, dtype in zip(shapes, (a_dtype, b_dtype)))
    product = functools.partial(_plain_dot, dims=MATRIX_PRODUCT, out_dtype=out_dtype)
    with jax.core.eval_context():  # run now, whatever trace the rule runs under
        wide = jax.jit(lambda a, b: _folded(side, product, a, b))(a, b)
        alone = jax.jit(product)
        each = [alone(a[i], b) if side == 0 else alone(a, b[i]) for i in range(batch)]
        return bool(
            np.array_equal(np.asarray(wide).view(np.uint8), np.stack([np.asarray(x) for x in each]).view(np.uint8))
        )
