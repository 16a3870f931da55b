"""A software prefetch for numba kernels: `prefetch(array, i)` hints that array[i] is
about to be read (LLVM's llvm.prefetch; no effect on results, a no-op where the CPU has
no such instruction).

Why: the dual solvers visit examples in a random order, so every visit starts with a
chain of dependent cache misses (index -> row pointer -> column indices -> alpha). The
work per example is too long for the CPU to run ahead to the next one by itself;
asking for the data of the example a few visits ahead overlaps those misses.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


# How many visits ahead: the row pointer and alpha of the example PREFETCH_FAR ahead,
# the column indices of the one PREFETCH_NEAR ahead (its row pointer has arrived by then).
PREFETCH_FAR = 16
PREFETCH_NEAR = 8


def _intrinsic_name() -> str | None:
    """llvm.prefetch's name for a pointer argument, where we know it for sure.

    LLVM 17 and later have only opaque pointers, whose mangled name is llvm.prefetch.p0
    (numba 0.68 / llvmlite 0.50, as installed here, ship LLVM 22). Older LLVMs may use
    typed pointers (llvm.prefetch.p0i8) and do not reliably reject a wrong name, so there
    `prefetch` compiles to nothing: slower, never wrong.
    """
    from llvmlite import binding

    return "llvm.prefetch.p0" if binding.llvm_version_info >= (17,) else None


_NAME = _intrinsic_name()


@intrinsic
def prefetch(typingctx, array, index):
    """Prefetch the element `index` of a 1-d array, or the row `index` of a C-contiguous 2-d one."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        if _NAME is None:
            return context.get_dummy_value()
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        where = [context.cast(builder, args[1], signature.args[1], types.intp)] + [zero] * (aryty.ndim - 1)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, where, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), _NAME)
        # read, high temporal locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
