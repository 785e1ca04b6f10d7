"""Observational baselines: blind to internal errors, sensitive to input-output errors."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import ObservationalBaselines
from causal_ext.abstraction.baselines import normalised_mutual_information
from causal_ext.abstraction.systems import adder


def test_nmi_known_values():
    x = np.repeat([0, 1, 2, 3], 24).astype(float)
    assert normalised_mutual_information(x, x) == pytest.approx(1.0)
    assert normalised_mutual_information(x, 3 - x) == pytest.approx(1.0)  # blind to relabelling
    y = np.tile([0, 1, 2, 3], 24).astype(float)  # exactly independent of x over this design
    assert normalised_mutual_information(x, y) == pytest.approx(0.0, abs=1e-12)
    assert normalised_mutual_information(np.zeros(5), np.zeros(5)) == 1.0
    assert normalised_mutual_information(np.zeros(5), np.arange(5.0)) == 0.0


def test_baselines_on_the_adder():
    fit = lambda c: ObservationalBaselines(n_samples=64).fit(c.low, c.high, c.abstraction)  # noqa: E731
    valid, wrong, inverted, explanation = (fit(adder.build(c)) for c in (
        "valid", "wrong_gate", "inverted_internal", "inverted_explanation"))
    assert valid.correlation_error_ == 0.0 and valid.mutual_information_error_ == pytest.approx(0.0)
    assert wrong.correlation_error_ > 0.1 and wrong.mutual_information_error_ > 0.1
    assert inverted.report() == valid.report() == explanation.report()  # same input-output behaviour
    with pytest.raises(ValueError, match="n_samples"):
        ObservationalBaselines(n_samples=1).fit(*(lambda c: (c.low, c.high, c.abstraction))(adder.build()))
