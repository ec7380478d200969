"""Uncertainty methods that need model weights (they write logits like any model).

* :mod:`benchmark.methods.sve` -- Singular Value Ensembles (arXiv 2601.22068).
"""
from benchmark.core.members import member_cross_entropy, member_uncertainty
from benchmark.methods.sve import SingularValueEnsemble, load_backbone_weights, select_layers, sve_from_timm

__all__ = ["SingularValueEnsemble", "load_backbone_weights", "member_cross_entropy", "member_uncertainty", "select_layers",
           "sve_from_timm"]
