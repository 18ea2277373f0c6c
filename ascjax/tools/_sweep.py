"""``sweep``: run many scenarios of one kernel as one compiled ``vmap`` and tabulate them.

A scenario is a row of a table of arrays: kernel parameters (phases, event ids, valid sizes,
trip counts up to a static maximum), per-scenario input data (an input whose leading axis is
the scenario) and timing-model costs (``costs.<field>``). The kernel is traced and compiled
once per chunk shape; chunks bound the memory a batch of states takes, and each chunk is
sharded over every device JAX sees (the scenario axis is split with ``jax.sharding``), so the
same call scales from one CPU to several GPUs.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import inspect
import json
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Verdict, exact_jit
from ..core._chip import get_chip
from ..core._options import Options
from ..engine import Record, default_costs
from ..engine._log import ENTRY
from ..front._tracing import gm_inputs, kernel_parameters
from ..runner._run import run
from ._case import Case, max_abs_err

_COST_PREFIX = "costs."


@dataclasses.dataclass
class SweepTable:
    """One row per scenario: its values, verdict, offending op and location, cycles, the pair sync ran against the
    kernel's order (``reordered``, where any scenario has one), max error."""

    columns: list[str]
    rows: list[dict]
    labels: dict = dataclasses.field(default_factory=dict)  # column -> {value: name} for the printed table

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def verdicts(self) -> list[Verdict]:
        return [Verdict.parse(r["verdict"]) for r in self.rows]

    def counts(self) -> dict[str, int]:
        """Scenarios per verdict, in Verdict order."""
        out = {}
        for v in Verdict:
            n = sum(1 for r in self.rows if r["verdict"] == v.label)
            if n:
                out[v.label] = n
        return out

    def summary(self, max_rows: int = 20) -> str:
        """Verdict counts, then the first ``max_rows`` rows as a table."""
        head = ", ".join(f"{n} {label}" for label, n in self.counts().items())
        reordered = sum(1 for r in self.rows if r["verdict"] == Verdict.OK.label and r.get("reordered"))
        if reordered:  # sync ordered the pair, but not as the kernel wrote it
            head += f" ({reordered} ok with an instruction run before an earlier one: see `reordered`)"
        text = f"{len(self)} scenarios: {head}\n" + self.format(self.rows[:max_rows])
        if len(self) > max_rows:
            text += f"\n... {len(self) - max_rows} more rows (to_csv / to_json for all)"
        return text

    def format(self, rows=None) -> str:
        rows = self.rows if rows is None else rows
        cells = [[_cell(self.labels.get(c, {}).get(r[c], r[c])) for c in self.columns] for r in rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.summary()

    def to_csv(self, path: str) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)

    def to_json(self, path: str | None = None) -> str:
        """The rows as a JSON list (written to ``path`` when given)."""
        text = json.dumps(self.rows, indent=1)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def _scenario_count(scenarios: dict) -> int:
    if not scenarios:
        raise ValueError("sweep needs at least one scenario column, e.g. {'first': [0, 2, 3]}")
    sizes = {name: int(np.shape(v)[0]) if np.ndim(v) else -1 for name, v in scenarios.items()}
    bad = [name for name, n in sizes.items() if n < 0]
    if bad:
        raise ValueError(f"sweep columns are arrays with the scenario on axis 0; {bad} are scalars: put them in params")
    if len(set(sizes.values())) != 1:
        raise ValueError(f"sweep columns must have one length (the scenario count), got {sizes}")
    n = next(iter(sizes.values()))
    if n == 0:
        raise ValueError(f"sweep columns {sorted(sizes)} are empty: give each at least one value")
    return n


def _check_columns(kernel, columns: dict, inputs: dict) -> None:
    """Every column names a kernel parameter, a GM input or a ``costs.`` field (checked by the caller)."""
    names = kernel_parameters(kernel)
    if names is None:
        return
    for name in columns:
        if not name.startswith(_COST_PREFIX) and name not in inputs and name not in names:
            known = ", ".join(names) or "none"
            raise ValueError(
                f"sweep column {name!r} is not a parameter of kernel {getattr(kernel, '__name__', kernel)!r} "
                f"(its parameters: {known}), a GM input ({', '.join(inputs) or 'none'}) or costs.<field>"
            )


