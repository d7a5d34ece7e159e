"""Hopping: the one home of how a run hops (`HopStrategy`; the default, `DocumentHops`, follows the documents).

The workflow imports from here only: `strategy.py` is the interface, `skip.py` when a planned hop runs, `searches.py`
what a subquery searches and how its candidates pool, `bridge.py` what a parent's passage names, `deeper.py` when a
chain grows by one more hop.
"""

from .deeper import Deepening, apply_deepening
from .searches import PooledCandidate, Variant, merge_scores, side_code, side_name, unscored
from .strategy import DocumentHops, HopStrategy

__all__ = ["Deepening", "DocumentHops", "HopStrategy", "PooledCandidate", "Variant", "apply_deepening",
           "merge_scores", "side_code", "side_name", "unscored"]
