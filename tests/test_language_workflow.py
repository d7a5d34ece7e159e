"""A workflow reads questions in the `Language` it is given: one argument reaches the planner, the hops and the
offline writer."""

from __future__ import annotations

import re
from dataclasses import replace

from dagrag.config import Settings
from dagrag.core.language import ENGLISH
from dagrag.work_flows.query_workflow import QueryWorkflow

QUESTION = "Wie unterscheidet sich Shirley Temple von Corliss Archer?"
# English's lists and forms, and one German comparison form with the German words it is made of.
GERMANISH = replace(
    ENGLISH,
    comparison_forms=(re.compile(r"^wie\s+unterscheidet\s+sich\s+(?P<a>.+?)\s+von\s+(?P<b>.+)$", re.IGNORECASE),
                      *ENGLISH.comparison_forms),
    stopwords=ENGLISH.stopwords | {"wie", "unterscheidet", "sich", "von"})


async def test_the_planner_the_hops_and_the_writer_read_the_language_from_settings_is_given(
        sample_store_path, embed_model, reranker) -> None:
    settings = Settings(qdrant_path=sample_store_path, collection="sample")
    english = QueryWorkflow.from_settings(settings, embed_model=embed_model, reranker=reranker)
    germanish = QueryWorkflow.from_settings(settings, embed_model=embed_model, reranker=reranker, language=GERMANISH)
    assert germanish.hops.language is GERMANISH and germanish.planner.language is GERMANISH
    assert germanish.writer.language is GERMANISH
    assert english.hops.language is ENGLISH and english.writer.language is ENGLISH

    as_english = await english.run(query=QUESTION)
    as_germanish = await germanish.run(query=QUESTION)
    sides = [sq.text for sq in as_germanish.plan.subqueries if sq.role == "side"]
    assert sides == ["Shirley Temple", "Corliss Archer"]
    assert not any(sq.role == "side" for sq in as_english.plan.subqueries)
