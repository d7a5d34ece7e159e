"""hints.sections lift candidates whose section or title matches, by SECTION_BOOST_WEIGHT."""

from __future__ import annotations

from dagrag.agents.searcher import SearchRequest


async def test_a_section_hint_lifts_the_matching_page_by_the_boost_weight(make_workflow):
    request = SearchRequest(text="American film director screenwriter producer", top_k=10)
    plain = await make_workflow(section_boost_weight=0.0).searcher.asearch_layer([request])
    titles = [h.node.metadata["title"] for h in plain[0].candidates]
    target = titles[-1]  # the weakest of the ten
    hinted = SearchRequest(text=request.text, top_k=10, sections=(target,))
    boosted = await make_workflow(section_boost_weight=0.2).searcher.asearch_layer([hinted])
    unboosted = await make_workflow(section_boost_weight=0.0).searcher.asearch_layer([hinted])
    score = {h.node.metadata["title"]: h.score for h in unboosted[0].candidates}
    lifted = {h.node.metadata["title"]: h.score for h in boosted[0].candidates}
    assert abs(lifted[target] - score[target] - 0.2) < 1e-6
    assert all(abs(lifted[t] - score[t]) < 1e-6 for t in score if t != target and t in lifted)
    assert [h.node.metadata["title"] for h in boosted[0].candidates].index(target) < titles.index(target)
