"""The vocabulary: buffers, fractal formats and hardware pipes of an AI Core."""

from __future__ import annotations

import enum


class Buffer(enum.Enum):
    """On-chip buffers (and GM). Names follow the Ascend C memory spaces."""

    GM = "GM"
    L1 = "L1"  # Mat / cbuf
    L0A = "L0A"  # Left, __ca__
    L0B = "L0B"  # Right, __cb__
    L0C = "L0C"  # Acc, __cc__
    BT = "BiasTable"
    UB = "UB"  # Vec (AIV only)
    # MX scale domains beside L0A / L0B (950 only): scale address = data address >> 4 [facts §4, §6]
    SCALE_LEFT = "ScaleLeft"  # L0A_MX
    SCALE_RIGHT = "ScaleRight"  # L0B_MX

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, buffer: Buffer | str) -> Buffer:
        """Accept ``Buffer.BT``, ``"BT"``, ``"BiasTable"`` or a PyPTO-Pro space name (``"Mat"``, ``"Acc"``...)."""
        if isinstance(buffer, Buffer):
            return buffer
        name = str(buffer)
        for b in cls:
            if name.upper() in (b.name, b.value.upper()):
                return b
        aliases = {"MAT": cls.L1, "LEFT": cls.L0A, "RIGHT": cls.L0B, "ACC": cls.L0C, "BIAS": cls.BT, "VEC": cls.UB}
        aliases.update({"L0A_MX": cls.SCALE_LEFT, "L0B_MX": cls.SCALE_RIGHT})
        if name.upper() in aliases:
            return aliases[name.upper()]
        raise ValueError(
            f"unknown buffer {buffer!r}: expected one of {[b.name for b in cls]} (or Mat/Left/Right/Acc/Bias/Vec)"
        )


class Format(enum.Enum):
    """Tile data formats. Fractals are 16 x c0 (c0 = 32 B / itemsize; 16 on L0C)."""

    ND = "ND"  # row-major
    NZ = "Nz"  # (M, N) -> (N1, M1, M0, N0): column of fractals, each row-major
    ZZ = "Zz"  # (M, K) -> (M1, K1, M0, K0): row of fractals, each row-major
    ZN = "Zn"  # (K, N) -> (K1, N1, N0, K0): bit for bit the Nz image of the transpose
    NN = "Nn"  # (K, N) -> (N1, K1, N0, K0): bit for bit the Zz image of the transpose (MX scale_b)

    def __str__(self) -> str:
        return self.value


class Pipe(enum.IntEnum):
    """Hardware pipes of one core. Each executes its own instructions in order."""

    S = 0  # scalar
    V = 1  # vector (AIV)
    M = 2  # cube: mmad (AIC)
    MTE1 = 3  # L1 -> L0A / L0B / BiasTable
    MTE2 = 4  # GM -> L1 / UB
    MTE3 = 5  # UB -> GM / L1
    FIX = 6  # fixpipe: L0C -> GM / UB

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, pipe: Pipe | str) -> Pipe:
        """Accept ``Pipe.M``, ``"M"`` or ``"PIPE_M"``."""
        if isinstance(pipe, Pipe):
            return pipe
        name = str(pipe).upper().removeprefix("PIPE_")
        try:
            return cls[name]
        except KeyError:
            raise ValueError(
                f"unknown pipe {pipe!r}: expected one of {[p.name for p in cls]} (or 'ALL' for a barrier)"
            ) from None


N_PIPES = len(Pipe)


