import numpy as np
import pytest

from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.synthetic import sample_lengths, synthetic_requests


def test_distributions_and_bounds():
    rng = np.random.default_rng(0)
    assert set(sample_lengths("const:7", 5, rng)) == {7}
    u = sample_lengths("uniform:3:5", 1000, rng)
    assert u.min() == 3 and u.max() == 5
    ln = sample_lengths("lognormal:100:0.5:300", 5000, rng)
    assert ln.max() <= 300 and np.median(ln) == pytest.approx(100, rel=0.05)


def test_synthetic_requests_are_seeded():
    a = synthetic_requests(20, "uniform:1:100", "const:5", seed=3)
    assert a == synthetic_requests(20, "uniform:1:100", "const:5", seed=3)
    assert a != synthetic_requests(20, "uniform:1:100", "const:5", seed=4)


@pytest.mark.parametrize("spec", ["normal:5:1", "uniform:9:3", "const:x", "const:0"])
def test_bad_distribution_names_the_field_and_the_forms(spec):
    with pytest.raises(WorkloadError, match=r"prompt=.*expected const:N, uniform:LOW:HIGH or lognormal"):
        synthetic_requests(3, spec, "const:1", seed=0)
