"""The benchmark's methods, one module each, registered with :func:`benchmark.stages.registry.register_method`.

* evaluated from the zoo's cached logits inside the evaluate stage: :mod:`~benchmark.methods.single`,
  :mod:`~benchmark.methods.duo` (Asymmetric Duos), :mod:`~benchmark.methods.deep_ensemble`;
* methods that need model weights (their stages write logits like any model): :mod:`~benchmark.methods.sve`
  (Singular Value Ensembles, arXiv 2601.22068), soups, MC dropout, last-layer Laplace, shallow ensembles,
  LoRA-Ensemble.
"""
from benchmark.core.members import member_cross_entropy, member_uncertainty
from benchmark.methods.sve import SingularValueEnsemble, load_backbone_weights, select_layers, sve_from_timm

__all__ = ["SingularValueEnsemble", "load_backbone_weights", "member_cross_entropy", "member_uncertainty", "select_layers",
           "sve_from_timm"]
