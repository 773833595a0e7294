"""Workloads: ShareGPT request sizes (with the train/test split the benchmark imports), synthetic distributions
and trace replay."""

from jevserve.sim.workloads.sharegpt import sample_sharegpt, sharegpt_split

__all__ = ["sample_sharegpt", "sharegpt_split"]
