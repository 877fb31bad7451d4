"""A mixed integer program built in blocks of variables and rows, solved by HiGHS.

HiGHS through its own interface (highspy) when it is installed: it takes a start solution
(the best fast decision, so the search starts from it and never ends worse), reports its
incumbent and bound while it searches, and gives the dual bound even when the time limit
stops it before it finds a decision. scipy.optimize.milp, the same solver without those, is
the fallback.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Callable, Optional

import numpy as np
import scipy.optimize
import scipy.sparse

try:
    import highspy
except ImportError:           # scipy's copy of HiGHS stands in
    highspy = None

MIP_REL_GAP = 1e-6        # relative gap at which HiGHS stops
PROGRESS_EVERY_S = 0.25   # the least time between two progress reports of one search
INTERFACES = ("highspy", "scipy")     # the ways to HiGHS


@dataclasses.dataclass
class Solved:
    """What a search found: every column's value in the best solution (None if it found
    none), the proven lower bound on the goal (None if the solver gave none), whether the
    program has no solution at all, and which interface to HiGHS solved it."""

    values: Optional[np.ndarray]
    bound: Optional[float]
    infeasible: bool
    interface: str


class Program:
    """A mixed integer program built in blocks: variables are arrays of column indices, a block
    of rows is lower <= sum of (coefficients, variables) terms <= upper."""

    def __init__(self):
        self.n_columns = 0
        self.n_rows = 0
        self._columns = []    # (lower, upper, integral) per block
        self._rows = []       # (lower, upper) per block
        self._entries = []    # (row, column, coefficient)

    def variables(self, shape, lower=0.0, upper=np.inf, integral=False) -> np.ndarray:
        index = self.n_columns + np.arange(int(np.prod(shape))).reshape(shape)
        self.n_columns += index.size
        self._columns.append((np.broadcast_to(lower, index.shape).ravel(),
                              np.broadcast_to(upper, index.shape).ravel(),
                              np.full(index.size, int(integral))))
        return index

    def constrain(self, lower, *terms, upper=np.inf) -> None:
        """One row per entry of `lower`; a term's variables have the rows' shape (one per row),
        or one more axis (several per row); coefficients broadcast to them."""
        lower = np.asarray(lower, np.float64)
        rows = self.n_rows + np.arange(lower.size).reshape(lower.shape)
        for coefficients, variables in terms:
            variables = np.asarray(variables)
            shape = lower.shape + variables.shape[lower.ndim:]
            self._entries.append(tuple(np.broadcast_to(a, shape).ravel() for a in (
                rows.reshape(rows.shape + (1,) * (len(shape) - lower.ndim)), variables,
                coefficients)))
        self._rows.append((lower.ravel(), np.broadcast_to(upper, lower.shape).ravel()))
        self.n_rows += lower.size

    def minimise(self, goal: np.ndarray, time_limit: Optional[float], *,
                 start: Optional[tuple] = None,
                 progress: Optional[Callable[[float, float], None]] = None,
                 interface: Optional[str] = None) -> Solved:
        """The least value of the variable `goal`. start: (columns, values) of a solution,
        the integer columns at least (HiGHS completes the rest). progress(incumbent, bound)
        is called now and then during the search (infinite while unknown). interface:
        "highspy" or "scipy"; None: highspy where it is installed. The start and progress
        need highspy; scipy ignores them."""
        interface = interface or ("highspy" if highspy is not None else "scipy")
        if interface not in INTERFACES:
            raise ValueError(f"unknown solver interface {interface!r}; "
                             f"{', '.join(INTERFACES)}")
        if interface == "highspy" and highspy is None:
            raise ValueError("the highspy solver interface is not installed")
        if interface == "scipy":
            return _scipy_minimise(self._standard_form(goal), time_limit)
        return _highspy_minimise(self._standard_form(goal), time_limit, start, progress)

    def _standard_form(self, goal: np.ndarray) -> "_StandardForm":
        row, column, coefficient = (np.concatenate(a) for a in zip(*self._entries))
        kept = coefficient != 0
        lower, upper, integral = (np.concatenate(a) for a in zip(*self._columns))
        row_lower, row_upper = (np.concatenate(a) for a in zip(*self._rows))
        cost = np.zeros(self.n_columns)
        cost[goal] = 1.0
        return _StandardForm(
            cost=cost, integral=integral, lower=lower, upper=upper,
            matrix=scipy.sparse.csc_array((coefficient[kept], (row[kept], column[kept])),
                                          shape=(self.n_rows, self.n_columns)),
            row_lower=row_lower, row_upper=row_upper)


@dataclasses.dataclass
class _StandardForm:
    """min cost . x, lower <= x <= upper (integral where flagged), row_lower <= matrix x <=
    row_upper: what either interface is handed."""

    cost: np.ndarray
    integral: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    matrix: scipy.sparse.csc_array
    row_lower: np.ndarray
    row_upper: np.ndarray


def _scipy_minimise(form: _StandardForm, time_limit) -> Solved:
    options = {"mip_rel_gap": MIP_REL_GAP}
    if time_limit is not None:
        options["time_limit"] = time_limit
    result = scipy.optimize.milp(
        form.cost, integrality=form.integral,
        bounds=scipy.optimize.Bounds(form.lower, form.upper),
        constraints=scipy.optimize.LinearConstraint(form.matrix, form.row_lower,
                                                    form.row_upper),
        options=options)
    bound = getattr(result, "mip_dual_bound", None)   # scipy gives it only with a decision
    return Solved(values=result.x, bound=None if bound is None else float(bound),
                  infeasible=result.status == 2, interface="scipy")


def _highspy_minimise(form: _StandardForm, time_limit, start, progress) -> Solved:
    highs = new_highs()
    for name, value in (("output_flag", False), ("mip_rel_gap", MIP_REL_GAP),
                        ("time_limit", np.inf if time_limit is None else float(time_limit))):
        highs.setOptionValue(name, value)
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = len(form.cost), len(form.row_lower)
    model.col_cost_, model.col_lower_, model.col_upper_ = form.cost, form.lower, form.upper
    model.row_lower_, model.row_upper_ = form.row_lower, form.row_upper
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = form.matrix.indptr
    model.a_matrix_.index_ = form.matrix.indices
    model.a_matrix_.value_ = form.matrix.data
    kinds = highspy.HighsVarType
    model.integrality_ = [kinds.kInteger if i else kinds.kContinuous for i in form.integral]
    highs.passModel(model)
    if start is not None:
        columns, values = start
        highs.setSolution(len(columns), np.asarray(columns, np.int32),
                          np.asarray(values, np.float64))
    if progress is not None:
        report_progress(highs, progress)
    highs.run()
    status = highs.getModelStatus()
    info = highs.getInfo()
    found = info.primal_solution_status == 2          # kSolutionStatusFeasible
    bound = float(info.mip_dual_bound)
    return Solved(values=np.array(highs.getSolution().col_value) if found else None,
                  bound=bound if np.isfinite(bound) else None,
                  infeasible=status == highspy.HighsModelStatus.kInfeasible,
                  interface="highspy")


def report_progress(highs, progress: Callable[[float, float], None]) -> None:
    """Call progress(incumbent, bound) on each better decision, and at most every
    PROGRESS_EVERY_S from the solver's frequent interrupt checks."""
    last = [-np.inf]

    def report(event, every=0.0):
        now = time.monotonic()
        if now - last[0] >= every:
            last[0] = now
            progress(event.data_out.mip_primal_bound, event.data_out.mip_dual_bound)

    highs.cbMipImprovingSolution.subscribe(report)
    highs.cbMipInterrupt.subscribe(lambda event: report(event, PROGRESS_EVERY_S))


_banner_written = False


def new_highs():
    """A HiGHS instance. The first one of a process writes HiGHS' banner to descriptor 1
    whatever its options say, which would break a command's JSON output: it goes to stderr."""
    global _banner_written
    if _banner_written:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _banner_written = True
    return highs
