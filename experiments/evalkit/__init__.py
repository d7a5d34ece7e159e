"""The benchmark harness's helpers, behind `experiments/eval.py`: data sets (`data`), documentation corpora
(`docs`), metrics (`metrics`). Scripts in experiments/ import them as `evalkit.<module>`."""
