"""UniCo: causal query generation over Pearl's ladder with exact answers (the UniCo method).

Networks come from :func:`~causal_ext.unico.random_graphs.random_network` (random DAGs and CPTs
with nonsense variable names), from the bnlearn repository (:func:`~causal_ext.unico.networks.load_bnlearn`,
read from the pgmpy wheel by an explicit :func:`~causal_ext.unico.networks.prepare_bnlearn`), or from
textbook examples (:mod:`causal_ext.unico.examples`). :class:`UniCoGenerator` samples instances of
the 18 query types (:data:`QUERY_TYPES`: 5 associational, 7 interventional, 6 counterfactual),
answers them exactly (variable elimination :mod:`~causal_ext.unico.inference`; graph surgery for
``do``; abduction-action-prediction on a multi-world network :mod:`~causal_ext.unico.counterfactual`;
mediation by nested counterfactuals), drops instances with reasoning shortcuts (:data:`RULES`),
renders each in symbolic, narrative and code form (:mod:`~causal_ext.unico.render`) and writes
JSONL records that follow :data:`~causal_ext.unico.schema.RECORD_SCHEMA`. No part needs pgmpy.
"""

from causal_ext.unico.bif import parse_bif, read_bif, write_bif
from causal_ext.unico.counterfactual import (
    Link,
    counterfactual_probability,
    ett,
    multi_world_network,
    natural_effects,
    pn_ps_bounds,
    probabilities_of_causation,
)
from causal_ext.unico.examples import KIDNEY_COUNTS, firing_squad, kidney_stones, response_types
from causal_ext.unico.generator import Source, UniCoGenerator, read_jsonl, write_jsonl
from causal_ext.unico.graphs import d_separated, is_backdoor_set, minimum_backdoor_sets
from causal_ext.unico.inference import distribution, joint_distribution, probability
from causal_ext.unico.network import DiscreteBN
from causal_ext.unico.networks import BNLEARN_NETWORKS, load_bnlearn, prepare_bnlearn
from causal_ext.unico.queries import QUERY_TYPES, RULES, Query, Solution, sample_query, solve
from causal_ext.unico.random_graphs import random_network
from causal_ext.unico.render import RENDERINGS, Renderer
from causal_ext.unico.schema import RECORD_SCHEMA, validate_record

__all__ = [
    "BNLEARN_NETWORKS", "KIDNEY_COUNTS", "QUERY_TYPES", "RECORD_SCHEMA", "RENDERINGS", "RULES",
    "DiscreteBN", "Link", "Query", "Renderer", "Solution", "Source", "UniCoGenerator",
    "counterfactual_probability", "d_separated", "distribution", "ett", "firing_squad", "is_backdoor_set",
    "joint_distribution", "kidney_stones", "load_bnlearn", "minimum_backdoor_sets", "multi_world_network",
    "natural_effects", "parse_bif", "pn_ps_bounds", "prepare_bnlearn", "probabilities_of_causation",
    "probability", "random_network", "read_bif", "read_jsonl", "response_types", "sample_query", "solve",
    "validate_record", "write_bif", "write_jsonl",
]  # fmt: skip
