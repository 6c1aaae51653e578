"""EnsembEval registration: the ``ensembeval`` scorer and the ``capeval train ensembeval`` / ``cider-idf`` trainers."""

from __future__ import annotations

from capeval.core.scoring import register_scorer
from capeval.core.training import register_trainer

register_scorer("ensembeval", factory="capeval.ensembeval.scorer:EnsembleScorer", images="required",
                references="required",
                help="EnsembEval: weighted sum of caption metrics (Berger et al. 2025) with every component",
                card="capeval.ensembeval:module_cards.toml")
register_trainer("ensembeval", configure="capeval.ensembeval.fit:configure_fit", run="capeval.ensembeval.fit:run_fit_command",
                 help="refit EnsembEval weights (forward feature selection + linear regression) on cached scores")
register_trainer("cider-idf", configure="capeval.ensembeval.fit:configure_idf", run="capeval.ensembeval.fit:run_idf_command",
                 help="build fixed CIDEr document frequencies from a reference corpus (for cider_fixed_idf)")