class InstrKind(enum.Enum):
    """What an instruction is. Reports and checks dispatch on this, never on instruction names."""

    MOVE = "data movement"  # an MTE copy (GM, L1, L0A/L0B, BiasTable, UB)
    MMAD = "mmad"  # writes L0C: the unit flag's writer side (AccPhase)
    L0C_READ = "L0C read"  # fixpipe to GM, move L0C -> UB: the unit flag's reader side (STPhase)
    VECTOR = "vector"  # compute on UB (pipe V)
    FLAG = "flag"  # intra-core SetFlag / WaitFlag
    BARRIER = "barrier"  # PipeBarrier
    CROSS_CORE = "cross-core event"  # set / wait_cross_core
    CONFIG = "config"  # scalar control registers
    SCALAR = "scalar access"  # the scalar unit reads or writes one element (setval)

    def __str__(self) -> str:
        return self.value


class CoreKind(enum.Enum):
    """The core an instruction runs on: the cube core, a vector core, or the one it is issued on."""

    CUBE = "AIC"
    VECTOR = "AIV"
    ANY = "any"

    def __str__(self) -> str:
        return self.value


#: Legal SetFlag/WaitFlag (src, dst) pairs on the AIC [facts §2 "Legal pairs on 2201"].
AIC_FLAG_PAIRS = frozenset(
    {
        (Pipe.M, Pipe.MTE1),
        (Pipe.M, Pipe.MTE2),
        (Pipe.M, Pipe.FIX),
        (Pipe.MTE1, Pipe.M),
        (Pipe.MTE1, Pipe.MTE2),
        (Pipe.MTE1, Pipe.MTE3),
        (Pipe.MTE1, Pipe.FIX),
        (Pipe.MTE2, Pipe.M),
        (Pipe.MTE2, Pipe.MTE1),
        (Pipe.MTE2, Pipe.MTE3),
        (Pipe.MTE3, Pipe.MTE1),
        (Pipe.MTE3, Pipe.MTE2),
        (Pipe.FIX, Pipe.M),
        (Pipe.FIX, Pipe.MTE1),
        (Pipe.FIX, Pipe.MTE2),  # HardEvent FIX_MTE2: reload what a fixpipe wrote to GM
        # the scalar unit may hand over to any pipe and back (S_MTE2, MTE2_S, ... in HardEvent)
        *((Pipe.S, p) for p in (Pipe.M, Pipe.MTE1, Pipe.MTE2, Pipe.FIX)),
        *((p, Pipe.S) for p in (Pipe.M, Pipe.MTE1, Pipe.MTE2, Pipe.FIX)),
    }
)

#: Legal SetFlag/WaitFlag (src, dst) pairs on an AIV [facts §2 "Legal pairs on 2201"]:
#: S<->V, S<->MTE2, S<->MTE3, V<->MTE2, V<->MTE3, MTE2<->MTE3.
AIV_FLAG_PAIRS = frozenset(
    (a, b)
    for a in (Pipe.S, Pipe.V, Pipe.MTE2, Pipe.MTE3)
    for b in (Pipe.S, Pipe.V, Pipe.MTE2, Pipe.MTE3)
    if a != b and not (a is Pipe.S and b is Pipe.S)
)
#: Pipes of each kind of core.
AIC_PIPES = (Pipe.S, Pipe.M, Pipe.MTE1, Pipe.MTE2, Pipe.MTE3, Pipe.FIX)
AIV_PIPES = (Pipe.S, Pipe.V, Pipe.MTE2, Pipe.MTE3)


class SyncMode(enum.IntEnum):
    """PyPTO-Pro ``sync_mode`` values (``python/src/bindings/ir/ir.cpp``); INTRA_BLOCK is the default."""

    INTER_BLOCK = 0
    INTER_SUBBLOCK = 1
    INTRA_BLOCK = 2
    UNICAST_BLOCK = 3

    @classmethod
    def parse(cls, mode) -> SyncMode:
        if isinstance(mode, cls):
            return mode
        if isinstance(mode, str):
            try:
                return cls[mode.upper()]
            except KeyError:
                pass
        elif isinstance(mode, int) and mode in tuple(cls):
            return cls(mode)
        raise ValueError(f"unknown sync_mode {mode!r}: expected one of {[m.name for m in cls]}")
