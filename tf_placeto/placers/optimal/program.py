"""A mixed integer program built in blocks of variables and rows, solved by scipy's HiGHS."""

from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.optimize
import scipy.sparse

MIP_REL_GAP = 1e-6        # relative gap at which HiGHS stops


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

    def minimise(self, goal: np.ndarray, time_limit: Optional[float]):
        """scipy.optimize.milp's result for the least value of the variable `goal`."""
        row, column, coefficient = (np.concatenate(a) for a in zip(*self._entries))
        kept = coefficient != 0
        matrix = scipy.sparse.csr_array((coefficient[kept], (row[kept], column[kept])),
                                        shape=(self.n_rows, self.n_columns))
        lower, upper, integral = (np.concatenate(a) for a in zip(*self._columns))
        row_lower, row_upper = (np.concatenate(a) for a in zip(*self._rows))
        cost = np.zeros(self.n_columns)
        cost[goal] = 1.0
        options = {"mip_rel_gap": MIP_REL_GAP}
        if time_limit is not None:
            options["time_limit"] = time_limit
        return scipy.optimize.milp(
            cost, integrality=integral, bounds=scipy.optimize.Bounds(lower, upper),
            constraints=scipy.optimize.LinearConstraint(matrix, row_lower, row_upper),
            options=options)
