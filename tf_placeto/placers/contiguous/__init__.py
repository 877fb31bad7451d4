"""The exact contiguous placer of Tarnawski et al. (NeurIPS 2020) on their cost graphs:
accounting.py counts what a split costs (max-load, latency), ideals.py finds the blocks and the
ideals of their DAG, dp.py runs the dynamic program over chains of ideals; as_problem.py makes
a cost graph the PlacementProblem of the project's own placers."""