def _progress(total: int, enabled):
    """A tqdm bar when tqdm is installed, else one line per chunk on stderr; None when off."""
    if enabled is False or (enabled is None and total <= 1):
        return None
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, unit="chunk", desc="sweep")
    except ImportError:

        class _Line:
            n = 0

            def update(self, k):
                self.n += k
                print(f"sweep: chunk {self.n}/{total}", file=sys.stderr)

            def close(self):
                pass

        return _Line()


def sweep(
    case_or_kernel,
    scenarios: dict,
    *,
    inputs: dict | None = None,
    outputs: dict | None = None,
    params: dict | None = None,
    chip=None,
    options: Options | None = None,
    chunk_size: int = 1024,
    devices=None,
    progress=None,
    reference=None,
) -> SweepTable:
    """Run every scenario of ``case_or_kernel`` (a ``Case`` or a kernel function) and tabulate them.

    **Arguments:**

    - ``scenarios``: name -> array with one entry per scenario (axis 0). A name is a kernel
      parameter, a GM input (its array then has the scenario axis in front of the input's
      shape) or ``"costs.<field>"`` for a timing-model cost (see ``ascjax.Costs``).
    - ``inputs`` / ``outputs`` / ``params`` / ``chip``: as for ``ascjax.run`` (a case brings
      its own; these override).
    - ``chunk_size``: scenarios per compiled batch (memory bound); rounded up to a multiple of
      the device count. The last chunk is padded by repeating its last scenario.
    - ``devices``: where to shard each chunk (default: ``jax.devices()``).
    - ``progress``: True / False / None (a bar when there is more than one chunk).
    - ``reference``: ``reference(inputs, row) -> {output: expected}`` for the ``max_err`` column
      of OK rows. A case's own reference (a function of the inputs alone) is used when the
      sweep changes no kernel parameter. Without a reference the GM outputs are not computed.

    **Returns:** a ``SweepTable``.
    """
    case = case_or_kernel if isinstance(case_or_kernel, Case) else None
    kernel = case.kernel if case else case_or_kernel
    inputs = gm_inputs(dict(case.inputs if case else {}, **(inputs or {})))
    outputs = dict(case.outputs if case else {}, **(outputs or {}))
    params = dict(case.params if case else {}, **(params or {}))
    chip = get_chip(chip or (case.chip if case else "a2"))
    options = options or Options()
    n = _scenario_count(scenarios)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size is the number of scenarios per compiled batch: at least 1, got {chunk_size}")
    columns = {name: np.asarray(v) for name, v in scenarios.items()}
    _check_columns(kernel, columns, inputs)
    for name in columns:
        if name.startswith(_COST_PREFIX) and not hasattr(default_costs(chip), name[len(_COST_PREFIX) :]):
            raise ValueError(f"sweep column {name!r}: Costs has no field {name[len(_COST_PREFIX) :]!r}")

    if reference is None and case is not None and case.reference is not None:
        if all(name.startswith(_COST_PREFIX) or name in inputs for name in columns):
            reference = lambda x, row: case.reference(x)  # noqa: E731
    devices = list(devices or jax.devices())
    per = -(-min(chunk_size, n) // len(devices)) * len(devices)
    mesh = jax.sharding.Mesh(np.array(devices), ("scenario",))
    shard = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("scenario"))
    chunks = -(-n // per)
    bar = _progress(chunks, progress)
    results = []
    for c in range(chunks):
        idx = np.minimum(np.arange(c * per, (c + 1) * per), n - 1)
        chunk = {name: jax.device_put(col[idx], shard) for name, col in columns.items()}
        out = _batched(kernel, chip, options, inputs, outputs, params, chunk, reference is not None)
        template = out.pop("record").template
        out = jax.device_get(out)
        take = min(per, n - c * per)
        results.append(jax.tree_util.tree_map(lambda a, take=take: np.asarray(a)[:take], out))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    merged = jax.tree_util.tree_map(lambda *a: np.concatenate(a), *results)
    table = _table(columns, merged, inputs, reference, template)
    table.labels = _enum_labels(kernel, params, table.columns)
    return table


def _one(kernel, chip, options, inputs, outputs, params, row, with_outputs):
    """One scenario: ``row`` overrides parameters, inputs and costs; the fields a table needs
    (the GM outputs only ``with_outputs``: verdicts and cycles do not depend on the data, so
    without them XLA drops the data plane)."""
    x = dict(inputs)
    p = dict(params)
    cost_updates = {}
    for name, value in row.items():
        if name.startswith(_COST_PREFIX):
            cost_updates[name[len(_COST_PREFIX) :]] = value
        elif name in inputs:
            x[name] = value
        else:
            p[name] = value
    costs = _with_costs(default_costs(chip), cost_updates)
    r = run(kernel, x, outputs, chip=chip, params=p, options=options, costs=costs, jit=False)
    fields = {
        "code": r.verdict,
        "entry": r.control.findings[0, ENTRY],  # the most severe finding's template entry (-1: none)
        "cycles": jnp.max(r.control.end),
        "record": Record(r.record.template, {}),  # its template only: static, one for every scenario
    }
    if options.sanitize:  # with the checks: a later instruction of a core that sync ran before an earlier one
        fields["reordered"] = r.control.reordered
    return {**fields, "outputs": r.outputs} if with_outputs else fields


@exact_jit
def _batched(kernel, chip, options, inputs, outputs, params, chunk, with_outputs):
    """Every scenario of ``chunk`` as one ``vmap``; compiled once per kernel, static setting and
    chunk shape, so a second sweep of the same kernel runs without tracing it again."""
    return jax.vmap(lambda row: _one(kernel, chip, options, inputs, outputs, params, row, with_outputs))(chunk)


def _with_costs(costs, updates: dict):
    """``costs`` with the swept fields replaced (Costs fields are arrays, so they may be traced)."""
    if not updates:
        return costs
    names = list(updates)
    values = [jnp.asarray(updates[k], getattr(costs, k).dtype) for k in names]
    return eqx.tree_at(lambda c: [getattr(c, k) for k in names], costs, values)


def _enum_labels(kernel, params: dict, columns: list) -> dict:
    """Names for the values of columns whose parameter is an enum (a phase prints as Partial / Final / none)."""
    try:
        parameters = inspect.signature(kernel).parameters
    except (TypeError, ValueError):
        return {}
    labels = {}
    for name in columns:
        default = params.get(name, parameters[name].default if name in parameters else None)
        if isinstance(default, enum.Enum):
            names = {int(m.value): m.name for m in type(default)}
            names.setdefault(0, "none")  # a phase of 0 (or None) is no phase
            labels[name] = names
    return labels


def _table(columns: dict, merged: dict, inputs: dict, reference, template) -> SweepTable:
    scalar_cols = [name for name, col in columns.items() if col.ndim == 1]
    values = {name: columns[name].tolist() for name in scalar_cols}
    codes, entries, cycles = (np.asarray(merged[k]).tolist() for k in ("code", "entry", "cycles"))
    reordered = np.asarray(merged["reordered"]).tolist() if "reordered" in merged else [(-1, -1)] * len(codes)
    # a sweep has few distinct verdicts and failing ops: each is looked up once
    verdicts = {code: (Verdict(code), Verdict(code).label) for code in set(codes)}
    rows = []
    for i, code in enumerate(codes):
        verdict, label = verdicts[code]
        op, location = None, None
        if verdict is not Verdict.OK:
            op, _, location = template.entries[entries[i]][1].partition(" at ")  # the kernel's spelling
        row = {name: values[name][i] for name in scalar_cols}
        row.update(verdict=label, op=op, location=location, cycles=max(int(cycles[i]), 0))
        first, earlier = reordered[i]
        if first >= 0:  # sync let a later instruction run first: its outputs are not the ones the kernel's order gives
            row["reordered"] = f"{_spelling(template, first)} before {_spelling(template, earlier)}"
        if reference is not None:
            x = {name: (columns[name][i] if name in columns else v) for name, v in inputs.items()}
            outs = {name: v[i] for name, v in merged["outputs"].items()}
            want = reference(x, {name: columns[name][i] for name in columns})
            row["max_err"] = max_abs_err(outs, want) if verdict is Verdict.OK else None
        rows.append(row)
    if any("reordered" in row for row in rows):
        for row in rows:
            row.setdefault("reordered", None)
    names = scalar_cols + ["verdict", "op", "location", "cycles"]
    names += [name for name in ("reordered", "max_err") if rows and name in rows[0]]
    return SweepTable(columns=names, rows=rows)


def _spelling(template, inst: int) -> str:
    """An instance as the kernel spells it, with its file and line: ``store (phases.py:60)``."""
    name, _, location = template.entries[int(template.entry[inst])][1].partition(" at ")
    return f"{name} ({location.rpartition('/')[2]})"
