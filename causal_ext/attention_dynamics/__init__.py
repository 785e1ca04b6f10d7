"""Two-cluster behaviour of causal-attention dynamics (Karagodin et al., NeurIPS 2024).

Tokens on the unit sphere move by ``dx_k/dt = P_{x_k}(sum_{j<=k} softmax_j(beta <Q x_k, K x_j>) V x_j)``
(causal masking: token ``k`` sees tokens ``1..k``). For ``lambda_max(V) > 0`` they converge to two clusters
at ``+-`` the top eigenvector of ``V``; for ``lambda_max(V) <= 0`` that generally fails.

Modules: :mod:`~causal_ext.attention_dynamics.flow` (the vector field), :mod:`.integrate` (batched adaptive
Runge-Kutta on the sphere, and scipy's ``solve_ivp``), :mod:`.dynamics` (the :class:`CausalAttentionFlow`
estimator), :mod:`.clusters` (single-linkage on angular distance, the two-cluster verdict), :mod:`.spectral`
(top eigen-directions of ``V``, dimension-deduction measures) and :mod:`.gqa` (the same measurements on
repeated application of a recframe grouped-query attention layer).
"""

from causal_ext.attention_dynamics.clusters import (
    TwoClusterVerdict,
    angular_distances,
    cluster_labels,
    two_cluster_verdict,
)
from causal_ext.attention_dynamics.dynamics import (
    CausalAttentionFlow,
    simulate_causal_attention,
    uniform_sphere,
)
from causal_ext.attention_dynamics.flow import (
    causal_attention_velocity,
    causal_attention_weights,
    tangent_project,
)
from causal_ext.attention_dynamics.integrate import SphereSolution, integrate_on_sphere
from causal_ext.attention_dynamics.spectral import (
    lambda_max,
    principal_fraction,
    project,
    subspace_fraction,
    top_eigendirections,
)

__all__ = [
    "TwoClusterVerdict", "angular_distances", "cluster_labels", "two_cluster_verdict",
    "CausalAttentionFlow", "simulate_causal_attention", "uniform_sphere",
    "causal_attention_velocity", "causal_attention_weights", "tangent_project",
    "SphereSolution", "integrate_on_sphere",
    "lambda_max", "principal_fraction", "project", "subspace_fraction", "top_eigendirections",
]
